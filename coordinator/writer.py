"""The local writer: one Arrow table in, one Copy-on-Write instant out.

insert and bulk_insert create new file groups sized by a target file size;
upsert and delete rewrite the affected file groups (rows carried over keep all
their meta columns); insert_overwrite replaces every file group of the touched
partitions in a replacecommit.
"""

from __future__ import annotations

import math
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import reduce
from typing import Protocol, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from coordinator.column_names import check_input_columns, unused_name
from coordinator.config import OPERATIONS, CoordinatorConfig
from coordinator.transaction import WRITE_FILE, Transaction
from locks.base import LockProvider
from timeline import crash_points, keys
from timeline.active_timeline import ActiveTimeline
from timeline.avro_schema import arrow_to_avro, avro_to_arrow, records_zones
from timeline.commit_metadata import CommitMetadata, WriteStat
from timeline.crash_points import crash_point
from timeline.errors import BadInputError, ConflictError
from timeline.file_names import PARTITION_METADATA, BaseFile, base_file_name, new_file_id, write_token
from timeline.fs_view import FileSystemView
from timeline.instant import COMMIT, REPLACE_COMMIT
from timeline.mdt import indexes as mdt_indexes
from timeline.mdt.bloom_index import bloom_candidates
from timeline.metrics import METRICS, TAGGING_FILES_SKIPPED
from timeline.read_once import reuse_reads
from timeline.reader import COMMIT_TIME, read_base_file
from timeline.schema_evolution import canonical_schema, conform, evolve, with_zones_of
from timeline.table import META_COLUMNS, Table

