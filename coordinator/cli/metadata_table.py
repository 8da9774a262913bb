"""`tandem metadata`: create, delete, repair, inspect and validate the metadata table and its indexes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

import click

from coordinator.cli.common import (
    ENGINES,
    console,
    coordinator_config,
    coordinator_options,
    emit_json,
    open_table,
    require_mdt,
    run_locked,
)
from timeline.errors import BadInputError

if TYPE_CHECKING:
    from coordinator.config import CoordinatorConfig
    from timeline.mdt.reader import MetadataReader
    from timeline.table import Table


@click.group()
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
@click.option(
    "--format",
    "file_format",
    type=click.Choice(["hudi", "tandem"]),
    default="hudi",
    show_default=True,
    help="The metadata table's files: Hudi's own (listed from by every Hudi engine) or Tandem's previous "
    "format, which the table then keeps.",
)
@coordinator_options
def metadata_create(path: str, index: str, engine: str, file_format: str, lock_uri: str | None, settings: tuple):
    """Build the metadata table (from a storage listing) and turn on indexes (from the files' footers)."""
    from coordinator.mdt.bootstrap import initialize
    from timeline.mdt.reader import MetadataReader

    wanted = _index_names(index)
    table = open_table(path)
    if not table.metadata().exists() or "files" in wanted and not table.has_metadata_table():

        def create(table: Table, config: CoordinatorConfig, lock) -> str:
            from coordinator.protocol.locking import held

            with held(lock), _progress("listing storage and writing the metadata table") as progress:
                return initialize(
                    table.metadata(), table.config.name, table.timeline(), file_format == "hudi", progress
                )

        time = run_locked(path, coordinator_config(lock_uri, settings), create)
        table = open_table(path)
        partitions = MetadataReader(table.metadata(), table.timeline()).all_partitions()
        click.echo(f"created the metadata table at {time}: {len(partitions)} partition(s)")
    extra = [w for w in wanted if w != "files"]
    if extra:
        if engine == "spark":
            from coordinator.spark.session import local_session

            with local_session() as spark:
                time = run_locked(path, coordinator_config(lock_uri, settings), partial(_build_indexes, extra, spark))
        else:
            time = run_locked(path, coordinator_config(lock_uri, settings), partial(_build_indexes, extra, None))
        click.echo(f"built {', '.join(extra)} at {time}" if time else f"{', '.join(extra)} already on")


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int], None]]:
    """A transient progress bar on stderr; yields what to call with each count of data files read."""
    from rich.progress import Progress

    with Progress(console=console(), transient=True) as bar:
        task = bar.add_task(label, total=None)
        yield lambda n: bar.advance(task, n)


def _build_indexes(wanted: list[str], spark, table: Table, config: CoordinatorConfig, lock) -> str | None:
    from coordinator.mdt.index_build import build
    from coordinator.protocol.locking import held

    with held(lock), _progress(f"indexing {', '.join(wanted)}") as progress:
        return build(table.metadata(), table.timeline(), wanted, progress, spark)


@metadata.command(name="delete")
@click.argument("path")
@click.option("--index", "index", default="files", show_default=True, help=INDEX_HELP + " files = all of it.")
def metadata_delete(path: str, index: str):
    """Delete the metadata table (readers list storage), or only some of its indexes."""
    from coordinator.mdt.index_build import drop

    wanted = _index_names(index)
    table = open_table(path)
    if "files" in wanted:
        table.delete_metadata_table()
        click.echo(f"deleted the metadata table of {table.config.name}")
        return
    dropped = drop(require_mdt(table), wanted)
    click.echo(f"deleted {', '.join(dropped)}" if dropped else f"{', '.join(wanted)} not on")


@metadata.command(name="repair")
@click.argument("path")
@coordinator_options
def metadata_repair(path: str, lock_uri: str | None, settings: tuple):
    """Rebuild the metadata table from the storage listing, under the table's lock."""
    from timeline.mdt.reader import MetadataReader

    time = run_locked(path, coordinator_config(lock_uri, settings), _repair_metadata)
    table = open_table(path)
    partitions = MetadataReader(table.metadata(), table.timeline()).all_partitions()
    click.echo(f"rebuilt the metadata table at {time}: {len(partitions)} partition(s)")


