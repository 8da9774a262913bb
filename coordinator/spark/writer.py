"""A Spark DataFrame as one instant: executors write the files, the driver commits.

The driver begins the instant through the coordinator's `Transaction`. Inserts
are one shuffle-free stage: each task starts new file groups for the partitions
its rows fall in. Upserts and deletes are tagged with a simple index (a join
with the keys of the latest file slices of the touched partitions, read by the
executors); an upsert's new records top up the partition's smallest file group
below the small-file limit (a group pushed past the target size spills its last
new records into new groups); records are then repartitioned by target file
group. Every task writes straight to final names, marker first, with its
partition-stage-attempt as the write token, and returns write stats; the driver
commits with those stats, and the commit's finalize step deletes every marked
file no stat names (a retried task's files).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import Broadcast, TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.column import Column
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType, StringType, StructField, StructType

from chaos.crash_points import crash_point
from coordinator import markers
from coordinator.config import CoordinatorConfig
from coordinator.transaction import WRITE_MARKER, Transaction
from coordinator.writer import (
    KEY,
    PARTITION,
    LocalWriter,
    WriteOptions,
    WriteResult,
    data_schema,
    resolve_operation,
    split_by,
    with_keys,
)
from locks.base import LockProvider
from timeline import keys
from timeline.avro_schema import arrow_to_avro
from timeline.commit_metadata import WriteStat
from timeline.errors import BadInputError
from timeline.file_names import BaseFile, write_token
from timeline.fs_view import FileSystemView
from timeline.instant import REPLACE_COMMIT
from timeline.keys import DEFAULT_PARTITION
from timeline.storage import Storage
from timeline.table import META_COLUMNS, Table

TARGET = "_tandem_target"  # the file id a record goes to; NEW for records that start new file groups
NEW = ""
STAT = "stat"
NULL_KEY_MARK = "tandem: record key field "
SQL_KEY_TYPES = (StringType, ByteType, ShortType, IntegerType, LongType)
BROADCAST_KEYS = 2_000_000  # incoming records up to which their keys are broadcast to filter the index scan
STATS_SCHEMA = StructType([StructField(STAT, StringType())])
STAT_ARROW = pa.schema([(STAT, pa.string())])


@dataclass(frozen=True)
class TaskPlan:
    """What every write task needs, shipped to the executors with the task closure."""

    base_uri: str
    instant: str
    operation: str
    bases: dict[str, BaseFile]  # file id -> latest base file, in the partitions this write touches
    options: WriteOptions


@dataclass(frozen=True)
class ExecutorInstant:
    """The transaction as an executor sees it: its time, and where markers go."""

    storage: Storage
    time: str

    def create_marker(self, path: str, kind: str = "CREATE") -> None:
        markers.create_marker(self.storage, self.time, path, kind)
        crash_point(WRITE_MARKER)


class SparkWriter:
    """Writes DataFrames into one table, each as one instant through the coordinator."""

    def __init__(
        self,
        spark: SparkSession,
        table: Table,
        options: WriteOptions | None = None,
        coordinator: CoordinatorConfig | None = None,
        lock: LockProvider | None = None,
    ) -> None:
        self.spark = spark
        self.table = table
        self.options = options or WriteOptions()
        self.coordinator = coordinator or CoordinatorConfig()
        self.lock = lock
        self.local = LocalWriter(table, self.options)

    def write(self, df: DataFrame, operation: str, on_begin: Callable[[str], None] | None = None) -> WriteResult:
        """Write `df` as one instant; on any failure the instant is undone in both tables.

        `on_begin` hears the instant time as soon as it is inflight.
        """
        operation, action = resolve_operation(operation)
        df = df.drop(*[c for c in df.columns if c in META_COLUMNS or c in (KEY, PARTITION, TARGET)])
        with Transaction(self.table, action, operation.upper(), self.coordinator, self.lock) as txn:
            if on_begin is not None:
                on_begin(txn.time)
            view, existing = self.local.view_and_schema(operation, txn)
            if existing is not None and operation != "delete":
                df = _cast_to(df, existing)
            try:
                if operation in ("upsert", "delete"):
                    stats = self._write_tagged(df, view, txn.time, operation)
                else:
                    stats = self._write_new(df, txn.time)
            except Exception as err:  # noqa: BLE001 - Spark wraps what the executors raised
                bad = _bad_input_in(err)
                if bad is None:
                    raise
                raise bad from err
            metadata = txn.metadata
            incoming = to_arrow_schema(df.schema)
            metadata.schema = arrow_to_avro(data_schema(incoming, existing, operation), self.table.config.name)
            if action == REPLACE_COMMIT:
                partitions = sorted({s.partition_path for s in stats})
                metadata.partition_to_replace_file_ids = {
                    p: [g.file_id for g in view.file_groups(p)] for p in partitions
                }
            for stat in sorted(stats, key=lambda s: s.path):
                metadata.add(stat)
        rows_in = sum(s.num_inserts + s.num_update_writes + s.num_deletes for s in stats)
        return WriteResult(txn.time, operation, metadata, rows_in)

    def _write_new(self, df: DataFrame, instant: str) -> list[WriteStat]:
        """insert, bulk_insert, insert_overwrite: one stage, no shuffle; each task starts new file groups
        for the partitions its rows fall in, as Spark's own partitioned writer does."""
        config = self.table.config
        plan = TaskPlan(self.table.uri, instant, "insert", {}, self.options)
        task = partial(insert_task, plan, config.record_key_fields, config.partition_fields, config.hive_style)
        return _collect_stats(df.mapInArrow(task, STATS_SCHEMA))

    def _write_tagged(self, df: DataFrame, view: FileSystemView, instant: str, operation: str) -> list[WriteStat]:
        """upsert, delete: tag with the simple index, then one task per target file group."""
        keyed = self._with_keys(df).persist()
        try:
            counts = {r[0]: r[1] for r in keyed.groupBy(PARTITION).count().collect()}
            partitions = sorted(counts)
            files = [f for f in view.latest_base_files() if f.partition in set(partitions)]
            tagged = self._tag(keyed, files, operation, sum(counts.values()))
            plan = TaskPlan(self.table.uri, instant, operation, {f.file_id: f for f in files}, self.options)
            tasks = max(1, min(len(files) + len(partitions), self.spark.sparkContext.defaultParallelism * 2))
            written = tagged.repartition(tasks, TARGET, PARTITION).mapInArrow(partial(write_task, plan), STATS_SCHEMA)
            return _collect_stats(written)
        finally:
            keyed.unpersist()

    def _with_keys(self, df: DataFrame) -> DataFrame:
        """Add the record key and partition path exactly as the local writer computes them.

        When every key and partition field is a string or an integer, Spark's own
        cast to string gives the same text as Arrow's, so the columns are SQL
        expressions and the rows never leave the JVM; otherwise `timeline.keys`
        runs on the executors.
        """
        config = self.table.config
        fields = {f.name: f.dataType for f in df.schema.fields}
        used = [*config.record_key_fields, *config.partition_fields]
        if all(isinstance(fields.get(name), SQL_KEY_TYPES) for name in used):
            return df.withColumn(KEY, _sql_record_key(config.record_key_fields)).withColumn(
                PARTITION, _sql_partition_path(config.partition_fields, config.hive_style)
            )
        schema = StructType([*df.schema.fields, StructField(KEY, StringType()), StructField(PARTITION, StringType())])
        add = partial(add_keys, config.record_key_fields, config.partition_fields, config.hive_style)
        return df.mapInArrow(add, schema)

    def _tag(self, keyed: DataFrame, files: list[BaseFile], operation: str, rows: int) -> DataFrame:
        """Simple index: each record's existing file group in its partition, or NEW.

        With at most BROADCAST_KEYS incoming records their keys are broadcast to the
        index scan, so the (large) index is filtered where it is read, never shuffled.
        """
        if not files:
            tagged = keyed.withColumn(TARGET, F.lit(NEW))
        else:
            if rows <= BROADCAST_KEYS:
                wanted = keyed.select(KEY).toArrow().column(0).combine_chunks()
                index = F.broadcast(self.index_of(files, wanted))
            else:
                index = self.index_of(files)
            tagged = (
                keyed.join(index, (keyed[KEY] == index["key"]) & (keyed[PARTITION] == index["partition"]), "left")
                .withColumn(TARGET, F.coalesce(index["file_id"], F.lit(NEW)))
                .drop("key", "partition", "file_id")
            )
        if operation == "delete":
            return tagged.filter(F.col(TARGET) != NEW)
        return self._to_small_groups(tagged, files)

    def _to_small_groups(self, tagged: DataFrame, files: list[BaseFile]) -> DataFrame:
        """New records of a partition top up its smallest file group below the small-file limit."""
        smallest: dict[str, BaseFile] = {}
        for f in files:
            if f.size < self.options.small_file_limit and (
                f.partition not in smallest or f.size < smallest[f.partition].size
            ):
                smallest[f.partition] = f
        if not smallest:
            return tagged
        small = self.spark.createDataFrame(
            [(p, f.file_id) for p, f in sorted(smallest.items())], "small_partition string, small_file_id string"
        )
        joined = tagged.join(F.broadcast(small), tagged[PARTITION] == small["small_partition"], "left")
        target = F.when(F.col(TARGET) == NEW, F.coalesce(F.col("small_file_id"), F.lit(NEW))).otherwise(F.col(TARGET))
        return joined.withColumn(TARGET, target).drop("small_partition", "small_file_id")

    def index_of(self, files: list[BaseFile], wanted: pa.Array | None = None) -> DataFrame:
        """(key, partition, file_id) of the records in `files`, read by the executors with pyarrow.

        With `wanted` (the incoming keys, broadcast) each task keeps only the keys
        the write touches, so the table's keys never cross into the JVM.
        """
        slices = max(1, min(len(files), self.spark.sparkContext.defaultParallelism * 2))
        rows = self.spark.sparkContext.parallelize([(f.path, f.partition, f.file_id) for f in files], slices)
        listing = self.spark.createDataFrame(rows, "path string, partition string, file_id string")
        config = self.table.config
        shared = None if wanted is None else self.spark.sparkContext.broadcast(wanted)
        read = partial(keys_of_files, self.table.uri, config.record_key_fields, config.populate_meta_fields, shared)
        return listing.mapInArrow(read, "key string, partition string, file_id string")


