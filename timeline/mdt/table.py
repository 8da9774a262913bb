"""The metadata table of one data table: create it, and apply or roll back its deltacommits."""

from __future__ import annotations

import json
import warnings

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from timeline.crash_points import crash_point, register
from timeline.errors import ConflictError, FencedError, RefusedDeleteWarning, TandemError
from timeline.format import action_metadata, avro_metadata, outcome, properties
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.instant import CLOCK, DELTA_COMMIT, ROLLBACK, Instant, State
from timeline.io import read_once
from timeline.io.lru import LruCache
from timeline.io.storage import Storage
from timeline.mdt import indexes, layout
from timeline.mdt.log import (
    DATA,
    PARTITION_ATTRIBUTE,
    ROLLBACK_COMMAND,
    SEAL,
    DecodedLog,
    LogBlock,
    decode_log,
    encode_log,
)
from timeline.metrics import METRICS, SYNC

DELTA_REQUESTED = register("mdt.deltacommit.requested", "MDT T.deltacommit.requested written")
DELTA_INFLIGHT = register("mdt.deltacommit.inflight", "MDT T.deltacommit.inflight written")
DELTA_LOG = register("mdt.deltacommit.log", "MDT log file of T written")
DELTA_COMPLETE = register("mdt.deltacommit.complete", "MDT T.deltacommit completed")
ROLLBACK_LOGS = register("mdt.rollback.logs", "rollback-command block naming the rolled-back instant appended")
ROLLBACK_INSTANT = register("mdt.rollback.instant", "MDT instant files of the rolled-back instant deleted")

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
BASE_ROW_GROUP = 1024


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


