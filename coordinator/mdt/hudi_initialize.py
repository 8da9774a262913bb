"""Building the metadata table of a table that has files, in Hudi's format, as Hudi 0.15 initializes one:
`files` from the storage listing, `bloom_filters` and `column_stats` from the listed files' Parquet footers,
each partition a bulk insert delta commit after the last completed data instant
(`MetadataTable.create_in_hudi_format`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from coordinator.mdt.hudi_deltacommit import bloom_filter_records, footers
from timeline.format.active_timeline import ActiveTimeline
from timeline.mdt import hudi_commit_records
from timeline.mdt.hudi_layout import COLUMN_STATS, FILES, SOLO_COMMIT_TIMESTAMP
from timeline.mdt.storage_listing import list_storage
from timeline.mdt.table import MetadataTable
from timeline.metrics import INITIALIZE, METRICS


def _listing(mdt: MetadataTable, data_timeline: ActiveTimeline) -> dict[str, dict[str, int]]:
    """partition -> {file name: size} of every base file of a completed instant (partitions without files kept)."""
    listing = list_storage(mdt.data_storage, data_timeline)
    by_partition: dict[str, dict[str, int]] = {p: {} for p in json.loads(listing.schema.metadata[b"partitions"])}
    for row in listing.to_pylist():
        by_partition.setdefault(row["partition"], {})[row["file"]] = row["size"]
    return by_partition


def initialize(mdt: MetadataTable, table_name: str, data_timeline: ActiveTimeline, indexes: Sequence[str] = ()) -> str:
    """Build the MDT (`files`, and the index partitions of `indexes`); the time of its first delta commit.
    The caller holds the lock and has checked that no data instant is pending."""
    with METRICS.timed(INITIALIZE):
        return _initialize(mdt, table_name, data_timeline, indexes)


def _initialize(mdt: MetadataTable, table_name: str, data_timeline: ActiveTimeline, indexes: Sequence[str]) -> str:
    files = _listing(mdt, data_timeline)
    named = [(p, n) for p, names in sorted(files.items()) for n in sorted(names)]
    read: list = []

    def records_of(partition: str, time: str) -> list[dict]:
        if partition == FILES:
            return hudi_commit_records.listing_records(files)
        if not read:
            read.extend(zip(named, footers(mdt.data_storage, named), strict=True))
        if partition == COLUMN_STATS:
            return [r for (p, n), f in read for r in hudi_commit_records.column_stats_records(p, n, f)]
        return bloom_filter_records(mdt.data_storage, time, read)

    start = max(data_timeline.completed_times(), default=SOLO_COMMIT_TIMESTAMP)
    return mdt.create_in_hudi_format(table_name, indexes, start, records_of)[0]