def _sql_record_key(fields: list[str]) -> Column:
    """`timeline.keys.record_keys` as a Spark expression (string and integer fields only)."""
    parts = []
    for name in fields:
        message = F.lit(f"{NULL_KEY_MARK}{name!r} is null")
        parts.append(F.when(F.col(name).isNull(), F.raise_error(message)).otherwise(F.col(name).cast("string")))
    if len(fields) == 1:
        return parts[0]
    return F.concat_ws(",", *[F.concat(F.lit(f"{name}:"), part) for name, part in zip(fields, parts, strict=True)])


def _sql_partition_path(fields: list[str], hive_style: bool) -> Column:
    """`timeline.keys.partition_paths` as a Spark expression (string and integer fields only)."""
    if not fields:
        return F.lit("")
    parts = []
    for name in fields:
        text = F.col(name).cast("string")
        value = F.when(text.isNull() | (text == ""), F.lit(DEFAULT_PARTITION)).otherwise(text)
        parts.append(F.concat(F.lit(f"{name}="), value) if hive_style else value)
    return parts[0] if len(parts) == 1 else F.concat_ws("/", *parts)


def add_keys(key_fields: list[str], partition_fields: list[str], hive_style: bool, batches: Iterator[pa.RecordBatch]):
    for batch in batches:
        yield from with_keys(pa.Table.from_batches([batch]), key_fields, partition_fields, hive_style).to_batches()


