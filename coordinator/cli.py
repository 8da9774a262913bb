"""The `tandem` command line (DESIGN §10): one clear stderr line per error, fixed exit codes."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from functools import cache, partial
from typing import TYPE_CHECKING

import click

from coordinator.config import OPERATIONS
from timeline.errors import (
    BadInputError,
    DamagedInstantWarning,
    LockError,
    MetadataFallbackWarning,
    RefusedDeleteWarning,
    TandemError,
)

# Start-up: the module level imports only what every command needs; the rest (pyarrow, rich, the timeline, the
# writer) is imported inside the command that uses it, and chaos through its entry point when one of its commands
# is looked up, so `--help` and light commands start fast.

if TYPE_CHECKING:
    import pyarrow as pa
    from rich.console import Console

    from coordinator.config import CoordinatorConfig
    from coordinator.writer import WriteResult
    from timeline.mdt.reader import MetadataReader
    from timeline.table import Table

ENGINES = ("local", "spark")
ENGINE_HELP = "local: this process with pyarrow; spark: a local Spark session, files written by its executors."
# Copies, so that `--help` needs neither coordinator.writer nor chaos.cli; tests/test_cli_startup.py keeps them equal.


@cache
def _console() -> Console:
    from rich.console import Console

    return Console()


def _open(path: str) -> Table:
    from timeline.table import Table

    return Table.open(path)


def _fields(text: str | None) -> list[str]:
    return [f.strip() for f in (text or "").split(",") if f.strip()]


def _emit_json(doc: object) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=True))


def _check_instant(text: str | None, option: str) -> str | None:
    """A time in any of Hudi's query formats, as the instant time reads compare with."""
    from timeline.instant import query_instant

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


def _config(lock_uri: str | None, settings: tuple[str, ...]) -> CoordinatorConfig:
    from coordinator.config import CoordinatorConfig, parse_settings

    config = CoordinatorConfig.from_hudi(parse_settings(settings))
    return replace(config, lock_uri=lock_uri) if lock_uri else config


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


@cli.command()
@click.argument("path")
@click.option("--name", required=True, help="Table name (hoodie.table.name).")
@click.option("--record-key", required=True, help="Record key column(s), comma separated.")
@click.option("--partition-by", default=None, help="Partition column(s), comma separated.")
@click.option("--hive-style", is_flag=True, help="Partition folders named col=value.")
@click.option("--precombine", default=None, help="Column whose largest value wins among duplicate keys.")
@click.option(
    "--lock", "lock_uri", default=None, envvar="TANDEM_LOCK", help="[env TANDEM_LOCK] Lock URI, as for `write`."
)
def init(
    path: str,
    name: str,
    record_key: str,
    partition_by: str | None,
    hive_style: bool,
    precombine: str | None,
    lock_uri: str | None,
):
    """Create an empty Copy-on-Write table (Hudi table version 6)."""
    from coordinator.locking import held
    from locks.config import open_lock
    from timeline.storage import Storage
    from timeline.table import Table

    create = partial(Table.create, path, name, _fields(record_key), _fields(partition_by), hive_style, precombine)
    if Storage(path).require_fencing(lock_uri or "file"):
        table = create()
    else:  # the override: only the external lock keeps two inits apart
        with held(open_lock(lock_uri, path, name)):
            table = create()
    click.echo(f"created table {table.config.name} at {table.uri}")


@cli.command()
@click.argument("path")
@click.option("--input", "input_path", required=True, help="Rows to write: .parquet, .csv or .jsonl.")
@click.option("--operation", type=click.Choice(OPERATIONS), required=True)
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True, help=ENGINE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@coordinator_options
def write(
    path: str, input_path: str, operation: str, engine: str, as_json: bool, lock_uri: str | None, settings: tuple
):
    """Write a file of rows as one instant (exit 3 if it lost a conflict, 4 if the lock was unavailable)."""
    from coordinator.input_files import read_input
    from coordinator.writer import LocalWriter

    config = _config(lock_uri, settings)
    table = _open(path)
    if engine == "spark":
        result = _spark_write(table, input_path, operation, config)
    else:
        result = LocalWriter(table, coordinator=config).write(read_input(input_path), operation)
    doc = {
        "instant": result.instant,
        "operation": operation,
        "engine": engine,
        "rows_in": result.rows_in,
        "files_written": len(result.files_written),
        "partitions": sorted(result.metadata.partition_to_write_stats),
    }
    if as_json:
        _emit_json(doc)
    else:
        click.echo(
            f"committed {result.instant}: {operation} of {result.rows_in} row(s) "
            f"into {len(result.files_written)} file(s) in {len(doc['partitions'])} partition(s)"
        )