DEFAULT_MAX_FILE_SIZE = 120 * 1024 * 1024
DEFAULT_SMALL_FILE_LIMIT = 100 * 1024 * 1024
KEY = "_hoodie_record_key"
GENERATED = (COMMIT_TIME, "_hoodie_commit_seqno", "_hoodie_file_name")  # meta columns a write makes, not derives
PARTITION = "_hoodie_partition_path"
TARGET = "_tandem_target"  # the file id a tagged record goes to; NEW for records that start new file groups
DELETE = "_tandem_delete"  # a tagged row that deletes its key from TARGET rather than writing it there
NEW = ""
# The files of one write are read, merged and written this many at a time: parquet decoding and encoding
# and fsync release the GIL, so an upsert touching many file groups is not paced by one file after another.
# On object storage each file is a request whose latency the threads overlap; locally the Python around
# each file holds the GIL, and past two threads a core they only contend (an upsert rewriting 96 files on
# 2 cores: 265 ms on 8 threads, 230 ms on 4).
IO_THREADS = 8
LOCAL_IO_THREADS = min(IO_THREADS, 2 * (os.cpu_count() or 1))
# Under the bloom index (its candidates mostly hold a key) the index reads a small candidate file whole, and
# the merge takes those rows instead of reading it again; at most KEPT_ROWS_BYTES of decoded rows per write.
WHOLE_READ_BYTES = 8 * 1024 * 1024
KEPT_ROWS_BYTES = 256 * 1024 * 1024
# `split_by` reorders rows by one take up to this size: a take joins a string column's chunks into one array,
# whose 32-bit offsets overflow past 2 GiB; larger inputs are filtered per value, chunk by chunk.
TAKE_BYTES = 1024 * 1024 * 1024
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class WriteOptions:
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    row_group_size: int = 128 * 1024
    # Hudi's hoodie.parquet.small.file.limit: an upsert's new records top up a file group below it
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
        self.io_threads = IO_THREADS if table.storage.is_s3 else LOCAL_IO_THREADS
        self._schema_cache: tuple[str, pa.Schema] | None = None  # (instant time, its data schema)
        self._fetched: dict[str, bytes] = {}  # base files one write read whole from S3, read again by its merge
        self._ensured: set[str] = set()  # partitions this write knows to have their metadata file
        self._kept: dict[str, pa.Table] = {}  # base files the index read whole, for their merge
        self._kept_lock = threading.Lock()
        self._kept_bytes = 0

    # preparation -------------------------------------------------------------------
    def _prepare(self, data: pa.Table, operation: str, schema: pa.Schema | None) -> pa.Table:
        """Drop incoming meta columns, put the rest in the table's schema, add key and partition."""
        data = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
        self.require_key_columns(data.column_names)
        config = self.config
        if schema is not None and operation != "delete":
            data = conform(data, schema)
        elif schema is not None:
            data = key_typed(data, schema, config.record_key_fields, config.partition_fields)
        return with_keys(data, config.record_key_fields, config.partition_fields, config.hive_style)

    def require_key_columns(self, columns: list[str]) -> None:
        """Key and partition fields must be in the input itself: nulls filled in for them would be no key."""
        for name in [*self.config.record_key_fields, *self.config.partition_fields]:
            if name not in columns:
                raise BadInputError(f"input has no column {name!r} (columns: {', '.join(columns)})")

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

    def _schema_from_timeline(self, timeline: ActiveTimeline) -> tuple[bool, pa.Schema | None]:
        """The table schema as the newest completed write left it: no listing, no MDT read.

        Its commit's `extraMetadata.schema` (Hudi's and Tandem's writers record it);
        for a commit without one, the schema of a file it wrote. (False, None) when
        the active timeline cannot tell (no write on it but an archive exists).
        """
        for instant in reversed(timeline.completed_writes()):
            if self._schema_cache is not None and self._schema_cache[0] == instant.time:
                return True, self._schema_cache[1]
            metadata = timeline.commit_metadata(instant)
            schema = self._recorded_schema(metadata, instant.file_name)
            if schema is None:
                schema = self._written_schema(metadata)
            if schema is not None:
                self._schema_cache = (instant.time, schema)  # a completed instant's schema never changes
                return True, schema
        return not timeline.archived_files, None

    def _written_schema(self, metadata: CommitMetadata) -> pa.Schema | None:
        for stat in metadata.write_stats():
            try:
                return self._schema_of(stat.path)
            except FileNotFoundError:
                continue
        return None

    def _recorded_schema(self, metadata: CommitMetadata, source: str) -> pa.Schema | None:
        """The commit's `extraMetadata.schema`; timestamps zoned as its files store them when it does not say."""
        if not metadata.schema:
            return None
        schema = avro_to_arrow(metadata.schema, f"the schema in {source}")
        schema = pa.schema([f for f in schema if f.name not in META_COLUMNS])
        if records_zones(metadata.schema) or not any(pa.types.is_timestamp(f.type) for f in schema):
            return schema
        written = self._written_schema(metadata)
        return schema if written is None else with_zones_of(schema, written)

    def view_and_schema(self, operation: str, txn: Transaction) -> tuple[FileSystemView | None, pa.Schema | None]:
        """The view to plan against (inserts need none) and the table's schema before this write."""
        known, existing = self._schema_from_timeline(txn.begin_timeline)
        if operation in ("insert", "bulk_insert") and known:
            txn.known_partitions = set()  # re-listing a known partition is a harmless union
            return None, existing
        view = self.table.view()
        txn.known_partitions = set(view.partitions())
        return view, existing if known else self.existing_schema(view)

    def dedupe(self, rows: pa.Table, by: list[str]) -> pa.Table:
        """Keep one row per value of the `by` columns: the largest precombine value, else the last row."""
        order = unused_name(rows.schema, "__order")  # any name may be an input column's
        rows = rows.append_column(order, pa.array(range(rows.num_rows)))
        sort = [(c, "ascending") for c in by]
        pre = self.config.precombine_field
        if pre and pre in rows.column_names:
            sort.append((pre, "descending"))
        sort.append((order, "descending"))
        rows = rows.sort_by(sort)
        if rows.num_rows:
            first = reduce(pc.or_, [changes(rows.column(c)) for c in by])
            mask = pa.concat_arrays([pa.array([True])] + list(first.chunks))
            rows = rows.filter(mask)
        return rows.sort_by(order).drop_columns([order])

    def record_identity(self) -> list[str]:
        """What makes two records one: the key and partition path, or the key alone under a global index."""
        return [KEY] if self.coordinator.global_index else [KEY, PARTITION]

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

    def _index(self, files: list[BaseFile]) -> dict[str, list[BaseFile]]:
        """Simple index: key -> the latest base files holding it, in `files`."""
        located: dict[str, list[BaseFile]] = defaultdict(list)
        for base, held in zip(files, each(self._keys_of, files, self.io_threads), strict=True):
            for key in held:
                located[key].append(base)
        return located

    def _may_hold(self, view: FileSystemView, files: list[BaseFile], rows: pa.Table) -> list[BaseFile]:
        """The files the bloom index cannot rule out for the incoming keys (all of them without the index)."""
        if not self.coordinator.bloom_index or not files:
            return files
        partitions = None if self.coordinator.global_index else rows.column(PARTITION)
        candidates = bloom_candidates(self.table.config, view, files, rows.column(KEY), partitions)
        METRICS.incr(TAGGING_FILES_SKIPPED, len(files) - len(candidates))
        return candidates

    def _keys_of(self, base: BaseFile) -> list[str]:
        """The keys a base file holds; a small bloom candidate is read whole and kept for its merge (one read,
        not two), while the write's budget for kept rows lasts."""
        whole = self.coordinator.bloom_index and 0 < base.size <= WHOLE_READ_BYTES
        if whole and self._kept_bytes < KEPT_ROWS_BYTES:
            rows = self._read(base, fetch=False)  # the rows are kept: its bytes need not be
            with self._kept_lock:
                if self._kept_bytes + rows.nbytes <= KEPT_ROWS_BYTES:
                    self._kept[base.path] = rows
                    self._kept_bytes += rows.nbytes
            return self._row_keys(rows).to_pylist()
        columns = [KEY] if self.config.populate_meta_fields else self.config.record_key_fields
        return self._row_keys(self._read(base, columns)).to_pylist()

    def _read(self, base: BaseFile, columns: list[str] | None = None, fetch: bool = True) -> pa.Table:
        """A base file this write builds on; gone means a concurrent writer and clean moved past it."""
        fetched = self._fetched if fetch else None
        try:
            return read_base_file(self.table.storage, base.path, columns, base.size or None, fetched)
        except FileNotFoundError as err:
            raise ConflictError(f"{base.path} was cleaned while this write read it: a newer version exists") from err

    def merge(
        self, base: BaseFile, incoming: pa.Table | None, delete_keys: set[str], schema: pa.Schema | None = None
    ) -> _FileWrite:
        """Rewrite one file group in `schema`: old rows minus replaced/deleted keys, plus incoming."""
        old = self._kept.pop(base.path, None)
        if old is None:
            old = self._read(base)
        if schema is not None:
            old = conform(old, schema, exact=False)  # stored rows: a widened column rounds, as readers read it
        old_keys = self._row_keys(old)
        replaced = set(delete_keys)
        if incoming is not None:
            replaced.update(incoming.column(KEY).to_pylist())
        carried = old.filter(pc.invert(pc.is_in(old_keys, value_set=pa.array(sorted(replaced), pa.string()))))
        deletes = len(delete_keys & set(old_keys.to_pylist())) if delete_keys else 0
        write = _FileWrite(base.partition, base.file_id, carried, prev_commit=base.instant, deletes=deletes)
        if incoming is not None and incoming.num_rows:
            is_update = pc.is_in(incoming.column(KEY), value_set=old_keys)
            if pc.all(is_update).as_py():  # the usual upsert: every record here updates a stored one
                updates, inserts = incoming, incoming.slice(0, 0)
            else:
                updates, inserts = incoming.filter(is_update), incoming.filter(pc.invert(is_update))
            write.rows = pa.concat_tables([carried, updates, inserts], promote_options="permissive")
            write.updates, write.inserts = updates.num_rows, inserts.num_rows
        return write

    def fit(self, write: _FileWrite) -> list[_FileWrite]:
        """A rewritten group over the target size keeps what fits; its last new records start new groups.

        Rows are ordered carried, updated, inserted (see `merge`), so only inserts ever move.
        """
        if write.inserts == 0:
            return [write]
        size = write.rows.nbytes
        if size <= self.options.max_file_size:
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

    def _plan(
        self, operation: str, rows: pa.Table, view: FileSystemView | None, schema: pa.Schema | None
    ) -> tuple[list[_FileWrite], dict]:
        if operation in ("upsert", "delete"):
            bases, tagged = self.tag(operation, rows, view)
            return self.plan_tagged(tagged, bases, schema), {}
        writes: list[_FileWrite] = []
        replaced: dict[str, list[str]] = {}
        for partition, part_rows in split_by(rows, PARTITION):
            writes += self.split_new(partition, part_rows)
            if operation == "insert_overwrite":
                replaced[partition] = [g.file_id for g in view.file_groups(partition)]
        return writes, replaced

    def tag(self, operation: str, rows: pa.Table, view: FileSystemView) -> tuple[dict[str, BaseFile], pa.Table]:
        """The simple index: every record with the file group it goes to (TARGET) and the copies it deletes.

        The index reads the keys of the latest base files of the partitions the
        records fall in, or of every partition under a global index. Returns the
        base files by file id, and `rows` tagged: one row per file group a record
        writes to (NEW when it starts one) and one DELETE row per copy it removes.
        """
        partitions = set(rows.column(PARTITION).to_pylist())
        glob = self.coordinator.global_index
        files = [f for f in view.latest_base_files() if glob or f.partition in partitions]
        located = self._index(self._may_hold(view, files, rows))
        move = self.coordinator.update_partition_path
        small = self.small_groups(files)
        tags: list[tuple[int, str, str, bool]] = []  # (row, target file id, partition path, deletes)
        records = zip(rows.column(KEY).to_pylist(), rows.column(PARTITION).to_pylist(), strict=True)
        for i, (key, partition) in enumerate(records):
            found = sorted(located.get(key, []), key=lambda b: (b.partition, b.file_id))
            updates, deletes, partition = route(operation, found, partition, glob, move)
            if not updates and operation != "delete":
                tags.append((i, small.get(partition, NEW), partition, False))
            tags += [(i, b.file_id, partition, False) for b in updates]
            tags += [(i, b.file_id, b.partition, True) for b in deletes]
        take, targets, paths, deleted = (list(c) for c in zip(*tags, strict=True)) if tags else ([], [], [], [])
        tagged = rows.take(pa.array(take, pa.int64()))
        tagged = tagged.set_column(tagged.schema.get_field_index(PARTITION), PARTITION, pa.array(paths, pa.string()))
        tagged = tagged.append_column(TARGET, pa.array(targets, pa.string()))
        return {f.file_id: f for f in files}, tagged.append_column(DELETE, pa.array(deleted, pa.bool_()))

    def small_groups(self, files: list[BaseFile]) -> dict[str, str]:
        """Per partition, its smallest file group below the small-file limit: where an upsert's new keys go,
        so that file groups (and what the index must open) stay few however many upserts a table takes."""
        smallest: dict[str, BaseFile] = {}
        for f in files:
            if f.size < self.options.small_file_limit and (
                f.partition not in smallest
                or (f.size, f.file_id) < (smallest[f.partition].size, smallest[f.partition].file_id)
            ):
                smallest[f.partition] = f
        return {p: f.file_id for p, f in smallest.items()}

    def plan_tagged(self, tagged: pa.Table, bases: dict[str, BaseFile], schema: pa.Schema | None) -> list[_FileWrite]:
        """The files of tagged records: NEW ones start file groups, the rest rewrite their target group."""

        def plan_group(target_group: tuple[str, pa.Table]) -> list[_FileWrite]:
            target, group = target_group
            gone = group.column(DELETE)
            delete_keys = set(group.filter(gone).column(KEY).to_pylist())
            records = group.filter(pc.invert(gone)).drop_columns([TARGET, DELETE])
            if target == NEW:
                return [w for p, part_rows in split_by(records, PARTITION) for w in self.split_new(p, part_rows)]
            return self.fit(self.merge(bases[target], records if records.num_rows else None, delete_keys, schema))

        groups = list(split_by(tagged, TARGET))
        return [write for planned in each(plan_group, groups, self.io_threads) for write in planned]

    # writing ----------------------------------------------------------------------------
    def _with_meta(self, write: _FileWrite, name: str, instant: str, task: int) -> pa.Table:
        """Fill meta columns of new rows (null commit time); carried-over rows keep theirs.

        A merge puts its carried rows first, so the new rows are usually a suffix: their
        meta values are built for that suffix alone and appended to the carried rows'
        columns, rather than built for every row and chosen row by row.
        """
        rows = write.rows
        n = rows.num_rows
        data_cols = [c for c in rows.column_names if c not in META_COLUMNS and c not in (KEY, PARTITION)]
        data = rows.select(data_cols)
        if not self.config.populate_meta_fields:
            return data
        commit_time = rows.column(COMMIT_TIME) if COMMIT_TIME in rows.column_names else None
        carried = 0 if commit_time is None else n - commit_time.null_count
        suffix = carried == 0 or (  # the new rows follow the carried ones, whose generated columns are strings
            commit_time.slice(0, carried).null_count == 0 and all(rows.column(c).type == pa.string() for c in GENERATED)
        )
        first = carried if suffix else 0
        fresh = {
            COMMIT_TIME: pa.array([instant] * (n - first), pa.string()),
            "_hoodie_commit_seqno": pa.array([f"{instant}_{task}_{i}" for i in range(first, n)], pa.string()),
            KEY: rows.column(KEY).slice(first),
            PARTITION: rows.column(PARTITION).slice(first),
            "_hoodie_file_name": pa.array([name] * (n - first), pa.string()),
        }
        if not carried:
            meta = [fresh[c] for c in META_COLUMNS]
        elif suffix:
            meta = [pa.chunked_array(rows.column(c).slice(0, carried).chunks + _chunks(fresh[c])) for c in META_COLUMNS]
        else:
            is_new = pc.is_null(commit_time)  # row by row; if_else also unifies string with large_string
            meta = [pc.if_else(is_new, fresh[c], rows.column(c)) for c in META_COLUMNS]
        return pa.Table.from_arrays(meta + list(data.columns), names=META_COLUMNS + data_cols)

    def ensure_partitions(self, partitions: Iterable[str], instant: str) -> None:
        """Create the partitions that have no metadata file yet, their folders durable first.

        A writer that finds the metadata file trusts the folder above it, so the
        folder's entry is flushed before that file exists.
        """
        storage = self.table.storage
        asked = set(partitions) - self._ensured
        self._ensured |= asked
        new = sorted(p for p in asked if not storage.exists(partition_metadata_path(p)))
        if not new:
            return
        storage.create_dirs(new)
        stamp = datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
        for partition in new:
            depth = len(partition.split("/")) if partition else 0
            body = f"#partition metadata\n#{stamp}\ncommitTime={instant}\npartitionDepth={depth}\n"
            storage.create_if_absent(partition_metadata_path(partition), body.encode())

    def write_file(self, txn: InstantSink, write: _FileWrite, task: int, token: str | None = None) -> WriteStat:
        """Marker first, then the parquet file; returns its write stat.

        `token` is the write token in the file name (Spark: partition-stage-attempt),
        so a retried task never overwrites its failed attempt's file.
        """
        name = base_file_name(write.file_id, token or write_token(task), txn.time)
        path = f"{write.partition}/{name}" if write.partition else name
        self.ensure_partitions([write.partition], txn.time)
        table = self._with_meta(write, name, txn.time, task)
        txn.create_marker(path, "MERGE" if write.prev_commit != "null" else "CREATE")
        with self.table.storage.open_output(path) as out:
            footer = write_parquet(table, out, self.options.row_group_size)
            size = out.tell()  # every byte written: the file's size, without asking storage
        self.table.storage.sync_file(path)  # on the writing thread: Spark executors flush in parallel
        crash_point(WRITE_FILE)
        column_stats, bloom = mdt_indexes.records_for_file(
            self.table.config, write.partition, name, table, self._row_keys(table), footer
        )
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
            column_stats=column_stats,
            bloom_filter=bloom,
        )

    def write(self, data: pa.Table, operation: str, on_begin: Callable[[str], None] | None = None) -> WriteResult:
        """Write `data` as one instant; on any failure the instant is undone.

        `on_begin` hears the instant time as soon as it is inflight (histories, progress).
        """
        operation, action = resolve_operation(operation)
        check_input_columns(data.schema)  # bad input before begin
        keys.partition_paths(data, self.config.partition_fields, self.config.hive_style)
        try:
            return self._write(data, operation, action, on_begin)
        finally:
            self._fetched.clear()
            self._ensured.clear()
            self._kept.clear()
            self._kept_bytes = 0

    def _write(
        self, data: pa.Table, operation: str, action: str, on_begin: Callable[[str], None] | None
    ) -> WriteResult:
        with ExitStack() as stack:
            with reuse_reads():  # the view reuses the MDT reads of the begin (nothing wrote there since)
                txn = stack.enter_context(
                    Transaction(self.table, action, operation.upper(), self.coordinator, self.lock)
                )
                if on_begin is not None:
                    on_begin(txn.time)
                view, existing = self.view_and_schema(operation, txn)
            self._ensured = set(txn.known_partitions)  # listed by the view: created before any file in them
            txn.markers_only_here = True  # every file of this write goes through txn.create_marker
            incoming = pa.schema([f for f in data.schema if f.name not in META_COLUMNS])
            schema = target_schema(incoming, existing, operation)
            txn.metadata.schema = arrow_to_avro(schema, self.config.name)
            rows = self._prepare(data, operation, schema)
            if operation in ("upsert", "delete"):
                rows = self.dedupe(rows, self.record_identity())
            writes, replaced = self._plan(operation, rows, view, schema)
            metadata = txn.metadata
            metadata.partition_to_replace_file_ids = replaced if action == REPLACE_COMMIT else None
            self.ensure_partitions([w.partition for w in writes], txn.time)  # one flush of their parents
            files = range(len(writes))
            for stat in each(lambda task: self.write_file(txn, writes[task], task), files, self.io_threads):
                metadata.add(stat)
        return WriteResult(txn.time, operation, metadata, data.num_rows)


