"""A Spark DataFrame as one instant: executors write the files, the driver commits.

The driver begins the instant through the coordinator's `Transaction` and
settles the schema the write leaves (schema evolution, checked before any task
runs); the executors cast their rows to it with the local writer's `conform`.
Inserts are one shuffle-free stage: each task starts new file groups for the
partitions its rows fall in; an insert's rows of a partition with a small file
group (at most a batch of them) go to one task per such partition, which tops
it up. On a merge-on-read table (a deltacommit) a task
writes each group's updates and deletes as one log of its slice instead, as the
local writer does. Upserts and deletes are tagged with a simple index
(a join with the keys of the latest file slices of the touched partitions, or of
every partition under a global index, read by the executors); an upsert's new
records top up the partition's smallest file group below the small-file limit
(a group pushed past the target size spills its last new records into new
groups); records are then repartitioned by target file group. Every task writes
straight to final names, marker first, with its partition-stage-attempt as the
write token, and returns write stats; the driver commits with those stats, and
the commit's finalize step deletes every marked file no stat names (a retried
task's files).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial, reduce

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import Broadcast, TaskContext
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.column import Column
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType, StringType, StructField, StructType

from coordinator.config import CoordinatorConfig
from coordinator.protocol import markers
from coordinator.protocol.transaction import WRITE_MARKER, Transaction, WriteOutcome
from coordinator.write.bloom_index import bloom_candidates
from coordinator.write.column_names import check_input_columns
from coordinator.write.log_files import LogTarget, write_log
from coordinator.write.log_slices import LogSlices, split_deletes
from coordinator.write.rows import KEY, PARTITION, key_typed, split_by, with_keys
from coordinator.write.table_schema import target_schema
from coordinator.write.tagging import DELETE, NEW, TARGET
from coordinator.write.writer import INPUT_BATCH_ROWS, LocalWriter, WriteOptions, WriteResult, resolve_operation
from locks.base import LockProvider
from timeline.crash_points import crash_point
from timeline.errors import BadInputError
from timeline.format import keys, partition_path
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.commit_metadata import CommitMetadata, DeltaWrite, WriteStat
from timeline.format.file_names import BaseFile, write_token
from timeline.format.fs_view import FileSystemView
from timeline.format.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT
from timeline.format.keys import DEFAULT_PARTITION
from timeline.format.meta_fields import META_COLUMNS
from timeline.format.schema_evolution import conform
from timeline.io.storage import Storage
from timeline.metrics import METRICS, TAGGING_FILES_SKIPPED
from timeline.table import Table

STAT = "stat"
NULL_KEY_MARK = "tandem: record key field "
SQL_KEY_TYPES = (StringType, ByteType, ShortType, IntegerType, LongType)
BROADCAST_KEYS = 2_000_000  # incoming records up to which their keys are broadcast to filter the index scan
INDEX_KEY, INDEX_PARTITION, INDEX_FILE = "_tandem_index_key", "_tandem_index_partition", "_tandem_index_file_id"
LOCATIONS, LOCATION = "_tandem_locations", "_tandem_location"
SMALL_PARTITION, SMALL_FILE = "_tandem_small_partition", "_tandem_small_file_id"
ORDER, RANK = "_tandem_order", "_tandem_rank"
LOCATION_TYPE = "array<struct<partition:string,file_id:string>>"
STATS_SCHEMA = StructType([StructField(STAT, StringType())])
BLOOM_BYTES = "bloomFilter"
STAT_ARROW = pa.schema([(STAT, pa.string())])


@dataclass(frozen=True)
class TaskPlan:
    """What every write task needs, shipped to the executors with the task closure."""

    base_uri: str
    instant: str
    operation: str
    bases: dict[str, BaseFile]  # file id -> latest base file, in the partitions this write touches
    options: WriteOptions
    schema: pa.Schema  # the table's data schema after this write: every file is written in it
    # merge-on-read: the slice each group's next log extends, and the groups new records may still top up
    logs: dict[str, LogTarget] | None = None
    small: frozenset[str] = frozenset()


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
        self.local = LocalWriter(table, self.options, self.coordinator)

    def write(
        self,
        df: DataFrame,
        operation: str,
        on_begin: Callable[[str], None] | None = None,
        instant_time: str | None = None,
    ) -> WriteResult:
        """Write `df` as one instant (at `instant_time` when given: a bootstrap's); on any failure the instant is
        undone in both tables.

        `on_begin` hears the instant time as soon as it is inflight.
        """
        operation, action = resolve_operation(operation)
        if self.table.config.merge_on_read and action == COMMIT:
            action = DELTA_COMMIT
        df = df.drop(*[c for c in df.columns if c in META_COLUMNS])
        check_input_columns(arrow_schema(df.schema))  # bad input before begin
        with Transaction(self.table, action, operation.upper(), self.coordinator, self.lock, instant_time) as txn:
            if on_begin is not None:
                on_begin(txn.time)
            view, existing = self.local.view_and_schema(operation, txn.begun)
            self.local.require_key_columns(df.columns)
            schema = target_schema(arrow_schema(df.schema), existing, operation)
            metadata = CommitMetadata(
                operation_type=operation.upper(), schema=arrow_to_avro(schema, self.table.config.name)
            )
            plan = TaskPlan(self.table.uri, txn.time, operation, {}, self.options, schema)
            try:
                if operation in ("upsert", "delete"):
                    stats = self._write_tagged(df, view, plan)
                else:
                    stats = self._write_new(df, plan, tops_up=existing is not None)
            except Exception as err:  # noqa: BLE001 - Spark wraps what the executors raised
                bad = bad_input_in(err)
                if bad is None:
                    raise
                raise bad from err
            if action == REPLACE_COMMIT:
                partitions = sorted({s.partition_path for s in stats})
                metadata.partition_to_replace_file_ids = {
                    p: [g.file_id for g in view.file_groups(p)] for p in partitions
                }
            for stat in sorted(stats, key=lambda s: s.path):
                metadata.add(stat)
            known = frozenset(view.partitions()) if view is not None else frozenset()
            txn.commit(WriteOutcome(metadata, known))
        rows_in = sum(s.num_inserts + s.num_update_writes + s.num_deletes for s in stats)
        return WriteResult(txn.time, operation, metadata, rows_in)

    def _write_new(self, df: DataFrame, plan: TaskPlan, tops_up: bool) -> list[WriteStat]:
        """insert, bulk_insert, insert_overwrite: one stage, no shuffle; each task starts new file groups
        for the partitions its rows fall in, as Spark's own partitioned writer does. An insert into a table
        with rows (`tops_up`) first counts its rows per partition; those of a partition with a small file group
        (`LocalWriter.insert_targets`) that bring at most a batch of rows (the local writer's first batch) go to
        one task per such partition instead, which tops that group up as the local writer does."""
        config = self.table.config
        task = partial(insert_task, plan, config.record_key_fields, config.partition_fields, config.hive_style)
        if plan.operation != "insert" or not tops_up or self.options.small_file_limit <= 0:
            return collect_stats(df.mapInArrow(task, STATS_SCHEMA))
        keyed = self._with_keys(df, plan.schema).persist()
        try:
            counts = {r[0]: r[1] for r in keyed.groupBy(PARTITION).count().collect()}
            small = self.local.insert_targets([p for p, n in counts.items() if n <= INPUT_BATCH_ROWS])
            if not small:
                return collect_stats(df.mapInArrow(task, STATS_SCHEMA))
            chosen = F.col(PARTITION).isin(sorted(small))
            fresh = keyed.filter(~chosen).drop(KEY, PARTITION)
            topping = keyed.filter(chosen).repartition(len(small), PARTITION)
            top = partial(top_up_task, replace(plan, bases={b.file_id: b for b in small.values()}))
            stats = collect_stats(fresh.mapInArrow(task, STATS_SCHEMA))
            return stats + collect_stats(topping.mapInArrow(top, STATS_SCHEMA))
        finally:
            keyed.unpersist()

    def _write_tagged(self, df: DataFrame, view: FileSystemView, plan: TaskPlan) -> list[WriteStat]:
        """upsert, delete: tag with the simple index, then one task per target file group."""
        keyed = self._with_keys(df, plan.schema)
        if self.coordinator.global_index:
            keyed = self._dedupe_by_key(keyed)
        keyed = keyed.persist()
        try:
            counts = {r[0]: r[1] for r in keyed.groupBy(PARTITION).count().collect()}
            for path in counts:  # SQL-built paths skip the key generator's check
                partition_path.canonical(path, f"partition columns {', '.join(self.table.config.partition_fields)}")
            partitions = sorted(counts)
            files = [f for f in view.latest_base_files() if self.coordinator.global_index or f.partition in counts]
            slices = LogSlices(view) if self.table.config.merge_on_read else None
            toppable = [f for f in files if slices is None or f.file_id not in slices.extended]
            tagged = self._tag(keyed, view, files, plan.operation, sum(counts.values()), toppable)
            plan = replace(plan, bases={f.file_id: f for f in files})
            if slices is not None:
                small = frozenset(slices.small_targets(view, self.options.small_file_limit))
                plan = replace(plan, logs={f.file_id: slices.target(f) for f in files}, small=small)
            tasks = max(1, min(len(files) + len(partitions), self.spark.sparkContext.defaultParallelism * 2))
            written = tagged.repartition(tasks, TARGET, PARTITION).mapInArrow(partial(write_task, plan), STATS_SCHEMA)
            return collect_stats(written)
        finally:
            keyed.unpersist()

    def _with_keys(self, df: DataFrame, schema: pa.Schema) -> DataFrame:
        """Add the record key and partition path exactly as the local writer computes them.

        When every key and partition field is a string or an integer, Spark's own
        cast to string gives the same text as Arrow's, so the columns are SQL
        expressions and the rows never leave the JVM; otherwise `timeline.format.keys`
        runs on the executors, on values in the table's types.
        """
        config = self.table.config
        fields = {f.name: f.dataType for f in df.schema.fields}
        used = [*config.record_key_fields, *config.partition_fields]
        if all(isinstance(fields.get(name), SQL_KEY_TYPES) for name in used):
            return df.withColumn(KEY, sql_record_key(config.record_key_fields)).withColumn(
                PARTITION, _sql_partition_path(config.partition_fields, config.hive_style)
            )
        keys_type = [StructField(KEY, StringType()), StructField(PARTITION, StringType())]
        add = partial(add_keys, config.record_key_fields, config.partition_fields, config.hive_style, schema)
        return df.mapInArrow(add, StructType([*df.schema.fields, *keys_type]))

    def _dedupe_by_key(self, keyed: DataFrame) -> DataFrame:
        """Under a global index a key is one record across partitions: keep its largest precombine value, else its
        last row, before tagging (the local writer's `dedupe` by key)."""
        pre = self.table.config.precombine_field
        order = [F.col(pre).desc_nulls_last()] if pre and pre in keyed.columns else []
        window = Window.partitionBy(KEY).orderBy(*order, F.col(ORDER).desc())
        ranked = keyed.withColumn(ORDER, F.monotonically_increasing_id()).withColumn(RANK, F.row_number().over(window))
        return ranked.filter(F.col(RANK) == 1).drop(ORDER, RANK)

    def _tag(
        self,
        keyed: DataFrame,
        view: FileSystemView,
        files: list[BaseFile],
        operation: str,
        rows: int,
        toppable: list[BaseFile],
    ) -> DataFrame:
        """Simple (or bloom) index: each record's file group, NEW, or DELETE rows for the copies it removes.

        With at most BROADCAST_KEYS incoming records their keys are broadcast to the
        index scan, so the (large) index is filtered where it is read, never shuffled;
        under a BLOOM index type only the files the bloom index cannot rule out are read.
        """
        if not files:
            tagged = keyed.withColumn(TARGET, F.lit(NEW)).withColumn(DELETE, F.lit(False))
            return tagged.filter(F.lit(False)) if operation == "delete" else tagged
        if rows <= BROADCAST_KEYS:
            incoming = keyed.select(KEY, PARTITION).toArrow()
            wanted = incoming.column(0).combine_chunks()
            index = F.broadcast(self.index_of(self._may_hold(view, files, incoming), wanted))
        else:
            index = self.index_of(files)
        if self.coordinator.global_index:
            tagged = self._tag_global(keyed, index, operation)
        else:
            same = (keyed[KEY] == index[INDEX_KEY]) & (keyed[PARTITION] == index[INDEX_PARTITION])
            tagged = (
                keyed.join(index, same, "left")
                .withColumn(TARGET, F.coalesce(index[INDEX_FILE], F.lit(NEW)))
                .withColumn(DELETE, F.lit(operation == "delete"))
                .drop(INDEX_KEY, INDEX_PARTITION, INDEX_FILE)
            )
        if operation == "delete":
            return tagged.filter(F.col(TARGET) != NEW)
        return self._to_small_groups(tagged, toppable)

    def _may_hold(self, view: FileSystemView, files: list[BaseFile], incoming: pa.Table) -> list[BaseFile]:
        if not self.coordinator.bloom_index:
            return files
        partitions = None if self.coordinator.global_index else incoming.column(1)
        candidates = bloom_candidates(self.table.config, view, files, incoming.column(0), partitions)
        METRICS.incr(TAGGING_FILES_SKIPPED, len(files) - len(candidates))
        return candidates

    def _tag_global(self, keyed: DataFrame, index: DataFrame, operation: str) -> DataFrame:
        """Global index: a key's copies in every partition (`route` in the local writer, as Spark SQL).

        A delete removes every copy. An upsert updates the copies in its own
        partition; copies elsewhere are deleted (the record moves) when
        `update_partition_path`, else, with none in its own partition, the record
        updates them in the first partition holding it, keeping that partition path.
        """
        location = F.struct(F.col(INDEX_PARTITION).alias("partition"), F.col(INDEX_FILE).alias("file_id"))
        located = index.groupBy(INDEX_KEY).agg(F.array_sort(F.collect_list(location)).alias(LOCATIONS))
        joined = keyed.join(located, keyed[KEY] == located[INDEX_KEY], "left").drop(INDEX_KEY)
        locs = F.coalesce(F.col(LOCATIONS), F.array().cast(LOCATION_TYPE))
        here = F.filter(locs, lambda loc: loc["partition"] == F.col(PARTITION))
        elsewhere = F.filter(locs, lambda loc: loc["partition"] != F.col(PARTITION))
        if operation == "delete":
            return _at_locations(joined, locs, deleting=True)
        if self.coordinator.update_partition_path:
            moved = _at_locations(joined, elsewhere, deleting=True).filter(F.col(TARGET) != NEW)
            return _at_locations(joined, here, deleting=False).unionByName(moved)
        stay = F.when(F.size(here) > 0, F.col(PARTITION)).otherwise(F.array_min(locs)["partition"])
        staying = joined.withColumn(PARTITION, F.coalesce(stay, F.col(PARTITION)))
        return _at_locations(staying, F.filter(locs, lambda loc: loc["partition"] == F.col(PARTITION)), deleting=False)

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
            [(p, f.file_id) for p, f in sorted(smallest.items())], f"{SMALL_PARTITION} string, {SMALL_FILE} string"
        )
        joined = tagged.join(F.broadcast(small), tagged[PARTITION] == small[SMALL_PARTITION], "left")
        target = F.when(F.col(TARGET) == NEW, F.coalesce(F.col(SMALL_FILE), F.lit(NEW))).otherwise(F.col(TARGET))
        return joined.withColumn(TARGET, target).drop(SMALL_PARTITION, SMALL_FILE)

    def index_of(self, files: list[BaseFile], wanted: pa.Array | None = None) -> DataFrame:
        """(key, partition, file id) of the records in `files`, read by the executors with pyarrow.

        With `wanted` (the incoming keys, broadcast) each task keeps only the keys
        the write touches, so the table's keys never cross into the JVM.
        """
        slices = max(1, min(len(files), self.spark.sparkContext.defaultParallelism * 2))
        rows = self.spark.sparkContext.parallelize([(f.path, f.partition, f.file_id) for f in files], slices)
        listing = self.spark.createDataFrame(rows, "path string, partition string, file_id string")
        config = self.table.config
        shared = None if wanted is None else self.spark.sparkContext.broadcast(wanted)
        read = partial(keys_of_files, self.table.uri, config.record_key_fields, config.populate_meta_fields, shared)
        return listing.mapInArrow(read, f"{INDEX_KEY} string, {INDEX_PARTITION} string, {INDEX_FILE} string")


def sql_record_key(fields: list[str]) -> Column:
    """`timeline.format.keys.record_keys` as a Spark expression (string and integer fields only), refusing the same
    values with the same words."""
    texts = {name: F.col(name).cast("string") for name in fields}
    if len(fields) == 1:
        [(name, text)] = texts.items()
        refused = F.when(text.isNull(), _sql_refuse(f"{NULL_KEY_MARK}{name!r} is null"))
        return refused.when(text == "", _sql_refuse(f"{NULL_KEY_MARK}{name!r} is empty")).otherwise(text)
    parts = []
    for name, text in texts.items():
        value = F.concat(F.lit(f"{NULL_KEY_MARK}{name!r} value "), _sql_shown(text))
        part = F.when(text.isNull(), _sql_refuse(f"{NULL_KEY_MARK}{name!r} is null"))
        part = part.when(text.contains(keys.KEY_PARTS_SEPARATOR), _sql_refuse(value, f" {keys.COMMA_REASON}"))
        for placeholder in (keys.NULL_PLACEHOLDER, keys.EMPTY_PLACEHOLDER):
            part = part.when(text == placeholder, _sql_refuse(value, f" {keys.placeholder_reason(placeholder)}"))
        part = part.when(text == "", F.lit(keys.EMPTY_PLACEHOLDER)).otherwise(text)
        parts.append(F.concat(F.lit(f"{name}:"), part))
    blank = reduce(lambda a, b: a & b, [text == "" for text in texts.values()])
    no_value = _sql_refuse(f"tandem: {keys.all_empty_reason(fields)}: Hudi refuses a key with no value")
    return F.when(blank, no_value).otherwise(F.concat_ws(keys.KEY_PARTS_SEPARATOR, *parts))


def _sql_partition_path(fields: list[str], hive_style: bool) -> Column:
    """`timeline.format.keys.partition_paths` as a Spark expression (string and integer fields only); a `/` in a
    value of a path of several columns is refused as there (the rest of the path check runs on the driver)."""
    if not fields:
        return F.lit("")
    parts = []
    for name in fields:
        text = F.col(name).cast("string")
        value = F.when(text.isNull() | (text == ""), F.lit(DEFAULT_PARTITION)).otherwise(text)
        if len(fields) > 1:
            shown = F.concat(F.lit(f"tandem: BadInputError: partition column {name!r} value "), _sql_shown(text))
            value = F.when(text.contains(keys.PATH_SEPARATOR), _sql_refuse(shown, f" {keys.SLASH_REASON}")).otherwise(
                value
            )
        parts.append(F.concat(F.lit(f"{name}="), value) if hive_style else value)
    return parts[0] if len(parts) == 1 else F.concat_ws(keys.PATH_SEPARATOR, *parts)


def _sql_refuse(message: str | Column, reason: str = "") -> Column:
    """Fail the task with `message`: `bad_input_in` makes it the local writer's BadInputError. The message ends
    its line, so Spark's own suffix (`SQLSTATE: ...`) falls on the next one."""
    text = F.lit(message) if isinstance(message, str) else message
    return F.raise_error(F.concat(text, F.lit(f"{reason}\n")))


def _sql_shown(text: Column) -> Column:
    """`partition_path.shown` in Spark SQL: quoted as Python's repr quotes (backslash, quote, newline, return and tab
    escaped; other unprintable characters are shown as they are), cut after SHOWN_CHARS characters."""
    head = F.substring(text, 1, partition_path.SHOWN_CHARS)
    escaped = head
    for raw, escape in (("\\", "\\\\"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        escaped = F.replace(escaped, F.lit(raw), F.lit(escape))
    double = head.contains("'") & ~head.contains('"')
    quoted = F.when(double, F.concat(F.lit('"'), escaped, F.lit('"'))).otherwise(
        F.concat(F.lit("'"), F.replace(escaped, F.lit("'"), F.lit("\\'")), F.lit("'"))
    )
    length = F.char_length(text)
    cut = F.concat(quoted, F.lit("... ("), length.cast("string"), F.lit(" characters)"))
    return F.when(length > partition_path.SHOWN_CHARS, cut).otherwise(quoted)


def _at_locations(df: DataFrame, locations: Column, deleting: bool) -> DataFrame:
    """One row per location (file group) in `locations`, or one NEW row when there is none.

    A deleting row carries the location's partition path: it removes the key's copy there.
    """
    exploded = df.withColumn(LOCATION, F.explode_outer(locations)).drop(LOCATIONS)
    tagged = exploded.withColumn(TARGET, F.coalesce(F.col(LOCATION)["file_id"], F.lit(NEW)))
    if deleting:
        tagged = tagged.withColumn(PARTITION, F.coalesce(F.col(LOCATION)["partition"], F.col(PARTITION)))
    return tagged.withColumn(DELETE, F.lit(deleting)).drop(LOCATION)


def arrow_schema(schema: StructType) -> pa.Schema:
    """A DataFrame's schema in Arrow; Spark's TimestampType is an instant, so a UTC timestamp."""
    fields = []
    for field in schema.fields:
        try:
            fields.append(pa.field(field.name, to_arrow_type(field.dataType, timezone="UTC")))
        except (PySparkException, TypeError) as err:
            kind = field.dataType.simpleString()
            raise BadInputError(f"column {field.name!r}: Spark type {kind} cannot be written to a Hudi table") from err
    return pa.schema(fields)


def add_keys(
    key_fields: list[str],
    partition_fields: list[str],
    hive_style: bool,
    schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Key and partition columns computed from the key fields in the table's types, as the local writer does."""
    for batch in batches:
        rows = pa.Table.from_batches([batch])
        typed = key_typed(rows, schema, key_fields, partition_fields)
        keyed = with_keys(typed, key_fields, partition_fields, hive_style)
        rows = rows.append_column(KEY, keyed.column(KEY)).append_column(PARTITION, keyed.column(PARTITION))
        yield from rows.to_batches()


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
        names=[INDEX_KEY, INDEX_PARTITION, INDEX_FILE],
    )
    if wanted is not None:
        index = index.filter(pc.is_in(index.column(INDEX_KEY), value_set=wanted.value))
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
    rows = with_keys(conform(pa.Table.from_batches(received), plan.schema), key_fields, partition_fields, hive_style)
    table = Table.open(plan.base_uri)
    writer = LocalWriter(table, plan.options)
    writes = [w for partition, part_rows in split_by(rows, PARTITION) for w in writer.split_new(partition, part_rows)]
    yield _write_all(writer, table, plan, writes)


def top_up_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One Spark task of an insert: the keyed rows of the partitions routed here, each topping up its small
    file group (`plan.bases`); yield the stats of the files written."""
    received = [b for b in batches if b.num_rows]
    if not received:
        return
    rows = conform(pa.Table.from_batches(received), plan.schema)
    table = Table.open(plan.base_uri)
    writer = LocalWriter(table, plan.options)
    small = {base.partition: base for base in plan.bases.values()}
    writes = [
        w
        for partition, part in split_by(rows, PARTITION)
        for w in writer.top_up_writes(small[partition], part, plan.schema)
    ]
    yield _write_all(writer, table, plan, writes)


def write_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One Spark task: write every file group routed to it; yield one write stat per file.

    Its rows are tagged records (one file group each) and DELETE rows; records
    that are the same (key, partition, target) are combined by precombine first.
    """
    received = [b for b in batches if b.num_rows]
    if not received:
        return
    rows = pa.Table.from_batches(received)
    if plan.operation != "delete":
        rows = conform(rows, plan.schema)
    table = Table.open(plan.base_uri)
    writer = LocalWriter(table, plan.options)
    rows = writer.dedupe(rows, [KEY, PARTITION, TARGET])
    logged: list[tuple[str, pa.Table]] = []
    if plan.logs is not None:  # merge-on-read: a group's updates and deletes go to a log of its slice
        groups = list(split_by(rows, TARGET))
        logged = [(t, g) for t, g in groups if t != NEW and not writer.takes_inserts(plan.bases[t], g, plan.small)]
        logged_ids = {t for t, _ in logged}
        rewritten = [g for t, g in groups if t not in logged_ids]
        rows = pa.concat_tables(rewritten) if rewritten else rows.slice(0, 0)
    yield _write_all(writer, table, plan, writer.plan_tagged(rows, plan.bases, plan.schema), logged)


def _write_all(
    writer: LocalWriter, table: Table, plan: TaskPlan, writes: list, logged: Sequence[tuple[str, pa.Table]] = ()
) -> pa.RecordBatch:
    """Write a task's files (marker first, this attempt's write token in the name); their stats as one batch."""
    context = TaskContext.get()
    token = write_token(context.partitionId(), context.stageId(), context.attemptNumber())
    sink = ExecutorInstant(table.storage, plan.instant)
    stats = [writer.write_file(sink, write, context.partitionId(), token) for write in writes]
    for target, records in logged:
        updates, deleted = split_deletes(records)
        log = plan.logs[target]
        stats.append(write_log(writer, sink, log, updates, deleted, context.partitionId(), table.config.name, token))
    return pa.RecordBatch.from_pydict({STAT: [stat_json(s) for s in stats]}, schema=STAT_ARROW)


def stat_json(stat: WriteStat) -> str:
    """A write stat as JSON for the driver; the bloom filter's bytes travel as base64."""
    fields = asdict(stat)
    if stat.bloom_filter is not None:
        fields["bloom_filter"] = {
            **stat.bloom_filter,
            BLOOM_BYTES: base64.b64encode(stat.bloom_filter[BLOOM_BYTES]).decode(),
        }
    return json.dumps(fields)


def collect_stats(written: DataFrame) -> list[WriteStat]:
    return stats_from_json([row[STAT] for row in written.collect()])


def stats_from_json(texts: list[str]) -> list[WriteStat]:
    """Write stats an executor sent as `stat_json`, in order."""
    stats = [WriteStat(**json.loads(text)) for text in texts]
    for stat in stats:
        if stat.delta is not None:  # a log's delta fields travel as a JSON object
            stat.delta = DeltaWrite(**{**stat.delta, "log_files": tuple(stat.delta["log_files"])})
        if stat.bloom_filter is not None:
            stat.bloom_filter[BLOOM_BYTES] = base64.b64decode(stat.bloom_filter[BLOOM_BYTES])
    return stats


def bad_input_in(err: Exception) -> BadInputError | None:
    """Bad input found on an executor (a null key, a column that is not there), as the local writer says it."""
    for line in str(err).splitlines():
        if NULL_KEY_MARK in line:
            return BadInputError(line[line.index(NULL_KEY_MARK) + len("tandem: ") :].strip())
        if "BadInputError: " in line:
            return BadInputError(line.split("BadInputError: ", 1)[1].strip())
    return None