@cli.command()
@click.argument("path")
@click.option("--as-of", default=None, help="Read the table as of this instant (time travel).")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True, help=ENGINE_HELP)
@click.option(
    "--where",
    default=None,
    help="SQL filter (DuckDB SQL locally, Spark SQL on spark); prunes partitions and files before reading.",
)
@click.option("--since", default=None, help="Incremental read: the records of commits after this instant.")
@click.option("--until", default=None, help="Incremental read: commits up to this instant (default: the latest).")
@click.option("--output", default=None, help="Write the rows to this .parquet file instead of printing.")
@click.option("--limit", default=20, show_default=True, help="Rows to print.")
@click.option("--meta", is_flag=True, help="Print the five _hoodie_ meta columns too.")
@click.option("--explain", is_flag=True, help="Print the scan plan (files considered and pruned) instead of rows.")
@click.option("--json", "as_json", is_flag=True, help="The plan and the row count as JSON (rows go to --output).")
def read(
    path: str,
    as_of: str | None,
    engine: str,
    where: str | None,
    since: str | None,
    until: str | None,
    output: str | None,
    limit: int,
    meta: bool,
    explain: bool,
    as_json: bool,
):
    """Read the latest snapshot, a snapshot as of an instant, or the changes between instants."""
    import pyarrow.parquet as pq
    from rich.table import Table as RichTable

    from timeline.reader import read_plan
    from timeline.scan import plan_scan
    from timeline.table import META_COLUMNS

    table = _open(path)
    as_of, since, until = (
        _check_instant(t, option) for t, option in ((as_of, "--as-of"), (since, "--since"), (until, "--until"))
    )
    if until is not None and since is None:
        raise BadInputError("--until needs --since (an incremental read)")
    if output and not output.endswith(".parquet"):
        raise BadInputError(f"--output {output} must end in .parquet")
    dialect = "spark" if engine == "spark" else "duckdb"
    plan = None
    if engine == "local" or explain or as_json:  # Spark's reader plans for itself
        plan = plan_scan(table, where, as_of=as_of, since=since, until=until, dialect=dialect)
    if explain:
        _emit_json(plan.explain()) if as_json else _print_plan(plan.explain())
        return
    rows = _spark_read(path, as_of, where, since, until) if engine == "spark" else read_plan(plan, where)
    if output:
        pq.write_table(rows, output)
    if as_json:
        _emit_json({"rows": rows.num_rows, "output": output, "plan": plan.explain()})
        return
    if output:
        click.echo(f"wrote {rows.num_rows} row(s) to {output}")
        return
    shown = RichTable(title=f"{table.config.name}: {rows.num_rows} row(s)")
    if not meta:
        rows = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names])
    for name in rows.column_names:
        shown.add_column(name, overflow="fold")
    for row in rows.slice(0, limit).to_pylist():
        shown.add_row(*(str(v) for v in row.values()))
    _console().print(shown)


@cli.command()
@click.argument("path")
@click.argument("sql")
@click.option("--as-of", default=None, help="Query the table as of this instant (time travel).")
@click.option("--output", default=None, help="Write the result to this .parquet file instead of printing.")
@click.option("--limit", default=20, show_default=True, help="Rows to print (and to put in --json).")
@click.option("--explain", is_flag=True, help="Print the scan plan (files considered and pruned) instead of rows.")
@click.option("--json", "as_json", is_flag=True, help="The row count, the first --limit rows and the plan as JSON.")
def query(path: str, sql: str, as_of: str | None, output: str | None, limit: int, explain: bool, as_json: bool):
    """Run one DuckDB SQL statement over the table, named `t` (and by its own name); its WHERE prunes files."""
    import pyarrow.parquet as pq
    from rich.table import Table as RichTable

    from coordinator.duckdb_view import plan_query, view_names
    from coordinator.duckdb_view import query as run_query

    as_of = _check_instant(as_of, "--as-of")
    if output and not output.endswith(".parquet"):
        raise BadInputError(f"--output {output} must end in .parquet")
    if explain:
        table = _open(path)
        plan = plan_query(table, sql, view_names(table, "t"), as_of)
        _emit_json(plan.explain()) if as_json else _print_plan(plan.explain())
        return
    rows, plan = run_query(path, sql, as_of=as_of)
    if output:
        pq.write_table(rows, output)
    if as_json:
        data = [{k: _json_value(v) for k, v in row.items()} for row in rows.slice(0, limit).to_pylist()]
        _emit_json({"rows": rows.num_rows, "output": output, "data": data, "plan": plan.explain()})
        return
    if output:
        click.echo(f"wrote {rows.num_rows} row(s) to {output}")
        return
    shown = RichTable(title=f"{plan.table.config.name}: {rows.num_rows} row(s)")
    for name in rows.column_names:
        shown.add_column(name, overflow="fold")
    for row in rows.slice(0, limit).to_pylist():
        shown.add_row(*(str(v) for v in row.values()))
    _console().print(shown)