def each(work: Callable[[T], R], items: list[T] | range, threads: int = IO_THREADS) -> list[R]:
    """`work` over `items`, results in order; on a pool of `threads` threads when there is more than one.

    Every item is finished (or failed) before this returns or raises, so an undo
    after a failure sees every marker and file the write made; an interrupt of the
    caller (Ctrl-C) cancels the items not started and waits for the running ones.
    A simulated crash in any item wins over an error in another (a killed process
    is not undone). Under armed chaos the items run one after another
    (`crash_points.in_order`). `work` must not call `each` itself: the pool is
    shared, and a task waiting on the pool could wait forever.
    """
    if len(items) < 2 or crash_points.in_order():
        return [work(item) for item in items]
    batch = _Batch()
    futures = []
    try:
        for item in items:
            futures.append(_io_pool(threads).submit(batch.run, work, item))
        wait(futures)
    except BaseException:
        batch.stop()
        raise
    errors = [future.exception() for future in futures]
    crash = next((e for e in errors if e is not None and not isinstance(e, Exception)), None)
    if crash is not None:
        raise crash
    return [future.result() for future in futures]


class _Batch:
    """The items of one `each`: once stopped, an item not yet started never starts, and `stop` returns
    only when none is running (an interrupt can land between a submit and its bookkeeping)."""

    def __init__(self) -> None:
        self.stopped = False
        self.running = 0
        self.changed = threading.Condition()

    def run(self, work: Callable[[T], R], item: T) -> R:
        with self.changed:
            if self.stopped:
                raise CancelledError
            self.running += 1
        try:
            return work(item)
        finally:
            with self.changed:
                self.running -= 1
                self.changed.notify_all()

    def stop(self) -> None:
        """Stop the batch and wait for its running items, whatever interrupts arrive meanwhile."""
        with self.changed:
            self.stopped = True
            while self.running:
                try:
                    self.changed.wait()
                except BaseException:
                    continue


