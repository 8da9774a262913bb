"""The local writer: one Arrow table in, one instant out.

insert and bulk_insert create new file groups sized by a target file size (an
insert first tops up each partition's smallest file group below the small-file
limit, as Hudi's does); upsert and delete rewrite the affected file groups (rows carried over keep all
their meta columns), or on a merge-on-read table write each group's updates and
deletes as a new log file of its slice (a deltacommit; new records still go to
base files); insert_overwrite replaces every file group of the touched
partitions in a replacecommit. Each step is its own module in `coordinator/write/`;
this one runs them in order inside one transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable
from collections.abc import Set as AbstractSet
from contextlib import ExitStack, closing
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from coordinator.config import OPERATIONS, CoordinatorConfig
from coordinator.protocol.transaction import Begun, Transaction, WriteOutcome
from coordinator.write import file_groups, log_slices, tagging
from coordinator.write.base_reads import BaseFileReads
from coordinator.write.column_names import check_input_columns
from coordinator.write.file_groups import FileWrite
from coordinator.write.log_files import write_log
from coordinator.write.new_files import BaseFileWriter, FileCounts, InsertFiles, InstantSink
from coordinator.write.pool import IO_THREADS, LOCAL_IO_THREADS, each
from coordinator.write.prefetch import prefetched
from coordinator.write.rows import KEY, PARTITION, dedupe, key_typed, split_by, with_keys
from coordinator.write.table_schema import existing_schema, target_schema
from coordinator.write.tagging import NEW, TARGET
from locks.base import LockProvider
from timeline import table_schema
from timeline.errors import BadInputError
from timeline.format import keys
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.file_names import PARTITION_METADATA, BaseFile, partition_metadata
from timeline.format.fs_view import FileSystemView
from timeline.format.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT
from timeline.format.meta_fields import META_COLUMNS
from timeline.format.schema_evolution import conform
from timeline.io.read_once import reuse_reads
from timeline.io.spill import SpillFile
from timeline.table import Table

DEFAULT_MAX_FILE_SIZE = 120 * 1024 * 1024
STREAMED = ("insert", "bulk_insert")  # operations that stream their input into new file groups
INPUT_BATCH_ROWS = 128 * 1024  # rows of an in-memory input taken at a time by a streamed write
DEFAULT_SMALL_FILE_LIMIT = 100 * 1024 * 1024
FILE_SIZING = {"hoodie.parquet.max.file.size": "max_file_size", "hoodie.parquet.small.file.limit": "small_file_limit"}


@dataclass
class WriteOptions:
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    row_group_size: int = 128 * 1024
    # Hudi's hoodie.parquet.small.file.limit: an insert's or upsert's new records top up a file group below it
    small_file_limit: int = DEFAULT_SMALL_FILE_LIMIT

    @classmethod
    def from_hudi(cls, props: dict[str, str]) -> WriteOptions:
        """Hudi's file-sizing settings (`hoodie.parquet.max.file.size`, `hoodie.parquet.small.file.limit`)."""
        options = cls()
        for key, name in FILE_SIZING.items():
            if key in props:
                try:
                    setattr(options, name, int(props[key]))
                except ValueError:
                    raise BadInputError(f"{key}={props[key]!r} is not a number of bytes") from None
        if options.max_file_size <= 0 or options.small_file_limit < 0:
            raise BadInputError("hoodie.parquet.max.file.size must be > 0 and hoodie.parquet.small.file.limit >= 0")
        return options