def _repair_metadata(table: Table, config: CoordinatorConfig, lock) -> str:
    from coordinator.mdt.bootstrap import repair
    from coordinator.protocol.locking import held

    with held(lock), _progress("listing storage and rebuilding the metadata table") as progress:
        return repair(table.metadata(), table.config.name, table.timeline(), progress)


@metadata.command(name="stats")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
def metadata_stats(path: str, as_json: bool):
    """Partition count, last compaction, sync state, log files and sizes."""
    from coordinator.mdt.bootstrap import validate
    from timeline.mdt import layout
    from timeline.mdt.reader import MetadataReader
    from timeline.metrics import METRICS

    table = open_table(path)
    mdt = require_mdt(table)
    data_timeline = table.timeline()
    mdt_timeline = mdt.timeline()
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
        **(_hudi_format_stats(table, mdt, reader) if mdt.is_hudi_format() else _stats(table, mdt, reader, base)),
        "metrics": METRICS.snapshot(),
    }
    if as_json:
        emit_json(doc)
        return
    for key, value in doc.items():
        click.echo(f"{key}: {value}")


def _stats(table: Table, mdt, reader: MetadataReader, base_instant: str) -> dict:
    slices = mdt.slices()
    return {
        "log_file_count": sum(len(s.logs) for s in slices.values()),
        "base_file_size": sum(s.base_size for s in slices.values()),
        "log_file_size": sum(sum(s.logs.values()) for s in slices.values()),
        "partitions": _partition_stats(table, mdt, reader, base_instant),
    }


def _hudi_format_stats(table: Table, mdt, reader: MetadataReader) -> dict:
    """The same figures for an MDT in Hudi's format: per MDT partition, its file groups, live records, and the
    base files and logs storage holds (every slice)."""
    from timeline.mdt.file_slices import list_file_groups

    partitions = {}
    slices = []
    for partition in table.config.java_metadata_partitions:
        groups = list_file_groups(mdt.storage, partition)
        slices += [s for g in groups for s in g.slices.values()]
        partitions[partition] = {
            "file_groups": len(groups),
            "records": reader.snapshot.record_count(partition),
            "base_file_size": sum(s.base_size for g in groups for s in g.slices.values()),
        }
    return {
        "log_file_count": sum(len(s.logs) for s in slices),
        "base_file_size": sum(s.base_size for s in slices),
        "log_file_size": sum(log.size for s in slices for log in s.logs),
        "partitions": partitions,
    }


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

    table = open_table(path)
    partitions = MetadataReader(require_mdt(table), table.timeline()).all_partitions()
    if as_json:
        emit_json({"partitions": partitions})
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

    table = open_table(path)
    listing = MetadataReader(require_mdt(table), table.timeline()).listing(list(partitions) or None)
    rows = listing.sort_by([("partition", "ascending"), ("file", "ascending")]).to_pylist()
    if as_json:
        emit_json({"files": rows})
    else:
        for row in rows:
            click.echo(f"{row['partition'] or '.'}\t{row['file']}\t{row['size']}")


@metadata.command(name="validate")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
def metadata_validate(path: str, as_json: bool):
    """List storage and recompute the indexes from the files' footers; report every difference (exit 1)."""
    from coordinator.mdt.bootstrap import validate
    from coordinator.mdt.index_build import validate as validate_indexes

    table = open_table(path)
    timeline = table.timeline()
    report = validate(require_mdt(table), timeline)
    index_reports = validate_indexes(table.metadata(), timeline)
    doc = report.to_json()
    doc["indexes"] = [r.to_json() for r in index_reports]
    errors = report.errors + sum(r.errors for r in index_reports)
    doc["in_sync"], doc["errors"] = errors == 0, errors
    if as_json:
        emit_json(doc)
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
