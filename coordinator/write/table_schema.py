"""The table's data schema before a write when the timeline cannot tell (the newest listed file) and after it
(evolution). The timeline's answer is `timeline.table_schema.recorded`, the one resolver every engine uses."""

from __future__ import annotations

import pyarrow as pa

from timeline import table_schema
from timeline.errors import ConflictError
from timeline.format.fs_view import FileSystemView
from timeline.format.schema_evolution import canonical_schema, evolve
from timeline.table import Table


def existing_schema(table: Table, view: FileSystemView) -> pa.Schema | None:
    """The newest file's data schema; gone means a concurrent writer and clean moved past this view."""
    latest = view.latest_base_files()
    if not latest:
        return None
    newest = max(latest, key=lambda f: f.instant).path
    try:
        return table_schema.without_meta(table_schema.of_file(table, newest))
    except FileNotFoundError as err:
        raise ConflictError(f"{newest} was cleaned while this write read it: a newer version exists") from err


def target_schema(incoming: pa.Schema, existing: pa.Schema | None, operation: str) -> pa.Schema:
    """The table's data schema after this write (schema evolution); a delete leaves it as it was."""
    if operation == "delete":
        return existing if existing is not None else canonical_schema(incoming)
    return evolve(existing, incoming)
