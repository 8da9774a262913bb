"""`hoodie.properties`: create it as Hudi 0.14 does, open it, refuse what we can't write."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from timeline.errors import BadInputError, NotATableError, UnsupportedTableError
from timeline.format import properties
from timeline.io import read_once
from timeline.io.storage import Storage

HOODIE_DIR = ".hoodie"
PROPERTIES_FILE = f"{HOODIE_DIR}/hoodie.properties"
PROPERTIES_CRC = f"{HOODIE_DIR}/.hoodie.properties.crc"  # Hadoop's local checksum sidecar, when Java wrote it
SUPPORTED_VERSION = "6"
SUPPORTED_LAYOUT = "1"
# Tandem's own record that the table has a metadata table, so a missing one is an error, not "none".
# Not `hoodie.table.metadata.partitions`: Java readers would look for an HFile MDT (DESIGN §1).
METADATA_ENABLED = "tandem.metadata.enabled"
# The MDT index partitions every writer of the table maintains (a table property, not a writer's choice).
METADATA_INDEXES = "tandem.metadata.indexes"
# a table that asked for the metadata table in Tandem's previous format (the only value); without it, an MDT in
# that format (every one Tandem built before Hudi's became the default) is rebuilt in Hudi's on the next write
METADATA_FORMAT = "tandem.metadata.format"
TANDEM_FORMAT = "tandem"
# Java Hudi's record of its own (HFile) metadata table. A Java writer with the default
# hoodie.metadata.enable=true that finds it empty rebuilds `.hoodie/metadata` in Hudi's format and sets it;
# Tandem's MDT must never sit under it, or Java readers and writers open Tandem's parquet as HFile and fail.
JAVA_METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
CREATE_SCHEMA = "hoodie.table.create.schema"
JAVA_METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"

SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEYGEN = "org.apache.hudi.keygen.ComplexKeyGenerator"
NONPARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
KNOWN_KEYGENS = {
    SIMPLE_KEYGEN,
    COMPLEX_KEYGEN,
    NONPARTITIONED_KEYGEN,
    "org.apache.hudi.keygen.ComplexAvroKeyGenerator",
    "org.apache.hudi.keygen.SimpleAvroKeyGenerator",
    "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator",
}


def checksum(database: str, table: str) -> int:
    """Hudi's table checksum: CRC32 of `<database>.<table>`; the dot stays when the database is empty, as
    Java writes it (`hoodie.database.name=` on a table its Spark writer created: CRC32 of `.<table>`)."""
    return zlib.crc32(f"{database}.{table}".encode())


def keygen_for(record_key_fields: list[str], partition_fields: list[str]) -> str:
    if not partition_fields:
        return NONPARTITIONED_KEYGEN
    if len(record_key_fields) == 1 and len(partition_fields) == 1:
        return SIMPLE_KEYGEN
    return COMPLEX_KEYGEN


PAYLOAD_CLASS = "hoodie.compaction.payload.class"
OVERWRITE_WITH_LATEST = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
MERGER_STRATEGY = "hoodie.compaction.record.merger.strategy"
DEFAULT_MERGER_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"  # HoodieRecordMerger.DEFAULT_MERGE_STRATEGY_UUID
COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
TABLE_TYPES = (COPY_ON_WRITE, MERGE_ON_READ)


def _split_fields(text: str | None) -> list[str]:
    return [f.strip() for f in (text or "").split(",") if f.strip()]


@dataclass
class TableConfig:
    """The parts of `hoodie.properties` Tandem acts on, plus everything else verbatim."""

    name: str
    record_key_fields: list[str]
    partition_fields: list[str] = field(default_factory=list)
    hive_style: bool = False
    precombine_field: str | None = None
    database: str = "default"
    populate_meta_fields: bool = True
    table_type: str = COPY_ON_WRITE
    raw: dict[str, str] = field(default_factory=dict)

    @property
    def merge_on_read(self) -> bool:
        """Whether updates and deletes go to log files of their file groups (hoodie.table.type)."""
        return self.table_type == MERGE_ON_READ

    @property
    def metadata_enabled(self) -> bool:
        return self.raw.get(METADATA_ENABLED) == "true"

    @property
    def metadata_indexes(self) -> list[str]:
        """Index partitions of the MDT (`column_stats`, `bloom_filters`) that writers keep up to date."""
        return [p for p in (self.raw.get(METADATA_INDEXES) or "").split(",") if p] if self.metadata_enabled else []

    @property
    def keeps_tandem_format(self) -> bool:
        """Whether the table asked for its metadata table in Tandem's previous format (`METADATA_FORMAT`)."""
        return self.raw.get(METADATA_FORMAT) == TANDEM_FORMAT

    @property
    def java_metadata_partitions(self) -> list[str]:
        """The partitions of a metadata table Java Hudi built in its own format (empty: none)."""
        return _split_fields(self.raw.get(JAVA_METADATA_PARTITIONS))

    @property
    def java_metadata_partitions_inflight(self) -> list[str]:
        """The metadata-table partitions being initialized (Hudi's record, set before their first commit)."""
        return _split_fields(self.raw.get(JAVA_METADATA_PARTITIONS_INFLIGHT))

    @property
    def keygen_class(self) -> str:
        return self.raw.get("hoodie.table.keygenerator.class") or keygen_for(
            self.record_key_fields, self.partition_fields
        )

    def to_properties(self) -> dict[str, str]:
        """The key set and order Hudi 0.14's `HoodieTableConfig` writes."""
        props: dict[str, str] = {}
        if self.precombine_field:
            props["hoodie.table.precombine.field"] = self.precombine_field
        props["hoodie.datasource.write.drop.partition.columns"] = "false"
        if self.partition_fields:
            props["hoodie.table.partition.fields"] = ",".join(self.partition_fields)
        props["hoodie.table.type"] = self.table_type
        props["hoodie.archivelog.folder"] = "archived"
        if not self.populate_meta_fields:
            props["hoodie.populate.meta.fields"] = "false"
        props["hoodie.timeline.layout.version"] = SUPPORTED_LAYOUT
        props["hoodie.table.version"] = SUPPORTED_VERSION
        props["hoodie.table.recordkey.fields"] = ",".join(self.record_key_fields)
        props["hoodie.database.name"] = self.database
        props["hoodie.datasource.write.partitionpath.urlencode"] = "false"
        props["hoodie.table.name"] = self.name
        props["hoodie.table.keygenerator.class"] = self.keygen_class
        props["hoodie.datasource.write.hive_style_partitioning"] = "true" if self.hive_style else "false"
        props["hoodie.table.timeline.timezone"] = "UTC"
        props["hoodie.table.base.file.format"] = "PARQUET"
        if self.merge_on_read:  # how readers merge log records: Java's log scanner loads this class
            props[PAYLOAD_CLASS] = self.raw.get(PAYLOAD_CLASS) or OVERWRITE_WITH_LATEST
            props[MERGER_STRATEGY] = self.raw.get(MERGER_STRATEGY) or DEFAULT_MERGER_STRATEGY
        for key, value in self.raw.items():
            props.setdefault(key, value)
        props.pop("hoodie.table.checksum", None)
        props["hoodie.table.checksum"] = str(checksum(self.database, self.name))
        return props

    @staticmethod
    def from_properties(props: dict[str, str], source: str) -> TableConfig:
        """Validate and load; anything Tandem cannot write safely is refused."""
        version = props.get("hoodie.table.version")
        if version != SUPPORTED_VERSION:
            raise UnsupportedTableError(
                f"{source}: table version {version!r} is not supported (Tandem writes version 6)"
            )
        layout = props.get("hoodie.timeline.layout.version", SUPPORTED_LAYOUT)
        if layout != SUPPORTED_LAYOUT:
            raise UnsupportedTableError(f"{source}: timeline layout version {layout!r} is not supported")
        table_type = props.get("hoodie.table.type", COPY_ON_WRITE)
        if table_type not in TABLE_TYPES:
            raise UnsupportedTableError(
                f"{source}: table type {table_type} is not supported ({', '.join(TABLE_TYPES)})"
            )
        if table_type == MERGE_ON_READ and props.get("hoodie.populate.meta.fields", "true") != "true":
            raise UnsupportedTableError(
                f"{source}: merge-on-read tables without meta fields are not supported (their log records are "
                "merged by _hoodie_record_key)"
            )
        if table_type == MERGE_ON_READ and props.get(METADATA_FORMAT) == TANDEM_FORMAT:
            raise UnsupportedTableError(
                f"{source}: merge-on-read tables keep their metadata table in Hudi's format, not {TANDEM_FORMAT!r}"
            )
        base_format = props.get("hoodie.table.base.file.format", "PARQUET").upper()
        if base_format != "PARQUET":
            raise UnsupportedTableError(f"{source}: base file format {base_format} is not supported (PARQUET only)")
        missing = _features_missing(props)
        if missing:
            raise UnsupportedTableError(f"{source}: {'; '.join(missing)}")
        name = props.get("hoodie.table.name")
        if not name:
            raise BadInputError(f"{source}: hoodie.table.name is missing")
        database = props.get("hoodie.database.name", "")
        stored = props.get("hoodie.table.checksum")
        if stored is not None and stored != str(checksum(database, name)):
            raise BadInputError(f"{source}: hoodie.table.checksum {stored} does not match the table name")
        keygen = props.get("hoodie.table.keygenerator.class")
        if keygen and keygen not in KNOWN_KEYGENS:
            raise UnsupportedTableError(f"{source}: key generator {keygen} is not supported")
        record_keys = _split_fields(props.get("hoodie.table.recordkey.fields"))
        if not record_keys:
            raise UnsupportedTableError(f"{source}: tables without record key fields are not supported")
        return TableConfig(
            name=name,
            record_key_fields=record_keys,
            partition_fields=_split_fields(props.get("hoodie.table.partition.fields")),
            hive_style=props.get("hoodie.datasource.write.hive_style_partitioning", "false") == "true",
            precombine_field=props.get("hoodie.table.precombine.field") or None,
            database=database,
            populate_meta_fields=props.get("hoodie.populate.meta.fields", "true") == "true",
            table_type=table_type,
            raw=dict(props),
        )


