"""The local writer: one Arrow table in, one Copy-on-Write instant out.

insert and bulk_insert create new file groups sized by a target file size;
upsert and delete rewrite the affected file groups (rows carried over keep all
their meta columns); insert_overwrite replaces every file group of the touched
partitions in a replacecommit.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from chaos.crash_points import crash_point
from coordinator.config import CoordinatorConfig
from coordinator.transaction import WRITE_FILE, Transaction
from locks.base import LockProvider
from timeline import keys
from timeline.active_timeline import ActiveTimeline
from timeline.avro_schema import arrow_to_avro
from timeline.commit_metadata import CommitMetadata, WriteStat
from timeline.errors import BadInputError, ConflictError
from timeline.file_names import PARTITION_METADATA, BaseFile, base_file_name, new_file_id, write_token
from timeline.fs_view import FileSystemView
from timeline.instant import COMMIT, REPLACE_COMMIT
from timeline.reader import read_base_file
from timeline.table import META_COLUMNS, Table

OPERATIONS = ("insert", "bulk_insert", "upsert", "delete", "insert_overwrite")
DEFAULT_MAX_FILE_SIZE = 120 * 1024 * 1024
DEFAULT_SMALL_FILE_LIMIT = 100 * 1024 * 1024
KEY = "_hoodie_record_key"
PARTITION = "_hoodie_partition_path"


@dataclass
class WriteOptions:
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    row_group_size: int = 128 * 1024
    # Hudi's hoodie.parquet.small.file.limit: an upsert's new records top up a file group below it (Spark writer)
    small_file_limit: int = DEFAULT_SMALL_FILE_LIMIT


@dataclass
class WriteResult:
    instant: str
    operation: str
    metadata: CommitMetadata
    rows_in: int

    @property
    def files_written(self) -> list[str]:
        return [s.path for s in self.metadata.write_stats()]


class InstantSink(Protocol):
    """Where a file's marker goes: the driver's transaction, or an executor's view of it."""

    @property
    def time(self) -> str: ...

    def create_marker(self, path: str, kind: str = "CREATE") -> None: ...


@dataclass
class _FileWrite:
    """One file to write: its group, rows (with meta columns) and stat counters."""

    partition: str
    file_id: str
    rows: pa.Table
    prev_commit: str = "null"
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


