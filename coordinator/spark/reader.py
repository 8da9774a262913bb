"""Reads as Spark DataFrames: snapshot, as-of and incremental, the file list from the metadata table.

No storage listing: the latest file slices come from the MDT (filtered by the
data timeline), partitions are pruned by evaluating the partition part of the
filter on each partition's typed values, and only the surviving files are handed
to Spark's own parquet reader. `s3://` tables are read by the executors through
pyarrow instead, because Spark's `s3a` connector (hadoop-aws) does not ship with
pyspark.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.logger import PySparkLogger
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from timeline.errors import BadInputError
from timeline.file_names import BaseFile
from timeline.fs_view import FileSystemView
from timeline.instant import WRITE_ACTIONS
from timeline.partition_filter import PARTITION_COLUMN, partition_candidates, typed_fields
from timeline.reader import read_base_file
from timeline.storage import Storage
from timeline.table import META_COLUMNS, Table

COMMIT_TIME = "_hoodie_commit_time"
SPARK_QUERY_LOGGER = "SQLQueryContextLogger"
URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
SPARK_ERRORS = (PySparkException, Py4JJavaError)


def read_table(
    spark: SparkSession,
    path: str,
    as_of: str | None = None,
    where: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> DataFrame:
    """The table's rows as a DataFrame.

    `as_of`: the snapshot as of that instant (time travel). `where`: a SQL filter;
    what it says about partition columns prunes partitions before any file is
    read. `since` (exclusive) / `until` (inclusive): an incremental read, the
    records written by the commits in that range, as of `until`.
    """
    table = Table.open(path)
    if since is not None and as_of is not None:
        raise BadInputError("an incremental read (since/until) cannot also be as of an instant")
    end = until if since is not None else as_of
    view = table.view(end)
    schema = table_schema(table, view)
    files = view.latest_base_files()
    if since is not None:
        touched = _groups_written(table, since, until)
        files = [f for f in files if (f.partition, f.file_id) in touched]
    if where:
        kept = set(prune_partitions(spark, table, view.partitions(), where, schema))
        files = [f for f in files if f.partition in kept]
    df = _read_files(spark, table, files, schema)
    if since is not None:
        df = df.filter(F.col(COMMIT_TIME) > since)
        if until is not None:
            df = df.filter(F.col(COMMIT_TIME) <= until)
    if where and schema is not None:
        df = _filtered(df, where)
    if not table.config.populate_meta_fields:
        df = df.drop(*META_COLUMNS)
    return df


def _filtered(df: DataFrame, where: str) -> DataFrame:
    try:
        return df.filter(where)
    except AnalysisException as err:
        raise BadInputError(f"--where {where!r}: {str(err).splitlines()[0]}") from err


def prune_partitions(
    spark: SparkSession, table: Table, partitions: list[str], where: str, schema: pa.Schema | None = None
) -> list[str]:
    """The partitions that may hold a row satisfying `where`.

    The part of `where` on partition columns alone (`partition_predicate`) is
    evaluated on each partition's candidate values, typed as in the table schema
    (`timeline.partition_filter`): a partition is kept when any candidate passes
    or its path is undecided, and every partition is kept when Spark cannot
    evaluate that part on its own. The full filter is applied to the rows after.
    """
    fields = table.config.partition_fields
    if not fields or not partitions or table.config.raw.get(URL_ENCODE) == "true":
        return partitions
    types = typed_fields(fields, schema if schema is not None else table_schema(table, table.view()))
    predicate = partition_predicate(spark, where, set(types)) if types else None
    if predicate is None:
        return partitions
    candidates, undecided = partition_candidates(partitions, fields, types, table.config.hive_style)
    passed = _passing(spark, candidates, predicate)
    if passed is None:
        return partitions
    kept = passed | set(undecided)
    return [p for p in partitions if p in kept]


def _passing(spark: SparkSession, candidates: pa.Table, predicate: str) -> set[str] | None:
    """The partitions with a candidate on which `predicate` is true; None when Spark cannot tell.

    A predicate that fails here (a cast of some value, a type it needs from the
    rest of the filter) or is not deterministic decides nothing.
    """
    if candidates.num_rows == 0:
        return set()
    frame = spark.createDataFrame(candidates, schema=from_arrow_schema(candidates.schema))
    # A failure here only means the predicate cannot prune: not an error to log. PySpark logs through
    # its own logger class, so the logger is fetched as one (a plain Logger would break its calls).
    quiet = PySparkLogger.getLogger(SPARK_QUERY_LOGGER)
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        passing = frame.filter(predicate)
        if not passing._jdf.queryExecution().analyzed().deterministic():
            return None
        return {row[0] for row in passing.select(PARTITION_COLUMN).collect()}
    except SPARK_ERRORS:
        return None
    finally:
        quiet.setLevel(level)


def partition_predicate(spark: SparkSession, where: str, columns: set[str]) -> str | None:
    """A filter naming only `columns` that every row satisfying `where` also satisfies; None when there is none.

    `where` is parsed by Spark's own parser. A conjunct naming another column is
    dropped (true), and so is a disjunction with such a side: that only weakens
    the filter, so what it rejects `where` rejects too. Under NOT nothing is
    dropped. A kept sub-expression is printed back as SQL only when that text
    parses to the same tree.
    """
    session = getattr(spark, "_jsparkSession", None)
    if session is None:  # Spark Connect: no parser on this side to ask, so nothing is pruned
        return None
    parser = session.sessionState().sqlParser()
    try:
        tree = parser.parseExpression(where)
    except SPARK_ERRORS:
        return None
    names = {c.lower() for c in columns}
    return where if _names_only(tree, names) else _weaken(parser, tree, names)


def _weaken(parser, node, names: set[str]) -> str | None:
    if _names_only(node, names):
        return _printed(parser, node)
    kind = node.nodeName()
    if kind not in ("And", "Or"):
        return None
    left, right = (_weaken(parser, node.children().apply(i), names) for i in (0, 1))
    if kind == "And":
        return " AND ".join(f"({p})" for p in (left, right) if p is not None) or None
    return f"({left}) OR ({right})" if left is not None and right is not None else None


def _names_only(node, names: set[str]) -> bool:
    """Whether every leaf is a literal or a column of `names` (any other leaf might read a data column)."""
    children = node.children()
    if children.size():
        return all(_names_only(children.apply(i), names) for i in range(children.size()))
    kind = node.nodeName()
    if kind == "UnresolvedAttribute":
        parts = node.nameParts()
        return parts.size() == 1 and parts.apply(0).lower() in names
    return kind == "Literal"


def _printed(parser, node) -> str | None:
    try:
        text = node.sql()
        return text if parser.parseExpression(text).equals(node) else None
    except SPARK_ERRORS:
        return None


def _groups_written(table: Table, since: str, until: str | None) -> set[tuple[str, str]]:
    timeline = table.timeline()
    touched = set()
    for instant in timeline.completed():
        if instant.action in WRITE_ACTIONS and instant.time > since and (until is None or instant.time <= until):
            for stat in timeline.commit_metadata(instant).write_stats():
                touched.add((stat.partition_path, stat.file_id))
    return touched


def table_schema(table: Table, view: FileSystemView) -> pa.Schema | None:
    """The newest latest file's schema: schema evolution only adds columns, so it is the widest."""
    files = view.latest_base_files()
    if not files:
        return None
    newest = max(files, key=lambda f: f.instant)
    with table.storage.open_input(newest.path) as handle:
        return pq.read_schema(handle)


def _read_files(spark: SparkSession, table: Table, files: list[BaseFile], schema: pa.Schema | None) -> DataFrame:
    if schema is None:
        return spark.createDataFrame([], StructType([]))
    spark_schema = from_arrow_schema(schema)
    if not files:
        return spark.createDataFrame([], spark_schema)
    if not table.storage.is_s3:
        full = [f"file://{table.storage.full(f.path)}" for f in files]
        return spark.read.schema(spark_schema).option("mergeSchema", "true").parquet(*full)
    listing = spark.createDataFrame([(f.path,) for f in files], "path string")
    slices = max(1, min(len(files), spark.sparkContext.defaultParallelism * 2))
    return listing.repartition(slices).mapInArrow(partial(read_task, table.uri, schema), spark_schema)


def read_task(base_uri: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side of an S3 read: each file through pyarrow, widened to the table's schema."""
    storage = Storage(base_uri)
    for batch in batches:
        for path in batch.column(0).to_pylist():
            rows = read_base_file(storage, path)
            columns = [
                rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                for f in schema
            ]
            yield from pa.Table.from_arrays(columns, schema=schema).to_batches()
