"""The `tandem` command line (DESIGN §10): one clear stderr line per error, fixed exit codes."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import click

from coordinator.cli.bootstrap import bootstrap
from coordinator.cli.init_demo import demo, init
from coordinator.cli.metadata_table import metadata
from coordinator.cli.plan import plan
from coordinator.cli.plugins import chaos_group
from coordinator.cli.savepoints import restore, savepoint
from coordinator.cli.sync import sync
from coordinator.cli.table_services import archive, clean, compact, lock, recover, worker
from coordinator.cli.write_read import ls, query, read, timeline, write
from timeline.errors import DamagedInstantWarning, MetadataFallbackWarning, RefusedDeleteWarning, TandemError

# Start-up: the module level of every module of this package imports only what every command needs (the standard
# library, click, coordinator.config, timeline.errors and the package's own modules); the rest (pyarrow, rich, the
# timeline, the writer) is imported inside the command that uses it, and chaos through its entry point when one of its
# commands is looked up, so `--help` and light commands start fast. The verbs live in the submodules, which import
# shared helpers from coordinator.cli.common, never this module; this module only registers them.

SHOWN_WARNINGS = (MetadataFallbackWarning, RefusedDeleteWarning, DamagedInstantWarning)


@contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """A read that lists storage because the metadata table is unhealthy, or a delete refused, says so once.

    One stderr line per distinct message."""
    shown: set[str] = set()
    other = warnings.showwarning

    def show(message, category, *args, **kwargs) -> None:
        if not issubclass(category, SHOWN_WARNINGS):
            other(message, category, *args, **kwargs)
        elif str(message) not in shown:
            shown.add(str(message))
            click.echo(f"warning: {message}", err=True)

    with warnings.catch_warnings():
        for category in SHOWN_WARNINGS:
            warnings.simplefilter("always", category)
        warnings.showwarning = show
        yield


@click.group()
def cli() -> None:
    """Tandem: commit a Hudi data table and its metadata table as one transaction."""


for _command in (
    init,
    bootstrap,
    write,
    read,
    query,
    plan,
    timeline,
    ls,
    metadata,
    recover,
    clean,
    compact,
    archive,
    savepoint,
    restore,
    sync,
    worker,
    lock,
    demo,
    chaos_group,
):
    cli.add_command(_command)


def main() -> None:
    """Run the CLI; map errors to one stderr line and the exit codes of DESIGN §10."""
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    try:
        with _warnings_on_stderr():  # every verb: one stderr line when the MDT is bypassed or a delete refused
            cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(1)
    except click.exceptions.ClickException as err:
        click.echo(f"error: {err.format_message()}", err=True)
        sys.exit(2)
    except TandemError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    except Exception as err:  # the contract: one clear line, exit 1
        click.echo(f"error: {type(err).__name__}: {err}", err=True)
        sys.exit(1)
