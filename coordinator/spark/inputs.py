"""Input files as Spark DataFrames, read by Spark itself (the `--engine spark` twin of `input_files`).

Types are inferred as `input_files` infers them, so one file makes the same
table schema whichever engine writes it: a timestamp without a zone in a CSV or
JSON file is a wall-clock time (Spark's TimestampNTZ, pyarrow's naive
timestamp), and JSON strings that are timestamps are timestamps.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from timeline.errors import BadInputError
from timeline.format.schema_evolution import canonical_schema, conform
from timeline.index.parquet_leaves import leaf_columns

TIMESTAMP_TYPE = "spark.sql.timestampType"


def read_input_frame(spark: SparkSession, path: str) -> DataFrame:
    if not os.path.isfile(path):
        raise BadInputError(f"input file {path} does not exist")
    suffix = os.path.splitext(path)[1].lower()
    full = f"file://{os.path.abspath(path)}"
    try:
        if suffix == ".parquet":
            return _parquet_frame(spark, path, full)
        if suffix == ".csv":
            with _wall_clock_inference(spark):
                return spark.read.option("header", "true").option("inferSchema", "true").csv(full)
        if suffix in (".jsonl", ".json"):
            with _wall_clock_inference(spark):
                return spark.read.option("inferTimestamp", "true").json(full)
    except PySparkException as err:
        raise BadInputError(f"input file {path} cannot be read as {suffix[1:]}: {str(err).splitlines()[0]}") from err
    raise BadInputError(f"input file {path}: unsupported format {suffix or '(none)'} (use .parquet, .csv or .jsonl)")


@contextmanager
def _wall_clock_inference(spark: SparkSession) -> Iterator[None]:
    """While a reader infers its schema (eagerly, at load), zone-less timestamps are TimestampNTZ."""
    previous = spark.conf.get(TIMESTAMP_TYPE, None)
    spark.conf.set(TIMESTAMP_TYPE, "TIMESTAMP_NTZ")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(TIMESTAMP_TYPE)
        else:
            spark.conf.set(TIMESTAMP_TYPE, previous)


def _parquet_frame(spark: SparkSession, path: str, full: str) -> DataFrame:
    """Spark reads the file, unless it holds nanosecond timestamps (pandas writes them), which Spark cannot read:
    then pyarrow reads it, in the types Tandem stores (microseconds; a value finer than that is bad input)."""
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise BadInputError(f"input file {path} cannot be read as parquet: {err}") from err
    if not any(pa.types.is_timestamp(dtype) and dtype.unit == "ns" for _, dtype in leaf_columns(schema)):
        return spark.read.parquet(full)
    stored = canonical_schema(schema)
    return spark.createDataFrame(conform(pq.read_table(path), stored), schema=from_arrow_schema(stored))
