"""What the verbs of the `tandem` command line share: the console, opening a table, JSON output, the option
decorators, the coordinator settings and running a service under the table's lock."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING

import click

from timeline.errors import BadInputError

if TYPE_CHECKING:
    from rich.console import Console

    from coordinator.config import CoordinatorConfig
    from timeline.table import Table

ENGINES = ("local", "spark")
ENGINE_HELP = "local: this process with pyarrow; spark: a local Spark session, files written by its executors."
# Copies, so that `--help` needs neither coordinator.write.writer nor chaos.cli
# (tests/coordinator/test_cli_startup.py keeps them equal).


@cache
def console() -> Console:
    from rich.console import Console

    return Console()


def open_table(path: str) -> Table:
    from timeline.table import Table

    return Table.open(path)


def emit_json(doc: object) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=True))


def json_value(value: object) -> object:
    """A row's or a partition's value as JSON: numbers, strings, booleans and nulls as they are, anything else
    (dates, decimals, timestamps) as its text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value - value == 0 else str(value)  # NaN and infinities are not JSON
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return str(value)


def check_instant(text: str | None, option: str) -> str | None:
    """A time in any of Hudi's query formats, as the instant time reads compare with."""
    from timeline.format.instant import query_instant

    return None if text is None else query_instant(text, option)


def coordinator_options(command):
    """`--lock URI` and repeatable `--set KEY=VALUE` (Hudi key names or Python names)."""
    command = click.option(
        "--set",
        "settings",
        multiple=True,
        metavar="KEY=VALUE",
        help="A coordinator setting, e.g. hoodie.cleaner.policy.failed.writes=LAZY (repeatable).",
    )(command)
    return click.option(
        "--lock",
        "lock_uri",
        default=None,
        envvar="TANDEM_LOCK",
        help="[env TANDEM_LOCK] Lock URI: file (default), memory, zk://HOST:PORT/PATH, dynamodb://TABLE?region=R&endpoint=URL.",
    )(command)


def clean_options(command):
    """`--policy` and `--retained` for clean (and `worker clean`); defaults come from the settings."""
    command = click.option(
        "--retained", type=int, default=None, help="Commits (or file versions) to retain (default 10 / 1)."
    )(command)
    return click.option(
        "--policy",
        type=click.Choice(["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"]),
        default=None,
        help="Clean policy (default KEEP_LATEST_COMMITS, or hoodie.cleaner.policy).",
    )(command)


def coordinator_config(lock_uri: str | None, settings: tuple[str, ...]) -> CoordinatorConfig:
    from coordinator.config import CoordinatorConfig, parse_settings

    config = CoordinatorConfig.from_hudi(parse_settings(settings))
    return replace(config, lock_uri=lock_uri) if lock_uri else config


def run_locked(path: str, config: CoordinatorConfig, service):
    """Open the table and its configured lock, run `service(table, config, lock)`, close the lock."""
    from coordinator.protocol.locking import table_lock

    table = open_table(path)
    lock = table_lock(table, config)
    try:
        return service(table, config, lock)
    finally:
        lock.close()


def require_mdt(table: Table):
    from timeline.mdt.health import repair_hint

    mdt = table.metadata()
    if not mdt.exists() and table.has_metadata_table():
        raise BadInputError(
            f"{table.uri} records a metadata table but its properties file is missing; {repair_hint(table.uri)}"
        )
    if not mdt.exists():
        raise BadInputError(f"{table.uri} has no metadata table (`tandem metadata create` builds one)")
    return mdt