class MetadataTable:
    """`<base>/.hoodie/metadata`: a Merge-on-Read table with its own timeline."""

    def __init__(self, data_storage: Storage) -> None:
        self.data_storage = data_storage
        self.storage = data_storage.sub(layout.MDT_DIR)

    def exists(self) -> bool:
        storage = self.data_storage
        return read_once.remembered(
            storage.full(layout.MDT_PROPERTIES), "exists", lambda: storage.exists(layout.MDT_PROPERTIES)
        )

    def create(self, table_name: str) -> None:
        """Write the MDT's `hoodie.properties`; the initial slice needs no files."""
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
        self.storage.makedirs(".hoodie/archived")
        self.storage.makedirs(layout.FILES_PARTITION)
        if not self.storage.create_if_absent(".hoodie/hoodie.properties", properties.dumps(props).encode()):
            raise TandemError(f"{self.storage.uri('')} already exists")

    def delete(self) -> None:
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

    def write_base(self, path: str, records: list[dict]) -> int:
        """A base file sorted by key, in small row groups for point lookups."""
        ordered = sorted(records, key=lambda r: r["key"])
        rows = pa.Table.from_pylist(
            [
                {
                    "key": r["key"],
                    "type": r["type"],
                    "filesystemMetadata": list((r.get("filesystemMetadata") or {}).items()),
                }
                for r in ordered
            ],
            schema=BASE_SCHEMA,
        )
        with self.storage.open_output(path) as out:
            pq.write_table(rows, out, row_group_size=BASE_ROW_GROUP)
            return out.tell()

    def write_index_base(self, partition: str, path: str, records: pa.Table) -> int:
        """An index partition's base file, sorted by key (so by data partition) for pruned reads."""
        ordered = records.sort_by("key")
        with self.storage.open_output(path) as out:
            pq.write_table(ordered, out, row_group_size=indexes.BASE_ROW_GROUP)
            return out.tell()

    def is_seal(self, base_instant: str, version: int) -> bool:
        blocks = self.read_log(layout.log_path(base_instant, version)).blocks
        return any(b.block_type == SEAL for b in blocks)

    def next_instant(self, data_timeline: ActiveTimeline) -> str:
        """An MDT-only instant time above both timelines."""
        return CLOCK.next_after(data_timeline.last_time(), self.timeline().last_time())

    # deltacommits -------------------------------------------------------------------
    def apply(
        self,
        time: str,
        records: list[dict],
        timeline: ActiveTimeline | None = None,
        footprint: set[tuple[str, str]] | None = None,
        index_records: dict[str, list[dict]] | None = None,
    ) -> str:
        """MDT deltacommit `time`: requested -> inflight -> one new log file -> completed.

        The log file claims the next version of the current slice with
        create-if-absent; losing that race means another writer believes it holds
        the lock too, and this commit aborts. The inflight file carries the data
        instant's footprint (the file groups it touches), so a writer that claims
        a later version can see what this one is about to commit. The records of
        the index partitions are further blocks of the same log file, so one claim
        commits all partitions together.
        """
        with METRICS.timed(SYNC):
            timeline = timeline or self.timeline()
            existing = timeline.find(time)
            if existing is not None and existing.is_completed:
                raise FencedError(f"metadata deltacommit {time} is already completed: another process completed it")
            instant = Instant(time, DELTA_COMMIT, State.REQUESTED)
            if existing is None:
                timeline.create_requested(instant)
                crash_point(DELTA_REQUESTED)
            timeline.transition_to_inflight(instant, encode_footprint(footprint or set()))
            crash_point(DELTA_INFLIGHT)
            base_instant = layout.writer_slice(timeline)
            current = self.slices().get(base_instant)
            version = current.max_version if current else 0
            if version and self.is_seal(base_instant, version):
                raise TandemError(
                    f"metadata slice {base_instant} is sealed but its compaction is not planned; run `tandem recover`"
                )
            path = layout.log_path(base_instant, version + 1)
            blocks = [LogBlock(time, DATA, records)] + index_blocks(time, index_records)
            encoded = encode_log(blocks)
            if not self.storage.create_if_absent(path, encoded):
                raise ConflictError(f"metadata log {path} was claimed by another writer; aborting {time}")
            crash_point(DELTA_LOG)
            self.storage.sync_dirs([layout.FILES_PARTITION])  # the log's entry, before the completion names it
            meta = CommitMetadata(operation_type="UPSERT_PREPPED")
            size = len(encoded)
            meta.add(
                WriteStat(
                    layout.FILE_ID,
                    path,
                    layout.FILES_PARTITION,
                    num_writes=len(records),
                    total_write_bytes=size,
                    file_size_in_bytes=size,
                )
            )
            timeline.complete(instant, meta.to_json_bytes())
            crash_point(DELTA_COMPLETE)
            return path

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

    def append_block(self, block: LogBlock, base_instant: str | None = None) -> int:
        """Append `block` as the next free log version of a slice (the writer slice by default); its version."""
        base_instant = base_instant or layout.writer_slice(self.timeline())
        current = self.slices().get(base_instant)
        version = (current.max_version if current else 0) + 1
        data = encode_log([block])
        while not self.storage.create_if_absent(layout.log_path(base_instant, version), data):
            version += 1
        return version

    def rollback(self, time: str, data_timeline: ActiveTimeline) -> bool:
        """Undo MDT deltacommit (or index build) `time` without touching the log chain.

        First the decision on data instant `time` is claimed as a rollback: if a
        commit decision stands instead, nothing is undone (a stale caller's view
        must never cost a committed instant). Claimed log versions are never
        deleted (a hole would let a writer with a stale view claim that version
        again); a rollback-command block naming `time` makes readers and
        compaction ignore its blocks. Then `time`'s MDT instant files go and an
        MDT rollback instant records it. Idempotent. Returns False when nothing
        was rolled back.
        """
        timeline = self.timeline()
        target = timeline.find(time)
        if target is None or not undoable(data_timeline, time):
            return False
        if not outcome.claim(self.data_storage, time, outcome.ROLLBACK).is_rollback:
            return False
        plan = action_metadata.rollback_plan(time, target.action, {})
        record = Instant(self.next_instant(data_timeline), ROLLBACK, State.REQUESTED)
        timeline.create_requested(record, avro_metadata.encode("HoodieRollbackPlan", plan))
        self._undo(timeline, record.time, time, target.action)
        self._complete_rollback(timeline, record, time, target.action)
        return True

    def finish_rollbacks(self, timeline: ActiveTimeline, data_timeline: ActiveTimeline) -> list[str]:
        """Complete the rollback records a crash left requested, repeating their (idempotent) undo.

        A record whose target is completed on the data timeline was never written by a
        rollback here (`rollback` refuses those): it is reported and left.
        """
        finished = []
        for record in timeline.pending():
            if record.action == ROLLBACK:
                target = timeline.rollback_target(record)
                if not undoable(data_timeline, target["commitTime"]):
                    message = f"metadata rollback {record.time} targets completed {target['commitTime']}; left pending"
                    warnings.warn(message, RefusedDeleteWarning, stacklevel=2)
                    continue
                self._undo(timeline, record.time, target["commitTime"], target["action"])
                self._complete_rollback(timeline, record, target["commitTime"], target["action"])
                finished.append(record.time)
        return finished

    def _undo(self, timeline: ActiveTimeline, record_time: str, time: str, action: str) -> None:
        self.append_block(LogBlock(record_time, ROLLBACK_COMMAND, [], {"target": time}))
        crash_point(ROLLBACK_LOGS)
        timeline.delete_instant_files(time, action)
        crash_point(ROLLBACK_INSTANT)

    def _complete_rollback(self, timeline: ActiveTimeline, record: Instant, time: str, action: str) -> None:
        done = action_metadata.rollback_metadata(record.time, 0, {"commitTime": time, "action": action}, {})
        timeline.complete(record, avro_metadata.encode("HoodieRollbackMetadata", done))


def index_blocks(time: str, index_records: dict[str, list[dict]] | None) -> list[LogBlock]:
    """One data block per index partition with records, tagged with its partition."""
    return [
        LogBlock(time, DATA, records, {PARTITION_ATTRIBUTE: partition})
        for partition, records in sorted((index_records or {}).items())
        if records
    ]


def undoable(data_timeline: ActiveTimeline, time: str) -> bool:
    """Whether the MDT may roll back `time`: never a completed (or archived) data instant's records."""
    return not data_timeline.is_completed_or_archived(time)


def encode_footprint(touched: set[tuple[str, str]]) -> bytes:
    return json.dumps({"touched": sorted([p, f] for p, f in touched)}).encode()
