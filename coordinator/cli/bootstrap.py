"""`tandem bootstrap`: a parquet dataset taken in as a table without copying it (RFC-12)."""

from __future__ import annotations

import click

from coordinator.cli.common import ENGINE_HELP, ENGINES, coordinator_config, coordinator_options, emit_json

MODES = ("metadata_only", "full_record")  # coordinator.bootstrap.run.MODES (kept light for start-up)


@click.command()
@click.argument("source")
@click.argument("target")
@click.option("--record-key", required=True, help="Record key column(s) of the source files, comma separated.")
@click.option(
    "--partition-by",
    default=None,
    help="Partition column(s), comma separated: the source's col=value folders (checked; found when left out).",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="metadata_only",
    show_default=True,
    help="metadata_only: skeleton files of the meta columns, joined with the untouched source on read; "
    "full_record: the rows copied into the table.",
)
@click.option(
    "--mode-regex",
    default=None,
    help="Partitions whose source folder matches this regex get --regex-mode, the others the other mode "
    "(Hudi's BootstrapRegexModeSelector).",
)
@click.option("--regex-mode", type=click.Choice(MODES), default="metadata_only", show_default=True)
@click.option("--precombine", default=None, help="Column whose largest value wins among later duplicate keys.")
@click.option("--name", default=None, help="Table name (hoodie.table.name; default: the target folder's name).")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True, help=ENGINE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@coordinator_options
def bootstrap(
    source: str,
    target: str,
    record_key: str,
    partition_by: str | None,
    mode: str,
    mode_regex: str | None,
    regex_mode: str,
    precombine: str | None,
    name: str | None,
    engine: str,
    as_json: bool,
    lock_uri: str | None,
    settings: tuple,
):
    """Take the parquet dataset at SOURCE in as a new table at TARGET; SOURCE is only ever read."""
    from dataclasses import asdict

    from coordinator.bootstrap.run import BootstrapRequest
    from coordinator.bootstrap.run import bootstrap as run_bootstrap

    request = BootstrapRequest(
        source=source,
        target=target,
        record_key=[c.strip() for c in record_key.split(",") if c.strip()],
        partition_by=None if partition_by is None else [c.strip() for c in partition_by.split(",") if c.strip()],
        mode=mode,
        mode_regex=mode_regex,
        regex_mode=regex_mode,
        precombine=precombine,
        name=name,
    )
    config = coordinator_config(lock_uri, settings)
    if engine == "spark":
        from coordinator.spark.bootstrap import SparkEngine
        from coordinator.spark.session import local_session

        with local_session() as spark:
            result = run_bootstrap(request, config, engine=SparkEngine(spark, config))
    else:
        result = run_bootstrap(request, config)
    if as_json:
        emit_json(asdict(result))
        return
    click.echo(
        f"bootstrapped {result.table}: {result.metadata_only_files} file(s) metadata-only, "
        f"{result.full_record_files} full-record, {result.rows} rows, {result.bytes_written} bytes written "
        f"(instants {', '.join(result.instants) or 'none: already done'})"
    )