def _features_missing(props: dict[str, str]) -> list[str]:
    """Table features Java Hudi may record that Tandem neither reads nor keeps up when it writes."""
    found = []
    if props.get("hoodie.bootstrap.base.path") and props.get("hoodie.table.type") == MERGE_ON_READ:
        found.append(
            "bootstrapped merge-on-read tables are not supported "
            f"(hoodie.bootstrap.base.path={props['hoodie.bootstrap.base.path']}: only copy-on-write ones are)"
        )
    if props.get("hoodie.table.cdc.enabled", "false").lower() == "true":
        found.append("CDC tables are not supported (hoodie.table.cdc.enabled=true: Tandem writes no change logs)")
    if props.get("hoodie.datasource.write.drop.partition.columns", "false").lower() == "true":
        found.append(
            "tables whose data files drop the partition columns are not supported "
            "(hoodie.datasource.write.drop.partition.columns=true)"
        )
    return found


def write_config(storage: Storage, config: TableConfig) -> None:
    """Create `hoodie.properties`; refuses to overwrite an existing table."""
    text = properties.dumps(config.to_properties())
    if not storage.create_if_absent(PROPERTIES_FILE, text.encode("utf-8")):
        raise BadInputError(f"{storage.uri('')} is already a table")


def read_config(storage: Storage) -> TableConfig:
    source = storage.uri(PROPERTIES_FILE)
    try:
        data = read_once.remembered(storage.full(PROPERTIES_FILE), "bytes", lambda: storage.read_bytes(PROPERTIES_FILE))
    except FileNotFoundError as err:
        raise NotATableError(f"{storage.uri('')} is not a Hudi table (no {PROPERTIES_FILE})") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInputError(f"{source} is not a text properties file") from err
    return TableConfig.from_properties(properties.loads(text), source)


