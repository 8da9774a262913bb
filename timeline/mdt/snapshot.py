"""What a metadata table in Hudi's format says at one moment: the data table's partitions, the files of each,
and the column statistics and bloom filters of base files. Each question reads only the file groups its keys
map to (`mapRecordKeyToFileGroupIndex` over the partition's groups sorted by file id, as Java maps them), and
in them only the keys or key prefixes asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from timeline.format.active_timeline import ActiveTimeline
from timeline.io.lru import LruCache
from timeline.io.storage import Storage
from timeline.mdt import hudi_keys, hudi_records
from timeline.mdt.file_slices import FileGroup, TimelineFacts, list_file_groups, slices_to_read
from timeline.mdt.hudi_layout import BLOOM_FILTERS, COLUMN_STATS, FILES
from timeline.mdt.hudi_records import BloomFilter, ColumnStats
from timeline.mdt.slice_records import GroupRecords, read_group, valid_instants

_ID_LENGTH = len(hudi_keys.column_index_id(""))  # a column's or partition's part of a column_stats key
_LIVE: LruCache[int, tuple[dict, dict[str, int]]] = LruCache(1024)


def _live_files(record: dict) -> dict[str, int]:
    """{file name: size} of a `files` record's live entries, worked out once per record object: base records
    are kept per process (`slice_records`), so a partition no log touched costs nothing the next time."""
    found = _LIVE.get(id(record))
    if found is not None and found[0] is record:
        return found[1]
    entries = record[hudi_records.FILES_FIELD] or {}
    live = {name: info["size"] for name, info in entries.items() if not info["isDeleted"]}
    _LIVE.put(id(record), (record, live))
    return live


@dataclass
class MetadataSnapshot:
    """The MDT under `mdt` (its base folder) as of `mdt_timeline`, blocks filtered by `is_valid`."""

    mdt: Storage
    mdt_timeline: ActiveTimeline
    is_valid: Callable[[str], bool]
    corrupt: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, mdt: Storage, mdt_timeline: ActiveTimeline, data_timeline: ActiveTimeline) -> MetadataSnapshot:
        return cls(mdt, mdt_timeline, valid_instants(data_timeline, mdt_timeline))

    def __post_init__(self) -> None:
        self._facts = TimelineFacts.of(self.mdt_timeline)
        self._groups: dict[str, list[FileGroup]] = {}

    def file_groups(self, partition: str) -> list[FileGroup]:
        if partition not in self._groups:
            self._groups[partition] = list_file_groups(self.mdt, partition)
        return self._groups[partition]

    def _read(
        self, partition: str, keys: Collection[str] | None = None, prefixes: Sequence[str] | None = None
    ) -> dict[str, dict]:
        groups = self.file_groups(partition)
        if not groups:
            return {}
        if keys is not None:
            by_group: dict[int, list[str]] = {}
            for key in keys:
                by_group.setdefault(hudi_keys.file_group_index(key, len(groups)), []).append(key)
            wanted = [(groups[i], group_keys) for i, group_keys in sorted(by_group.items())]
        else:
            wanted = [(group, None) for group in groups]
        records: dict[str, dict] = {}
        for group, group_keys in wanted:
            read: GroupRecords = read_group(
                self.mdt, slices_to_read(group, self._facts), self._facts, self.is_valid, group_keys, prefixes
            )
            self.corrupt += read.corrupt
            records.update(read.records)
        return records

    # -- files
    def partitions(self) -> list[str]:
        """Every data partition ("" for a non-partitioned table), sorted."""
        record = self._read(FILES, [hudi_keys.ALL_PARTITIONS]).get(hudi_keys.ALL_PARTITIONS)
        if record is None:
            return []
        names = [n for n, info in hudi_records.files_of(record).items() if not info.is_deleted]
        return sorted("" if n == hudi_keys.NON_PARTITIONED else n for n in names)

    def record_count(self, partition: str) -> int:
        """Live records of one MDT partition, every key merged (a full read: for reports, not for plans)."""
        return len(self.records(partition))

    def records(self, partition: str) -> dict[str, dict]:
        """Every merged record of one MDT partition, by key (a full read: for checks and reports)."""
        return self._read(partition)

    def files_records(self, keys: Collection[str] | None = None) -> dict[str, dict]:
        """The merged `files` records of `keys` (None: every record), by key; tombstoned entries included."""
        return self._read(FILES, keys)

    def files(self, partitions: Sequence[str]) -> dict[str, dict[str, int]]:
        """partition -> {file name: size} of the live files the MDT lists there."""
        keys = {hudi_keys.files_key(p): p for p in partitions}
        records = self._read(FILES, list(keys))
        out: dict[str, dict[str, int]] = {p: {} for p in partitions}
        for key, record in records.items():
            out[keys[key]] = _live_files(record)
        return out

    # -- indexes
    def column_stats(self, columns: Sequence[str], partitions: Sequence[str] | None = None) -> list[ColumnStats]:
        """The column statistics of `columns`, in every partition or only in `partitions` (key prefix scans)."""
        prefixes = [
            hudi_keys.column_index_id(c)
            + (hudi_keys.partition_index_id(hudi_keys.partition_identifier(p)) if p is not None else "")
            for c in columns
            for p in (partitions if partitions is not None else [None])
        ]
        records = self._read(COLUMN_STATS, prefixes=prefixes)
        return [hudi_records.column_stats_of(r) for _, r in sorted(records.items())]

    def column_stats_of_files(
        self, columns: Sequence[str], partitions: Sequence[str]
    ) -> dict[tuple[str, str], list[ColumnStats]]:
        """(partition, file name) -> the live column statistics of `columns` of each file in `partitions`,
        read in one pass of key prefix scans; the key's partition part says which partition a record is of."""
        by_id = {hudi_keys.partition_index_id(hudi_keys.partition_identifier(p)): p for p in partitions}
        prefixes = [hudi_keys.column_index_id(c) + partition_id for c in columns for partition_id in by_id]
        out: dict[tuple[str, str], list[ColumnStats]] = {}
        for key, record in sorted(self._read(COLUMN_STATS, prefixes=prefixes).items()):
            stats = hudi_records.column_stats_of(record)
            if not stats.is_deleted:
                partition = by_id[key[_ID_LENGTH : 2 * _ID_LENGTH]]
                out.setdefault((partition, stats.file_name), []).append(stats)
        return out

    def bloom_filters(self, files: Sequence[tuple[str, str]]) -> dict[tuple[str, str], BloomFilter]:
        """(partition, file name) -> the bloom filter record of each base file the MDT has one for."""
        keys = {hudi_keys.bloom_filter_key(p, f): (p, f) for p, f in files}
        records = self._read(BLOOM_FILTERS, list(keys))
        return {keys[k]: hudi_records.bloom_filter_of(r) for k, r in records.items()}
