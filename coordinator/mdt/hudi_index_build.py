"""Turning an index partition on or off in a metadata table in Hudi's format, as Java's indexer does: a new
partition is recorded as being built, initialized whole from the live files' Parquet footers as a bulk insert
delta commit at `<last completed data instant><010 + n>`, then recorded as built; from then on every delta
commit keeps it. A partition turned off leaves the record first, then its files go."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple, dataclass, field
from functools import partial
from typing import Any

from coordinator.mdt.hudi_deltacommit import (
    base_stats_records,
    bloom_filter_records,
    footers,
    indexed_columns,
    log_stats_records,
    planned_groups,
)
from timeline.crash_points import crash_point
from timeline.errors import BadInputError, UnreadableDataFileError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.data_logs import parse_data_log
from timeline.format.instant import DELTA_COMMIT, Instant
from timeline.format.partition_path import file_path
from timeline.format.table_config import TableConfig, read_config, record_metadata_indexes, record_metadata_partitions
from timeline.io.storage import Storage
from timeline.mdt import file_group_writes as writes
from timeline.mdt import hudi_records
from timeline.mdt.file_slices import list_file_groups
from timeline.mdt.hudi_layout import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    DEFAULT_FILE_GROUP_COUNT,
    FILES,
    INIT_ORDER,
    KEPT_BY_TANDEM,
    SOLO_COMMIT_TIMESTAMP,
    partition_init_instant,
)
from timeline.mdt.reader import MetadataReader
from timeline.mdt.slice_records import is_mdt_only_instant
from timeline.mdt.snapshot import MetadataSnapshot
from timeline.mdt.table import MetadataTable

READ_THREADS = 8  # data files read at once (footers and key columns: I/O bound, pyarrow releases the GIL)


def add_partitions(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    wanted: Sequence[str],
    live: Sequence[tuple[str, str]],
    progress: Callable[[int], None] | None = None,
    spark: Any = None,
) -> str | None:
    """Build the index partitions of `wanted` the MDT lacks from the `live` (partition, file) data files (call
    under the lock, nothing pending), reading them on threads (`progress` told of each file) or on the
    executors of `spark`; the first new partition's instant, or None when all were built."""
    config = read_config(mdt.data_storage)
    built = config.java_metadata_partitions
    new = [p for p in INIT_ORDER if p in wanted and p in KEPT_BY_TANDEM and p not in built]
    if not new:
        return None
    timeline = mdt.timeline()
    taken = {i.time for i in timeline.instants}
    start = max(data_timeline.completed_times(), default=SOLO_COMMIT_TIMESTAMP)
    # read first: a file that cannot be read changes nothing
    built_records = _records_of(mdt, new, start, taken, live, progress, spark)
    record_metadata_partitions(mdt.data_storage, built, inflight=new)
    record_metadata_indexes(mdt.data_storage, sorted(set(config.metadata_indexes) | set(new)))
    for partition, (time, records) in built_records.items():
        written = writes.initialize_partition(
            mdt.storage, partition, time, records, DEFAULT_FILE_GROUP_COUNT[partition]
        )
        writes.complete_delta_commit(timeline, time, written, "BULK_INSERT")
        crash_point(writes.PARTITION_BUILT)
    mdt.is_hudi_format(record_metadata_partitions(mdt.data_storage, [*built, *new]))
    return built_records[new[0]][0]


def _records_of(
    mdt: MetadataTable,
    new: Sequence[str],
    start: str,
    taken: set[str],
    live: Sequence[tuple[str, str]],
    progress: Callable[[int], None] | None,
    spark: Any,
) -> dict[str, tuple[str, list[dict]]]:
    """partition -> (its initializing instant, its records) for each of `new`, from the `live` files."""
    times = {}
    offset = 0
    for partition in new:
        while partition_init_instant(start, offset) in taken:
            offset += 1
        times[partition] = partition_init_instant(start, offset)
        taken.add(times[partition])
    try:
        records = index_records(mdt.data_storage, times, live, progress, spark)
    except UnreadableDataFileError as err:
        raise UnreadableDataFileError(f"{err}; nothing was changed") from err
    return {p: (times[p], records[p]) for p in new}