def record_metadata_table(storage: Storage, enabled: bool) -> TableConfig:
    """Set `tandem.metadata.enabled` for an MDT in Tandem's previous format, which the table then asks for
    (`METADATA_FORMAT`); or clear it, with the indexes, the format and Java's MDT record."""
    if enabled:
        return _record(storage, {METADATA_ENABLED: "true", METADATA_FORMAT: TANDEM_FORMAT})
    gone = dict.fromkeys(
        (
            METADATA_ENABLED,
            METADATA_INDEXES,
            METADATA_FORMAT,
            JAVA_METADATA_PARTITIONS,
            JAVA_METADATA_PARTITIONS_INFLIGHT,
        )
    )
    return _record(storage, gone)  # the folder is gone, whoever built it: no record may point at it


def clear_java_metadata_record(storage: Storage) -> TableConfig:
    """Remove Java Hudi's record of its metadata table (after Tandem rebuilt `.hoodie/metadata` in its own format)."""
    return _record(storage, {JAVA_METADATA_PARTITIONS: None, JAVA_METADATA_PARTITIONS_INFLIGHT: None})


def record_metadata_partitions(storage: Storage, partitions: list[str], inflight: list[str] = ()) -> TableConfig:
    """Set Hudi's record of the metadata table's built partitions (sorted, comma-joined, as Java writes it) and
    of those being built; a partition is recorded built once its initialization completed, and Java readers
    look for nothing else."""
    value = ",".join(sorted(set(partitions))) or None
    building = ",".join(sorted(set(inflight))) or None
    return _record(storage, {JAVA_METADATA_PARTITIONS: value, JAVA_METADATA_PARTITIONS_INFLIGHT: building})


