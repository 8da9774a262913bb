"""`tandem write`, `read`, `query`, `timeline` and `ls`: rows in, rows and listings out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from coordinator.cli.common import (
    ENGINE_HELP,
    ENGINES,
    check_instant,
    console,
    coordinator_config,
    coordinator_options,
    emit_json,
    json_value,
    open_table,
    require_mdt,
)
from coordinator.config import OPERATIONS
from timeline.errors import BadInputError

if TYPE_CHECKING:
    import pyarrow as pa

    from coordinator.write.writer import WriteOptions, WriteResult
    from timeline.table import Table


@click.command()
@click.argument("path")
@click.option("--input", "input_path", required=True, help="Rows to write: .parquet, .csv or .jsonl.")
@click.option("--operation", type=click.Choice(OPERATIONS), required=True)
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True, help=ENGINE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.option("--sync-glue", "glue", default=None, help="After the commit, sync the table to this Glue database.")
@click.option("--glue-endpoint", default=None, help="The Glue endpoint of --sync-glue (default: AWS's).")
@coordinator_options
def write(
    path: str,
    input_path: str,
    operation: str,
    engine: str,
    as_json: bool,
    glue: str | None,
    glue_endpoint: str | None,
    lock_uri: str | None,
    settings: tuple,
):
    """Write a file of rows as one instant (exit 3 if it lost a conflict, 4 if the lock was unavailable);
    `--sync-glue`: then register the result in Glue (exit 1 if only that failed: the commit stands)."""
    from coordinator.config import parse_settings
    from coordinator.write.input_files import read_input
    from coordinator.write.writer import FILE_SIZING, LocalWriter, WriteOptions

    sizing = {k: v for k, v in parse_settings(settings).items() if k in FILE_SIZING}
    options = WriteOptions.from_hudi(sizing)
    config = coordinator_config(lock_uri, tuple(s for s in settings if s.partition("=")[0].strip() not in sizing))
    table = open_table(path)
    if engine == "spark":
        result = _spark_write(table, input_path, operation, options, config)
    else:
        result = LocalWriter(table, options, config).write(read_input(input_path), operation)
    doc = {
        "instant": result.instant,
        "operation": operation,
        "engine": engine,
        "rows_in": result.rows_in,
        "files_written": len(result.files_written),
        "partitions": sorted(result.metadata.partition_to_write_stats),
    }
    if as_json:
        emit_json(doc)
    else:
        click.echo(
            f"committed {result.instant}: {operation} of {result.rows_in} row(s) "
            f"into {len(result.files_written)} file(s) in {len(doc['partitions'])} partition(s)"
        )
    if glue:
        from coordinator.cli.sync import sync_after_write

        said = sync_after_write(table, config, result.instant, glue, glue_endpoint)
        click.echo(said, err=as_json)  # stdout stays one JSON document


@click.command()
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
@click.option(
    "--read-optimized",
    is_flag=True,
    help="A merge-on-read table's base files alone (Hudi's read-optimized query: fast, logs not merged).",
)
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
    read_optimized: bool,
    output: str | None,
    limit: int,
    meta: bool,
    explain: bool,
    as_json: bool,
):
    """Read the latest snapshot, a snapshot as of an instant, or the changes between instants."""
    import pyarrow.parquet as pq
    from rich.table import Table as RichTable

    from timeline.format.meta_fields import META_COLUMNS
    from timeline.query.reader import read_plan
    from timeline.query.scan import plan_scan

    table = open_table(path)
    as_of, since, until = (
        check_instant(t, option) for t, option in ((as_of, "--as-of"), (since, "--since"), (until, "--until"))
    )
    if until is not None and since is None:
        raise BadInputError("--until needs --since (an incremental read)")
    if output and not output.endswith(".parquet"):
        raise BadInputError(f"--output {output} must end in .parquet")
    if read_optimized and engine == "spark":
        raise BadInputError("--read-optimized reads with the local engine (Spark's reader merges every slice)")
    dialect = "spark" if engine == "spark" else "duckdb"
    plan = None
    if engine == "local" or explain or as_json:  # Spark's reader plans for itself
        plan = plan_scan(
            table, where, as_of=as_of, since=since, until=until, dialect=dialect, read_optimized=read_optimized
        )
    if explain:
        emit_json(plan.explain()) if as_json else _print_plan(plan.explain())
        return
    rows = _spark_read(path, as_of, where, since, until) if engine == "spark" else read_plan(plan)
    if output:
        pq.write_table(rows, output)
    if as_json:
        emit_json({"rows": rows.num_rows, "output": output, "plan": plan.explain()})
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
    console().print(shown)


@click.command()
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

    from coordinator.duckdb.view import plan_query, view_names
    from coordinator.duckdb.view import query as run_query

    as_of = check_instant(as_of, "--as-of")
    if output and not output.endswith(".parquet"):
        raise BadInputError(f"--output {output} must end in .parquet")
    if explain:
        table = open_table(path)
        plan = plan_query(table, sql, view_names(table, "t"), as_of)
        emit_json(plan.explain()) if as_json else _print_plan(plan.explain())
        return
    rows, plan = run_query(path, sql, as_of=as_of)
    if output:
        pq.write_table(rows, output)
    if as_json:
        data = [{k: json_value(v) for k, v in row.items()} for row in rows.slice(0, limit).to_pylist()]
        emit_json({"rows": rows.num_rows, "output": output, "data": data, "plan": plan.explain()})
        return
    if output:
        click.echo(f"wrote {rows.num_rows} row(s) to {output}")
        return
    shown = RichTable(title=f"{plan.table.config.name}: {rows.num_rows} row(s)")
    for name in rows.column_names:
        shown.add_column(name, overflow="fold")
    for row in rows.slice(0, limit).to_pylist():
        shown.add_row(*(str(v) for v in row.values()))
    console().print(shown)


def _print_plan(doc: dict) -> None:
    for key, value in doc.items():
        if value not in (None, []):
            click.echo(f"{key}: {value}")


@click.command()
@click.argument("path")
@click.option("--metadata", "of_metadata", is_flag=True, help="The metadata table's timeline instead.")
@click.option("--json", "as_json", is_flag=True)
def timeline(path: str, of_metadata: bool, as_json: bool):
    """Instants on the active timeline, oldest first."""
    from rich.table import Table as RichTable

    table = open_table(path)
    active = require_mdt(table).timeline() if of_metadata else table.timeline()
    doc = [{"instant": i.time, "action": i.action, "state": i.state.value} for i in active.instants]
    if as_json:
        emit_json({"table": table.config.name, "instants": doc, "archived_files": len(active.archived_files)})
        return
    shown = RichTable(title=f"timeline of {table.config.name}")
    for column in ("instant", "action", "state"):
        shown.add_column(column)
    for item in doc:
        shown.add_row(item["instant"], item["action"], item["state"])
    console().print(shown)


@click.command(name="ls")
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
    table = open_table(path)
    view = table.view(source=source or "auto", partitions=None if partition is None else [partition])
    files = view.latest_base_files(partition)
    doc = [{"partition": f.partition, "file": f.name, "size": f.size, "instant": f.instant} for f in files]
    if as_json:
        emit_json({"source": view.source, "fallback_reason": view.fallback_reason, "files": doc})
        return
    for item in doc:
        click.echo(f"{item['partition'] or '.'}\t{item['file']}\t{item['size']}")


def _spark_write(table: Table, input_path: str, operation: str, options: WriteOptions, config) -> WriteResult:
    from coordinator.spark.inputs import read_input_frame
    from coordinator.spark.session import local_session
    from coordinator.spark.writer import SparkWriter

    with local_session() as spark:
        writer = SparkWriter(spark, table, options, coordinator=config)
        return writer.write(read_input_frame(spark, input_path), operation)


def _spark_read(path: str, as_of: str | None, where: str | None, since: str | None, until: str | None) -> pa.Table:
    from coordinator.spark.reader import read_table
    from coordinator.spark.session import local_session

    with local_session() as spark:
        return read_table(spark, path, as_of=as_of, where=where, since=since, until=until).toArrow()
