"""Base files written part by part: the one way a write makes a data file, and the stream of an insert.

`BaseFileWriter` makes one file: its partition's metadata file and its marker
first, then row groups as parts of its rows arrive, then the file closed, fsynced
and described (its write stat and index records). Its column ranges accumulate
part by part; its bloom filter, sized for exactly its keys, is built at the end:
from the rows at hand when the file was written in one part (every small commit
and every rewritten file group), else from its keys read back batch by batch.

`InsertFiles` streams an insert's rows into new file groups with bounded memory
whatever the input's size: rows wait per partition and are written a row group at
a time into that partition's open file, which is rolled at the target file size
(Hudi's `hoodie.parquet.max.file.size`, on the Arrow bytes of its data columns,
as `file_groups.split_new` sizes files); when the waiting rows together pass
BUFFER_BYTES the partition holding most is written early, and at most
MAX_OPEN_FILES files are open (the one written longest ago is finished first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.protocol.transaction import WRITE_FILE
from coordinator.write.meta_columns import with_meta
from coordinator.write.parquet_files import open_parquet
from coordinator.write.pool import each
from coordinator.write.rows import KEY, PARTITION, row_keys
from timeline.crash_points import crash_point
from timeline.format.commit_metadata import WriteStat
from timeline.format.file_names import base_file_name, new_file_id, write_token
from timeline.format.table_config import TableConfig
from timeline.index.column_ranges import RangeAccumulator
from timeline.io.spill import SpillFile
from timeline.mdt import indexes as mdt_indexes
from timeline.table import Table

BUFFER_BYTES = 128 * 1024 * 1024  # rows waiting for their files, over every partition
MAX_OPEN_FILES = 64
READ_BACK_ROWS = 128 * 1024  # keys read back per batch to build a file's bloom filter
# A filter takes about 43 bytes a key while it is built (one byte a bit at the default fpp): files with more
# keys than this build theirs one at a time, so files closing side by side never hold several such filters.
LARGE_FILTER_KEYS = 1_000_000
SPILL_BYTES = 1024 * 1024  # an insert's bloom filters from this size wait for the commit on local disk
BLOOM_BYTES = "bloomFilter"
_LARGE_FILTERS = threading.Lock()


class InstantSink(Protocol):
    """Where a file's marker goes: the driver's transaction, or an executor's view of it."""

    @property
    def time(self) -> str: ...

    def create_marker(self, path: str, kind: str = "CREATE") -> None: ...


class FileOptions(Protocol):
    max_file_size: int
    row_group_size: int


class FileOwner(Protocol):
    """The writer a file belongs to (`writer.LocalWriter`): its table, settings and partition bookkeeping."""

    table: Table
    config: TableConfig
    options: FileOptions

    def ensure_partitions(self, partitions: Iterable[str], instant: str) -> None: ...


@dataclass
class FileCounts:
    """What a file's write stat says about its rows beyond their number."""

    prev_commit: str = "null"
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


def data_bytes(rows: pa.Table) -> int:
    """The bytes a file's size target counts: its data columns in Arrow (as `file_groups.split_new`)."""
    names = rows.column_names
    return rows.nbytes - sum(rows.column(c).nbytes for c in (KEY, PARTITION) if c in names)


