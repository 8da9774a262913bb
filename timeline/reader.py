"""Snapshot and as-of reads of a Copy-on-Write table into one Arrow table."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from timeline.file_names import BaseFile
from timeline.fs_view import FileSystemView
from timeline.storage import Storage
from timeline.table import META_COLUMNS, Table


def read_base_file(storage: Storage, path: str, columns: list[str] | None = None) -> pa.Table:
    with storage.open_input(path) as handle:
        return pq.read_table(handle, columns=columns)


def read_files(storage: Storage, files: Iterable[BaseFile], columns: list[str] | None = None) -> pa.Table:
    """Concatenate base files, widening schemas where files differ (schema evolution)."""
    tables = [read_base_file(storage, f.path, columns) for f in files]
    tables = [t for t in tables if t.num_columns]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def read_view(table: Table, view: FileSystemView, partitions: list[str] | None = None) -> pa.Table:
    """Rows of the latest file slice of every file group (in the given partitions).

    Tables with `hoodie.populate.meta.fields=false` carry null meta columns in
    Spark-written files; like Hudi's readers, leave them out.
    """
    files = [f for f in view.latest_base_files() if partitions is None or f.partition in partitions]
    rows = read_files(table.storage, files)
    if not table.config.populate_meta_fields:
        rows = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names])
    return rows
