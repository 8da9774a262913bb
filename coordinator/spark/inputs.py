"""Input files as Spark DataFrames, read by Spark itself (the `--engine spark` twin of `input_files`)."""

from __future__ import annotations

import os

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from timeline.errors import BadInputError


def read_input_frame(spark: SparkSession, path: str) -> DataFrame:
    if not os.path.isfile(path):
        raise BadInputError(f"input file {path} does not exist")
    suffix = os.path.splitext(path)[1].lower()
    full = f"file://{os.path.abspath(path)}"
    try:
        if suffix == ".parquet":
            return spark.read.parquet(full)
        if suffix == ".csv":
            return spark.read.option("header", "true").option("inferSchema", "true").csv(full)
        if suffix in (".jsonl", ".json"):
            return spark.read.json(full)
    except PySparkException as err:
        raise BadInputError(f"input file {path} cannot be read as {suffix[1:]}: {str(err).splitlines()[0]}") from err
    raise BadInputError(f"input file {path}: unsupported format {suffix or '(none)'} (use .parquet, .csv or .jsonl)")