_pools: dict[int, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()


def _io_pool(threads: int = IO_THREADS) -> ThreadPoolExecutor:
    """One pool per width per process: starting threads per write costs about a millisecond each."""
    with _pool_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(threads, thread_name_prefix="tandem-io")
        return pool


def _forget_pool() -> None:
    """A forked child has none of its parent's threads: it starts its own pools."""
    global _pools, _pool_lock
    _pools, _pool_lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def resolve_operation(operation: str) -> tuple[str, str]:
    """The operation's canonical name and the action of its instant; an unknown one is bad input."""
    operation = operation.lower()
    if operation not in OPERATIONS:
        raise BadInputError(f"unknown operation {operation!r} (one of {', '.join(OPERATIONS)})")
    return operation, REPLACE_COMMIT if operation == "insert_overwrite" else COMMIT


def target_schema(incoming: pa.Schema, existing: pa.Schema | None, operation: str) -> pa.Schema:
    """The table's data schema after this write (schema evolution); a delete leaves it as it was."""
    if operation == "delete":
        return existing if existing is not None else canonical_schema(incoming)
    return evolve(existing, incoming)


def route(
    operation: str, found: list[BaseFile], partition: str, global_index: bool, update_partition_path: bool
) -> tuple[list[BaseFile], list[BaseFile], str]:
    """Where one record goes, given the latest base files holding its key (sorted by partition, file id).

    Returns the files it updates, the files it is deleted from, and its partition
    path. Under the simple index a record is (key, partition): only files of its
    own partition count. Under the global index a key is one record wherever it
    is: a delete removes every copy; an upsert into a new partition moves the
    record (deleted from the old one) when `update_partition_path`, else updates
    it where it is (the first partition holding it), keeping that partition path.
    """
    here = [b for b in found if b.partition == partition]
    elsewhere = [b for b in found if b.partition != partition] if global_index else []
    if operation == "delete":
        return [], here + elsewhere, partition
    if elsewhere and not here and not update_partition_path:
        stay = elsewhere[0].partition
        return [b for b in elsewhere if b.partition == stay], [], stay
    return here, elsewhere, partition


def with_keys(data: pa.Table, key_fields: list[str], partition_fields: list[str], hive_style: bool) -> pa.Table:
    """`data` with its record key and partition path columns, as every writer computes them."""
    data = data.append_column(KEY, keys.record_keys(data, key_fields))
    return data.append_column(PARTITION, keys.partition_paths(data, partition_fields, hive_style))


def key_typed(data: pa.Table, schema: pa.Schema, key_fields: list[str], partition_fields: list[str]) -> pa.Table:
    """`data` with its key and partition fields in the table's types (a delete's other columns may be anything),
    so their keys read as the stored records' do."""
    typed = [schema.field(name) for name in dict.fromkeys([*key_fields, *partition_fields]) if name in schema.names]
    return conform(data, pa.schema(typed))


def _chunks(column: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


def some_chunk(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """`column` with at least one chunk: a kernel or filter over no rows returns a chunked array of none,
    and `indices_nonzero` over one segfaults from pyarrow 14 to 25 (26 fixed it)."""
    return column if column.num_chunks else pa.chunked_array([pa.array([], column.type)], column.type)


def changes(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """For each row after the first, whether its value differs from the row before: the starts of the runs
    of a sorted column (one row has none, as one empty chunk)."""
    n = len(values)
    return some_chunk(pc.not_equal(values.slice(1), values.slice(0, max(n - 1, 0))))


def split_by(rows: pa.Table, column: str) -> Iterator[tuple[str, pa.Table]]:
    """The rows of each value of `column` (never null), values in sorted order, rows in their order.

    One stable sort, then a slice per run of equal values: an upsert splits by the file group
    each record goes to, so a filter of every row per value would cost rows x groups.
    """
    n = rows.num_rows
    if n == 0:
        return
    if rows.nbytes > TAKE_BYTES:
        for value in sorted(set(rows.column(column).to_pylist())):
            yield value, rows.filter(pc.equal(rows.column(column), value))
        return
    ordered = rows.take(pc.sort_indices(rows.column(column)))  # stable: ties keep their order
    values = ordered.column(column)
    ends = pc.indices_nonzero(changes(values)).to_pylist()
    for start, end in zip([0, *(e + 1 for e in ends)], [*(e + 1 for e in ends), n], strict=True):
        yield values[start].as_py(), ordered.slice(start, end - start)


def partition_metadata_path(partition: str) -> str:
    return f"{partition}/{PARTITION_METADATA}" if partition else PARTITION_METADATA


def write_parquet(table: pa.Table, out: pa.NativeFile, row_group_size: int) -> pq.FileMetaData:
    """The one place Tandem writes a data file.

    Float and double columns (nested ones too) get neither min/max statistics nor
    dictionary pages. pyarrow's statistics leave NaN out and tell -0.0 from 0.0,
    and a dictionary holds -0.0 and 0.0 as different values, so a reader that
    skips row groups by them (Spark's pushdown: `f > 5` drops a NaN, `f = 0`
    drops a -0.0) would lose rows SQL says match.
    """
    exact = [path for path, dtype in leaf_columns(table.schema) if not pa.types.is_floating(dtype)]
    with pq.ParquetWriter(out, table.schema, write_statistics=exact, use_dictionary=exact) as writer:
        writer.write_table(table, row_group_size=row_group_size)
    return writer.writer.metadata


def leaf_columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """(parquet column path, type) of every leaf, named as pyarrow writes them (`s.x`, `l.list.element`)."""
    leaves = []
    for field in schema:
        for path, dtype in _leaves(field.type):
            leaves.append((".".join([field.name, *path]), dtype))
    return leaves


def _leaves(dtype: pa.DataType) -> list[tuple[list[str], pa.DataType]]:
    if pa.types.is_struct(dtype):
        return [([f.name, *path], leaf) for f in dtype for path, leaf in _leaves(f.type)]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return [(["list", "element", *path], leaf) for path, leaf in _leaves(dtype.value_type)]
    if pa.types.is_map(dtype):
        keys_ = [(["key_value", "key", *path], leaf) for path, leaf in _leaves(dtype.key_type)]
        return keys_ + [(["key_value", "value", *path], leaf) for path, leaf in _leaves(dtype.item_type)]
    return [([], dtype)]
