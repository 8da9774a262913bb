"""Reading the metadata table with the completed-instant filter (DESIGN §3).

The latest completed slice is merged with the logs of any pending compaction's
new slice. Only blocks of valid instants count: completed on the data
timeline, MDT-only actions completed on the MDT timeline, or instants older
than the active data timeline (archived) — and never an instant a
rollback-command block names (an MDT rollback leaves the claimed log in place). The resulting files are filtered
once more by the data timeline. The base file stays columnar; only keys that
logs touch are merged in Python.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from timeline.errors import CorruptInstantError, UnsupportedTableError
from timeline.format import partition_path
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.file_names import BASE_FILE_PATTERN
from timeline.format.instant import CLEAN, COMPACTION, INDEXING, ROLLBACK, Instant, State
from timeline.io.lru import LruCache
from timeline.mdt import indexes, layout
from timeline.mdt import records as rec
from timeline.mdt.log import DATA, FILES, LogBlock, block_partition, rolled_back_targets
from timeline.mdt.snapshot import MetadataSnapshot
from timeline.mdt.table import MetadataTable
from timeline.metrics import LOOKUP_FILES, LOOKUP_PARTITIONS, METRICS, SCAN

MDT_ONLY = {COMPACTION, CLEAN, ROLLBACK, INDEXING}
LISTING_SCHEMA = pa.schema([("partition", pa.string()), ("file", pa.string()), ("size", pa.int64())])
PARSE_THREADS = min(4, os.cpu_count() or 1)
PARALLEL_ROWS = 20_000
T = TypeVar("T")
_INSTANT_OF_FILE = r"_(?P<instant>\d{14,17})\.parquet$"
# `_INSTANT_OF_FILE` as Arrow's RE2 reads it: ASCII digits, and `$` only at the very end
_INSTANT_RE = re.compile(r"_([0-9]{14,17})\.parquet\Z")


@dataclass
class MergedView:
    """Merged records: base rows (columnar) plus Python records for keys logs touched."""

    base: pa.Table | None
    overrides: dict[str, dict] = field(default_factory=dict)
    corrupt: list[str] = field(default_factory=list)
    whole: pa.Table | None = None  # the whole base file, when the process keeps it (see `derived`)


class MetadataReader:
    """The MDT's listing and index records as of a data timeline. An MDT in Hudi's own format (Java Hudi's)
    is read through `MetadataSnapshot`; its index partitions are not in Tandem's encoding, so the reader
    answers without them (no file is ever skipped for want of a record)."""

    def __init__(self, mdt: MetadataTable, data_timeline: ActiveTimeline) -> None:
        self.mdt = mdt
        self.data_timeline = data_timeline
        self.mdt_timeline = mdt.timeline()
        self.snapshot = (
            MetadataSnapshot.open(mdt.storage, self.mdt_timeline, data_timeline) if mdt.is_hudi_format() else None
        )
        self.completed_mdt_only = frozenset(
            i.time for i in self.mdt_timeline.instants if i.is_completed and i.action in MDT_ONLY
        )
        self._valid_times = data_timeline.completed_times() | self.completed_mdt_only

    def is_valid(self, time: str) -> bool:
        return time in self._valid_times or self.data_timeline.is_completed_or_archived(time)

    def _slices_to_read(self) -> tuple[layout.Slice | None, list[str]]:
        """The latest completed slice, and every log to merge on top of its base, in order."""
        slices = self.mdt.slices()
        base_instant = layout.latest_completed_compaction(self.mdt_timeline)
        current = slices.get(base_instant)
        logs = current.log_paths() if current else []
        for pending in sorted(i.time for i in layout.pending_compactions(self.mdt_timeline)):
            if pending > base_instant and pending in slices:
                logs += slices[pending].log_paths()
        return current, logs

    def counts(self, block: LogBlock, partition: str, rolled_back: set[str]) -> bool:
        """Whether a block's records are part of `partition` in this view."""
        return (
            block.block_type == DATA
            and block_partition(block) == partition
            and block.instant not in rolled_back
            and self.is_valid(block.instant)
        )

    def _log_blocks(self, logs: list[str], corrupt: list[str]) -> list[LogBlock]:
        blocks: list[LogBlock] = []
        for path in logs:
            decoded = self.mdt.read_log(path)
            corrupt += decoded.corrupt
            blocks += decoded.blocks
        return blocks

    def merged(self, keys: list[str] | None = None, whole: bool = False) -> MergedView:
        """Base rows and log overrides, for all keys or just `keys`; with all keys, or `whole`, also the
        whole base file as the process keeps it."""
        with METRICS.timed(SCAN):
            if self.snapshot is not None:
                records = self.snapshot.files_records(keys)
                return MergedView(None, records, list(self.snapshot.corrupt))
            current, logs = self._slices_to_read()
            base = kept = None
            if current is not None and current.base_file:
                if whole or keys is None:
                    kept = self.mdt.kept_base(current.base_file, current.base_size)
                base = self.mdt.read_base(current.base_file, keys, current.base_size)
            wanted = set(keys) if keys is not None else None
            view = MergedView(base, whole=kept)
            touched: dict[str, list[dict]] = {}
            blocks = self._log_blocks(logs, view.corrupt)
            rolled_back = rolled_back_targets(blocks)
            for block in blocks:
                if not self.counts(block, FILES, rolled_back):
                    continue
                for record in block.records:
                    if wanted is None or record["key"] in wanted:
                        touched.setdefault(record["key"], []).append(record)
            base_rows = base_records(base, list(touched)) if touched else {}
            for key, updates in touched.items():
                merged = base_rows.get(key)
                for update in updates:
                    merged = rec.merge(merged, update)
                view.overrides[key] = merged
            return view

    def index(self, partition: str, partitions: list[str] | None = None, columns: list[str] | None = None) -> pa.Table:
        """Live records of index partition `partition` (base + logs), optionally only of some data partitions
        (and, for `column_stats`, some columns). Records of files the view does not list may be included;
        callers join them to their listing."""
        if self.snapshot is not None:
            return indexes.ARROW_SCHEMAS[partition].empty_table()
        with METRICS.timed(SCAN):
            current, logs = self._slices_to_read()
            base_instant = current.base_instant if current is not None else None
            base = self._index_base(partition, base_instant, partitions, columns) if base_instant else None
            blocks = self._log_blocks(logs, [])
            rolled_back = rolled_back_targets(blocks)
            wanted = None if partitions is None else set(partitions)
            merged: dict[str, dict] = {}
            dead: set[tuple[str, str]] = set()
            for block in blocks:
                if self.counts(block, partition, rolled_back):
                    records = [r for r in block.records if wanted is None or r["partition"] in wanted]
                    if columns is not None:
                        records = [r for r in records if r["isDeleted"] or r["columnName"] in columns]
                    indexes.apply_records(merged, dead, records)
            return indexes.merged_table(partition, base, merged, dead)

    def _index_base(
        self, partition: str, base_instant: str, partitions: list[str] | None, columns: list[str] | None
    ) -> pa.Table | None:
        path = layout.index_base_path(partition, base_instant)
        try:
            kept = self.mdt.kept_base(path, self._written_size(base_instant, path))
        except FileNotFoundError:
            return None
        if kept is not None:  # read whole once per process; filtered in memory
            if partitions is not None:
                kept = kept.filter(pc.is_in(kept.column("partition"), pa.array(partitions, pa.string())))
            if columns is not None:
                kept = kept.filter(pc.is_in(kept.column("columnName"), pa.array(columns, pa.string())))
            return kept
        filters = []
        if partitions is not None:
            filters.append(("partition", "in", partitions))
        if columns is not None:
            filters.append(("columnName", "in", columns))
        try:
            with self.mdt.storage.open_input(path) as handle:
                return pq.read_table(handle, filters=filters or None)
        except FileNotFoundError:
            return None

    def _written_size(self, compaction: str, path: str) -> int | None:
        """The size compaction `compaction` recorded for a base file it wrote (None: not recorded)."""
        instant = Instant(compaction, COMPACTION, State.COMPLETED)
        try:
            stats = self.mdt_timeline.commit_metadata(instant).write_stats()
        except (FileNotFoundError, CorruptInstantError):
            return None
        return next((s.file_size_in_bytes for s in stats if s.path == path), None)

    # queries -------------------------------------------------------------------------
    def all_partitions(self) -> list[str]:
        return list(self.partition_tuple())

    def partition_tuple(self) -> tuple[str, ...]:
        """Every partition, sorted. While no log touches the partition list it is the very tuple derived
        from the kept base file, so what a planner derives from it can be kept by its identity."""
        view = self.merged([rec.ALL_PARTITIONS], whole=True)  # the partition tuple is derived once per base
        record = view.overrides.get(rec.ALL_PARTITIONS)
        if record is not None:
            partitions = _partitions_of(pa.array(list(rec.live_files(record)), pa.string()))
        elif view.whole is not None:
            partitions = derived(view.whole, "partitions", _partitions_of_base)
        else:
            partitions = _partitions_of_base(view.base)
        METRICS.incr(LOOKUP_PARTITIONS, len(partitions))
        return partitions

    def listing(self, partitions: list[str] | None = None, base_files: bool = False) -> pa.Table:
        """(partition, file, size) of live files, filtered by the data timeline.

        One read of the MDT whatever the number of partitions asked for. `base_files`:
        only names of base files, with their `file_id` and `instant` columns (names parsed once).
        """
        keys = None if partitions is None else [rec.partition_key(p) for p in partitions]
        if self.snapshot is not None:
            listing = self._snapshot_listing(keys, base_files)
            METRICS.incr(LOOKUP_FILES, listing.num_rows)
            return listing
        view = self.merged(keys)
        if base_files:
            listing = self._base_file_listing(view)
        else:
            listing = self._file_listing(view)
        METRICS.incr(LOOKUP_FILES, listing.num_rows)
        return listing

    def listed_files(self, partitions: list[str] | None = None) -> list[tuple[str, str, int]]:
        """(partition, file, size) of the live files of `partitions` (None: all), as `listing` gives them.

        On Hudi's format a lookup of partitions takes its rows straight from the records, filtered in Python
        by the same rule: a few partitions are a handful of rows, which Arrow's fixed cost per call would
        dominate."""
        if self.snapshot is None or partitions is None:
            listing = self.listing(partitions)
            return list(zip(*(listing.column(c).to_pylist() for c in LISTING_SCHEMA.names), strict=True))
        with METRICS.timed(SCAN):
            records = self.snapshot.files_records([rec.partition_key(p) for p in partitions])
        rows = []
        for key, record in records.items():
            if key == rec.ALL_PARTITIONS:
                continue
            partition = rec.data_partition(key)  # a key that is no canonical partition path is a corrupt record
            rows += [(partition, name, size) for name, size in rec.live_files(record).items()]
        kept = self._kept_instants({name for _, name, _ in rows})
        rows = [row for row in rows if row[1] in kept]
        METRICS.incr(LOOKUP_FILES, len(rows))
        return rows

    def listed_logs(self, partitions: list[str] | None = None) -> list[tuple[str, str, int]]:
        """(partition, file, size) of the live log files of `partitions` (None: all) on Hudi's format.

        Not filtered by the data timeline: a log's name carries no instant (its blocks do, and readers skip
        the blocks of instants that did not complete). A failed instant's log is not listed at all: its MDT
        deltacommit's blocks never count."""
        if self.snapshot is None:
            raise UnsupportedTableError("merge-on-read tables keep their metadata table in Hudi's format")
        keys = None if partitions is None else [rec.partition_key(p) for p in partitions]
        with METRICS.timed(SCAN):
            records = self.snapshot.files_records(keys)
        rows = []
        for key, record in records.items():
            if key != rec.ALL_PARTITIONS:
                partition = rec.data_partition(key)
                rows += [(partition, n, size) for n, size in rec.live_files(record).items() if n.startswith(".")]
        return rows

    def _kept_instants(self, names: set[str]) -> set[str]:
        """The names `_filter_by_data_timeline` keeps, decided per name in Python."""
        timeline = self.data_timeline
        completed = timeline.completed_times()
        instants = {name: found[1] if (found := _INSTANT_RE.search(name)) else None for name in names}
        kept = {name for name, instant in instants.items() if instant in completed}
        if timeline.instants and timeline.archived_files:
            earliest = timeline.earliest_write_time()
            kept |= {name for name, instant in instants.items() if instant is not None and instant < earliest}
        return kept

    def _snapshot_listing(self, keys: list[str] | None, base_files: bool) -> pa.Table:
        """The listing of a Hudi-format MDT: each record's rows parsed once per record object (records the logs
        leave alone are the same objects from read to read), then joined and filtered by the data timeline."""
        with METRICS.timed(SCAN):
            records = self.snapshot.files_records(keys)
        parts = [_record_rows(r, base_files) for k, r in records.items() if k != rec.ALL_PARTITIONS]
        if base_files:
            empty = _with_base_file_parts(LISTING_SCHEMA.empty_table())
        else:
            empty = _listed(LISTING_SCHEMA.empty_table())
        listing = pa.concat_tables(parts) if parts else empty
        listing = self._filter_by_data_timeline(listing, listing.column("instant"))
        return _shown(listing) if base_files else listing.drop_columns(["instant"])

    def _file_listing(self, view: MergedView) -> pa.Table:
        """Every live file of the view; the base rows' part (flattened, names parsed) once per kept base rows."""
        parts = []
        if view.base is not None and view.base.num_rows and not _all_overridden(view):
            base = derived(view.base, "listed files", lambda b: _listed(_flatten(b)))
            if view.overrides:
                shown = ["" if k == rec.NON_PARTITIONED else k for k in view.overrides]
                base = base.filter(pc.invert(pc.is_in(base.column("partition"), pa.array(shown, pa.string()))))
            parts.append(base)
        if view.overrides:
            parts.append(_listed(_override_rows(view)))
        listing = pa.concat_tables(parts) if parts else _listed(LISTING_SCHEMA.empty_table())
        return self._filter_by_data_timeline(listing, listing.column("instant")).drop_columns(["instant"])

    def _base_file_listing(self, view: MergedView) -> pa.Table:
        """Live base files of the view with their `file_id` and `instant` (parsed once per kept base rows)."""
        parts = []
        if view.base is not None and view.base.num_rows and not _all_overridden(view):
            base = derived(view.base, "base files", lambda b: _with_base_file_parts(_flatten(b)))
            if view.overrides:
                touched = pa.array(list(view.overrides), pa.string())
                base = base.filter(pc.invert(pc.is_in(base.column("partition"), touched)))
            parts.append(base)
        if view.overrides:
            parts.append(_with_base_file_parts(_override_rows(view)))
        listing = pa.concat_tables(parts) if parts else _with_base_file_parts(LISTING_SCHEMA.empty_table())
        listing = listing.filter(pc.not_equal(listing.column("partition"), rec.ALL_PARTITIONS))
        return _shown(self._filter_by_data_timeline(listing, listing.column("instant")))

    def _filter_by_data_timeline(self, listing: pa.Table, instants: pa.Array | pa.ChunkedArray) -> pa.Table:
        if listing.num_rows == 0:
            return listing
        # a name without an instant (null) is in no value set: is_in answers false for it, never null
        keep = pc.is_in(instants, pa.array(sorted(self.data_timeline.completed_times()), pa.string()))
        if pc.all(keep).as_py():
            return listing
        timeline = self.data_timeline
        if timeline.instants:
            older = pc.fill_null(pc.less(instants, timeline.earliest_write_time()), False)
            # the archive is listed only when a file older than the active timeline asks for it (an undone
            # instant's file is not here: its log block is not valid, see ActiveTimeline.is_completed_or_archived)
            if pc.any(pc.and_(older, pc.invert(keep))).as_py() and timeline.archived_files:
                keep = pc.or_(keep, older)
        return listing.filter(keep)


def _extract_in_parallel(names: pa.ChunkedArray, pattern: str) -> pa.Array:
    """`pc.extract_regex` over slices on threads (Arrow kernels release the GIL): parsing every name of a
    large listing is the bulk of planning it."""
    names = names.combine_chunks()
    if len(names) < PARALLEL_ROWS:
        return pc.extract_regex(names, pattern)
    step = -(-len(names) // PARSE_THREADS)
    with ThreadPoolExecutor(PARSE_THREADS) as pool:
        parts = pool.map(
            lambda start: pc.extract_regex(names[start : start + step], pattern), range(0, len(names), step)
        )
        return pa.concat_arrays(list(parts))


_DERIVED: dict[tuple[int, str], tuple[weakref.ref, Any]] = {}


def derived(base: pa.Table, what: str, compute: Callable[[pa.Table], T]) -> T:
    """`compute(base)`, once per kept base table object: the MDT keeps a read base file in memory
    (`MetadataTable.kept_base`), and the rows of the keys lately asked for, and a base file never
    changes, so what is derived from them (parsed file names, the partition list, the planner's typed
    partition values) is derived once per process; only what the logs add is worked out per scan.
    Dropped with the base table."""
    key = (id(base), what)
    found = _DERIVED.get(key)
    if found is not None and found[0]() is base:
        return found[1]
    value = compute(base)
    _DERIVED[key] = (weakref.ref(base, lambda _: _DERIVED.pop(key, None)), value)
    return value


_RECORD_ROWS: LruCache[tuple[int, bool], tuple[dict, pa.Table]] = LruCache(1 << 15)


def _record_rows(record: dict, base_files: bool) -> pa.Table:
    """The live files of one `files` record as `_listed` (or, for `base_files`, `_with_base_file_parts`) gives
    them, worked out once per record object; CorruptInstantError for a key that names no partition."""
    key = (id(record), base_files)
    found = _RECORD_ROWS.get(key)
    if found is not None and found[0] is record:
        return found[1]
    rec.data_partition(record["key"])  # a key that is no canonical partition path is a corrupt record
    live = rec.live_files(record)
    rows = pa.table(
        {
            "partition": pa.array([record["key"]] * len(live), pa.string()),
            "file": pa.array(list(live), pa.string()),
            "size": pa.array(list(live.values()), pa.int64()),
        },
        schema=LISTING_SCHEMA,
    )
    rows = _with_base_file_parts(rows) if base_files else _listed(rows)
    _RECORD_ROWS.put(key, (record, rows))
    return rows


def _partitions_of_base(base: pa.Table | None) -> tuple[str, ...]:
    if base is None or not base.num_rows:
        return ()
    listed = base.filter(pc.equal(base.column("key"), rec.ALL_PARTITIONS))
    return _partitions_of(_flatten(listed).column("file").combine_chunks())  # columnar: no dict per partition


def _partitions_of(keys: pa.Array) -> tuple[str, ...]:
    named = pc.not_equal(keys, rec.NON_PARTITIONED)
    partition_path.canonical_all(keys.filter(named), "metadata table record key", CorruptInstantError)
    return tuple(sorted(pc.if_else(named, keys, "").to_pylist()))


def _all_overridden(view: MergedView) -> bool:
    """Whether the logs touched every key of the view's base rows (a lookup of partitions written since
    the last compaction): their base rows then add nothing."""
    base = view.base
    if base is view.whole or len(view.overrides) < base.num_rows:  # base keys are unique
        return False
    return view.overrides.keys() >= set(base.column("key").to_pylist())


def _override_rows(view: MergedView) -> pa.Table:
    """(partition key, file, size) of the live files of the records logs touched."""
    rows = [
        {"partition": record["key"], "file": name, "size": size}
        for record in view.overrides.values()
        for name, size in rec.live_files(record).items()
    ]
    return pa.Table.from_pylist(rows, schema=LISTING_SCHEMA)


def _listed(flat: pa.Table) -> pa.Table:
    """Flattened rows as a listing shows them: no partition-list record, the non-partitioned key as "", and
    each file's instant parsed from its name (null for a name that has none)."""
    flat = _shown(flat.filter(pc.not_equal(flat.column("partition"), rec.ALL_PARTITIONS)))
    instants = _extract_in_parallel(flat.column("file"), _INSTANT_OF_FILE)
    return flat.append_column("instant", pc.struct_field(instants, "instant"))


def _shown(listing: pa.Table) -> pa.Table:
    """The partition column (the first) as readers see it: the non-partitioned table's key as ""."""
    partition = listing.column("partition")
    return listing.set_column(0, "partition", pc.if_else(pc.equal(partition, rec.NON_PARTITIONED), "", partition))


def _with_base_file_parts(listing: pa.Table) -> pa.Table:
    """Only base files, with their `file_id` and `instant` columns parsed from the names."""
    parts = _extract_in_parallel(listing.column("file"), BASE_FILE_PATTERN)
    valid = pc.is_valid(parts)
    listing, parts = listing.filter(valid), parts.filter(valid)
    listing = listing.append_column("file_id", pc.struct_field(parts, "file_id"))
    return listing.append_column("instant", pc.struct_field(parts, "instant"))


def _flatten(base: pa.Table) -> pa.Table:
    """Base rows -> one row per live file, without Python objects.

    The map column is viewed as a list of (key, value) structs: list kernels
    honour the offsets of a filtered or sliced column, map accessors do not.
    """
    maps = base.column("filesystemMetadata")
    entries = maps.cast(pa.list_(pa.struct([("key", pa.string()), ("value", maps.type.item_type)])))
    flat = pc.list_flatten(entries)
    parents = pc.list_parent_indices(entries)
    table = pa.table(
        {
            "partition": pc.take(base.column("key"), parents),
            "file": pc.struct_field(flat, "key"),
            "size": pc.struct_field(flat, ["value", "size"]),
        },
        schema=LISTING_SCHEMA,
    )
    return table.filter(pc.invert(pc.struct_field(flat, ["value", "isDeleted"])))


def base_records(base: pa.Table | None, keys: list[str]) -> dict[str, dict]:
    if base is None or not keys:
        return {}
    rows = base.filter(pc.is_in(base.column("key"), pa.array(keys, pa.string()))).to_pylist()
    return {
        r["key"]: {"key": r["key"], "type": r["type"], "filesystemMetadata": dict(r["filesystemMetadata"] or [])}
        for r in rows
    }
