"""The table's schema, resolved in one place for the writer, the scan planner and the engines.

Two answers, both from the newest completed writes so that neither lists the table nor reads the MDT:
- as stored (`stored`): the schema of a file the newest write wrote, meta columns included, exactly as readers
  will find the files (the planner hands it to DuckDB and Spark);
- as recorded (`recorded`): the data schema the newest write recorded (`extraMetadata.schema`, as Hudi's and
  Tandem's writers do), zoned like its files where the record does not say, else its files' schema; what a
  writer evolves from.
A completed instant never changes, so each answer is kept per table and instant.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from timeline.errors import BadInputError, TandemError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_schema import avro_to_arrow, records_zones
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.file_names import BaseFile, parse_base_file, split_path
from timeline.format.instant import Instant
from timeline.format.meta_fields import META_COLUMNS
from timeline.format.schema_evolution import with_zones_of
from timeline.format.table_config import CREATE_SCHEMA
from timeline.io.lru import LruCache
from timeline.query.skeleton_join import joined_schema
from timeline.table import Table

SCHEMA_WRITES = 8  # newest completed writes whose files give the stored schema before the listing is asked
SCHEMA_CACHE_ENTRIES = 256
_STORED: LruCache[tuple[str, str], pa.Schema] = LruCache(SCHEMA_CACHE_ENTRIES)
_RECORDED: LruCache[tuple[str, str], pa.Schema] = LruCache(SCHEMA_CACHE_ENTRIES)


def without_meta(schema: pa.Schema) -> pa.Schema:
    """The data columns of a schema: Hudi's meta columns left out."""
    return pa.schema([f for f in schema if f.name not in META_COLUMNS])


def of_file(table: Table, path: str) -> pa.Schema:
    """A base file's schema as stored, meta columns included; a bootstrapped skeleton's as its readers join it."""
    with table.storage.open_input(path) as handle:
        schema = pq.read_schema(handle)
    base = _base_file_of(path)
    source = table.source_of(base.partition, base.file_id, base.instant) if base is not None else None
    return schema if source is None else joined_schema(schema, source)


def written(table: Table, timeline: ActiveTimeline, instant: Instant) -> pa.Schema | None:
    """The stored schema of a file completed write `instant` wrote; None when none is left (replaced and
    cleaned since) or its metadata is damaged (a damaged stat is not used)."""
    key = (table.uri, instant.time)
    known = _STORED.get(key)
    if known is not None:
        return known
    metadata = timeline.commit_metadata_if_sound(instant)
    for stat in metadata.write_stats() if metadata is not None else []:
        base = _base_file_of(stat.path)
        if base is None or base.instant != instant.time:
            continue
        try:
            schema = of_file(table, base.path)
        except FileNotFoundError:
            continue
        _STORED.put(key, schema)
        return schema
    return None


def stored(table: Table, timeline: ActiveTimeline, end: str | None = None) -> pa.Schema | None:
    """The stored schema of the newest of the last SCHEMA_WRITES completed writes (at or before `end`) that
    still has a file; schema evolution only adds or widens columns, so it is the widest. None: ask a listing."""
    writes = [i for i in timeline.completed_writes() if end is None or i.time <= end]
    for instant in reversed(writes[-SCHEMA_WRITES:]):
        schema = written(table, timeline, instant)
        if schema is not None:
            return schema
    return None


def recorded(table: Table, timeline: ActiveTimeline) -> tuple[bool, pa.Schema | None]:
    """The data schema the newest completed write left, and whether the active timeline could tell: (False,
    None) when it holds no write but an archive exists."""
    for instant in reversed(timeline.completed_writes()):
        key = (table.uri, instant.time)
        schema = _RECORDED.get(key)
        if schema is None:
            metadata = timeline.commit_metadata(instant)
            schema = _from_record(table, timeline, instant, metadata)
            if schema is None:
                found = written(table, timeline, instant)
                schema = without_meta(found) if found is not None else None
        if schema is not None:
            _RECORDED.put(key, schema)
            return True, schema
    return not timeline.archived_files, None


def declared(table: Table) -> pa.Schema:
    """Meta columns and the schema the table was created with (or its latest commit records), if any: the
    columns of a table no write has filled yet."""
    meta = [pa.field(c, pa.string()) for c in META_COLUMNS]
    text = table.config.raw.get(CREATE_SCHEMA)
    try:
        text = text or table.timeline().latest_schema()
        data = list(avro_to_arrow(text, CREATE_SCHEMA)) if text else []
    except TandemError:
        data = []
    return pa.schema(meta + list(without_meta(pa.schema(data))))


def _from_record(
    table: Table, timeline: ActiveTimeline, instant: Instant, metadata: CommitMetadata
) -> pa.Schema | None:
    """The commit's `extraMetadata.schema`; timestamps zoned as its files store them when it does not say."""
    if not metadata.schema:
        return None
    schema = without_meta(avro_to_arrow(metadata.schema, f"the schema in {instant.file_name}"))
    if records_zones(metadata.schema) or not any(pa.types.is_timestamp(f.type) for f in schema):
        return schema
    files = written(table, timeline, instant)
    return schema if files is None else with_zones_of(schema, without_meta(files))


def _base_file_of(path: str | None) -> BaseFile | None:
    """The base file a commit's write stat names; None for anything else."""
    try:
        return parse_base_file(*split_path(path)) if path else None
    except BadInputError:
        return None
