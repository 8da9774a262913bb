"""`tandem init` (create a table) and `tandem demo` (the main job)."""

from __future__ import annotations

from functools import partial

import click

from coordinator.cli.common import console
from timeline.errors import BadInputError


@click.command()
@click.argument("path")
@click.option("--name", required=True, help="Table name (hoodie.table.name).")
@click.option("--record-key", required=True, help="Record key column(s), comma separated.")
@click.option("--partition-by", default=None, help="Partition column(s), comma separated.")
@click.option("--hive-style", is_flag=True, help="Partition folders named col=value.")
@click.option("--precombine", default=None, help="Column whose largest value wins among duplicate keys.")
@click.option(
    "--metadata-format",
    type=click.Choice(["hudi", "tandem"]),
    default="hudi",
    show_default=True,
    help="The metadata table's files: Hudi's own (HFile and Hudi log blocks, listed from by every Hudi engine) "
    "or Tandem's previous format, which the table then keeps.",
)
@click.option(
    "--table-type",
    type=click.Choice(["COPY_ON_WRITE", "MERGE_ON_READ"], case_sensitive=False),
    default="COPY_ON_WRITE",
    show_default=True,
    help="MERGE_ON_READ: upserts and deletes go to log files of their file groups, merged by every reader and "
    "compacted into base files by `tandem compact` or the compaction worker.",
)
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
    metadata_format: str,
    table_type: str,
    lock_uri: str | None,
):
    """Create an empty table (Hudi table version 6), copy-on-write unless --table-type says otherwise."""
    from coordinator.protocol.locking import held
    from locks.config import open_lock
    from timeline.io.storage import Storage
    from timeline.table import Table

    create = partial(
        Table.create,
        path,
        name,
        _fields(record_key),
        _fields(partition_by),
        hive_style,
        precombine,
        hudi_format=metadata_format == "hudi",
        table_type=table_type.upper(),
    )
    if Storage(path).require_fencing(lock_uri or "file"):
        table = create()
    else:  # the override: only the external lock keeps two inits apart
        with held(open_lock(lock_uri, path, name)):
            table = create()
    click.echo(f"created table {table.config.name} at {table.uri}")


def _fields(text: str | None) -> list[str]:
    return [f.strip() for f in (text or "").split(",") if f.strip()]


@click.command()
@click.argument("path", required=False)
@click.option("--batches", default=6, show_default=True, help="Spark write jobs in the pipeline (at least 4).")
@click.option("--rows", default=20000, show_default=True, help="Rows of the first insert.")
def demo(path: str | None, batches: int, rows: int):
    """The main job: a Spark pipeline with async clean and compaction workers, on the embedded defaults."""
    from coordinator.demo import run_demo

    if batches < 4 or rows < 100:
        raise BadInputError("--batches must be >= 4 and --rows >= 100")
    run_demo(path, console(), batches, rows)