def index_records(
    data: Storage,
    times: Mapping[str, str],
    live: Sequence[tuple[str, str]],
    progress: Callable[[int], None] | None = None,
    spark: Any = None,
) -> dict[str, list[dict]]:
    """The records of index partitions (partition -> its initializing instant in `times`) for the `live`
    (partition, file) data files, read on threads (`progress` told of each file) or on the executors of
    `spark`; UnreadableDataFileError naming a file whose footer or keys cannot be read (Java's indexer fails
    on it too)."""
    task = partial(_file_records, data.base_uri, read_config(data), dict(times))
    if spark is not None and live:
        slices = max(1, min(len(live), spark.sparkContext.defaultParallelism * 4))
        found = spark.sparkContext.parallelize(list(live), slices).map(task).collect()
    else:
        found = []
        with ThreadPoolExecutor(READ_THREADS) as pool:
            for one in pool.map(task, live):
                found.append(one)
                if progress is not None:
                    progress(1)
    unreadable = next((one for one in found if isinstance(one, str)), None)
    if unreadable is not None:
        raise UnreadableDataFileError(f"{unreadable}: the {', '.join(times)} index cannot be built over it")
    return {p: [r for one in found for r in one[p]] for p in times}


def _file_records(
    base_uri: str, config: TableConfig, times: Mapping[str, str], file: tuple[str, str]
) -> dict[str, list[dict]] | str:
    """One data file's records in each partition of `times` (partition -> its initializing instant), or why the
    file cannot be read (an error would not cross back from a Spark executor as itself)."""
    storage = Storage(base_uri)
    try:
        (footer,) = footers(storage, [file])
        out = {}
        if COLUMN_STATS in times:
            out[COLUMN_STATS] = base_stats_records(storage, file, footer)
        if BLOOM_FILTERS in times:
            out[BLOOM_FILTERS] = bloom_filter_records(storage, times[BLOOM_FILTERS], [(file, footer)], config=config)
        return out
    except UnreadableDataFileError as err:
        return str(err)


def drop_partitions(mdt: MetadataTable, unwanted: Sequence[str]) -> list[str]:
    """Turn index partitions off: out of both records first (writers and readers stop using them), then their
    files deleted; the partitions dropped."""
    config = read_config(mdt.data_storage)
    dropped = [p for p in unwanted if p in config.java_metadata_partitions or p in config.metadata_indexes]
    if not dropped:
        return []
    planned = set(planned_groups(mdt.timeline()))
    busy = [p for p in dropped if any(g.file_id in planned for g in list_file_groups(mdt.storage, p))]
    if busy:  # its plan would miss the files: a pending compaction is retried, never abandoned
        raise BadInputError(
            f"a pending metadata compaction covers {', '.join(busy)}: run `tandem compact` first, then drop it"
        )
    record_metadata_indexes(mdt.data_storage, [i for i in config.metadata_indexes if i not in dropped])
    kept = [p for p in config.java_metadata_partitions if p not in dropped]
    mdt.is_hudi_format(record_metadata_partitions(mdt.data_storage, kept))
    for partition in dropped:
        mdt.storage.delete_dir(partition)
    return dropped


@dataclass
class PartitionCheck:
    """An index partition against the records recomputed from the live files: `missing` live files without
    records and `wrong` ones whose records differ, as (partition, file); `stale` the keys of records of files
    that are not live."""

    partition: str
    missing: list[tuple[str, str]] = field(default_factory=list)
    wrong: list[tuple[str, str]] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)


def _comparable(partition: str, record: dict) -> tuple:
    """What a record says about its file: the statistics, or the filter (not the instant that wrote it)."""
    if partition == COLUMN_STATS:  # repr: a NaN bound (a float column holding NaN) equals itself
        return (repr(astuple(hudi_records.column_stats_of(record))),)
    bloom = hudi_records.bloom_filter_of(record)
    return bloom.type, bytes(bloom.bloom_filter), bloom.is_deleted


