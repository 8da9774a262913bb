"""`tandem savepoint create|delete|list` (a completed commit marked to keep, Hudi's `savepoint` action) and
`tandem restore` (the table returned to a savepoint, Hudi's `restore`)."""

from __future__ import annotations

import click

from coordinator.cli.common import (
    check_instant,
    coordinator_config,
    coordinator_options,
    emit_json,
    open_table,
    run_locked,
)


@click.group()
def savepoint() -> None:
    """Mark a completed commit to keep: clean keeps its files and archival stops before it."""


@savepoint.command(name="create")
@click.argument("path")
@click.option("--instant", "time", default=None, help="The completed commit to keep (default: the latest one).")
@click.option("--user", default="", help="Recorded as savepointedBy.")
@click.option("--comments", default="", help="Recorded with the savepoint.")
@coordinator_options
def create(path: str, time: str | None, user: str, comments: str, lock_uri: str | None, settings: tuple):
    """Savepoint a completed commit of the table at PATH."""
    from coordinator.protocol import savepoint as savepoints
    from coordinator.protocol.locking import held
    from timeline.errors import BadInputError

    time = check_instant(time, "--instant")

    def run(table, config, lock):
        with held(lock):
            chosen = time or next((i.time for i in reversed(table.timeline().completed_writes())), None)
            if chosen is None:
                raise BadInputError(f"{table.uri} has no completed commit to savepoint")
            return savepoints.create(table, chosen, user, comments)

    made = run_locked(path, coordinator_config(lock_uri, settings), run)
    click.echo(f"savepoint {made.time}: {sum(len(n) for n in made.files.values())} file(s) kept")


@savepoint.command(name="delete")
@click.argument("path")
@click.option("--instant", "time", required=True, help="The savepoint to remove.")
@coordinator_options
def delete(path: str, time: str, lock_uri: str | None, settings: tuple):
    """Remove a savepoint: its commit's files may be cleaned and archived again."""
    from coordinator.protocol import savepoint as savepoints
    from coordinator.protocol.locking import held

    time = check_instant(time, "--instant")

    def run(table, config, lock):
        with held(lock):
            savepoints.delete(table, time)

    run_locked(path, coordinator_config(lock_uri, settings), run)
    click.echo(f"deleted savepoint {time}")


@savepoint.command(name="list")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
def list_savepoints(path: str, as_json: bool):
    """The table's savepoints, Java's and Tandem's, oldest first."""
    from coordinator.protocol import savepoint as savepoints

    found = savepoints.listed(open_table(path))
    rows = [
        {"instant": s.time, "by": s.by, "at_ms": s.at_ms, "comments": s.comments, "files": len(s.names)} for s in found
    ]
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        click.echo(f"{row['instant']}  {row['files']} file(s)  by {row['by'] or '-'}  {row['comments']}")
    if not rows:
        click.echo("no savepoints")


@click.command()
@click.argument("path")
@click.option("--to", "time", required=True, help="The savepoint to return the table to.")
@coordinator_options
def restore(path: str, time: str, lock_uri: str | None, settings: tuple):
    """Return the table at PATH to a savepoint: every later commit removed, in both tables."""
    from coordinator.protocol import restore as restores
    from coordinator.protocol.locking import held
    from coordinator.protocol.recovery import roll_back_orphans

    time = check_instant(time, "--to")

    def run(table, config, lock):
        with held(lock):
            roll_back_orphans(table, config)  # a pending restore finished, orphans rolled back: the plan sees all
            return restores.restore(table, time)

    done = run_locked(path, coordinator_config(lock_uri, settings), run)
    click.echo(f"restored to {time} (restore {done})")
