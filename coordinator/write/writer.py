"""The local writer: one Arrow table in, one Copy-on-Write instant out.

insert and bulk_insert create new file groups sized by a target file size;
upsert and delete rewrite the affected file groups (rows carried over keep all
their meta columns); insert_overwrite replaces every file group of the touched
partitions in a replacecommit. Each step is its own module in `coordinator/write/`;
this one runs them in order inside one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

import pyarrow as pa

from coordinator.config import OPERATIONS, CoordinatorConfig
from coordinator.protocol.transaction import WRITE_FILE, Begun, Transaction, WriteOutcome
from coordinator.write import file_groups, tagging
from coordinator.write.base_reads import BaseFileReads
from coordinator.write.column_names import check_input_columns
from coordinator.write.file_groups import FileWrite
from coordinator.write.meta_columns import with_meta
from coordinator.write.parquet_files import write_parquet
from coordinator.write.pool import IO_THREADS, LOCAL_IO_THREADS, each
from coordinator.write.rows import KEY, PARTITION, dedupe, key_typed, row_keys, split_by, with_keys
from coordinator.write.table_schema import existing_schema, target_schema
from locks.base import LockProvider
from timeline import table_schema
from timeline.crash_points import crash_point
from timeline.errors import BadInputError
from timeline.format import keys
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.file_names import PARTITION_METADATA, BaseFile, base_file_name, write_token
from timeline.format.fs_view import FileSystemView
from timeline.format.instant import COMMIT, REPLACE_COMMIT
from timeline.format.meta_fields import META_COLUMNS
from timeline.format.schema_evolution import conform
from timeline.io.read_once import reuse_reads
from timeline.mdt import indexes as mdt_indexes
from timeline.table import Table

DEFAULT_MAX_FILE_SIZE = 120 * 1024 * 1024
DEFAULT_SMALL_FILE_LIMIT = 100 * 1024 * 1024


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
        self.reads = BaseFileReads(table, self.config)  # base files one write reads: its index and its merge
        self._ensured: set[str] = set()  # partitions this write knows to have their metadata file

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
        return existing_schema(self.table, view)

    def view_and_schema(self, operation: str, begun: Begun) -> tuple[FileSystemView | None, pa.Schema | None]:
        """The view to plan against (inserts need none) and the table's schema before this write."""
        known, existing = table_schema.recorded(self.table, begun.timeline)
        if operation in ("insert", "bulk_insert") and known:
            return None, existing
        view = self.table.view()
        return view, existing if known else self.existing_schema(view)

    def dedupe(self, rows: pa.Table, by: list[str]) -> pa.Table:
        """Keep one row per value of the `by` columns: the largest precombine value, else the last row."""
        return dedupe(rows, by, self.config.precombine_field)

    def record_identity(self) -> list[str]:
        """What makes two records one: the key and partition path, or the key alone under a global index."""
        return [KEY] if self.coordinator.global_index else [KEY, PARTITION]

    # planning ------------------------------------------------------------------------
    def split_new(self, partition: str, rows: pa.Table) -> list[FileWrite]:
        """New file groups, as few as the target file size allows, evenly filled."""
        return file_groups.split_new(partition, rows, self.options.max_file_size)

    def tag(self, operation: str, rows: pa.Table, view: FileSystemView) -> tuple[dict[str, BaseFile], pa.Table]:
        """Every record with the file group it goes to and the copies it deletes (`tagging.tag`)."""
        return tagging.tag(
            operation, rows, view, self.reads, self.coordinator, self.options.small_file_limit, self.io_threads
        )

    def plan_tagged(self, tagged: pa.Table, bases: dict[str, BaseFile], schema: pa.Schema | None) -> list[FileWrite]:
        """The files of tagged records: NEW ones start file groups, the rest rewrite their target group."""
        max_file_size = self.options.max_file_size
        return file_groups.plan_tagged(tagged, bases, schema, self.reads, self.config, max_file_size, self.io_threads)

    def _plan(
        self, operation: str, rows: pa.Table, view: FileSystemView | None, schema: pa.Schema | None
    ) -> tuple[list[FileWrite], dict]:
        if operation in ("upsert", "delete"):
            bases, tagged = self.tag(operation, rows, view)
            return self.plan_tagged(tagged, bases, schema), {}
        writes: list[FileWrite] = []
        replaced: dict[str, list[str]] = {}
        for partition, part_rows in split_by(rows, PARTITION):
            writes += self.split_new(partition, part_rows)
            if operation == "insert_overwrite":
                replaced[partition] = [g.file_id for g in view.file_groups(partition)]
        return writes, replaced

    # writing ----------------------------------------------------------------------------
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

    def write_file(self, txn: InstantSink, write: FileWrite, task: int, token: str | None = None) -> WriteStat:
        """Marker first, then the parquet file; returns its write stat.

        `token` is the write token in the file name (Spark: partition-stage-attempt),
        so a retried task never overwrites its failed attempt's file.
        """
        name = base_file_name(write.file_id, token or write_token(task), txn.time)
        path = f"{write.partition}/{name}" if write.partition else name
        self.ensure_partitions([write.partition], txn.time)
        table = with_meta(write.rows, name, txn.time, task, self.config.populate_meta_fields)
        txn.create_marker(path, "MERGE" if write.prev_commit != "null" else "CREATE")
        with self.table.storage.open_output(path) as out:
            footer = write_parquet(table, out, self.options.row_group_size)
            size = out.tell()  # every byte written: the file's size, without asking storage
        self.table.storage.sync_file(path)  # on the writing thread: Spark executors flush in parallel
        crash_point(WRITE_FILE)
        column_stats, bloom = mdt_indexes.records_for_file(
            self.table.config, write.partition, name, table, row_keys(table, self.config), footer
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
            self.reads.clear()
            self._ensured.clear()

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
                view, existing = self.view_and_schema(operation, txn.begun)
            # Partitions the view listed (none for an insert: re-listing a known partition is a harmless union);
            # their metadata files were created before any file in them.
            known = frozenset(view.partitions()) if view is not None else frozenset()
            self._ensured = set(known)
            incoming = table_schema.without_meta(data.schema)
            schema = target_schema(incoming, existing, operation)
            metadata = CommitMetadata(operation_type=operation.upper(), schema=arrow_to_avro(schema, self.config.name))
            rows = self._prepare(data, operation, schema)
            if operation in ("upsert", "delete"):
                rows = self.dedupe(rows, self.record_identity())
            writes, replaced = self._plan(operation, rows, view, schema)
            metadata.partition_to_replace_file_ids = replaced if action == REPLACE_COMMIT else None
            self.ensure_partitions([w.partition for w in writes], txn.time)  # one flush of their parents
            files = range(len(writes))
            for stat in each(lambda task: self.write_file(txn, writes[task], task), files, self.io_threads):
                metadata.add(stat)
            txn.commit(WriteOutcome(metadata, known, marked_here=True))  # every file went through create_marker
        return WriteResult(txn.time, operation, metadata, data.num_rows)


def resolve_operation(operation: str) -> tuple[str, str]:
    """The operation's canonical name and the action of its instant; an unknown one is bad input."""
    operation = operation.lower()
    if operation not in OPERATIONS:
        raise BadInputError(f"unknown operation {operation!r} (one of {', '.join(OPERATIONS)})")
    return operation, REPLACE_COMMIT if operation == "insert_overwrite" else COMMIT


def partition_metadata_path(partition: str) -> str:
    return f"{partition}/{PARTITION_METADATA}" if partition else PARTITION_METADATA
