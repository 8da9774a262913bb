"""The table's data schema before a write (from the timeline, else a file) and after it (evolution).

Read from the newest completed commit when it can be, so an insert needs no listing and no MDT read.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from timeline.errors import ConflictError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_schema import avro_to_arrow, records_zones
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.fs_view import FileSystemView
from timeline.format.schema_evolution import canonical_schema, evolve, with_zones_of
from timeline.table import META_COLUMNS, Table


class TableSchemas:
    """The schema lookups of one writer, remembering the schema of the newest write it looked at."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._cache: tuple[str, pa.Schema] | None = None  # (instant time, its data schema)

    def existing(self, view: FileSystemView) -> pa.Schema | None:
        """The newest file's schema; gone means a concurrent writer and clean moved past this view."""
        latest = view.latest_base_files()
        if not latest:
            return None
        newest = max(latest, key=lambda f: f.instant).path
        try:
            return self.of_file(newest)
        except FileNotFoundError as err:
            raise ConflictError(f"{newest} was cleaned while this write read it: a newer version exists") from err

    def of_file(self, path: str) -> pa.Schema:
        with self.table.storage.open_input(path) as handle:
            schema = pq.read_schema(handle)
        return pa.schema([f for f in schema if f.name not in META_COLUMNS])

    def from_timeline(self, timeline: ActiveTimeline) -> tuple[bool, pa.Schema | None]:
        """The table schema as the newest completed write left it: no listing, no MDT read.

        Its commit's `extraMetadata.schema` (Hudi's and Tandem's writers record it);
        for a commit without one, the schema of a file it wrote. (False, None) when
        the active timeline cannot tell (no write on it but an archive exists).
        """
        for instant in reversed(timeline.completed_writes()):
            if self._cache is not None and self._cache[0] == instant.time:
                return True, self._cache[1]
            metadata = timeline.commit_metadata(instant)
            schema = self._recorded(metadata, instant.file_name)
            if schema is None:
                schema = self._written(metadata)
            if schema is not None:
                self._cache = (instant.time, schema)  # a completed instant's schema never changes
                return True, schema
        return not timeline.archived_files, None

    def _written(self, metadata: CommitMetadata) -> pa.Schema | None:
        for stat in metadata.write_stats():
            try:
                return self.of_file(stat.path)
            except FileNotFoundError:
                continue
        return None

    def _recorded(self, metadata: CommitMetadata, source: str) -> pa.Schema | None:
        """The commit's `extraMetadata.schema`; timestamps zoned as its files store them when it does not say."""
        if not metadata.schema:
            return None
        schema = avro_to_arrow(metadata.schema, f"the schema in {source}")
        schema = pa.schema([f for f in schema if f.name not in META_COLUMNS])
        if records_zones(metadata.schema) or not any(pa.types.is_timestamp(f.type) for f in schema):
            return schema
        written = self._written(metadata)
        return schema if written is None else with_zones_of(schema, written)


def target_schema(incoming: pa.Schema, existing: pa.Schema | None, operation: str) -> pa.Schema:
    """The table's data schema after this write (schema evolution); a delete leaves it as it was."""
    if operation == "delete":
        return existing if existing is not None else canonical_schema(incoming)
    return evolve(existing, incoming)
