"""A local SparkSession on the embedded defaults, with Python workers from this interpreter."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from coordinator.spark.datasource import register

TASK_ATTEMPTS = 2  # like a cluster: a failed task is retried once, so retries are exercised locally too
# Storage settings the executors' pyarrow needs. Python workers inherit the JVM's environment, fixed when
# the first session of the process launched it, so the driver's current values travel as executorEnv.
EXECUTOR_ENV_PREFIXES = ("AWS_",)


def local_session(app: str = "tandem", cores: int = 2) -> SparkSession:
    """`local[cores, attempts]`: the UI and its port are off; timestamps are UTC like the files."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: no network interface needed
    builder = SparkSession.builder
    for name, value in os.environ.items():
        if name.startswith(EXECUTOR_ENV_PREFIXES):
            builder = builder.config(f"spark.executorEnv.{name}", value)
    session = (
        builder.master(f"local[{cores},{TASK_ATTEMPTS}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores * 2))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)  # spark.read.format("tandem")
    return session
