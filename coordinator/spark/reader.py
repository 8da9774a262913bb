"""Reads as Spark DataFrames: snapshot, as-of and incremental, planned by `timeline.query.scan`.

The planner lists the latest file slices from the metadata table and prunes
partitions and files with the filter (parsed as Spark SQL); only the surviving
files are handed to Spark's own parquet reader, and Spark applies the whole
filter to their rows. `s3://` tables are read by the executors through pyarrow
instead, because Spark's `s3a` connector (hadoop-aws) does not ship with
pyspark.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from timeline.errors import BadInputError
from timeline.format.meta_fields import COMMIT_TIME, META_COLUMNS
from timeline.format.source_file import source_from_json, source_json
from timeline.io.storage import Storage
from timeline.mor.slice_merge import LogMerge
from timeline.query.predicate import Expr, parse_sql
from timeline.query.reader import read_base_file
from timeline.query.scan import ScanPlan, Split, plan_scan
from timeline.table import Table

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

    `as_of`: the snapshot as of that instant (time travel). `where`: a Spark SQL
    filter; partitions and files that cannot match are pruned before any file is
    read. `since` (exclusive) / `until` (inclusive): an incremental read, the
    records written by the commits in that range, as of `until`.
    """
    return scan(spark, path, as_of, where, since, until)[0]


def scan(
    spark: SparkSession,
    path: str,
    as_of: str | None = None,
    where: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> tuple[DataFrame, ScanPlan]:
    """`read_table`, and the plan it read (files considered and pruned)."""
    table = Table.open(path)
    plan = plan_scan(table, spark_filter(where), as_of=as_of, since=since, until=until)
    df = _read_files(spark, table, plan.splits, plan.schema, plan.merge)
    if since is not None:
        df = df.filter(F.col(COMMIT_TIME) > since)
        if until is not None:
            df = df.filter(F.col(COMMIT_TIME) <= until)
    if where and plan.schema is not None:
        df = _filtered(df, where)
    if not table.config.populate_meta_fields:
        df = df.drop(*META_COLUMNS)
    return df, plan


def spark_filter(where: str | None) -> Expr | None:
    """`where` as a predicate tree for pruning; None when it is not one the planner can read.

    Spark's parser has the last word on what the filter means: text the planner
    cannot parse prunes nothing, and Spark reports the error, if any, itself.
    """
    if not where:
        return None
    try:
        return parse_sql(where, "spark")
    except BadInputError:
        return None


def _filtered(df: DataFrame, where: str) -> DataFrame:
    try:
        return df.filter(where)
    except AnalysisException as err:
        raise BadInputError(f"--where {where!r}: {str(err).splitlines()[0]}") from err


def _read_files(
    spark: SparkSession, table: Table, files: list[Split], schema: pa.Schema | None, merge: LogMerge | None
) -> DataFrame:
    if schema is None:
        return spark.createDataFrame([], StructType([]))
    spark_schema = from_arrow_schema(schema)
    if not files:
        return spark.createDataFrame([], spark_schema)
    merged = merge is not None and bool(merge.logs)  # slices with logs: merged on the executors
    joined = any(f.source is not None for f in files)  # bootstrapped skeletons: joined with their sources
    if not table.storage.is_s3 and not merged and not joined:
        full = [f"file://{table.storage.full(f.path)}" for f in files]
        return spark.read.schema(spark_schema).option("mergeSchema", "true").parquet(*full)
    rows = [(f.path, f.partition, f.file_id, source_json(f.source)) for f in files]
    listing = spark.createDataFrame(rows, "path string, partition string, file_id string, source string")
    slices = max(1, min(len(files), spark.sparkContext.defaultParallelism * 2))
    task = partial(read_task, table.uri, schema, merge if merged else None)
    return listing.repartition(slices).mapInArrow(task, spark_schema)


def read_task(
    base_uri: str, schema: pa.Schema, merge: LogMerge | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side of a read through pyarrow (object stores, merge-on-read slices with logs, bootstrapped
    skeletons): each file slice read (its logs merged over it), widened to the table's schema."""
    storage = Storage(base_uri)
    for batch in batches:
        for path, partition, file_id, source in zip(*(c.to_pylist() for c in batch.columns), strict=True):
            rows = read_base_file(storage, path, source=source_from_json(source))
            if merge is not None:
                rows = merge.merged(storage, rows, partition, file_id)
            columns = [
                rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                for f in schema
            ]
            yield from pa.Table.from_arrays(columns, schema=schema).to_batches()
