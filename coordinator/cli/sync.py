"""`tandem sync` (the table registered in a catalog, Hudi's meta sync) and what a write's `--sync-glue` runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from coordinator.cli.common import coordinator_config, coordinator_options, emit_json, run_locked

if TYPE_CHECKING:
    from coordinator.catalog.sync import SyncReport
    from coordinator.config import CoordinatorConfig
    from locks.base import LockProvider
    from timeline.table import Table


def glue_options(command):
    """Where the Glue catalog is and what the table is called there."""
    options = [
        click.option(
            "--endpoint", default=None, help="Glue's endpoint URL (default: AWS's, or AWS_ENDPOINT_URL_GLUE)."
        ),
        click.option("--region", default=None, help="Glue's region (default: AWS_REGION, else us-east-1)."),
        click.option("--table", "table_name", default=None, help="The catalog table's name (default: the table's)."),
        click.option("--location", default=None, help="The base path as the catalog's readers reach it."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.command()
@click.argument("path")
@click.option("--glue", "database", required=True, help="The Glue database to register the table in.")
@glue_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@coordinator_options
def sync(
    path: str,
    database: str,
    endpoint: str | None,
    region: str | None,
    table_name: str | None,
    location: str | None,
    as_json: bool,
    lock_uri: str | None,
    settings: tuple,
):
    """Register the table at PATH in AWS Glue: its schema and partitions as its commits left them (two
    tables, NAME_ro and NAME_rt, for a merge-on-read table)."""
    report = run_locked(path, coordinator_config(lock_uri, settings),
                        lambda table, config, lock: sync_locked(table, lock, database, endpoint, region, table_name,
                                                                location))  # fmt: skip
    if as_json:
        emit_json(report.to_dict())
    else:
        click.echo(describe(report))


def sync_locked(
    table: Table,
    lock: LockProvider,
    database: str,
    endpoint: str | None,
    region: str | None,
    name: str | None,
    location: str | None,
) -> SyncReport:
    """The sync, under the table's lock."""
    from coordinator.catalog.glue import GlueCatalog
    from coordinator.catalog.sync import sync as sync_table
    from coordinator.protocol.locking import held

    catalog = GlueCatalog(endpoint, region)
    with held(lock):
        return sync_table(table, catalog, database, name, location, still_locked=lock.check)


def sync_after_write(table: Table, config: CoordinatorConfig, instant: str, database: str, endpoint: str | None) -> str:
    """A write's `--sync-glue`: the commit stands whatever happens here; a failure says so and what to run."""
    from coordinator.catalog.glue import CatalogError
    from coordinator.protocol.locking import table_lock
    from timeline.errors import TandemError

    lock = table_lock(table, config)
    try:
        return describe(sync_locked(table, lock, database, endpoint, None, None, None))
    except TandemError as err:
        raise CatalogError(
            f"committed {instant}, but the sync to Glue database {database} failed ({err}); "
            f"`tandem sync {table.uri} --glue {database}` retries it"
        ) from err
    finally:
        lock.close()


def describe(report: SyncReport) -> str:
    tables = ", ".join(report.tables)
    if report.newer_in_catalog and len(report.newer_in_catalog) == len(report.tables):
        return f"{report.database}: {tables} already hold a later state than {report.synced or 'no commit'}"
    parts = [f"synced {tables} in {report.database} to {report.synced or 'no commit'}"]
    parts.append(f"partitions +{report.added_partitions} -{report.dropped_partitions} ~{report.moved_partitions}")
    if report.created_tables:
        parts.append(f"created {', '.join(report.created_tables)}")
    if report.added_columns:
        parts.append(f"columns added: {', '.join(report.added_columns)}")
    if report.widened_columns:
        parts.append(f"columns widened: {', '.join(report.widened_columns)}")
    return "; ".join(parts)
