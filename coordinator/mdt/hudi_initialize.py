"""Building the metadata table of a table that has files, in Hudi's format, as Hudi 0.15 initializes one:
`files` from the storage listing, `bloom_filters` and `column_stats` from the listed files' Parquet footers,
each partition a bulk insert delta commit after the last completed data instant
(`MetadataTable.create_in_hudi_format`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from coordinator.mdt.hudi_index_build import index_records
from timeline.errors import UnreadableDataFileError
from timeline.format.active_timeline import ActiveTimeline
from timeline.mdt import hudi_commit_records
from timeline.mdt.hudi_layout import FILES, SOLO_COMMIT_TIMESTAMP
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


def initialize(
    mdt: MetadataTable,
    table_name: str,
    data_timeline: ActiveTimeline,
    indexes: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
) -> str:
    """Build the MDT (`files`, and the index partitions of `indexes`, `progress` told of each data file read
    for one); the time of its first delta commit. The caller holds the lock and has checked that no data
    instant is pending."""
    with METRICS.timed(INITIALIZE):
        return _initialize(mdt, table_name, data_timeline, indexes, progress)


def _initialize(
    mdt: MetadataTable,
    table_name: str,
    data_timeline: ActiveTimeline,
    indexes: Sequence[str],
    progress: Callable[[int], None] | None,
) -> str:
    files = _listing(mdt, data_timeline)
    named = [(p, n) for p, names in sorted(files.items()) for n in sorted(names)]

    def records_of(partition: str, time: str) -> list[dict]:
        if partition == FILES:
            return hudi_commit_records.listing_records(files)
        try:
            return index_records(mdt.data_storage, {partition: time}, named, progress)[partition]
        except UnreadableDataFileError as err:
            raise UnreadableDataFileError(
                f"{err}; the metadata table is left unbuilt (readers list storage): repair or remove that file, "
                "or build the table without that index"
            ) from err

    start = max(data_timeline.completed_times(), default=SOLO_COMMIT_TIMESTAMP)
    return mdt.create_in_hudi_format(table_name, indexes, start, records_of)[0]
