"""Snapshot and as-of reads of a table into one Arrow table (merge-on-read slices merged, `timeline.mor`)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from timeline.errors import BadInputError, UnreadableDataFileError
from timeline.format.file_names import BaseFile
from timeline.format.fs_view import FileSystemView
from timeline.format.meta_fields import COMMIT_TIME, META_COLUMNS
from timeline.format.schema_evolution import conform, union
from timeline.format.source_file import SourceFile
from timeline.io.storage import Storage
from timeline.mor.slice_merge import LogMerge
from timeline.query.skeleton_join import read_joined
from timeline.table import Table

if TYPE_CHECKING:
    from timeline.query.scan import ScanPlan, Split


WHOLE_OBJECT_BYTES = 32 * 1024 * 1024  # on S3, a known-size file up to this is read by one GetObject
FETCHED_BYTES = 256 * 1024 * 1024  # what one `fetched` cache may hold
# A file up to this is decoded on the calling thread: for a small file the hand-off to pyarrow's pool costs
# more than its columns take to decode (a 20-row file: 200 us with the pool, 110 us without).
THREADED_READ_BYTES = 4 * 1024 * 1024
PARALLEL_FILES = 8  # files from which a read opens and decodes them on a pool, READ_THREADS at a time
READ_THREADS = 8


def read_base_file(
    storage: Storage,
    path: str,
    columns: list[str] | None = None,
    size: int | None = None,
    fetched: dict[str, bytes] | None = None,
    source: SourceFile | None = None,
) -> pa.Table:
    """A base file's rows. On S3 a file whose `size` the listing gave is one GetObject when small (pyarrow's
    file would HEAD for the size, then read the footer and each column by range); `fetched` keeps the bytes
    for a second read in the same write (an upsert reads a file's keys, then the whole file). A bootstrapped
    skeleton (`source`) is joined with its source file (`skeleton_join`)."""
    try:
        if source is not None:
            return read_joined(storage, path, source, columns)
        return _read_base_file(storage, path, columns, size, fetched)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException, ValueError) as err:
        raise UnreadableDataFileError(f"data file {path} could not be read ({str(err).strip()})") from err


def _read_base_file(
    storage: Storage, path: str, columns: list[str] | None, size: int | None, fetched: dict[str, bytes] | None
) -> pa.Table:
    threads = size is None or size > THREADED_READ_BYTES
    if not storage.is_s3 or size is None or size > WHOLE_OBJECT_BYTES:
        with storage.open_input(path) as handle:  # not read_table: no pyarrow.dataset import
            return pq.ParquetFile(handle).read(columns=columns, use_threads=threads)
    data = fetched.get(path) if fetched is not None else None
    if data is None:
        data = storage.read_bytes(path)
        if fetched is not None and sum(map(len, fetched.values())) + len(data) <= FETCHED_BYTES:
            fetched[path] = data
    return pq.ParquetFile(pa.BufferReader(data)).read(columns=columns, use_threads=threads)


def read_files(
    storage: Storage, files: Iterable[BaseFile | Split], columns: list[str] | None = None, merge: LogMerge | None = None
) -> pa.Table:
    """Concatenate base files in the table's schema: the union of theirs, oldest first.

    Schema evolution widens a column without rewriting older files (an int column
    that became a long keeps int files), so every file is cast to the union. On a
    merge-on-read table (`merge`) a file whose slice has logs is read whole and the
    logs merged over it before the columns are chosen.
    """
    files = list(files)
    if len(files) < PARALLEL_FILES:
        tables = [_read_slice(storage, f, columns, merge) for f in files]
    else:  # many small files (a bootstrapped table's skeletons and sources): their opens and decodes overlap
        with ThreadPoolExecutor(READ_THREADS) as pool:
            tables = list(pool.map(lambda f: _read_slice(storage, f, columns, merge), files))
    oldest_first = sorted(range(len(files)), key=lambda i: (files[i].instant, files[i].path))
    if not any(t.num_columns for t in tables):
        return pa.table({})
    try:
        schema = union(tables[i].schema for i in oldest_first if tables[i].num_columns)
    except BadInputError as err:
        raise BadInputError(f"the table's files disagree on a column's type: {err}") from err
    wide = [conform(t, schema, exact=False) for t in tables if t.num_columns]
    return pa.concat_tables(wide, promote_options="permissive")


def _read_slice(
    storage: Storage, file: BaseFile | Split, columns: list[str] | None, merge: LogMerge | None
) -> pa.Table:
    """The rows of one file slice: its base file's, with its logs merged over them when it has any."""
    if merge is None or not merge.logs_of(file.partition, file.file_id):
        return read_base_file(storage, file.path, columns, source=file.source)
    rows = merge.merged(storage, read_base_file(storage, file.path, source=file.source), file.partition, file.file_id)
    return rows if columns is None else rows.select([c for c in columns if c in rows.column_names])


def read_plan(plan: ScanPlan) -> pa.Table:
    """The rows of a planned scan: its splits, the incremental range, then its residual filter (by DuckDB).

    The planner only drops files that cannot match, so the filter is applied to
    every row read; DuckDB applies it so that SQL means what it means in SQL
    (NULLs, NaN, casts), not what a hand-written evaluator thinks it means.
    """
    rows = read_files(plan.table.storage, plan.splits, merge=plan.merge)
    if not plan.splits and plan.schema is not None:  # every file pruned: no rows, but the table's columns
        rows = plan.schema.empty_table()
    if plan.since is not None and rows.num_rows:
        times = rows.column(COMMIT_TIME)
        keep = pc.greater(times, plan.since)
        if plan.until is not None:
            keep = pc.and_(keep, pc.less_equal(times, plan.until))
        rows = rows.filter(keep)
    if plan.residual:
        rows = sql_filter(rows, plan.residual)
    if not plan.table.config.populate_meta_fields:
        rows = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names])
    return rows


def sql_filter(rows: pa.Table, where: str) -> pa.Table:
    try:
        import duckdb
    except ImportError as err:
        raise BadInputError("a local --where needs DuckDB: pip install 'tandem-lake[duckdb]'") from err
    if rows.num_columns == 0:
        return rows
    connection = duckdb.connect()
    try:
        connection.register("rows", rows)
        return connection.sql(f"SELECT * FROM rows WHERE {where}").to_arrow_table().cast(rows.schema)
    except duckdb.Error as err:
        raise BadInputError(f"--where {where!r}: {str(err).splitlines()[0]}") from err
    finally:
        connection.close()


def log_merge(table: Table, view: FileSystemView) -> LogMerge | None:
    """What merging the view's slices needs, on a merge-on-read table (None on copy-on-write)."""
    if not table.config.merge_on_read:
        return None
    return LogMerge.of(view.slice_logs(), view.timeline, view.as_of, table.config.precombine_field)


def read_view(table: Table, view: FileSystemView, partitions: list[str] | None = None) -> pa.Table:
    """Rows of the latest file slice of every file group (in the given partitions).

    Tables with `hoodie.populate.meta.fields=false` carry null meta columns in
    Spark-written files; like Hudi's readers, leave them out.
    """
    files = [f for f in view.latest_base_files() if partitions is None or f.partition in partitions]
    rows = read_files(table.storage, files, merge=log_merge(table, view))
    if not table.config.populate_meta_fields:
        rows = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names])
    return rows