class LocalWriter:
    def __init__(
        self,
        table: Table,
        options: WriteOptions | None = None,
        coordinator: CoordinatorConfig | None = None,
        lock: LockProvider | None = None,
    ) -> None:
        self.table = table
        self.config = table.config
        self.options = options or WriteOptions()
        self.coordinator = coordinator or CoordinatorConfig()
        self.lock = lock
        self._schema_cache: tuple[str, pa.Schema] | None = None  # (instant time, its data schema)

    # preparation -------------------------------------------------------------------
    def _prepare(self, data: pa.Table, operation: str, existing: pa.Schema | None) -> pa.Table:
        """Drop incoming meta columns, cast to the table's types, add key and partition."""
        data = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
        if existing is not None and operation != "delete":
            data = _cast_to(data, existing)
        return with_keys(data, self.config.record_key_fields, self.config.partition_fields, self.config.hive_style)

    def existing_schema(self, view: FileSystemView) -> pa.Schema | None:
        """The newest file's schema; gone means a concurrent writer and clean moved past this view."""
        latest = view.latest_base_files()
        if not latest:
            return None
        newest = max(latest, key=lambda f: f.instant).path
        try:
            return self._schema_of(newest)
        except FileNotFoundError as err:
            raise ConflictError(f"{newest} was cleaned while this write read it: a newer version exists") from err

    def _schema_of(self, path: str) -> pa.Schema:
        with self.table.storage.open_input(path) as handle:
            schema = pq.read_schema(handle)
        return pa.schema([f for f in schema if f.name not in META_COLUMNS])

    def _schema_without_view(self, timeline: ActiveTimeline) -> tuple[bool, pa.Schema | None]:
        """The table schema from the newest completed write's own files: no listing, no MDT read.

        (False, None) when the active timeline cannot tell (no write on it but an archive exists).
        """
        for instant in reversed(timeline.completed_writes()):
            if self._schema_cache is not None and self._schema_cache[0] == instant.time:
                return True, self._schema_cache[1]
            for stat in timeline.commit_metadata(instant).write_stats():
                try:
                    schema = self._schema_of(stat.path)
                except FileNotFoundError:
                    continue
                self._schema_cache = (instant.time, schema)  # a completed instant's schema never changes
                return True, schema
        return not timeline.archived_files, None

    def view_and_schema(self, operation: str, txn: Transaction) -> tuple[FileSystemView | None, pa.Schema | None]:
        """Inserts read no file listing at all; every other operation plans against the view."""
        if operation in ("insert", "bulk_insert"):
            known, existing = self._schema_without_view(txn.begin_timeline)
            if known:
                txn.known_partitions = set()  # re-listing a known partition is a harmless union
                return None, existing
        view = self.table.view()
        txn.known_partitions = set(view.partitions())
        return view, self.existing_schema(view)

    def dedupe(self, rows: pa.Table) -> pa.Table:
        """Keep one row per key: the largest precombine value, else the last row."""
        order = pa.array(range(rows.num_rows))
        rows = rows.append_column("__order", order)
        sort = [(KEY, "ascending")]
        pre = self.config.precombine_field
        if pre and pre in rows.column_names:
            sort.append((pre, "descending"))
        sort.append(("__order", "descending"))
        rows = rows.sort_by(sort)
        keys_col = rows.column(KEY)
        if rows.num_rows:
            first = pc.not_equal(keys_col.slice(1), keys_col.slice(0, rows.num_rows - 1))
            mask = pa.concat_arrays([pa.array([True])] + [c for c in first.chunks])
            rows = rows.filter(mask)
        return rows.sort_by("__order").drop_columns(["__order"])

    # planning ------------------------------------------------------------------------
    def split_new(self, partition: str, rows: pa.Table) -> list[_FileWrite]:
        """New file groups, as few as the target file size allows, evenly filled."""
        if rows.num_rows == 0:
            return []
        data_bytes = rows.drop_columns([KEY, PARTITION]).nbytes
        files = max(1, math.ceil(data_bytes / self.options.max_file_size))
        per_file = math.ceil(rows.num_rows / files)
        return [
            _FileWrite(partition, new_file_id(), chunk, inserts=chunk.num_rows)
            for chunk in (rows.slice(start, per_file) for start in range(0, rows.num_rows, per_file))
        ]

    def _index(self, view: FileSystemView, partition: str) -> dict[str, BaseFile]:
        """Simple index: key -> latest base file of its group, for one partition."""
        located: dict[str, BaseFile] = {}
        for base in view.latest_base_files(partition):
            for key in self._keys_of(base):
                located[key] = base
        return located

    def _keys_of(self, base: BaseFile) -> list[str]:
        columns = [KEY] if self.config.populate_meta_fields else self.config.record_key_fields
        return self._row_keys(self._read(base, columns)).to_pylist()

    def _read(self, base: BaseFile, columns: list[str] | None = None) -> pa.Table:
        """A base file this write builds on; gone means a concurrent writer and clean moved past it."""
        try:
            return read_base_file(self.table.storage, base.path, columns)
        except FileNotFoundError as err:
            raise ConflictError(f"{base.path} was cleaned while this write read it: a newer version exists") from err

    def merge(self, base: BaseFile, incoming: pa.Table | None, delete_keys: set[str]) -> _FileWrite:
        """Rewrite one file group: old rows minus replaced/deleted keys, plus incoming."""
        old = self._read(base)
        old_keys = self._row_keys(old)
        replaced = set(delete_keys)
        if incoming is not None:
            replaced.update(incoming.column(KEY).to_pylist())
        keep = pc.invert(pc.is_in(old_keys, value_set=pa.array(sorted(replaced), pa.string())))
        carried = old.filter(keep)
        deletes = len(delete_keys & set(old_keys.to_pylist()))
        write = _FileWrite(base.partition, base.file_id, carried, prev_commit=base.instant, deletes=deletes)
        if incoming is not None and incoming.num_rows:
            is_update = pc.is_in(incoming.column(KEY), value_set=old_keys.combine_chunks())
            updates, inserts = incoming.filter(is_update), incoming.filter(pc.invert(is_update))
            write.rows = pa.concat_tables([carried, updates, inserts], promote_options="permissive")
            write.updates, write.inserts = updates.num_rows, inserts.num_rows
        return write

    def fit(self, write: _FileWrite) -> list[_FileWrite]:
        """A rewritten group over the target size keeps what fits; its last new records start new groups.

        Rows are ordered carried, updated, inserted (see `merge`), so only inserts ever move.
        """
        size = write.rows.nbytes
        if size <= self.options.max_file_size or write.inserts == 0:
            return [write]
        per_row = size / write.rows.num_rows
        keep = max(write.rows.num_rows - write.inserts, int(self.options.max_file_size / per_row))
        spilled = write.rows.num_rows - keep
        if spilled <= 0:
            return [write]
        moved = write.rows.slice(keep)  # new records: null commit times, so they get fresh meta columns
        write.rows, write.inserts = write.rows.slice(0, keep), write.inserts - spilled
        return [write, *self.split_new(write.partition, moved)]

    def _row_keys(self, rows: pa.Table) -> pa.ChunkedArray:
        """Keys of stored rows; files of tables without meta fields hold nulls there."""
        if self.config.populate_meta_fields and KEY in rows.column_names:
            return rows.column(KEY)
        return keys.record_keys(rows, self.config.record_key_fields)

    def _plan(self, operation: str, rows: pa.Table, view: FileSystemView | None) -> tuple[list[_FileWrite], dict]:
        writes: list[_FileWrite] = []
        replaced: dict[str, list[str]] = {}
        for partition, part_rows in split_by(rows, PARTITION):
            if operation in ("insert", "bulk_insert"):
                writes += self.split_new(partition, part_rows)
            elif operation == "insert_overwrite":
                writes += self.split_new(partition, part_rows)
                replaced[partition] = [g.file_id for g in view.file_groups(partition)]
            else:
                writes += self._plan_merge(operation, partition, part_rows, view)
        return writes, replaced

    def _plan_merge(self, operation: str, partition: str, rows: pa.Table, view: FileSystemView) -> list[_FileWrite]:
        located = self._index(view, partition)
        row_keys = rows.column(KEY).to_pylist()
        by_group: dict[str, list[int]] = defaultdict(list)
        new_rows: list[int] = []
        for i, key in enumerate(row_keys):
            base = located.get(key)
            if base is None:
                new_rows.append(i)
            else:
                by_group[base.file_id].append(i)
        bases = {b.file_id: b for b in located.values()}
        writes = []
        for file_id, idx in sorted(by_group.items()):
            chosen = rows.take(pa.array(idx))
            if operation == "delete":
                writes.append(self.merge(bases[file_id], None, set(chosen.column(KEY).to_pylist())))
            else:
                writes.append(self.merge(bases[file_id], chosen, set()))
        if operation == "upsert":
            writes += self.split_new(partition, rows.take(pa.array(new_rows, pa.int64())))
        return writes

    # writing ----------------------------------------------------------------------------
    def _with_meta(self, write: _FileWrite, name: str, instant: str, task: int) -> pa.Table:
        """Fill meta columns of new rows; carried-over rows keep theirs."""
        rows = write.rows
        n = rows.num_rows
        fresh_keys = rows.column(KEY)
        fresh_parts = rows.column(PARTITION)
        commit_time = rows.column("_hoodie_commit_time") if "_hoodie_commit_time" in rows.column_names else None
        if commit_time is None:
            is_new = pa.array([True] * n)
            old_cols = {c: pa.nulls(n, pa.string()) for c in META_COLUMNS}
        else:
            is_new = pc.is_null(commit_time)
            old_cols = {c: rows.column(c) for c in META_COLUMNS}
        seqnos = pa.array([f"{instant}_{task}_{i}" for i in range(n)], pa.string())
        values = {
            "_hoodie_commit_time": pa.array([instant] * n, pa.string()),
            "_hoodie_commit_seqno": seqnos,
            "_hoodie_record_key": fresh_keys,
            "_hoodie_partition_path": fresh_parts,
            "_hoodie_file_name": pa.array([name] * n, pa.string()),
        }
        data_cols = [c for c in rows.column_names if c not in META_COLUMNS and c not in (KEY, PARTITION)]
        data = rows.select(data_cols)
        if not self.config.populate_meta_fields:
            return data
        meta = [pc.if_else(is_new, values[c], old_cols[c]) for c in META_COLUMNS]
        return pa.Table.from_arrays(meta + list(data.columns), names=META_COLUMNS + data_cols)

    def _ensure_partition(self, partition: str, instant: str) -> None:
        path = f"{partition}/{PARTITION_METADATA}" if partition else PARTITION_METADATA
        depth = len(partition.split("/")) if partition else 0
        stamp = datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
        body = f"#partition metadata\n#{stamp}\ncommitTime={instant}\npartitionDepth={depth}\n"
        if not self.table.storage.exists(path):
            self.table.storage.create_if_absent(path, body.encode())

    def write_file(self, txn: InstantSink, write: _FileWrite, task: int, token: str | None = None) -> WriteStat:
        """Marker first, then the parquet file; returns its write stat.

        `token` is the write token in the file name (Spark: partition-stage-attempt),
        so a retried task never overwrites its failed attempt's file.
        """
        name = base_file_name(write.file_id, token or write_token(task), txn.time)
        path = f"{write.partition}/{name}" if write.partition else name
        self._ensure_partition(write.partition, txn.time)
        table = self._with_meta(write, name, txn.time, task)
        txn.create_marker(path, "MERGE" if write.prev_commit != "null" else "CREATE")
        with self.table.storage.open_output(path) as out:
            pq.write_table(table, out, row_group_size=self.options.row_group_size)
        crash_point(WRITE_FILE)
        size = self.table.storage.size(path)
        return WriteStat(
            file_id=write.file_id,
            path=path,
            partition_path=write.partition,
            prev_commit=write.prev_commit,
            num_writes=table.num_rows,
            num_inserts=write.inserts,
            num_update_writes=write.updates,
            num_deletes=write.deletes,
            total_write_bytes=size,
            file_size_in_bytes=size,
        )

    def write(self, data: pa.Table, operation: str, on_begin: Callable[[str], None] | None = None) -> WriteResult:
        """Write `data` as one instant; on any failure the instant is undone.

        `on_begin` hears the instant time as soon as it is inflight (histories, progress).
        """
        operation, action = resolve_operation(operation)
        with Transaction(self.table, action, operation.upper(), self.coordinator, self.lock) as txn:
            if on_begin is not None:
                on_begin(txn.time)
            view, existing = self.view_and_schema(operation, txn)
            rows = self._prepare(data, operation, existing)
            if operation in ("upsert", "delete"):
                rows = self.dedupe(rows)
            writes, replaced = self._plan(operation, rows, view)
            metadata = txn.metadata
            incoming = pa.schema([f for f in rows.schema if f.name not in (KEY, PARTITION)])
            metadata.schema = arrow_to_avro(data_schema(incoming, existing, operation), self.config.name)
            metadata.partition_to_replace_file_ids = replaced if action == REPLACE_COMMIT else None
            for task, write in enumerate(writes):
                metadata.add(self.write_file(txn, write, task))
        return WriteResult(txn.time, operation, metadata, data.num_rows)