def keys_of_files(
    base_uri: str, key_fields: list[str], meta_fields: bool, wanted: Broadcast | None, batches: Iterator[pa.RecordBatch]
):
    """One index task: the keys of its files, filtered once against `wanted` (one hash build per task)."""
    storage = Storage(base_uri)
    found, partitions, file_ids = [], [], []
    for batch in batches:
        for path, partition, file_id in zip(*(batch.column(c).to_pylist() for c in batch.schema.names), strict=True):
            with storage.open_input(path) as handle:
                rows = pq.read_table(handle, columns=[KEY] if meta_fields else key_fields)
            found.append(rows.column(KEY) if meta_fields else keys.record_keys(rows, key_fields))
            partitions.append(pa.array([partition] * rows.num_rows, pa.string()))
            file_ids.append(pa.array([file_id] * rows.num_rows, pa.string()))
    if not found:
        return
    index = pa.table(
        [pa.chunked_array(found, pa.string()), pa.chunked_array(partitions), pa.chunked_array(file_ids)],
        names=["key", "partition", "file_id"],
    )
    if wanted is not None:
        index = index.filter(pc.is_in(index.column("key"), value_set=wanted.value))
    yield from index.to_batches()


def insert_task(
    plan: TaskPlan,
    key_fields: list[str],
    partition_fields: list[str],
    hive_style: bool,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """One Spark task of an insert: key its rows, start new file groups per partition, yield their stats."""
    received = [b for b in batches if b.num_rows]
    if not received:
        return
    rows = with_keys(pa.Table.from_batches(received), key_fields, partition_fields, hive_style)
    table = Table.open(plan.base_uri)
    writer = LocalWriter(table, plan.options)
    writes = [w for partition, part_rows in split_by(rows, PARTITION) for w in writer.split_new(partition, part_rows)]
    yield _write_all(writer, table, plan, writes)


def write_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One Spark task: write every file group routed to it; yield one write stat per file."""
    received = list(batches)
    if not received or not any(b.num_rows for b in received):
        return
    rows = pa.Table.from_batches(received)
    table = Table.open(plan.base_uri)
    writer = LocalWriter(table, plan.options)
    if plan.operation in ("upsert", "delete"):
        rows = writer.dedupe(rows)
    writes = []
    for target, group in split_by(rows, TARGET):
        group = group.drop_columns([TARGET])
        if target == NEW:
            for partition, part_rows in split_by(group, PARTITION):
                writes += writer.split_new(partition, part_rows)
        elif plan.operation == "delete":
            writes.append(writer.merge(plan.bases[target], None, set(group.column(KEY).to_pylist())))
        else:
            writes += writer.fit(writer.merge(plan.bases[target], group, set()))
    yield _write_all(writer, table, plan, writes)


def _write_all(writer: LocalWriter, table: Table, plan: TaskPlan, writes: list) -> pa.RecordBatch:
    """Write a task's files (marker first, this attempt's write token in the name); their stats as one batch."""
    context = TaskContext.get()
    token = write_token(context.partitionId(), context.stageId(), context.attemptNumber())
    sink = ExecutorInstant(table.storage, plan.instant)
    stats = [writer.write_file(sink, write, context.partitionId(), token) for write in writes]
    return pa.RecordBatch.from_pydict({STAT: [json.dumps(asdict(s)) for s in stats]}, schema=STAT_ARROW)


def _collect_stats(written: DataFrame) -> list[WriteStat]:
    return [WriteStat(**json.loads(row[STAT])) for row in written.collect()]


def _bad_input_in(err: Exception) -> BadInputError | None:
    """Bad input found on an executor (a null key, a column that is not there), as the local writer says it."""
    for line in str(err).splitlines():
        if NULL_KEY_MARK in line:
            return BadInputError(line[line.index(NULL_KEY_MARK) + len("tandem: ") :].strip())
        if "BadInputError: " in line:
            return BadInputError(line.split("BadInputError: ", 1)[1].strip())
    return None


def _cast_to(df: DataFrame, schema: pa.Schema) -> DataFrame:
    """Cast incoming columns to the table's types (Spark's cast: a value that won't cast becomes null)."""
    columns = []
    for name in df.columns:
        if name in schema.names:
            columns.append(F.col(name).cast(from_arrow_type(schema.field(name).type)).alias(name))
        else:
            columns.append(F.col(name))
    return df.select(*columns)
