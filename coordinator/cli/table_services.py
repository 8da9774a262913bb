"""`tandem recover`, `clean`, `compact`, `archive`, `worker` and `lock`: the table services and the table's lock."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING

import click

from coordinator.cli.common import (
    clean_options,
    coordinator_config,
    coordinator_options,
    emit_json,
    open_table,
    run_locked,
)
from timeline.errors import BadInputError, LockError, TandemError

if TYPE_CHECKING:
    from coordinator.config import CoordinatorConfig


@click.command()
@click.argument("path")
@coordinator_options
def recover(path: str, lock_uri: str | None, settings: tuple):
    """Roll back orphan instants in both tables, finish interrupted services, retry compactions."""
    from coordinator.services.steps import recover_table

    report = run_locked(path, coordinator_config(lock_uri, settings), recover_table)
    for orphan, rollback_time in report.rolled_back.items():
        click.echo(f"rolled back {orphan} (rollback {rollback_time})")
    for time in report.resumed_rollbacks + report.resumed_cleans + report.resumed_restores:
        click.echo(f"finished interrupted {time}")
    for time in report.dropped_savepoints:
        click.echo(f"dropped savepoint {time}, left unfinished by its creator")
    for time in report.compactions:
        click.echo(f"finished pending compaction {time}")
    if report.stray_files:
        click.echo(f"removed {len(report.stray_files)} file(s) written after their instant was rolled back")
    if report.metadata:
        for time in report.metadata.rolled_back:
            click.echo(f"rolled back metadata deltacommit {time}")
        for time in report.metadata.compacted:
            click.echo(f"completed metadata compaction {time}")
    click.echo("recovered: no orphan instants left")


@click.command()
@click.argument("path")
@clean_options
@coordinator_options
def clean(path: str, policy: str | None, retained: int | None, lock_uri: str | None, settings: tuple):
    """Delete file versions no longer needed, mirrored into the metadata table."""
    from coordinator.services.steps import clean as run_clean

    time = run_locked(path, _clean_config(coordinator_config(lock_uri, settings), policy, retained), run_clean)
    click.echo(f"cleaned at {time}" if time else "nothing to clean")


def _clean_config(config: CoordinatorConfig, policy: str | None, retained: int | None) -> CoordinatorConfig:
    if policy:
        config = replace(config, clean_policy=policy)
    if retained is not None:
        field = "file_versions_retained" if config.clean_policy == "KEEP_LATEST_FILE_VERSIONS" else "commits_retained"
        config = replace(config, **{field: retained})
    return config


@click.command()
@click.argument("path")
@coordinator_options
def compact(path: str, lock_uri: str | None, settings: tuple):
    """Compact now: a merge-on-read table's file slices with logs, then the metadata table (pending compactions
    are retried first)."""
    from coordinator.services.steps import compact as run_compaction

    report = run_locked(path, coordinator_config(lock_uri, settings), partial(run_compaction, force=True))
    if report.data_compacted:
        click.echo(f"completed compaction(s) of the data table: {', '.join(report.data_compacted)}")
    done = report.compacted
    if done:
        click.echo(f"completed metadata compaction(s): {', '.join(done)}")
    if not done and not report.data_compacted:
        click.echo("nothing to compact")


@click.command()
@click.argument("path")
@coordinator_options
def archive(path: str, lock_uri: str | None, settings: tuple):
    """Move old completed instants of both timelines to their archived timelines (DESIGN §6)."""
    from coordinator.services.steps import archive_table

    report = run_locked(path, coordinator_config(lock_uri, settings), archive_table)
    click.echo(f"archived {len(report.data)} data instant(s) and {len(report.metadata)} metadata instant(s)")


@click.command()
@click.argument("kind", type=click.Choice(["clean", "compact"]))
@click.argument("path")
@click.option("--interval", default=30.0, show_default=True, help="Seconds between runs.")
@click.option("--max-runs", type=int, default=None, help="Stop after this many runs (default: until SIGTERM).")
@clean_options
@coordinator_options
def worker(
    kind: str,
    path: str,
    interval: float,
    max_runs: int | None,
    policy: str | None,
    retained: int | None,
    lock_uri: str | None,
    settings: tuple,
):
    """Run clean or metadata compaction every --interval seconds under the table's lock; SIGTERM stops it."""
    from coordinator.services.worker import run_worker

    if interval < 0 or (max_runs is not None and max_runs < 1):
        raise BadInputError("--interval must be >= 0 and --max-runs >= 1")
    config = _clean_config(coordinator_config(lock_uri, settings), policy, retained)
    run_worker(open_table(path), kind, config, interval, max_runs, lambda line: click.echo(line))


@click.group()
def lock() -> None:
    """Inspect or free a table's lock."""


def _open_table_lock(path: str, uri: str):
    from locks.config import open_lock

    table = open_table(path)
    return open_lock(uri, table.uri, table.config.name)


@lock.command(name="status")
@click.argument("path")
@click.option(
    "--lock", "lock_uri", default="file", show_default=True, help="Lock URI (file, memory, zk://, dynamodb://)."
)
@click.option("--json", "as_json", is_flag=True)
def lock_status(path: str, lock_uri: str, as_json: bool):
    """Who holds the lock, since when, and with which fencing token."""
    provider = _open_table_lock(path, lock_uri)
    try:
        holder = provider.owner()
    except TandemError:
        raise
    except Exception as err:
        raise LockError(f"cannot reach the {provider.name} lock service: {type(err).__name__}: {err}") from err
    finally:
        provider.close()
    doc = {"provider": provider.name, "held": holder is not None}
    if holder is not None:
        doc.update(
            host=holder.host,
            pid=holder.pid,
            instant=holder.instant,
            token=holder.token,
            acquired_at=datetime.fromtimestamp(holder.acquired_at, timezone.utc).isoformat(),
        )
    if as_json:
        emit_json(doc)
    elif holder is None:
        click.echo(f"{provider.name} lock is free")
    else:
        click.echo(
            f"{provider.name} lock held by pid {holder.pid} on {holder.host} since {doc['acquired_at']}, "
            f"token {holder.token}" + (f", instant {holder.instant}" if holder.instant else "")
        )


@lock.command(name="release")
@click.argument("path")
@click.option("--lock", "lock_uri", default="file", show_default=True)
@click.option("--force", is_flag=True, help="Required: free the lock whoever holds it.")
def lock_release(path: str, lock_uri: str, force: bool):
    """Free a stuck lock. Its holder will find it lost at its next check."""
    if not force:
        raise BadInputError("refusing to free a lock someone may hold: pass --force if its holder is gone")
    provider = _open_table_lock(path, lock_uri)
    try:
        holder = provider.owner()
        provider.force_release()
    finally:
        provider.close()
    click.echo(f"released {provider.name} lock" + (f" held by pid {holder.pid} on {holder.host}" if holder else ""))