def resolve_operation(operation: str) -> tuple[str, str]:
    """The operation's canonical name and the action of its instant; an unknown one is bad input."""
    operation = operation.lower()
    if operation not in OPERATIONS:
        raise BadInputError(f"unknown operation {operation!r} (one of {', '.join(OPERATIONS)})")
    return operation, REPLACE_COMMIT if operation == "insert_overwrite" else COMMIT


def with_keys(data: pa.Table, key_fields: list[str], partition_fields: list[str], hive_style: bool) -> pa.Table:
    """`data` with its record key and partition path columns, as every writer computes them."""
    data = data.append_column(KEY, keys.record_keys(data, key_fields))
    return data.append_column(PARTITION, keys.partition_paths(data, partition_fields, hive_style))


def split_by(rows: pa.Table, column: str) -> Iterator[tuple[str, pa.Table]]:
    """The rows of each value of `column`, values in sorted order."""
    for value in sorted(set(rows.column(column).to_pylist())):
        yield value, rows.filter(pc.equal(rows.column(column), value))


def data_schema(incoming: pa.Schema, existing: pa.Schema | None, operation: str) -> pa.Schema:
    """The table's data schema after this write: existing columns plus new ones.

    Incoming columns were cast to the existing types first, so the permissive
    unification only ever meets equal types or a new column.
    """
    if existing is None:
        return incoming
    if operation == "delete":
        return existing
    return pa.unify_schemas([existing, incoming], promote_options="permissive")


def _cast_to(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Cast incoming columns to the table's types; a column that won't cast is bad input."""
    columns = []
    for name in data.column_names:
        column = data.column(name)
        if name in schema.names and column.type != schema.field(name).type:
            try:
                column = column.cast(schema.field(name).type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise BadInputError(f"column {name!r}: cannot cast {column.type} to {schema.field(name).type}") from err
        columns.append(column)
    return pa.Table.from_arrays(columns, names=data.column_names)
