"""The data table's files as storage lists them, as MDT records: what an initializing compaction writes
into the first base file and what `validate` compares the MDT with. Both sides need it, so it is its own
module below them both."""

from __future__ import annotations

import json

import pyarrow as pa

from timeline.format.active_timeline import ActiveTimeline
from timeline.format.file_names import PARTITION_METADATA, split_path
from timeline.format.fs_view import list_table_files, parse_listing
from timeline.io.storage import Storage
from timeline.mdt import records as rec
from timeline.mdt.reader import LISTING_SCHEMA


def list_storage(storage: Storage, data_timeline: ActiveTimeline) -> pa.Table:
    """(partition, file, size) of every base file of a completed instant, listed in parallel."""
    entries = list_table_files(storage)
    files = [f for f in parse_listing(entries) if data_timeline.is_completed_or_archived(f.instant)]
    partitions = {split_path(e.path)[0] for e in entries if e.path.endswith(PARTITION_METADATA)}
    partitions |= {f.partition for f in files}
    table = pa.Table.from_pylist(
        [{"partition": f.partition, "file": f.name, "size": f.size} for f in files], schema=LISTING_SCHEMA
    )
    return table.replace_schema_metadata({"partitions": json.dumps(sorted(partitions))})


def storage_records(storage: Storage, data_timeline: ActiveTimeline) -> dict[str, dict]:
    """The `files` partition's records of that listing: one per partition, and the list of partitions."""
    listing = list_storage(storage, data_timeline)
    partitions = json.loads(listing.schema.metadata[b"partitions"])
    by_partition: dict[str, dict[str, int]] = {p: {} for p in partitions}
    for row in listing.to_pylist():
        by_partition.setdefault(row["partition"], {})[row["file"]] = row["size"]
    records = {rec.partition_key(p): rec.file_list(p, files) for p, files in by_partition.items()}
    records[rec.ALL_PARTITIONS] = rec.partition_list(sorted(by_partition))
    return records
