"""`tandem plan`: the splits an engine would read, for any engine or scheduler to consume (Hudi's RFC-40).

The document is the scan planner's `ScanPlan` in plain JSON (docs/split-planning.md): each base file to read and
where to open it, the logs to merge over it on a merge-on-read table, the source file a bootstrapped skeleton
joins, and the filter every reader must still apply to the rows. Planning reads metadata, never a data file.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

import click

from coordinator.cli.common import check_instant, emit_json, json_value, open_table

if TYPE_CHECKING:
    import pyarrow as pa

    from timeline.format.active_timeline import ActiveTimeline
    from timeline.format.source_file import SourceFile
    from timeline.io.storage import Storage
    from timeline.query.scan import ScanPlan, Split
    from timeline.table import Table

PLAN_VERSION = 1  # raised only when a field changes meaning or goes away; a new field keeps it
COLUMN_STATS = "column_stats"
COMMIT_METADATA = "commit_metadata"
ESTIMATED_FROM_SIZE = "estimated_from_size"


class RowCount(NamedTuple):
    """A base file's rows, whether that number is known rather than estimated, and where it came from."""

    count: int | None
    exact: bool
    source: str  # column_stats, commit_metadata or estimated_from_size


@click.command()
@click.argument("path")
@click.option(
    "--where", default=None, help="DuckDB SQL filter: prunes partitions and files; every reader applies it to rows."
)
@click.option("--as-of", default=None, help="Plan the table as of this time (the latest commit at or before it).")
@click.option("--read-optimized", is_flag=True, help="A merge-on-read table's base files alone: no logs to merge.")
@click.option("--json", "as_json", is_flag=True, help="The plan as one JSON document (docs/split-planning.md).")
def plan(path: str, where: str | None, as_of: str | None, read_optimized: bool, as_json: bool):
    """The splits an engine would read: base files, the logs to merge over them, the filter left to apply."""
    from timeline.io import read_once
    from timeline.query.scan import plan_scan

    table = open_table(path)
    as_of = check_instant(as_of, "--as-of")
    with read_once.reuse_reads():  # the plan and the timeline the document reads are one snapshot
        scan = plan_scan(table, where, as_of=as_of, read_optimized=read_optimized)
        _check_residual(scan)
        doc = plan_document(scan, where, as_of, read_optimized)
    if as_json:
        emit_json(doc)
    else:
        _print_splits(doc)


def plan_document(scan: ScanPlan, where: str | None, as_of: str | None, read_optimized: bool) -> dict:
    """The plan as the JSON document of docs/split-planning.md (read-optimized means something on merge-on-read
    only: a copy-on-write table has no logs)."""
    from coordinator.duckdb.view import output_schema

    table = scan.table
    timeline = table.timeline()
    counts = _row_counts(scan, timeline)
    splits = [_split_doc(scan, split, rows) for split, rows in zip(scan.splits, counts, strict=True)]
    return {
        "version": PLAN_VERSION,
        "table": _table_doc(table),
        "query_type": "read_optimized" if read_optimized and table.config.merge_on_read else "snapshot",
        "as_of": as_of,
        "as_of_instant": _read_instant(timeline, scan.as_of),
        "source": scan.source,
        "fallback_reason": scan.fallback_reason,
        "filter": where,
        "residual": scan.residual,
        "column_stats": scan.stats,
        "notes": list(scan.notes),
        "schema": _schema_doc(output_schema(scan)),
        "counts": _counts(scan, splits),
        "splits": splits,
    }


def _check_residual(scan: ScanPlan) -> None:
    """A filter the planner passes on untranslated (a function it does not know) must still be one DuckDB can
    apply: tried on no rows of the read schema, so a connector never gets a plan its readers cannot run."""
    import importlib.util

    if scan.residual and scan.schema is not None and importlib.util.find_spec("duckdb") is not None:
        from timeline.query.reader import sql_filter

        sql_filter(scan.schema.empty_table(), scan.residual)


def _table_doc(table: Table) -> dict:
    config = table.config
    return {
        "name": config.name,
        "base_uri": _location(table.storage, ""),
        "type": config.table_type,
        "record_key_fields": list(config.record_key_fields),
        "partition_fields": list(config.partition_fields),
        "hive_style_partitioning": config.hive_style,
        "precombine_field": config.precombine_field,
    }


def _read_instant(timeline: ActiveTimeline, as_of: str | None) -> str | None:
    """The instant a read sees: the latest completed write at or before `as_of` (of all of them without one)."""
    return max((i.time for i in timeline.completed_writes() if as_of is None or i.time <= as_of), default=None)


def _schema_doc(schema: pa.Schema) -> list[dict]:
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


