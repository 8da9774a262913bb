"""The base files one write builds on, read once where it can: the index reads a file's keys, the merge
reads its rows, and on S3 the bytes fetched for one are not fetched again for the other."""

from __future__ import annotations

import threading

import pyarrow as pa

from coordinator.write.rows import KEY, row_keys
from timeline.errors import ConflictError
from timeline.format.file_names import BaseFile
from timeline.format.table_config import TableConfig
from timeline.query.reader import read_base_file
from timeline.table import Table

# Under the bloom index (its candidates mostly hold a key) the index reads a small candidate file whole, and
# the merge takes those rows instead of reading it again; at most KEPT_ROWS_BYTES of decoded rows per write.
WHOLE_READ_BYTES = 8 * 1024 * 1024
KEPT_ROWS_BYTES = 256 * 1024 * 1024


class BaseFileReads:
    """The reads of one write at a time; `clear` after each write (the next one must read afresh)."""

    def __init__(self, table: Table, config: TableConfig) -> None:
        self.table = table
        self.config = config  # the writer's: the table's config when the writer was made
        self._fetched: dict[str, bytes] = {}  # base files one write read whole from S3, read again by its merge
        self._kept: dict[str, pa.Table] = {}  # base files the index read whole, for their merge
        self._kept_lock = threading.Lock()
        self._kept_bytes = 0

    def clear(self) -> None:
        self._fetched.clear()
        self._kept.clear()
        self._kept_bytes = 0

    def keys_of(self, base: BaseFile, bloom_index: bool) -> pa.ChunkedArray:
        """The keys a base file holds; a small bloom candidate is read whole and kept for its merge (one read,
        not two), while the write's budget for kept rows lasts."""
        config = self.config
        whole = bloom_index and 0 < base.size <= WHOLE_READ_BYTES
        if whole and self._kept_bytes < KEPT_ROWS_BYTES:
            rows = self.read(base, fetch=False)  # the rows are kept: its bytes need not be
            with self._kept_lock:
                if self._kept_bytes + rows.nbytes <= KEPT_ROWS_BYTES:
                    self._kept[base.path] = rows
                    self._kept_bytes += rows.nbytes
            return row_keys(rows, config)
        columns = [KEY] if config.populate_meta_fields else config.record_key_fields
        return row_keys(self.read(base, columns), config)

    def rows_of(self, base: BaseFile) -> pa.Table:
        """Every row of a base file, for its merge: the rows the index kept, else read now."""
        old = self._kept.pop(base.path, None)
        return self.read(base) if old is None else old

    def read(self, base: BaseFile, columns: list[str] | None = None, fetch: bool = True) -> pa.Table:
        """A base file this write builds on; gone means a concurrent writer and clean moved past it."""
        fetched = self._fetched if fetch else None
        try:
            return read_base_file(self.table.storage, base.path, columns, base.size or None, fetched, base.source)
        except FileNotFoundError as err:
            raise ConflictError(f"{base.path} was cleaned while this write read it: a newer version exists") from err