class BaseFileWriter:
    """One base file being written: `write` parts of its rows (keyed, meta columns filled as they come), then
    `close` for its write stat, or `abandon` after a failure (the undo deletes it by its marker)."""

    def __init__(
        self, writer: FileOwner, sink: InstantSink, partition: str, file_id: str, task: int, token: str | None
    ) -> None:
        self.writer = writer
        self.sink = sink
        self.partition = partition
        self.file_id = file_id
        self.task = task
        self.name = base_file_name(file_id, token or write_token(task), sink.time)
        self.path = f"{partition}/{self.name}" if partition else self.name
        self.rows = 0
        self.data_bytes = 0
        self.counts = FileCounts()
        self._stack = ExitStack()
        self._out: pa.NativeFile | None = None
        self._parquet: pq.ParquetWriter | None = None
        self.spill: SpillFile | None = None  # where a large bloom filter waits for the commit, if anywhere
        self._indexed = writer.table.config  # the indexes the table keeps now: the write's begin may add one
        self._ranges: RangeAccumulator | None = None
        self._only_part: pa.Table | None = None  # the file's rows when it was written in one part

    def write(self, rows: pa.Table) -> None:
        """Append rows (with their key and partition columns; carried rows keep their meta columns)."""
        populate = self.writer.config.populate_meta_fields
        table = with_meta(rows, self.name, self.sink.time, self.task, populate, self.rows)
        if self._parquet is None:
            self._open(table.schema)
            hudi_format = "files" in self._indexed.java_metadata_partitions  # its statistics come from footers
            if mdt_indexes.COLUMN_STATS in self._indexed.metadata_indexes and not hudi_format:
                self._ranges = RangeAccumulator(table.schema, mdt_indexes.indexed_columns(self._indexed, table.schema))
            self._only_part = table
        else:
            table = table.cast(self._parquet.schema)
            self._only_part = None
        self._parquet.write_table(table, row_group_size=self.writer.options.row_group_size)
        if self._ranges is not None:
            self._ranges.add(table)
        self.rows += table.num_rows
        self.data_bytes += data_bytes(rows)

    def _open(self, schema: pa.Schema) -> None:
        self.writer.ensure_partitions([self.partition], self.sink.time)
        self.sink.create_marker(self.path, "MERGE" if self.counts.prev_commit != "null" else "CREATE")
        self._out = self._stack.enter_context(self.writer.table.storage.open_output(self.path))
        self._parquet = open_parquet(self._out, schema)

    def close(self) -> WriteStat:
        """Finish the file (footer, bytes stored, fsynced) and describe it."""
        self._parquet.close()
        footer = self._parquet.writer.metadata
        size = self._out.tell()  # every byte written: the file's size, without asking storage
        self._stack.close()
        storage = self.writer.table.storage
        storage.sync_file(self.path)  # on the writing thread: Spark executors flush in parallel
        crash_point(WRITE_FILE)
        column_stats, bloom = self._index_records(footer)
        return WriteStat(
            file_id=self.file_id,
            path=self.path,
            partition_path=self.partition,
            prev_commit=self.counts.prev_commit,
            num_writes=self.rows,
            num_inserts=self.counts.inserts,
            num_update_writes=self.counts.updates,
            num_deletes=self.counts.deletes,
            total_write_bytes=size,
            file_size_in_bytes=size,
            column_stats=column_stats,
            bloom_filter=bloom,
        )

    def abandon(self) -> None:
        """Close what is open after a failure: an object store keeps no partial object."""
        self._only_part = None
        try:
            if self._parquet is not None:
                self._parquet.close()
        finally:
            self._stack.__exit__(RuntimeError, RuntimeError("write abandoned"), None)

    def _index_records(self, footer: pq.FileMetaData) -> tuple[list[dict] | None, dict | None]:
        stats = None
        if self._ranges is not None:
            ranges = self._ranges.ranges(mdt_indexes.column_sizes(footer))
            stats = [r.to_record(self.partition, self.name) for r in ranges]
        bloom = None
        kept = (*self._indexed.metadata_indexes, *self._indexed.java_metadata_partitions)
        if mdt_indexes.BLOOM_FILTERS in kept:
            with _LARGE_FILTERS if self.rows > LARGE_FILTER_KEYS else nullcontext():
                bloom = mdt_indexes.bloom_record(self._indexed, self.partition, self.name, self.rows, self._keys())
            if self.spill is not None and len(bloom[BLOOM_BYTES]) >= SPILL_BYTES:
                bloom[BLOOM_BYTES] = self.spill.keep(bloom[BLOOM_BYTES])
        self._only_part = None
        return stats, bloom

    def _keys(self) -> Iterator[pa.ChunkedArray]:
        """The file's record keys, batch by batch: from the rows at hand, else read back from the file."""
        config = self.writer.config
        if self._only_part is not None:
            yield row_keys(self._only_part, config)
            return
        columns = [KEY] if config.populate_meta_fields else config.record_key_fields
        with self.writer.table.storage.open_input(self.path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(READ_BACK_ROWS, columns=columns, use_threads=False):
                yield row_keys(pa.Table.from_batches([batch]), config)


@dataclass
class _Waiting:
    """One partition's rows waiting for its file."""

    parts: list[pa.Table] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0


class InsertFiles:
    """The new file groups of an insert: `add` keyed rows as they stream in, `finish` for the write stats,
    `abandon` after a failure."""

    def __init__(
        self,
        writer: FileOwner,
        sink: InstantSink,
        task: Callable[[], int],
        token: str | None = None,
        threads: int = 1,
        spill: SpillFile | None = None,
    ) -> None:
        self.writer = writer
        self.sink = sink
        self._task = task  # the task number of the next file (Spark: the executor task's own)
        self._token = token
        self._threads = threads
        self._waiting: dict[str, _Waiting] = {}
        self._open: dict[str, BaseFileWriter] = {}  # partition -> its open file, the least recently written first
        self._waiting_bytes = 0
        self.stats: list[WriteStat] = []
        self.spill = spill

    def add(self, parts: list[tuple[str, pa.Table]]) -> None:
        """Rows split by partition (`rows.split_by`), keyed; written as row groups fill."""
        group = self.writer.options.row_group_size
        for partition, part in parts:
            waiting = self._waiting.setdefault(partition, _Waiting())
            waiting.parts.append(part)
            waiting.rows += part.num_rows
            size = part.nbytes  # all of it waits, keys and partition paths too
            waiting.nbytes += size
            self._waiting_bytes += size
            if waiting.rows >= group:
                self._write(partition, whole_groups=True)
        while self._waiting_bytes > BUFFER_BYTES:
            self._write(max(self._waiting, key=lambda p: self._waiting[p].nbytes), whole_groups=False)

    def finish(self) -> list[WriteStat]:
        """Write what waits and close every file, partitions side by side on the pool."""
        partitions = sorted(set(self._waiting) | set(self._open))
        work = [(p, self._waiting.pop(p, None), self._open.pop(p, None)) for p in partitions]
        self._waiting_bytes = 0
        self.writer.ensure_partitions(partitions, self.sink.time)  # one flush of their parents, not one each
        for stats in each(lambda item: self._drain(*item), work, self._threads):
            self.stats += stats
        return self.stats

    def abandon(self) -> None:
        """Close the files still open after a failure (the undo deletes every file by its marker)."""
        for file in self._open.values():
            file.abandon()
        self._open.clear()
        self._waiting.clear()

    def _drain(self, partition: str, waiting: _Waiting | None, file: BaseFileWriter | None) -> list[WriteStat]:
        closed = []
        if waiting is not None:
            file, closed = self._fill(partition, _rows_of(waiting), file)
        if file is not None:
            closed.append(_closed(file))
        return closed

    def _write(self, partition: str, whole_groups: bool) -> None:
        """Write a partition's waiting rows (only whole row groups when asked) into its open file."""
        waiting = self._waiting.pop(partition)
        self._waiting_bytes -= waiting.nbytes
        rows = _rows_of(waiting)
        if whole_groups:
            ready = rows.num_rows - rows.num_rows % self.writer.options.row_group_size
            if ready < rows.num_rows:
                rest = rows.slice(ready)
                self._waiting[partition] = _Waiting([rest], rest.num_rows, rest.nbytes)
                self._waiting_bytes += self._waiting[partition].nbytes
            rows = rows.slice(0, ready)
        file = self._open.pop(partition, None)
        if file is None and len(self._open) >= MAX_OPEN_FILES:
            self.stats.append(_closed(self._open.pop(next(iter(self._open)))))  # the one written longest ago
        file, closed = self._fill(partition, rows, file)
        self.stats += closed
        if file is not None:
            self._open[partition] = file  # inserted last: the most recently written

    def _fill(
        self, partition: str, rows: pa.Table, file: BaseFileWriter | None
    ) -> tuple[BaseFileWriter | None, list[WriteStat]]:
        """Write `rows` into `file` and new files after it, each rolled at the target size: the file left open
        (None if the last one was filled) and the stats of those closed. A file that fails is abandoned."""
        limit = self.writer.options.max_file_size
        closed = []
        while rows.num_rows:
            file = file or self._new_file(partition)
            try:
                size = data_bytes(rows)
                room = limit - file.data_bytes
                fits = rows.num_rows if size <= room else max(1, int(room / size * rows.num_rows))
                file.write(rows.slice(0, fits))
                file.counts.inserts += fits
                rows = rows.slice(fits)
                if file.data_bytes >= limit:  # an estimate that fell short is topped up on the next round
                    closed.append(file.close())
                    file = None
            except BaseException:
                file.abandon()
                raise
        return file, closed

    def _new_file(self, partition: str) -> BaseFileWriter:
        file = BaseFileWriter(self.writer, self.sink, partition, new_file_id(), self._task(), self._token)
        file.spill = self.spill
        return file


def _rows_of(waiting: _Waiting) -> pa.Table:
    return pa.concat_tables(waiting.parts) if len(waiting.parts) > 1 else waiting.parts[0]


def _closed(file: BaseFileWriter) -> WriteStat:
    """The file closed, or abandoned if closing fails."""
    try:
        return file.close()
    except BaseException:
        file.abandon()
        raise
