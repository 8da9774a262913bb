"""The functions behind `import tandem`: each takes a table or its path and the settings it needs, with the
embedded defaults (file lock, metadata table on) when none are given, and runs what the CLI verb of the same name
runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from coordinator.config import CoordinatorConfig
from coordinator.protocol.archival import ArchivalReport
from coordinator.protocol.locking import table_lock
from coordinator.protocol.recovery import RecoveryReport
from coordinator.services import steps
from coordinator.write.writer import LocalWriter, WriteOptions, WriteResult
from timeline.errors import BadInputError
from timeline.query.reader import read_plan
from timeline.query.scan import ScanPlan, plan_scan
from timeline.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def create_table(
    path: str,
    name: str,
    record_key: Sequence[str],
    partition_by: Sequence[str] = (),
    *,
    hive_style: bool = False,
    precombine: str | None = None,
    metadata_table: bool = True,
    table_type: str = "COPY_ON_WRITE",
) -> Table:
    """A new table (Hudi table version 6) at `path`, copy-on-write or MERGE_ON_READ, with a metadata table
    unless told not to."""
    return Table.create(
        path,
        name,
        list(record_key),
        list(partition_by),
        hive_style,
        precombine,
        with_metadata=metadata_table,
        table_type=table_type,
    )


def open_table(path: str) -> Table:
    """An existing table; a path that holds none is a BadInputError."""
    return Table.open(path)


def _table(table: Table | str) -> Table:
    return table if isinstance(table, Table) else Table.open(table)


def write(
    table: Table | str,
    data: pa.Table | DataFrame,
    operation: str = "upsert",
    *,
    config: CoordinatorConfig | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    """Write `data` as one instant with `operation` (insert, bulk_insert, upsert, delete, insert_overwrite): a
    pyarrow table in this process, a Spark DataFrame by its executors. On any failure the instant is undone."""
    opened = _table(table)
    if isinstance(data, pa.Table):
        return LocalWriter(opened, options, config).write(data, operation)
    if hasattr(data, "sparkSession"):
        from coordinator.spark.writer import SparkWriter

        return SparkWriter(data.sparkSession, opened, options, config).write(data, operation)
    raise BadInputError(f"write takes a pyarrow Table or a Spark DataFrame, not {type(data).__name__}")


def scan(
    table: Table | str,
    where: str | None = None,
    *,
    as_of: str | None = None,
    since: str | None = None,
    until: str | None = None,
    read_optimized: bool = False,
) -> ScanPlan:
    """The files a read would open, pruned by partition and column statistics; `plan.explain()` says why.
    `read_optimized`: a merge-on-read table's base files alone, its logs not merged."""
    return plan_scan(_table(table), where, as_of=as_of, since=since, until=until, read_optimized=read_optimized)


def read(
    table: Table | str,
    where: str | None = None,
    *,
    as_of: str | None = None,
    since: str | None = None,
    until: str | None = None,
    read_optimized: bool = False,
) -> pa.Table:
    """The rows of the latest snapshot, of the snapshot `as_of` an instant or time, or written after `since`
    (up to `until`), matching `where` (DuckDB SQL); `read_optimized`: a merge-on-read table's base files alone."""
    return read_plan(scan(table, where, as_of=as_of, since=since, until=until, read_optimized=read_optimized))


def read_dataframe(
    spark: SparkSession,
    path: str,
    where: str | None = None,
    *,
    as_of: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> DataFrame:
    """The same as `read`, as a Spark DataFrame read by the executors."""
    from coordinator.spark.reader import read_table

    return read_table(spark, path, as_of=as_of, where=where, since=since, until=until)


def clean(table: Table | str, config: CoordinatorConfig | None = None) -> str | None:
    """Plan and run one clean under the configured lock; the clean instant, or None when nothing is due."""
    return steps.clean(_table(table), config or CoordinatorConfig())


def compact(table: Table | str, config: CoordinatorConfig | None = None, force: bool = False) -> steps.CompactionReport:
    """Retry pending metadata-table compactions and run one when due (or whenever logs exist, if `force`)."""
    opened, settings = _table(table), config or CoordinatorConfig()
    return steps.compact(opened, settings, table_lock(opened, settings), force)


def archive(table: Table | str, config: CoordinatorConfig | None = None) -> ArchivalReport:
    """Move old completed instants of both timelines to their archives."""
    opened, settings = _table(table), config or CoordinatorConfig()
    return steps.archive_table(opened, settings, table_lock(opened, settings))


def recover(table: Table | str, config: CoordinatorConfig | None = None) -> RecoveryReport:
    """Roll back orphan instants in both tables and finish interrupted table services."""
    opened, settings = _table(table), config or CoordinatorConfig()
    return steps.recover_table(opened, settings, table_lock(opened, settings))