def _json_value(value: object) -> object:
    """A result value as JSON: numbers, strings, booleans and nulls as they are, anything else as its text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value - value == 0 else str(value)  # NaN and infinities are not JSON
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return str(value)


def _print_plan(doc: dict) -> None:
    for key, value in doc.items():
        if value not in (None, []):
            click.echo(f"{key}: {value}")


@cli.command()
@click.argument("path")
@click.option("--metadata", "of_metadata", is_flag=True, help="The metadata table's timeline instead.")
@click.option("--json", "as_json", is_flag=True)
def timeline(path: str, of_metadata: bool, as_json: bool):
    """Instants on the active timeline, oldest first."""
    from rich.table import Table as RichTable

    table = _open(path)
    active = _require_mdt(table).timeline() if of_metadata else table.timeline()
    doc = [{"instant": i.time, "action": i.action, "state": i.state.value} for i in active.instants]
    if as_json:
        _emit_json({"table": table.config.name, "instants": doc, "archived_files": len(active.archived_files)})
        return
    shown = RichTable(title=f"timeline of {table.config.name}")
    for column in ("instant", "action", "state"):
        shown.add_column(column)
    for item in doc:
        shown.add_row(item["instant"], item["action"], item["state"])
    _console().print(shown)


@cli.command(name="ls")
@click.argument("path")
@click.option("--partition", default=None, help="Only this partition ('' for a non-partitioned table).")
@click.option(
    "--source",
    type=click.Choice(["metadata", "storage"]),
    default=None,
    help="Where the listing comes from (default: the metadata table if the table has a healthy one).",
)
@click.option("--json", "as_json", is_flag=True)
def ls(path: str, partition: str | None, source: str | None, as_json: bool):
    """Latest base files of the table, filtered by the timeline."""
    table = _open(path)
    view = table.view(source=source or "auto", partitions=None if partition is None else [partition])
    files = view.latest_base_files(partition)
    doc = [{"partition": f.partition, "file": f.name, "size": f.size, "instant": f.instant} for f in files]
    if as_json:
        _emit_json({"source": view.source, "fallback_reason": view.fallback_reason, "files": doc})
        return
    for item in doc:
        click.echo(f"{item['partition'] or '.'}\t{item['file']}\t{item['size']}")


def _spark_write(table: Table, input_path: str, operation: str, config) -> WriteResult:
    from coordinator.spark.inputs import read_input_frame
    from coordinator.spark.session import local_session
    from coordinator.spark.writer import SparkWriter

    with local_session() as spark:
        return SparkWriter(spark, table, coordinator=config).write(read_input_frame(spark, input_path), operation)


def _spark_read(path: str, as_of: str | None, where: str | None, since: str | None, until: str | None) -> pa.Table:
    from coordinator.spark.reader import read_table
    from coordinator.spark.session import local_session

    with local_session() as spark:
        return read_table(spark, path, as_of=as_of, where=where, since=since, until=until).toArrow()


def _require_mdt(table: Table):
    from timeline.mdt.health import repair_hint

    mdt = table.metadata()
    if not mdt.exists() and table.has_metadata_table():
        raise BadInputError(
            f"{table.uri} records a metadata table but its properties file is missing; {repair_hint(table.uri)}"
        )
    if not mdt.exists():
        raise BadInputError(f"{table.uri} has no metadata table (`tandem metadata create` builds one)")
    return mdt


@cli.group()
def metadata() -> None:
    """Create, inspect and check the metadata table."""


INDEX_HELP = "Comma-separated: files (the listing), column_stats, bloom_filters."


def _index_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("files", "column_stats", "bloom_filters")]
    if unknown or not names:
        raise BadInputError(f"--index {text!r}: expected files, column_stats or bloom_filters")
    return names


@metadata.command(name="create")
@click.argument("path")
@click.option("--index", "index", default="files", show_default=True, help=INDEX_HELP)
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="local",
    show_default=True,
    help="Where index builds read the files' footers: local threads, or Spark's executors.",
)
@coordinator_options
def metadata_create(path: str, index: str, engine: str, lock_uri: str | None, settings: tuple):
    """Build the metadata table (from a storage listing) and turn on indexes (from the files' footers)."""
    from timeline.mdt.bootstrap import initialize
    from timeline.mdt.reader import MetadataReader

    wanted = _index_names(index)
    table = _open(path)
    if not table.metadata().exists() or "files" in wanted and not table.has_metadata_table():
        with _console().status("listing storage and writing the metadata table"):
            time = initialize(table.metadata(), table.config.name, table.timeline())
        partitions = MetadataReader(table.metadata(), table.timeline()).all_partitions()
        click.echo(f"created the metadata table at {time}: {len(partitions)} partition(s)")
    extra = [w for w in wanted if w != "files"]
    if extra:
        if engine == "spark":
            from coordinator.spark.session import local_session

            with local_session() as spark:
                time = _run_locked(path, _config(lock_uri, settings), partial(_build_indexes, extra, spark))
        else:
            time = _run_locked(path, _config(lock_uri, settings), partial(_build_indexes, extra, None))
        click.echo(f"built {', '.join(extra)} at {time}" if time else f"{', '.join(extra)} already on")


def _build_indexes(wanted: list[str], spark, table: Table, config: CoordinatorConfig, lock) -> str | None:
    from rich.progress import Progress

    from coordinator.locking import held
    from timeline.mdt.index_build import build

    with held(lock), Progress(console=_console(), transient=True) as progress:
        task = progress.add_task(f"indexing {', '.join(wanted)}", total=None)
        return build(table.metadata(), table.timeline(), wanted, lambda n: progress.advance(task, n), spark)


@metadata.command(name="delete")
@click.argument("path")
@click.option("--index", "index", default="files", show_default=True, help=INDEX_HELP + " files = all of it.")
def metadata_delete(path: str, index: str):
    """Delete the metadata table (readers list storage), or only some of its indexes."""
    from timeline.mdt.index_build import drop

    wanted = _index_names(index)
    table = _open(path)
    if "files" in wanted:
        table.delete_metadata_table()
        click.echo(f"deleted the metadata table of {table.config.name}")
        return
    dropped = drop(_require_mdt(table), wanted)
    click.echo(f"deleted {', '.join(dropped)}" if dropped else f"{', '.join(wanted)} not on")


@metadata.command(name="repair")
@click.argument("path")
@coordinator_options
def metadata_repair(path: str, lock_uri: str | None, settings: tuple):
    """Rebuild the metadata table from the storage listing, under the table's lock."""
    from timeline.mdt.reader import MetadataReader

    time = _run_locked(path, _config(lock_uri, settings), _repair_metadata)
    table = _open(path)
    partitions = MetadataReader(table.metadata(), table.timeline()).all_partitions()
    click.echo(f"rebuilt the metadata table at {time}: {len(partitions)} partition(s)")


def _repair_metadata(table: Table, config: CoordinatorConfig, lock) -> str:
    from coordinator.locking import held
    from timeline.mdt.bootstrap import repair
    from timeline.table_config import clear_java_metadata_record

    with held(lock):
        time = repair(table.metadata(), table.config.name, table.timeline())
        clear_java_metadata_record(table.storage)  # after the rebuild: Java now finds no HFile MDT to open
        return time


@metadata.command(name="stats")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
def metadata_stats(path: str, as_json: bool):
    """Partition count, last compaction, sync state, log files and sizes."""
    from timeline.mdt import layout
    from timeline.mdt.bootstrap import validate
    from timeline.mdt.reader import MetadataReader
    from timeline.metrics import METRICS

    table = _open(path)
    mdt = _require_mdt(table)
    data_timeline = table.timeline()
    mdt_timeline = mdt.timeline()
    slices = mdt.slices()
    completed = [i.time for i in mdt_timeline.completed()]
    completed_data = [i.time for i in data_timeline.completed()]
    report = validate(mdt, data_timeline)
    reader = MetadataReader(mdt, data_timeline)
    base = layout.latest_completed_compaction(mdt_timeline)
    doc = {
        "partition_count": len(MetadataReader(mdt, data_timeline).all_partitions()),
        "last_compaction": layout.latest_completed_compaction(mdt_timeline),
        "pending_compactions": [i.time for i in layout.pending_compactions(mdt_timeline)],
        "last_metadata_instant": completed[-1] if completed else None,
        "last_data_instant": completed_data[-1] if completed_data else None,
        "in_sync": report.errors == 0,
        "log_file_count": sum(len(s.logs) for s in slices.values()),
        "base_file_size": sum(s.base_size for s in slices.values()),
        "log_file_size": sum(sum(s.logs.values()) for s in slices.values()),
        "partitions": _partition_stats(table, mdt, reader, base),
        "metrics": METRICS.snapshot(),
    }
    if as_json:
        _emit_json(doc)
        return
    for key, value in doc.items():
        click.echo(f"{key}: {value}")


def _partition_stats(table: Table, mdt, reader: MetadataReader, base_instant: str) -> dict:
    """Per MDT partition: live records and the bytes of its current base file."""
    from timeline.mdt import layout

    current = mdt.slices().get(base_instant)
    out = {"files": {"records": reader.listing().num_rows, "base_file_size": current.base_size if current else 0}}
    for partition in table.config.metadata_indexes:
        path = layout.index_base_path(partition, base_instant)
        size = mdt.storage.size(path) if mdt.storage.exists(path) else 0
        out[partition] = {"records": reader.index(partition).num_rows, "base_file_size": size}
    return out


@metadata.command(name="list-partitions")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
def metadata_list_partitions(path: str, as_json: bool):
    """Partitions, from the metadata table."""
    from timeline.mdt.reader import MetadataReader

    table = _open(path)
    partitions = MetadataReader(_require_mdt(table), table.timeline()).all_partitions()
    if as_json:
        _emit_json({"partitions": partitions})
    else:
        for p in partitions:
            click.echo(p or ".")


@metadata.command(name="list-files")
@click.argument("path")
@click.option("--partition", "partitions", multiple=True, help="Partition(s) to list; all when omitted.")
@click.option("--json", "as_json", is_flag=True)
def metadata_list_files(path: str, partitions: tuple[str, ...], as_json: bool):
    """Files from the metadata table (every committed file version), one read for all partitions."""
    from timeline.mdt.reader import MetadataReader

    table = _open(path)
    listing = MetadataReader(_require_mdt(table), table.timeline()).listing(list(partitions) or None)
    rows = listing.sort_by([("partition", "ascending"), ("file", "ascending")]).to_pylist()
    if as_json:
        _emit_json({"files": rows})
    else:
        for row in rows:
            click.echo(f"{row['partition'] or '.'}\t{row['file']}\t{row['size']}")


@metadata.command(name="validate")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
def metadata_validate(path: str, as_json: bool):
    """List storage and recompute the indexes from the files' footers; report every difference (exit 1)."""
    from timeline.mdt.bootstrap import validate
    from timeline.mdt.index_build import validate as validate_indexes

    table = _open(path)
    timeline = table.timeline()
    report = validate(_require_mdt(table), timeline)
    index_reports = validate_indexes(table.metadata(), timeline)
    doc = report.to_json()
    doc["indexes"] = [r.to_json() for r in index_reports]
    errors = report.errors + sum(r.errors for r in index_reports)
    doc["in_sync"], doc["errors"] = errors == 0, errors
    if as_json:
        _emit_json(doc)
    else:
        click.echo(f"in sync: {doc['in_sync']} ({doc['errors']} difference(s))")
        for key in (
            "missing_in_metadata",
            "extra_in_metadata",
            "size_mismatch",
            "partitions_missing",
            "partitions_extra",
            "corrupt_blocks",
            "unhealthy",
            "damaged_instants",
        ):
            for item in doc[key]:
                click.echo(f"  {key}: {item}")
        for index in doc["indexes"]:
            click.echo(f"  {index['partition']}: {index['files']} file(s), {index['errors']} difference(s)")
            for key in ("missing", "wrong", "stale", "unreadable"):
                for item in index[key]:
                    click.echo(f"    {key}: {item}")
    if errors:
        sys.exit(1)


@cli.command()
@click.argument("path")
@coordinator_options
def recover(path: str, lock_uri: str | None, settings: tuple):
    """Roll back orphan instants in both tables, finish interrupted services, retry compactions."""
    from coordinator.services import recover_table

    report = _run_locked(path, _config(lock_uri, settings), recover_table)
    for orphan, rollback_time in report.rolled_back.items():
        click.echo(f"rolled back {orphan} (rollback {rollback_time})")
    for time in report.resumed_rollbacks + report.resumed_cleans:
        click.echo(f"finished interrupted {time}")
    if report.stray_files:
        click.echo(f"removed {len(report.stray_files)} file(s) written after their instant was rolled back")
    if report.metadata:
        for time in report.metadata.rolled_back:
            click.echo(f"rolled back metadata deltacommit {time}")
        for time in report.metadata.compacted:
            click.echo(f"completed metadata compaction {time}")
    click.echo("recovered: no orphan instants left")


@cli.command()
@click.argument("path")
@clean_options
@coordinator_options
def clean(path: str, policy: str | None, retained: int | None, lock_uri: str | None, settings: tuple):
    """Delete file versions no longer needed, mirrored into the metadata table."""
    from coordinator.services import clean as run_clean

    time = _run_locked(path, _clean_config(_config(lock_uri, settings), policy, retained), run_clean)
    click.echo(f"cleaned at {time}" if time else "nothing to clean")


def _clean_config(config: CoordinatorConfig, policy: str | None, retained: int | None) -> CoordinatorConfig:
    if policy:
        config = replace(config, clean_policy=policy)
    if retained is not None:
        field = "file_versions_retained" if config.clean_policy == "KEEP_LATEST_FILE_VERSIONS" else "commits_retained"
        config = replace(config, **{field: retained})
    return config


def _run_locked(path: str, config: CoordinatorConfig, service):
    """Open the table and its configured lock, run `service(table, config, lock)`, close the lock."""
    from coordinator.locking import table_lock

    table = _open(path)
    lock = table_lock(table, config)
    try:
        return service(table, config, lock)
    finally:
        lock.close()


@cli.command()
@click.argument("path")
@coordinator_options
def compact(path: str, lock_uri: str | None, settings: tuple):
    """Run pending metadata compactions, and schedule and run one now if any logs exist."""
    from coordinator.services import compact as run_compaction

    report = _run_locked(path, _config(lock_uri, settings), partial(run_compaction, force=True))
    done = report.compacted
    click.echo(f"completed metadata compaction(s): {', '.join(done)}" if done else "nothing to compact")


@cli.command()
@click.argument("path")
@coordinator_options
def archive(path: str, lock_uri: str | None, settings: tuple):
    """Move old completed instants of both timelines to their archived timelines (DESIGN §6)."""
    from coordinator.services import archive_table

    report = _run_locked(path, _config(lock_uri, settings), archive_table)
    click.echo(f"archived {len(report.data)} data instant(s) and {len(report.metadata)} metadata instant(s)")


@cli.command()
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
    from coordinator.worker import run_worker

    if interval < 0 or (max_runs is not None and max_runs < 1):
        raise BadInputError("--interval must be >= 0 and --max-runs >= 1")
    config = _clean_config(_config(lock_uri, settings), policy, retained)
    run_worker(_open(path), kind, config, interval, max_runs, lambda line: click.echo(line))


@cli.group()
def lock() -> None:
    """Inspect or free a table's lock."""


def _open_table_lock(path: str, uri: str):
    from locks.config import open_lock

    table = _open(path)
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
        _emit_json(doc)
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


@cli.command()
@click.argument("path", required=False)
@click.option("--batches", default=6, show_default=True, help="Spark write jobs in the pipeline (at least 4).")
@click.option("--rows", default=20000, show_default=True, help="Rows of the first insert.")
def demo(path: str | None, batches: int, rows: int):
    """The main job: a Spark pipeline with async clean and compaction workers, on the embedded defaults."""
    from coordinator.demo import run_demo

    if batches < 4 or rows < 100:
        raise BadInputError("--batches must be >= 4 and --rows >= 100")
    run_demo(path, _console(), batches, rows)


class _PluginGroup(click.Group):
    """A group whose commands live above production (`tandem chaos`: chaos.cli), found through the `tandem.commands`
    entry point of its name: the coordinator never imports chaos, and `tandem --help` loads nothing of it."""

    def _source(self) -> click.Group | None:
        from importlib.metadata import entry_points

        found = entry_points(group="tandem.commands", name=self.name)
        return next(iter(found)).load() if found else None

    def list_commands(self, ctx: click.Context) -> list[str]:
        source = self._source()
        return source.list_commands(ctx) if source else []

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        source = self._source()
        if source is None:
            raise click.UsageError(f"`tandem {self.name}` is not installed (`pip install -e .` registers it)")
        return source.get_command(ctx, cmd_name)


@cli.group(name="chaos", cls=_PluginGroup)
def chaos_group() -> None:  # the help of chaos.cli's group (a copy, see OPERATIONS)
    """Crash the protocols at every step and check the invariants after recovery."""


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
