"""The metadata table of one data table: create it, and read it through per-process caches of its immutable
files. Its deltacommits and their rollback are `coordinator.mdt.deltacommit`."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from timeline.errors import TandemError
from timeline.format import properties
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import CLOCK, DELTA_COMMIT, State
from timeline.format.table_config import (
    TableConfig,
    read_config,
    record_metadata_initializing,
    record_metadata_partitions,
)
from timeline.io import read_once
from timeline.io.lru import LruCache
from timeline.io.storage import Storage
from timeline.mdt import file_group_writes, hudi_layout, layout
from timeline.mdt.hudi_commit_records import listing_records
from timeline.mdt.hudi_layout import KEPT_BY_TANDEM
from timeline.mdt.log import (
    SEAL,
    DecodedLog,
    decode_log,
)

BASE_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("type", pa.int32()),
        (
            "filesystemMetadata",
            pa.map_(pa.string(), pa.struct([("size", pa.int64()), ("isDeleted", pa.bool_())])),
        ),
    ]
)


CACHED_BASE_BYTES = 64 << 20
_BASE_CACHE_ENTRIES = 6  # a table's `files` base and its two index bases, for two tables
_BASE_CACHE: LruCache[tuple[str, str, int], pa.Table] = LruCache(_BASE_CACHE_ENTRIES)


def _cached_base(storage: Storage, path: str, size: int) -> pa.Table:
    key = (storage.base_uri, path, size)
    found = _BASE_CACHE.get(key)
    if found is not None:
        return found
    # A whole file through `ParquetFile`: `pq.read_table` would import pyarrow.dataset (and pandas), a
    # third of a short command's start-up.
    if storage.is_s3:  # the size is known: one GetObject, not a HEAD and ranged reads
        table = pq.ParquetFile(pa.BufferReader(storage.read_bytes(path))).read()
    else:
        with storage.open_input(path) as handle:
            table = pq.ParquetFile(handle).read()
    _BASE_CACHE.put(key, table)
    return table


_ROW_GROUPS: LruCache[tuple[str, str, int, int], pa.Table] = LruCache(64)
_FOOTERS: LruCache[tuple[str, str, int], pq.FileMetaData] = LruCache(_BASE_CACHE_ENTRIES)


def _cached_rows(storage: Storage, path: str, size: int, keys: list[str]) -> pa.Table:
    """The rows of `keys` from a local base file this process has not read whole: only the row groups whose
    key statistics can hold one (a base file is sorted by key), each read once per process. The first
    lookup after a compaction then reads a row group, not the whole new base file."""
    key = (storage.base_uri, path, size)
    footer = _FOOTERS.get(key)
    with storage.open_input(path) as handle:
        parquet = pq.ParquetFile(handle, metadata=footer)
        footer = parquet.metadata
        _FOOTERS.put(key, footer)
        column = next((i for i in range(footer.num_columns) if footer.schema.column(i).path == "key"), None)
        wanted = pa.array(keys, pa.string())
        parts = []
        for group in range(footer.num_row_groups):
            stats = footer.row_group(group).column(column).statistics if column is not None else None
            if stats is not None and stats.has_min_max and not any(stats.min <= k <= stats.max for k in keys):
                continue
            rows = _ROW_GROUPS.get((*key, group))
            if rows is None:
                rows = parquet.read_row_group(group, use_threads=False)  # a small group: a pool hand-off adds tail
                _ROW_GROUPS.put((*key, group), rows)
            parts.append(_of_keys(rows, wanted))
    return pa.concat_tables(parts) if parts else BASE_SCHEMA.empty_table()


_KEYED_ROWS: LruCache[tuple[str, str, int, tuple[str, ...]], pa.Table] = LruCache(64)
_KEYED_ROWS_BYTES = 256 << 10  # rows of a few partitions (with what is derived from them, about 2.6x that)


def _keyed_rows(storage: Storage, path: str, size: int, keys: list[str]) -> pa.Table:
    """The rows of `keys` from a base file small enough to keep, the same table object for the same keys:
    a long-lived reader asking again for a partition then reuses what was derived from its rows
    (`reader.derived`) instead of filtering and flattening them anew."""
    key = (storage.base_uri, path, size, tuple(keys))
    found = _KEYED_ROWS.get(key)
    if found is not None:
        return found
    if not storage.is_s3 and not _holds_whole(storage, path, size):
        rows = _cached_rows(storage, path, size, keys)
    else:
        rows = _of_keys(_cached_base(storage, path, size), pa.array(keys, pa.string()))
    if rows.nbytes <= _KEYED_ROWS_BYTES:
        _KEYED_ROWS.put(key, rows)
    return rows


def _of_keys(rows: pa.Table, keys: pa.Array) -> pa.Table:
    return rows.filter(pc.is_in(rows.column("key"), keys))


def _holds_whole(storage: Storage, path: str, size: int) -> bool:
    return (storage.base_uri, path, size) in _BASE_CACHE


CACHED_LOG_BYTES = 32 << 20
_LOG_CACHE: LruCache[tuple[str, str, int, int], DecodedLog] = LruCache(
    max_bytes=CACHED_LOG_BYTES, size=lambda k, _: k[2]
)
_LISTED_LOGS: dict[str, dict[str, tuple[int, int]]] = {}  # MDT uri -> log path -> (size, mtime) last listed


def _remember_listing(storage: Storage, slices: dict[str, layout.Slice]) -> None:
    _LISTED_LOGS[storage.base_uri] = {
        layout.log_path(s.base_instant, v): (size, s.stamps.get(v, 0))
        for s in slices.values()
        for v, size in s.logs.items()
    }


def _cached_log(storage: Storage, path: str) -> DecodedLog:
    """A log file decoded once per process while its last listing shows the same size and time.

    A log is immutable once its create-if-absent lands, so within one commit the
    health check at begin, the view, the check at commit and the claim of the next
    version decode it once instead of four times (a GET each on S3). Anything that
    changes the file in place changes its time, and the next listing sees that.
    """
    listed = _LISTED_LOGS.get(storage.base_uri, {}).get(path)
    if listed is None or not listed[1]:
        return decode_log(storage.read_bytes(path), storage.uri(path))
    key = (storage.base_uri, path, *listed)
    found = _LOG_CACHE.get(key)
    if found is not None:
        return found
    decoded = decode_log(storage.read_bytes(path), storage.uri(path))
    _LOG_CACHE.put(key, decoded)
    return decoded


def _no_files(partition: str, _instant: str) -> list[dict]:
    """The initial records of a partition of a table without files: an empty list of partitions."""
    return listing_records({}) if partition == hudi_layout.FILES else []


class MetadataTable:
    """`<base>/.hoodie/metadata`: a Merge-on-Read table with its own timeline."""

    def __init__(self, data_storage: Storage) -> None:
        self.data_storage = data_storage
        self.storage = data_storage.sub(layout.MDT_DIR)
        self._hudi_partitions: list[str] | None = None
        self._initializing: list[str] = []

    def exists(self) -> bool:
        storage = self.data_storage
        return read_once.remembered(
            storage.full(layout.MDT_PROPERTIES), "exists", lambda: storage.exists(layout.MDT_PROPERTIES)
        )

    def is_hudi_format(self, config: TableConfig | None = None) -> bool:
        """Whether the MDT is in Hudi's own format (HFile base files, Hudi log blocks), decided as Java decides:
        the data table's `hoodie.table.metadata.partitions` lists `files` (or its `.inflight` record does, while a
        Tandem writer initializes it: then the health check finds it incomplete). `config`: the data table's properties
        as the caller just read them (the health check, before each read); the answer is kept for the reader
        that follows, so deciding costs no request of its own."""
        if layout.FILES_PARTITION in self.hudi_partitions(config):
            return True
        return layout.FILES_PARTITION in self._initializing

    def hudi_partitions(self, config: TableConfig | None = None) -> list[str]:
        """The MDT partitions the data table records as built in Hudi's format (`is_hudi_format` keeps them)."""
        if config is None and self._hudi_partitions is None:
            config = read_config(self.data_storage)
        if config is not None:
            self._hudi_partitions = config.java_metadata_partitions
            self._initializing = config.java_metadata_partitions_inflight
        return self._hudi_partitions

    def create(self, table_name: str) -> None:
        """Write the MDT's `hoodie.properties` in Tandem's previous format; the initial slice needs no files."""
        props = {
            "hoodie.table.name": f"{table_name}_metadata",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.table.version": "6",
            "hoodie.timeline.layout.version": "1",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "false",
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.timeline.timezone": "UTC",
        }
        self._hudi_partitions, self._initializing = [], []
        self.storage.makedirs(".hoodie/archived")
        self.storage.makedirs(layout.FILES_PARTITION)
        if not self.storage.create_if_absent(".hoodie/hoodie.properties", properties.dumps(props).encode()):
            raise TandemError(f"{self.storage.uri('')} already exists")

    def create_in_hudi_format(
        self,
        table_name: str,
        indexes: Sequence[str] = (),
        start: str = hudi_layout.SOLO_COMMIT_TIMESTAMP,
        records_of: Callable[[str, str], Sequence[Mapping]] | None = None,
    ) -> list[str]:
        """Build the MDT in Hudi's format: `files` and the index partitions of `indexes`, each initialized with
        `records_of(partition, instant)` (none: a table without files) after data instant `start`; the data
        table records the partitions as being initialized first, so a crash part-way leaves an MDT readers
        and writers know to be incomplete. Returns the initial delta commits' instants."""
        partitions = [
            p for p in hudi_layout.INIT_ORDER if p == hudi_layout.FILES or (p in indexes and p in KEPT_BY_TANDEM)
        ]
        record_metadata_initializing(self.data_storage, partitions)
        self.delete()
        times = file_group_writes.initialize(self.storage, table_name, partitions, start, records_of or _no_files)
        self.is_hudi_format(record_metadata_partitions(self.data_storage, partitions))
        return times

    def delete(self) -> None:
        self._hudi_partitions = None
        self.data_storage.delete_dir(layout.MDT_DIR)

    def timeline(self) -> ActiveTimeline:
        return read_once.remembered(
            self.storage.full(".hoodie"), "timeline", lambda: layout.load_timeline(self.storage)
        )

    def timeline_if_exists(self) -> ActiveTimeline | None:
        """The MDT timeline, or None when the MDT has no `hoodie.properties` (it does not exist): one
        listing of its `.hoodie` answers both, where `exists()` then `timeline()` cost two requests."""
        known, exists = read_once.recall(self.data_storage.full(layout.MDT_PROPERTIES), "exists")
        if known and not exists:
            return None
        listed, timeline = read_once.recall(self.storage.full(".hoodie"), "timeline")
        if known and listed:
            return timeline
        infos = self.storage.list_dir(".hoodie", sizes=False)
        found = any(i.base_name == "hoodie.properties" and i.type == pafs.FileType.File for i in infos)
        timeline = ActiveTimeline.from_listing(self.storage, ".hoodie", infos) if found else None
        read_once.offer(self.data_storage.full(layout.MDT_PROPERTIES), "exists", found)
        if timeline is not None:
            read_once.offer(self.storage.full(".hoodie"), "timeline", timeline)
        return timeline

    def slices(self) -> dict[str, layout.Slice]:
        return read_once.remembered(self.storage.full(layout.FILES_PARTITION), "slices", self._list_slices)

    def _list_slices(self) -> dict[str, layout.Slice]:
        slices = layout.list_slices(self.storage)
        _remember_listing(self.storage, slices)
        return slices

    def read_log(self, path: str) -> DecodedLog:
        return _cached_log(self.storage, path)

    def kept_base(self, path: str, size: int | None) -> pa.Table | None:
        """The whole base file as this process keeps it (see `read_base`); None when it is too large to keep."""
        return _cached_base(self.storage, path, size) if size is not None and 0 < size <= CACHED_BASE_BYTES else None

    def read_base(self, path: str, keys: list[str] | None = None, size: int | None = None) -> pa.Table:
        """The base file, or only the rows of `keys` (row groups pruned by key statistics).

        With the `size` the slice listing found, a base file up to `CACHED_BASE_BYTES` is read
        once per process: a base file is immutable (each compaction writes a new name), so its
        (path, size) names its content, and a lookup then filters rows in memory.
        """
        if size is not None and 0 < size <= CACHED_BASE_BYTES:
            if keys is not None:
                return _keyed_rows(self.storage, path, size, keys)
            return _cached_base(self.storage, path, size)
        filters = [("key", "in", keys)] if keys is not None else None
        with self.storage.open_input(path) as handle:
            return pq.read_table(handle, filters=filters)

    def is_seal(self, base_instant: str, version: int) -> bool:
        blocks = self.read_log(layout.log_path(base_instant, version)).blocks
        return any(b.block_type == SEAL for b in blocks)

    def next_instant(self, data_timeline: ActiveTimeline) -> str:
        """An MDT-only instant time above both timelines."""
        return CLOCK.next_after(data_timeline.last_time(), self.timeline().last_time())

    def footprint(self, time: str, timeline: ActiveTimeline) -> set[tuple[str, str]] | None:
        """File groups data instant `time` declared in its MDT inflight file; None if unknown."""
        instant = timeline.find(time)
        if instant is None or instant.action != DELTA_COMMIT:
            return None
        try:
            doc = json.loads(timeline.read(instant.with_state(State.INFLIGHT)) or b"null")
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("touched"), list):
            return None
        return {(str(p), str(f)) for p, f in doc["touched"]}
