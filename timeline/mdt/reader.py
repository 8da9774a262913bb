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

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from timeline.active_timeline import ActiveTimeline
from timeline.instant import CLEAN, COMPACTION, ROLLBACK
from timeline.mdt import layout
from timeline.mdt import records as rec
from timeline.mdt.log import DATA, LogBlock, rolled_back_targets
from timeline.mdt.table import MetadataTable
from timeline.metrics import LOOKUP_FILES, LOOKUP_PARTITIONS, METRICS, SCAN

MDT_ONLY = {COMPACTION, CLEAN, ROLLBACK}
LISTING_SCHEMA = pa.schema([("partition", pa.string()), ("file", pa.string()), ("size", pa.int64())])
_INSTANT_OF_FILE = r"_(?P<instant>\d{14,17})\.parquet$"


@dataclass
class MergedView:
    """Merged records: base rows (columnar) plus Python records for keys logs touched."""

    base: pa.Table | None
    overrides: dict[str, dict] = field(default_factory=dict)
    corrupt: list[str] = field(default_factory=list)


class MetadataReader:
    def __init__(self, mdt: MetadataTable, data_timeline: ActiveTimeline) -> None:
        self.mdt = mdt
        self.data_timeline = data_timeline
        self.mdt_timeline = mdt.timeline()
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

    def merged(self, keys: list[str] | None = None) -> MergedView:
        """Base rows and log overrides, for all keys or just `keys`."""
        with METRICS.timed(SCAN):
            current, logs = self._slices_to_read()
            base = None
            if current is not None and current.base_file:
                base = self.mdt.read_base(current.base_file, keys)
            wanted = set(keys) if keys is not None else None
            view = MergedView(base)
            touched: dict[str, list[dict]] = {}
            blocks: list[LogBlock] = []
            for path in logs:
                decoded = self.mdt.read_log(path)
                view.corrupt += decoded.corrupt
                blocks += decoded.blocks
            rolled_back = rolled_back_targets(blocks)
            for block in blocks:
                if block.block_type != DATA or block.instant in rolled_back or not self.is_valid(block.instant):
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

    # queries -------------------------------------------------------------------------
    def all_partitions(self) -> list[str]:
        view = self.merged([rec.ALL_PARTITIONS])
        record = view.overrides.get(rec.ALL_PARTITIONS) or base_records(view.base, [rec.ALL_PARTITIONS]).get(
            rec.ALL_PARTITIONS
        )
        partitions = sorted(rec.data_partition(k) for k in rec.live_files(record))
        METRICS.incr(LOOKUP_PARTITIONS, len(partitions))
        return partitions

    def listing(self, partitions: list[str] | None = None) -> pa.Table:
        """(partition, file, size) of live files, filtered by the data timeline.

        One read of the MDT whatever the number of partitions asked for.
        """
        keys = None if partitions is None else [rec.partition_key(p) for p in partitions]
        view = self.merged(keys)
        parts = []
        if view.base is not None and view.base.num_rows:
            base = view.base
            if view.overrides:
                base = base.filter(pc.invert(pc.is_in(base.column("key"), pa.array(list(view.overrides)))))
            parts.append(_flatten(base))
        if view.overrides:
            rows = [
                {"partition": record["key"], "file": name, "size": size}
                for record in view.overrides.values()
                for name, size in rec.live_files(record).items()
            ]
            parts.append(pa.Table.from_pylist(rows, schema=LISTING_SCHEMA))
        listing = pa.concat_tables(parts) if parts else LISTING_SCHEMA.empty_table()
        listing = listing.filter(pc.not_equal(listing.column("partition"), rec.ALL_PARTITIONS))
        listing = self._filter_by_data_timeline(listing)
        partition = pc.if_else(
            pc.equal(listing.column("partition"), rec.NON_PARTITIONED), "", listing.column("partition")
        )
        listing = listing.set_column(0, "partition", partition)
        METRICS.incr(LOOKUP_FILES, listing.num_rows)
        return listing

    def _filter_by_data_timeline(self, listing: pa.Table) -> pa.Table:
        if listing.num_rows == 0:
            return listing
        instants = pc.struct_field(pc.extract_regex(listing.column("file"), _INSTANT_OF_FILE), "instant")
        keep = pc.is_in(instants, pa.array(sorted(self.data_timeline.completed_times()), pa.string()))
        if self.data_timeline.archived_files and self.data_timeline.instants:
            keep = pc.or_(keep, pc.less(instants, self.data_timeline.earliest_time()))
        return listing.filter(pc.fill_null(keep, False))


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
