"""The metadata table's own table facts as Hudi 0.15 lays them down: partitions, file groups, instant times,
and `hoodie.properties` (of the MDT and the data table's MDT keys).

Sources: MetadataPartitionType, HoodieTableMetadataUtil, HoodieBackedTableMetadataWriter, HoodieMetadataConfig,
HoodieTableConfig of Hudi 0.15.
"""

from __future__ import annotations

from collections.abc import Iterable

from timeline.format import table_config
from timeline.mdt.hudi_keys import file_group_index

FILES = "files"
COLUMN_STATS = "column_stats"
BLOOM_FILTERS = "bloom_filters"
RECORD_INDEX = "record_index"

# HoodieBackedTableMetadataWriter.enablePartitions: the order partitions are initialized in, `files` always
# first, each at its own instant (`partition_init_instant` with offsets 0, 1, 2 ... in this order).
INIT_ORDER = (FILES, BLOOM_FILTERS, COLUMN_STATS, RECORD_INDEX)

# The partitions a Tandem writer keeps in sync, in the order a delta commit writes them (`files`, whose log is
# every commit's fence, first); a table with any other built partition is refused to Tandem's writers.
KEPT_BY_TANDEM = (FILES, COLUMN_STATS, BLOOM_FILTERS)

FILE_ID_PREFIX = {
    FILES: "files-",
    COLUMN_STATS: "col-stats-",
    BLOOM_FILTERS: "bloom-filters-",
    RECORD_INDEX: "record-index-",
}

# initializeFileGroups: each file group of a new partition starts as log version 1 over the partition's
# initial instant, written with this token and holding one empty delete block (header INSTANT_TIME only), so
# a group that gets no record in the initial bulk insert still exists.
INITIAL_LOG_WRITE_TOKEN = "0-0-0"  # HoodieLogFormat.DEFAULT_WRITE_TOKEN

# File groups a partition is created with, never changed afterwards: `files` always 1; the indexes
# `hoodie.metadata.index.column.stats.file.group.count` (2) and `...bloom.filter.file.group.count` (4).
# The record index alone is sized from its record count (estimateFileGroupCount, 10 to 10000 groups).
DEFAULT_FILE_GROUP_COUNT = {FILES: 1, COLUMN_STATS: 2, BLOOM_FILTERS: 4}

# `hoodie.metadata.compact.max.delta.commits`: delta commits after the last compaction before the next one
DEFAULT_COMPACT_MAX_DELTA_COMMITS = 10

# HoodieTableMetadata.SOLO_COMMIT_TIMESTAMP: the initialization time of a data table with no completed instant
SOLO_COMMIT_TIMESTAMP = "00000000000000"
_PARTITION_INIT_SUFFIX = 10  # "010", "011", ... (HoodieTableMetadataUtil.PARTITION_INITIALIZATION_TIME_SUFFIX)

# HoodieTableMetadataUtil.OperationSuffix: MDT instants of table services, appended to a data instant's time
COMPACTION_SUFFIX = "001"
CLEAN_SUFFIX = "002"
RESTORE_SUFFIX = "003"
METADATA_INDEXER_SUFFIX = "004"
LOG_COMPACTION_SUFFIX = "005"
ROLLBACK_SUFFIX = "006"

# The data table's record of which MDT partitions are built and which are being built: comma-joined, sorted
# (HoodieTableConfig.setMetadataPartitionState). A partition is added once its initial commit completed.
DATA_TABLE_PARTITIONS = "hoodie.table.metadata.partitions"
DATA_TABLE_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"

METADATA_TABLE_SUFFIX = "_metadata"
PAYLOAD_CLASS = "org.apache.hudi.metadata.HoodieMetadataPayload"
KEY_GENERATOR = "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
MERGER_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"  # HoodieRecordMerger.DEFAULT_MERGER_STRATEGY_UUID


def file_group_id(partition: str, index: int) -> str:
    """`getFileIDForFileGroup`: `<prefix><index, 4 digits>-0`, e.g. `files-0000-0`, `col-stats-0001-0`."""
    return f"{FILE_ID_PREFIX[partition]}{index:04d}-0"


def file_group_for(partition: str, record_key: str, file_group_count: int) -> str:
    """The file group id a record key is written to in a partition of `file_group_count` groups."""
    return file_group_id(partition, file_group_index(record_key, file_group_count))


def partition_init_instant(initialization_time: str, offset: int) -> str:
    """`createIndexInitTimestamp`: the instant that initializes one MDT partition. `initialization_time` is
    the data table's last completed instant (`SOLO_COMMIT_TIMESTAMP` if none); the offset is the smallest
    from 0 whose instant the MDT does not hold yet, so a fresh table gets `...010` for `files`, then `...011`
    and `...012` for the indexes initialized with it."""
    return f"{initialization_time}{_PARTITION_INIT_SUFFIX + offset:03d}"


def compaction_instant(latest_delta_commit: str) -> str:
    """The MDT compaction scheduled after the delta commit `latest_delta_commit` (its time + `001`)."""
    return latest_delta_commit + COMPACTION_SUFFIX


def clean_instant(instant: str) -> str:
    return instant + CLEAN_SUFFIX


def log_compaction_instant(latest_delta_commit: str) -> str:
    return latest_delta_commit + LOG_COMPACTION_SUFFIX


def rollback_instant(instant: str) -> str:
    return instant + ROLLBACK_SUFFIX


def metadata_partitions_value(partitions: Iterable[str]) -> str:
    """The value of `DATA_TABLE_PARTITIONS` (or `..._INFLIGHT`) for a set of MDT partitions."""
    return ",".join(sorted(set(partitions)))


def metadata_table_properties(data_table_name: str) -> dict[str, str]:
    """`hoodie.properties` of the MDT of the data table `data_table_name`, every key Hudi 0.15 writes at
    initialization (HoodieBackedTableMetadataWriter.initializeMetaClient). The MDT has no database name, so
    its checksum is CRC32 of `.<name>_metadata`."""
    name = data_table_name + METADATA_TABLE_SUFFIX
    return {
        "hoodie.table.name": name,
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.archivelog.folder": "archived",
        "hoodie.compaction.payload.class": PAYLOAD_CLASS,
        "hoodie.compaction.record.merger.strategy": MERGER_STRATEGY,
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.keygenerator.class": KEY_GENERATOR,
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.checksum": str(table_config.checksum("", name)),
    }