def validate(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    live: Sequence[tuple[str, str]],
    being_deleted: AbstractSet[str] = frozenset(),
) -> list[PartitionCheck]:
    """Every index partition the MDT has, record by record against the live files' footers and logs;
    `being_deleted`: paths a pending clean is deleting (the MDT lists them until the clean mirrors)."""
    built = [p for p in mdt.hudi_partitions() if p in (COLUMN_STATS, BLOOM_FILTERS)]
    if not built:
        return []
    snapshot = MetadataSnapshot.open(mdt.storage, mdt.timeline(), data_timeline)
    read = list(zip(live, footers(mdt.data_storage, live), strict=True))
    checks = []
    for partition in built:
        check = PartitionCheck(partition)
        computed: dict[str, tuple[tuple[str, str], dict]] = {}
        for (p, n), footer in read:
            if partition == COLUMN_STATS:
                records = base_stats_records(mdt.data_storage, (p, n), footer)
            else:
                records = bloom_filter_records(mdt.data_storage, "", [((p, n), footer)])
            computed.update({r["key"]: ((p, n), r) for r in records})
        stored = {k: r for k, r in snapshot.records(partition).items() if not _is_tombstone(partition, r)}
        for key, (file, record) in computed.items():
            if key not in stored:
                check.missing.append(file)
            elif _comparable(partition, stored[key]) != _comparable(partition, record):
                check.wrong.append(file)
        if partition == COLUMN_STATS:  # a log's records, where it has them, must be its own
            logs = {k: v for k, v in _log_stats(mdt, data_timeline, stored, being_deleted).items() if k in stored}
            for key, (file, record) in logs.items():
                if _comparable(partition, stored[key]) != _comparable(partition, record):
                    check.wrong.append(file)
            computed.update(logs)
        check.stale = sorted(
            k for k in stored if k not in computed and not (partition == COLUMN_STATS and _of_a_log(stored[k]))
        )
        check.missing, check.wrong = sorted(set(check.missing)), sorted(set(check.wrong))
        checks.append(check)
    return checks


def _log_stats(
    mdt: MetadataTable, data_timeline: ActiveTimeline, stored: Mapping[str, dict], being_deleted: AbstractSet[str]
) -> dict[str, tuple[tuple[str, str], dict]]:
    """The records each live log with stored statistics should have, by key. A log may have none (Hudi indexes
    no log when it builds the partition, nor a rollback's), and a cleaned log keeps its records (Hudi's clean
    writes tombstones for base files only)."""
    logs = MetadataReader(mdt, data_timeline).listed_logs()
    named = {hudi_records.column_stats_of(r).file_name for r in stored.values()}
    logs = [(p, n, size) for p, n, size in logs if n in named and file_path(p, n) not in being_deleted]
    columns = indexed_columns(mdt.data_storage) if logs else []
    return {
        r["key"]: ((log[0], log[1]), r) for log in logs for r in log_stats_records(mdt.data_storage, [log], columns)
    }


def _of_a_log(record: dict) -> bool:
    name = hudi_records.column_stats_of(record).file_name or ""
    return parse_data_log("", name) is not None


def _is_tombstone(partition: str, record: dict) -> bool:
    if partition == COLUMN_STATS:
        return hudi_records.column_stats_of(record).is_deleted
    return hudi_records.bloom_filter_of(record).is_deleted


def finish_interrupted(
    mdt: MetadataTable, data_timeline: ActiveTimeline, live: Sequence[tuple[str, str]]
) -> str | None:
    """Build again the index partitions a crash left recorded as being built (call under the lock, nothing
    pending): their folders and the delta commits that initialized them belong to no built partition (no
    writer writes to a partition before it is recorded built), so both go first. None if none was left."""
    config = read_config(mdt.data_storage)
    interrupted = [p for p in config.java_metadata_partitions_inflight if p in (COLUMN_STATS, BLOOM_FILTERS)]
    if not interrupted or not mdt.is_hudi_format(config) or FILES not in config.java_metadata_partitions:
        return None
    timeline = mdt.timeline()
    for instant in timeline.instants:
        if (
            instant.action == DELTA_COMMIT
            and is_mdt_only_instant(instant.time)
            and _initializes(timeline, instant, interrupted)
        ):
            timeline.delete_instant_files(instant.time, instant.action)
    for partition in interrupted:
        mdt.storage.delete_dir(partition)
    return add_partitions(mdt, data_timeline, interrupted, live)


def _initializes(timeline: ActiveTimeline, instant: Instant, partitions: Sequence[str]) -> bool:
    """Whether MDT-only delta commit `instant` initialized one of `partitions` (a pending one wrote nothing
    any reader counts; a completed one names its partitions in its write stats)."""
    if not instant.is_completed:
        return True
    stats = timeline.commit_metadata(instant).write_stats()
    return bool(stats) and all(s.partition_path in partitions for s in stats)
