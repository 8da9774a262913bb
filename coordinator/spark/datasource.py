"""`spark.read.format("tandem").load(path)`: a Python data source planned by `timeline.query.scan`.

Everything runs in Spark's Python workers: `schema()` when the DataFrame is
loaded, `pushFilters()` and `partitions()` when a query is planned, `read()` in
the tasks. The snapshot is fixed at load: without `as.of.instant` the source
pins the table's latest completed instant, so a commit landing between load and
an action changes neither the schema nor the rows.

Filter pushdown prunes, it never filters. The filters Spark pushes are
translated into the planner's predicate tree (their AND), which drops the
partitions and files no row of which can match; every filter is handed back to
Spark all the same, so Spark applies it to the rows read with its own
semantics. A filter that cannot be translated simply prunes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from coordinator.duckdb.view import output_schema
from timeline.errors import BadInputError, TandemError
from timeline.format.instant import query_instant
from timeline.format.meta_fields import COMMIT_TIME
from timeline.format.schema_evolution import conform
from timeline.io.storage import Storage
from timeline.mor.slice_merge import LogMerge
from timeline.query import predicate as P
from timeline.query.reader import read_base_file
from timeline.query.scan import ScanPlan, Split, plan_scan
from timeline.table import Table

NAME = "tandem"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
AS_OF_KEYS = ("as.of.instant",)
BEGIN_KEYS = ("begin.instant", "hoodie.datasource.read.begin.instanttime")
END_KEYS = ("end.instant", "hoodie.datasource.read.end.instanttime")
QUERY_TYPE_KEY = "hoodie.datasource.query.type"
PARALLELISM_KEY = "tandem.read.parallelism"
_COMPARISONS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
_SCALARS = (bool, int, float, Decimal, str, bytes, date)  # datetime is a date


def register(spark: SparkSession) -> None:
    """Make `spark.read.format("tandem")` available in this session, with filter pushdown on.

    The registered class carries the session's default parallelism: the workers
    that plan the read have no SparkContext to ask.
    """
    spark.conf.set(PUSHDOWN_CONF, "true")
    parallelism = spark.sparkContext.defaultParallelism
    source = type("RegisteredTandemDataSource", (TandemDataSource,), {"parallelism": parallelism})
    spark.dataSource.register(source)


class TandemDataSource(DataSource):
    """Options: `path` (load's argument), `as.of.instant`, `begin.instant`/`end.instant` (or Hudi's keys)."""

    parallelism: int | None = None

    @classmethod
    def name(cls) -> str:
        return NAME

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.arrow_schema: pa.Schema | None = None
        try:
            self.uri = _path(options)
            self.as_of, self.since, self.until = _snapshot_options(options)
        except TandemError as err:
            raise _plain(err) from None

    def schema(self) -> StructType:
        return _spark_schema(self.resolved())

    def resolved(self) -> pa.Schema:
        """Pin the snapshot and find its schema (once: the instance travels pickled to the other workers)."""
        if self.arrow_schema is None:
            try:
                table = Table.open(self.uri)
                latest = _latest_instant(table)
                if self.since is not None:
                    self.until = self.until or latest
                    if not table.config.populate_meta_fields:
                        raise BadInputError(
                            f"{table.uri} does not populate meta fields: an incremental read needs {COMMIT_TIME}"
                        )
                else:
                    self.as_of = self.as_of or latest
                plan = plan_scan(table, None, as_of=self.as_of, since=self.since, until=self.until)
                self.arrow_schema = output_schema(plan)
            except TandemError as err:
                raise _plain(err) from None
        return self.arrow_schema

    def reader(self, schema: StructType) -> TandemReader:
        return TandemReader(self, schema)


class TandemReader(DataSourceReader):
    def __init__(self, source: TandemDataSource, schema: StructType) -> None:
        self.table_schema = source.resolved()  # first: it pins the snapshot when Spark did not ask for the schema
        self.uri = source.uri
        self.as_of, self.since, self.until = source.as_of, source.since, source.until
        self.schema = schema
        self.parallelism = _parallelism(source)
        self.pushed: list[P.Expr] = []
        self.explained: dict | None = None  # the last plan's explain(), for tests and debugging

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Translate what can be translated for pruning, and give every filter back for Spark to apply."""
        for item in filters:
            expr = translate(item)
            if expr is not None:
                try:
                    self.pushed.append(P.resolve(expr, self.table_schema))
                except BadInputError:
                    pass  # a column of a user-given schema the table lacks: nothing to prune with
            yield item

    def filter(self) -> P.Expr | None:
        expr = None
        for item in self.pushed:
            expr = item if expr is None else P.And(expr, item)
        return expr

    def plan(self) -> ScanPlan:
        try:
            table = Table.open(self.uri)
            return plan_scan(table, self.filter(), as_of=self.as_of, since=self.since, until=self.until)
        except TandemError as err:
            raise _plain(err) from None

    def partitions(self) -> list[InputPartition]:
        plan = self.plan()
        self.explained = plan.explain()
        groups = group_splits(plan.splits, self.parallelism * 2)
        parts = [
            InputPartition(([(s.path, s.partition, s.file_id, s.source) for s in g], _task_merge(plan.merge, g)))
            for g in groups
        ]
        return parts or [InputPartition(([], None))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        storage = Storage(self.uri)
        target = to_arrow_schema(self.schema, timezone="UTC")
        files, merge = partition.value
        for path, part, file_id, source in files:
            rows = read_base_file(storage, path, source=source)
            if merge is not None:
                rows = merge.merged(storage, rows, part, file_id)
            if self.since is not None:
                rows = rows.filter(_in_range(rows.column(COMMIT_TIME), self.since, self.until))
            if rows.num_rows:
                yield from conform(rows, target, exact=False).select(target.names).to_batches()


def _task_merge(merge: LogMerge | None, splits: list[Split]) -> LogMerge | None:
    """What one read task needs to merge its merge-on-read slices: only their logs (None: nothing to merge)."""
    if merge is None:
        return None
    logs = {(s.partition, s.file_id): found for s in splits if (found := merge.logs_of(s.partition, s.file_id))}
    return replace(merge, logs=logs) if logs else None


def translate(item: Filter) -> P.Expr | None:
    """The predicate tree of one pushed filter, meaning exactly what it means in Spark; None if not translatable."""
    if isinstance(item, Not):
        child = translate(item.child)
        return None if child is None else P.Not(child)
    attribute = getattr(item, "attribute", ())
    if len(attribute) != 1:
        return None  # a nested field: the planner prunes on top-level columns only
    column = attribute[0]
    if isinstance(item, (IsNull, IsNotNull)):
        return P.IsNull(column, negated=isinstance(item, IsNotNull))
    value = item.value
    if type(item) in _COMPARISONS:
        return P.Comparison(column, _COMPARISONS[type(item)], _literal(value)) if _scalar(value) else None
    if isinstance(item, EqualNullSafe):
        if value is None:
            return P.IsNull(column)
        if not _scalar(value):
            return None
        return P.And(P.Comparison(column, "=", _literal(value)), P.IsNull(column, negated=True))
    if isinstance(item, In):
        values = tuple(value)
        if not values or not all(v is None or _scalar(v) for v in values):
            return None
        return P.InList(column, tuple(_literal(v) for v in values))
    if isinstance(item, (StringStartsWith, StringEndsWith, StringContains)) and isinstance(value, str):
        text = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = {StringStartsWith: f"{text}%", StringEndsWith: f"%{text}", StringContains: f"%{text}%"}[type(item)]
        return P.Like(column, pattern)
    return None


def _plain(err: TandemError) -> TandemError:
    """The error without its chain: Spark shows the worker's traceback, which should end in one clear line."""
    try:
        return type(err)(str(err))
    except TypeError:
        return BadInputError(str(err))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, _SCALARS)