def _split_doc(scan: ScanPlan, split: Split, rows: RowCount) -> dict:
    storage = scan.table.storage
    logs = scan.merge.logs_of(split.partition, split.file_id) if scan.merge is not None else []
    log_docs = [{"location": _location(storage, log.path), "path": log.path, "size_bytes": log.size} for log in logs]
    source = _source_doc(split.source)
    return {
        "location": _location(storage, split.path),
        "path": split.path,
        "partition_path": split.partition,
        "partition_values": {name: json_value(value) for name, value in split.partition_values.items()},
        "file_id": split.file_id,
        "instant": split.instant,
        "size_bytes": split.size,
        "total_bytes": split.size + sum(log.size for log in logs) + (source["size_bytes"] if source else 0),
        "row_count": rows.count,
        "row_count_exact": rows.exact and not logs,  # logs may add, replace and delete rows of the base file
        "row_count_source": rows.source,
        "logs": log_docs,
        "bootstrap_source": source,
    }


def _source_doc(source: SourceFile | None) -> dict | None:
    if source is None:
        return None
    return {
        "location": _location(_storage(source.base_uri), source.path),
        "path": source.path,
        "base_uri": source.base_uri,
        "size_bytes": source.length,
        "modified_ms": source.modified_ms,
        "partition_values": dict(source.partition_values),
    }


def _counts(scan: ScanPlan, splits: list[dict]) -> dict:
    logs = [log for split in splits for log in split["logs"]]
    rows = [split["row_count"] for split in splits]
    return {
        "splits": len(splits),
        "files_considered": scan.considered,
        "pruned_by_partition": scan.pruned_by_partition,
        "pruned_by_column_stats": scan.pruned_by_stats,
        "base_file_bytes": sum(split["size_bytes"] for split in splits),
        "log_files": len(logs),
        "log_file_bytes": sum(log["size_bytes"] for log in logs),
        "bytes": sum(split["total_bytes"] for split in splits),
        "row_count": None if None in rows else sum(rows),
        "row_count_exact": all(split["row_count_exact"] for split in splits),
    }


def _row_counts(scan: ScanPlan, timeline: ActiveTimeline) -> list[RowCount]:
    """Each split's base file rows: known from its column statistics, else from the write stat of the commit that
    wrote it; else estimated from its size at the rows per byte of the files whose rows are known (none known:
    null). No data file is opened: on an object store a footer is a request per file."""
    splits = scan.splits
    known = {s.path: rows for s in splits if (rows := _rows_from_stats(s, scan.schema)) is not None}
    missing = {s.instant for s in splits if s.path not in known}
    for path, count in (_rows_written(timeline, missing) if missing else {}).items():
        known.setdefault(path, RowCount(count, True, COMMIT_METADATA))
    sized = [(s.size, known[s.path].count) for s in splits if s.path in known]
    known_bytes = sum(size for size, _ in sized)
    per_byte = sum(count for _, count in sized) / known_bytes if known_bytes else None
    return [known.get(s.path) or _estimated(s.size, per_byte) for s in splits]


def _rows_from_stats(split: Split, schema: pa.Schema | None) -> RowCount | None:
    """A flat column's value count is the file's rows (a nested column's counts its leaves)."""
    import pyarrow as pa

    for name, found in (split.stats or {}).items():
        if schema is not None and name in schema.names and not pa.types.is_nested(schema.field(name).type):
            return RowCount(found.value_count, True, COLUMN_STATS)
    return None


def _rows_written(timeline: ActiveTimeline, instants: set[str]) -> dict[str, int]:
    """Base file path -> the rows the write stat of its commit says it holds (`numWrites`, which Hudi's writers
    always record; 0 for a file a delete emptied), for the commits of `instants` still on the active timeline."""
    out: dict[str, int] = {}
    for instant in timeline.completed_writes():
        metadata = timeline.commit_metadata_if_sound(instant) if instant.time in instants else None
        for stat in metadata.write_stats() if metadata is not None else ():
            if not stat.is_log:
                out[stat.path] = stat.num_writes
    return out


def _estimated(size: int, per_byte: float | None) -> RowCount:
    return RowCount(None if per_byte is None else round(size * per_byte), False, ESTIMATED_FROM_SIZE)


def _location(storage: Storage, path: str) -> str:
    """Where an engine opens a file: its URI on an object store, its absolute path on a local disk."""
    return storage.uri(path) if storage.is_s3 else storage.full(path)


@functools.cache
def _storage(base_uri: str) -> Storage:
    """One storage per bootstrap base path, however many skeletons name it."""
    from timeline.io.storage import Storage

    return Storage(base_uri)


def _print_splits(doc: dict) -> None:
    for split in doc["splits"]:
        rows = split["row_count"]
        shown = "?" if rows is None else str(rows) if split["row_count_exact"] else f"~{rows}"
        sizes = f"{split['size_bytes']} B\t{shown} row(s)\t{len(split['logs'])} log(s)"
        click.echo(f"{split['path']}\t{split['instant']}\t{sizes}")
    counts = doc["counts"]
    summary = (
        f"{counts['splits']} split(s), {counts['bytes']} bytes, as of {doc['as_of_instant'] or 'no commit'} "
        f"(listed from {doc['source']}); pruned {counts['pruned_by_partition']} file(s) by partition, "
        f"{counts['pruned_by_column_stats']} by column stats"
    )
    click.echo(summary + (f"; every reader applies: {doc['residual']}" if doc["residual"] else ""))