def record_metadata_initializing(storage: Storage, partitions: list[str]) -> TableConfig:
    """Record that a metadata table in Hudi's format is being initialized with `partitions` (Hudi's inflight
    record, set before any of its files exist): until `record_metadata_partitions` names them, readers list
    storage and writers refuse, whatever a crash left in `.hoodie/metadata`."""
    value = ",".join(sorted(set(partitions)))
    changes = {
        METADATA_ENABLED: "true",
        METADATA_FORMAT: None,
        JAVA_METADATA_PARTITIONS: None,
        JAVA_METADATA_PARTITIONS_INFLIGHT: value,
    }
    return _record(storage, changes)


def record_metadata_indexes(storage: Storage, indexes: list[str]) -> TableConfig:
    """Set the MDT index partitions writers maintain (`tandem.metadata.indexes`)."""
    return _record(storage, {METADATA_INDEXES: ",".join(sorted(set(indexes))) or None})


def _record(storage: Storage, changes: dict[str, str | None]) -> TableConfig:
    """Apply `changes` (None removes a key), rewriting `hoodie.properties` atomically.

    Every other key is kept as it was written (by Hudi or by us), so the checksum
    stays valid and Java readers see the same table.
    """
    config = read_config(storage)
    props = dict(config.raw)
    for key, value in changes.items():
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    if props == config.raw:
        return config
    if not storage.is_s3:  # Hadoop's checksum of the old text (Java wrote it locally) would fail Java's next open
        storage.discard(PROPERTIES_CRC)
    storage.write_bytes(PROPERTIES_FILE, properties.dumps(props).encode("utf-8"))
    return TableConfig.from_properties(props, storage.uri(PROPERTIES_FILE))