def _literal(value: Any) -> Any:
    """Spark's timestamps come zoned in UTC by name (zoneinfo); the planner takes any aware datetime."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc)
    return value


def group_splits(splits: list[Split], count: int) -> list[list[Split]]:
    """At most `count` groups of about equal bytes: largest file first, into the lightest group so far."""
    count = max(1, min(count, len(splits)))
    groups: list[list[Split]] = [[] for _ in range(count)]
    sizes = [0] * count
    for split in sorted(splits, key=lambda s: (-s.size, s.path)):
        lightest = sizes.index(min(sizes))
        groups[lightest].append(split)
        sizes[lightest] += max(split.size, 1)
    return [g for g in groups if g]


def _in_range(times: pa.ChunkedArray, since: str, until: str | None) -> pa.ChunkedArray:
    keep = pc.greater(times, since)
    return pc.and_(keep, pc.less_equal(times, until)) if until is not None else keep


def _path(options: dict[str, str]) -> str:
    path = options.get("path")
    if not path:
        raise BadInputError('the tandem data source needs the table\'s path: spark.read.format("tandem").load(path)')
    return path


def _option(options: dict[str, str], keys: tuple[str, ...]) -> str | None:
    found = {options[k] for k in keys if options.get(k)}
    if len(found) > 1:
        raise BadInputError(f"options {' and '.join(keys)} disagree: {', '.join(sorted(found))}")
    return query_instant(found.pop().strip(), f"option {keys[0]}") if found else None


def _snapshot_options(options: dict[str, str]) -> tuple[str | None, str | None, str | None]:
    as_of, since, until = _option(options, AS_OF_KEYS), _option(options, BEGIN_KEYS), _option(options, END_KEYS)
    query_type = (options.get(QUERY_TYPE_KEY) or "").lower()
    if query_type not in ("", "snapshot", "incremental"):
        raise BadInputError(f"option {QUERY_TYPE_KEY}: {query_type!r} is not snapshot or incremental")
    if (query_type == "incremental" or until is not None) and since is None:
        raise BadInputError(f"an incremental read needs {BEGIN_KEYS[0]} (or {BEGIN_KEYS[1]})")
    if query_type == "snapshot" and since is not None:
        raise BadInputError(f"{BEGIN_KEYS[0]} is an incremental read, but {QUERY_TYPE_KEY} is snapshot")
    if since is not None and as_of is not None:
        raise BadInputError(f"an incremental read ({BEGIN_KEYS[0]}) cannot also be {AS_OF_KEYS[0]} an instant")
    return as_of, since, until


def _latest_instant(table: Table) -> str | None:
    completed = table.timeline().completed()
    return completed[-1].time if completed else None


def _parallelism(source: TandemDataSource) -> int:
    given = source.options.get(PARALLELISM_KEY)
    if given:
        if not given.isdigit() or int(given) < 1:
            raise BadInputError(f"option {PARALLELISM_KEY}: {given!r} is not a positive integer")
        return int(given)
    return source.parallelism or os.cpu_count() or 1


def _spark_schema(schema: pa.Schema) -> StructType:
    """Every field nullable: an older file may lack a column, and Hudi's fields are all optional."""
    fields = []
    for field in schema:
        try:
            converted = from_arrow_schema(pa.schema([field]))[0]
        except (TypeError, ValueError, PySparkException):
            raise BadInputError(f"column {field.name!r} has type {field.type}, which Spark cannot read") from None
        fields.append(converted)
    return _nullable(StructType(fields))


def _nullable(dtype: DataType) -> Any:
    if isinstance(dtype, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in dtype.fields])
    if isinstance(dtype, ArrayType):
        return ArrayType(_nullable(dtype.elementType), True)
    if isinstance(dtype, MapType):
        return MapType(dtype.keyType, _nullable(dtype.valueType), True)
    return dtype
