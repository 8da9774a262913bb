"""Reads as Spark DataFrames: snapshot, as-of and incremental, the file list from the metadata table.

No storage listing: the latest file slices come from the MDT (filtered by the
data timeline), partitions are pruned by evaluating the filter on the partition
values alone, and only the surviving files are handed to Spark's own parquet
reader. `s3://` tables are read by the executors through pyarrow instead,
because Spark's `s3a` connector (hadoop-aws) does not ship with pyspark.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from timeline.errors import BadInputError
from timeline.file_names import BaseFile
from timeline.fs_view import FileSystemView
from timeline.instant import WRITE_ACTIONS
from timeline.reader import read_base_file
from timeline.storage import Storage
from timeline.table import META_COLUMNS, Table

COMMIT_TIME = "_hoodie_commit_time"
SPARK_QUERY_LOGGER = "SQLQueryContextLogger"


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
    files = view.latest_base_files()
    if since is not None:
        touched = _groups_written(table, since, until)
        files = [f for f in files if (f.partition, f.file_id) in touched]
    if where:
        kept = set(prune_partitions(spark, table, view.partitions(), where))
        files = [f for f in files if f.partition in kept]
    df = _read_files(spark, table, files, view)
    if since is not None:
        df = df.filter(F.col(COMMIT_TIME) > since)
        if until is not None:
            df = df.filter(F.col(COMMIT_TIME) <= until)
    if where:
        df = df.filter(where)
    if not table.config.populate_meta_fields:
        df = df.drop(*META_COLUMNS)
    return df


def prune_partitions(spark: SparkSession, table: Table, partitions: list[str], where: str) -> list[str]:
    """The partitions whose values can satisfy `where`.

    The filter is evaluated on a small DataFrame of partition values (strings, as
    in the paths); a filter that names a data column cannot be decided there, so
    it prunes nothing and is applied to the rows only.
    """
    fields = table.config.partition_fields
    if not fields or not partitions:
        return partitions
    rows = [(p, *partition_values(p, fields, table.config.hive_style)) for p in partitions]
    values = spark.createDataFrame(rows, ", ".join(["__partition string", *(f"`{f}` string" for f in fields)]))
    quiet = logging.getLogger(SPARK_QUERY_LOGGER)
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # an unresolved data column is expected here, not an error to log
    try:
        return [r[0] for r in values.filter(where).select("__partition").collect()]
    except AnalysisException as err:
        if "UNRESOLVED_COLUMN" in str(err):
            return partitions
        raise BadInputError(f"--where {where!r}: {str(err).splitlines()[0]}") from err
    finally:
        quiet.setLevel(level)


def partition_values(partition: str, fields: list[str], hive_style: bool) -> list[str]:
    """The values a partition path stands for, one per partition field."""
    parts = partition.split("/")
    if hive_style:
        return [p.split("=", 1)[1] if "=" in p else p for p in parts]
    return parts if len(parts) == len(fields) else [partition] + [""] * (len(fields) - 1)


def _groups_written(table: Table, since: str, until: str | None) -> set[tuple[str, str]]:
    timeline = table.timeline()
    touched = set()
    for instant in timeline.completed():
        if instant.action in WRITE_ACTIONS and instant.time > since and (until is None or instant.time <= until):
            for stat in timeline.commit_metadata(instant).write_stats():
                touched.add((stat.partition_path, stat.file_id))
    return touched


def _schema_of(table: Table, files: list[BaseFile], view: FileSystemView) -> pa.Schema | None:
    """The newest file's schema: schema evolution only adds columns, so it is the widest."""
    candidates = files or view.latest_base_files()
    if not candidates:
        return None
    newest = max(candidates, key=lambda f: f.instant)
    with table.storage.open_input(newest.path) as handle:
        return pq.read_schema(handle)


def _read_files(spark: SparkSession, table: Table, files: list[BaseFile], view: FileSystemView) -> DataFrame:
    schema = _schema_of(table, files, view)
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