@dataclass
class WriteResult:
    instant: str
    operation: str
    metadata: CommitMetadata
    rows_in: int

    @property
    def files_written(self) -> list[str]:
        return [s.path for s in self.metadata.write_stats()]


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
        """The view to plan against (inserts need none: an insert lists only the partitions it writes, for the
        groups it tops up, `insert_targets`) and the table's schema before this write."""
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

    def tag(
        self, operation: str, rows: pa.Table, view: FileSystemView, no_small: frozenset[str] = frozenset()
    ) -> tuple[dict[str, BaseFile], pa.Table]:
        """Every record with the file group it goes to and the copies it deletes (`tagging.tag`)."""
        limit, threads = self.options.small_file_limit, self.io_threads
        return tagging.tag(operation, rows, view, self.reads, self.coordinator, limit, threads, no_small)

    def plan_tagged(self, tagged: pa.Table, bases: dict[str, BaseFile], schema: pa.Schema | None) -> list[FileWrite]:
        """The files of tagged records: NEW ones start file groups, the rest rewrite their target group."""
        max_file_size = self.options.max_file_size
        return file_groups.plan_tagged(tagged, bases, schema, self.reads, self.config, max_file_size, self.io_threads)

    def insert_targets(self, partitions: Collection[str]) -> dict[str, BaseFile]:
        """Hudi's insert: per partition of `partitions`, the smallest file group below the small-file limit,
        rewritten with the partition's first new rows; on merge-on-read only a group whose latest slice has no
        logs and no pending compaction (`log_slices`). Lists those partitions alone."""
        if self.options.small_file_limit <= 0 or not partitions:
            return {}
        view = self.table.view(partitions=sorted(partitions))
        extended = log_slices.LogSlices(view).extended if self.config.merge_on_read else frozenset()
        return log_slices.small_bases(view, self.options.small_file_limit, extended)

    def top_up_writes(self, base: BaseFile, rows: pa.Table, schema: pa.Schema) -> list[FileWrite]:
        """The files that top up `base`'s group with new rows after its own (`file_groups.top_up`); what passes
        the target file size starts new groups. On merge-on-read a row whose key the group holds starts a new
        group too: two copies in one base file are merged with a later log record differently by each of Hudi's
        readers (its 0.15 Spark reader updates the first copy only), copies in two groups are each updated."""
        elsewhere = rows.slice(0, 0)
        if self.config.merge_on_read:
            held = pc.is_in(rows.column(KEY), value_set=self.reads.keys_of(base, False).combine_chunks())
            rows, elsewhere = rows.filter(pc.invert(held)), rows.filter(held)
        max_size = self.options.max_file_size
        writes = file_groups.fit(file_groups.top_up(self.reads, base, rows, schema), max_size) if rows else []
        if writes and writes[0].inserts == 0:  # the group had no room: it is not rewritten for nothing
            writes = writes[1:]
        return writes + self.split_new(base.partition, elsewhere)

    def _top_up(
        self, txn: InstantSink, base: BaseFile, rows: pa.Table, schema: pa.Schema, task: Callable[[], int]
    ) -> list[WriteStat]:
        """Plan and write one group's top-up in one task, so a thread holds one group's rows at a time."""
        return [self.write_file(txn, write, task()) for write in self.top_up_writes(base, rows, schema)]

    def takes_inserts(self, base: BaseFile, records: pa.Table, small: AbstractSet[str]) -> bool:
        """Whether a merge-on-read group's tagged records include new ones (only a small group without logs
        is given any, `log_slices`): then its base file is rewritten, as Hudi's merge handle does; otherwise
        its updates and deletes go to a log."""
        if base.file_id not in small:
            return False
        stored = self.reads.keys_of(base, False)
        return not pc.all(pc.is_in(records.column(KEY), value_set=stored.combine_chunks())).as_py()

    def _plan_new(self, operation: str, rows: pa.Table, view: FileSystemView) -> tuple[list[FileWrite], dict]:
        """insert_overwrite: new file groups for every partition it writes, replacing their groups."""
        writes: list[FileWrite] = []
        replaced: dict[str, list[str]] = {}
        for partition, part_rows in split_by(rows, PARTITION):
            writes += self.split_new(partition, part_rows)
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
        for partition in new:
            depth = len(partition.split("/")) if partition else 0
            storage.create_if_absent(partition_metadata_path(partition), partition_metadata(instant, depth))

    def write_file(self, txn: InstantSink, write: FileWrite, task: int, token: str | None = None) -> WriteStat:
        """Marker first, then the parquet file; returns its write stat.

        `token` is the write token in the file name (Spark: partition-stage-attempt),
        so a retried task never overwrites its failed attempt's file.
        """
        file = BaseFileWriter(self, txn, write.partition, write.file_id, task, token)
        file.counts = FileCounts(write.prev_commit, write.inserts, write.updates, write.deletes)
        try:
            file.write(write.rows)
            return file.close()
        except BaseException:
            file.abandon()
            raise

    def write(
        self,
        data: pa.Table | pa.RecordBatchReader,
        operation: str,
        on_begin: Callable[[str], None] | None = None,
        instant_time: str | None = None,
    ) -> WriteResult:
        """Write `data` as one instant (at `instant_time` when given: a bootstrap's); on any failure the instant
        is undone.

        An insert or bulk_insert streams `data` (a table or a reader of any size) into
        its files with bounded memory; the other operations read a reader whole. A
        table's keys and partition values are checked before the instant begins, a
        reader's as its batches arrive. `on_begin` hears the instant time as soon as
        it is inflight (histories, progress).
        """
        operation, action = resolve_operation(operation)
        if self.config.merge_on_read and action == COMMIT:
            action = DELTA_COMMIT
        check_input_columns(data.schema)  # bad input before begin
        if isinstance(data, pa.RecordBatchReader) and operation not in STREAMED:
            data = data.read_all()
        if isinstance(data, pa.Table):
            keys.partition_paths(data, self.config.partition_fields, self.config.hive_style)
        else:
            data = self._first_checked(data)
        try:
            return self._write(data, operation, action, on_begin, instant_time)
        finally:
            self.reads.clear()
            self._ensured.clear()

    def _first_checked(self, reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
        """The reader, its first batch's partition values checked before the write begins (a small input is
        refused without a trace); later batches are checked as they arrive."""
        first = next(iter(reader), None)
        if first is None:
            return reader
        keys.partition_paths(pa.Table.from_batches([first]), self.config.partition_fields, self.config.hive_style)
        return pa.RecordBatchReader.from_batches(reader.schema, itertools.chain([first], reader))

    def _write(
        self,
        data: pa.Table | pa.RecordBatchReader,
        operation: str,
        action: str,
        on_begin: Callable[[str], None] | None,
        instant_time: str | None,
    ) -> WriteResult:
        with ExitStack() as stack:
            with reuse_reads():  # the view reuses the MDT reads of the begin (nothing wrote there since)
                txn = stack.enter_context(
                    Transaction(self.table, action, operation.upper(), self.coordinator, self.lock, instant_time)
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
            if operation in STREAMED:
                spill = stack.enter_context(closing(SpillFile()))  # open until the commit has written the MDT
                rows_in = self._insert(txn, data, schema, metadata, spill, tops_up=operation == "insert")
            else:
                rows_in = data.num_rows
                self._rewrite(txn, data, operation, action, view, schema, metadata)
            txn.commit(WriteOutcome(metadata, known, marked_here=True))  # every file went through create_marker
        return WriteResult(txn.time, operation, metadata, rows_in)

    def _insert(
        self,
        txn: Transaction,
        data: pa.Table | pa.RecordBatchReader,
        schema: pa.Schema,
        metadata: CommitMetadata,
        spill: SpillFile,
        tops_up: bool,
    ) -> int:
        """Stream the input into new file groups (`new_files.InsertFiles`), large bloom filters waiting for the
        commit in `spill`; with `tops_up` (an insert) the rows of the first batch that holds a partition top up
        its small file group instead, planned and written group by group (one group's rows held at a time per
        thread). Returns the number of rows read."""
        batches = data.to_reader(INPUT_BATCH_ROWS) if isinstance(data, pa.Table) else data
        task = itertools.count().__next__
        files = InsertFiles(self, txn, task, threads=self.io_threads, spill=spill)

        def split(batch: pa.RecordBatch) -> tuple[int, list[tuple[str, pa.Table]]]:
            rows = self._prepare(pa.Table.from_batches([batch]), "insert", schema)
            return batch.num_rows, list(split_by(rows, PARTITION))

        rows_in = 0
        seen: set[str] = set()  # partitions whose small group was looked up: each is topped up once
        try:
            one_batch = isinstance(data, pa.Table) and data.num_rows <= INPUT_BATCH_ROWS  # nothing to overlap
            for count, parts in map(split, batches) if one_batch else prefetched(batches, split):
                rows_in += count
                new = {partition for partition, _ in parts} - seen
                seen |= new
                small = self.insert_targets(new) if tops_up else {}
                tops = [(small[partition], rows) for partition, rows in parts if partition in small]
                for stats in each(lambda top: self._top_up(txn, *top, schema, task), tops, self.io_threads):
                    for stat in stats:
                        metadata.add(stat)
                files.add([(partition, rows) for partition, rows in parts if partition not in small])
            for stat in files.finish():
                metadata.add(stat)
        except BaseException:
            files.abandon()
            raise
        return rows_in

    def _rewrite(
        self,
        txn: Transaction,
        data: pa.Table,
        operation: str,
        action: str,
        view: FileSystemView,
        schema: pa.Schema,
        metadata: CommitMetadata,
    ) -> None:
        """Upsert and delete: each target group is merged and its files written in one task, so a thread holds
        one group's rows at a time. insert_overwrite: plan its new groups, then write them."""
        rows = self._prepare(data, operation, schema)
        if operation in ("upsert", "delete"):
            rows = self.dedupe(rows, self.record_identity())
            slices = log_slices.LogSlices(view) if self.config.merge_on_read else None
            no_small = slices.extended if slices is not None else frozenset()
            bases, tagged = self.tag(operation, rows, view, no_small)
            self.ensure_partitions(pc.unique(tagged.column(PARTITION)).to_pylist(), txn.time)  # one flush
            tasks = itertools.count()
            max_size = self.options.max_file_size
            small = slices.small_targets(view, self.options.small_file_limit) if slices is not None else set()

            def write_group(group: tuple[str, pa.Table]) -> list[WriteStat]:
                target, records = group
                if slices is not None and target != NEW and not self.takes_inserts(bases[target], records, small):
                    updates, deleted = log_slices.split_deletes(records)
                    log = slices.target(bases[target])
                    return [write_log(self, txn, log, updates, deleted, next(tasks), self.config.name)]
                writes = file_groups.plan_group(*group, bases, schema, self.reads, self.config, max_size)
                return [self.write_file(txn, write, next(tasks)) for write in writes]

            for stats in each(write_group, list(split_by(tagged, TARGET)), self.io_threads):
                for stat in stats:
                    metadata.add(stat)
            return
        writes, replaced = self._plan_new(operation, rows, view)
        metadata.partition_to_replace_file_ids = replaced if action == REPLACE_COMMIT else None
        self.ensure_partitions([w.partition for w in writes], txn.time)  # one flush of their parents
        files = range(len(writes))
        for stat in each(lambda task: self.write_file(txn, writes[task], task), files, self.io_threads):
            metadata.add(stat)


def resolve_operation(operation: str) -> tuple[str, str]:
    """The operation's canonical name and the action of its instant; an unknown one is bad input."""
    operation = operation.lower()
    if operation not in OPERATIONS:
        raise BadInputError(f"unknown operation {operation!r} (one of {', '.join(OPERATIONS)})")
    return operation, REPLACE_COMMIT if operation == "insert_overwrite" else COMMIT


def partition_metadata_path(partition: str) -> str:
    return f"{partition}/{PARTITION_METADATA}" if partition else PARTITION_METADATA
