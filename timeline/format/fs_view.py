"""File groups and their latest base files, keeping only files of completed instants."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from timeline.errors import CorruptInstantError
from timeline.format import partition_path
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.data_logs import DataLog, parse_data_log, slice_logs
from timeline.format.file_names import BaseFile, parse_base_file
from timeline.format.partition_path import canonical_all
from timeline.io.storage import FileEntry, Storage


@dataclass
class FileGroup:
    partition: str
    file_id: str
    base_files: list[BaseFile]


LISTING_THREADS = 16
SMALL_VIEW = 256  # files up to which a view picks its latest files in Python (see `_newest_of_live_groups`)

_GROUP_SCHEMA = pa.schema([("partition", pa.string()), ("file_id", pa.string()), ("instant", pa.string())])
FILES_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("file", pa.string()),
        ("size", pa.int64()),
        ("file_id", pa.string()),
        ("instant", pa.string()),
    ]
)


def list_table_files(storage: Storage) -> list[FileEntry]:
    """Every file outside `.hoodie/` in canonical partition folders, one top-level folder per thread.

    Folders that are not canonical partition paths (hidden ones, the timeline)
    cannot hold table data, and the listing never follows a symlink. At the top
    (a non-partitioned table's folder) hidden files are skipped but for
    merge-on-read logs, whose names start with a dot.
    """
    listed = storage.list_dir("")
    top = [i for i in listed if not i.base_name.startswith(".") or parse_data_log("", i.base_name) is not None]
    entries = [FileEntry(i.base_name, int(i.size or 0)) for i in top if i.type.name == "File"]
    folders = [
        i.base_name
        for i in top
        if i.type.name == "Directory"
        and not i.base_name.startswith(".")
        and partition_path.problem(i.base_name) is None
    ]
    with ThreadPoolExecutor(LISTING_THREADS) as pool:
        for listed in pool.map(storage.list_files, folders):
            entries.extend(e for e in listed if _in_partition(e.path))
    return entries


def _in_partition(path: str) -> bool:
    """Whether a listed file sits in a canonical partition folder (not in a hidden one, say)."""
    return partition_path.problem(path.rpartition("/")[0]) is None


def list_base_files(storage: Storage) -> list[BaseFile]:
    """Every Hudi base file in the table's partition folders (a storage listing)."""
    return parse_listing(list_table_files(storage))


def parse_listing(entries: Iterable[FileEntry]) -> list[BaseFile]:
    """Base files among listed entries; hidden files and non-canonical folders are skipped."""
    files = []
    for entry in entries:
        partition, _, name = entry.path.rpartition("/")
        if name.startswith(".") or partition_path.problem(partition) is not None:
            continue
        parsed = parse_base_file(partition, name, entry.size)
        if parsed is not None:
            files.append(parsed)
    return files


class FileSystemView:
    """What a snapshot (or an as-of snapshot) of the table consists of."""

    def __init__(
        self,
        files: Iterable[BaseFile],
        timeline: ActiveTimeline,
        as_of: str | None = None,
        logs: Iterable[DataLog] = (),
    ) -> None:
        self.timeline = timeline
        self.as_of = as_of
        self.logs = list(logs)  # a merge-on-read table's log files, as listed (their blocks say who wrote them)
        replaced = timeline.replaced_file_ids(as_of)
        self.committed = [
            f
            for f in files
            if not (as_of is not None and f.instant > as_of) and timeline.is_completed_or_archived(f.instant)
        ]
        groups: dict[tuple[str, str], list[BaseFile]] = defaultdict(list)
        for f in self.committed:
            if (f.partition, f.file_id) not in replaced:
                groups[(f.partition, f.file_id)].append(f)
        self.groups = {key: FileGroup(key[0], key[1], fs) for key, fs in groups.items()}
        self._latest: list[BaseFile] | None = None
        self._slice_logs: dict[tuple[str, str], list[DataLog]] | None = None

    def partitions(self) -> list[str]:
        return sorted({p for p, _ in self.groups})

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        return [g for (p, _), g in sorted(self.groups.items()) if partition is None or p == partition]

    def latest_table(self) -> pa.Table:
        """The latest base files as a FILES_SCHEMA table (what the scan planner works on)."""
        return files_table(self.latest_base_files())

    def latest_base_files(self, partition: str | None = None) -> list[BaseFile]:
        """The latest base file of each live file group, as `latest_mask` chooses them (the one rule, for
        listings from storage and from the metadata table alike), in group order."""
        if self._latest is None and len(self.committed) <= SMALL_VIEW:
            self._latest = sorted(self._newest_of_live_groups(), key=lambda f: (f.partition, f.file_id))
        if self._latest is None:
            columns = {
                "partition": [f.partition for f in self.committed],
                "file_id": [f.file_id for f in self.committed],
                "instant": [f.instant for f in self.committed],
            }
            keep = latest_mask(pa.table(columns, schema=_GROUP_SCHEMA), self.timeline, self.as_of)
            chosen = [f for f, kept in zip(self.committed, keep.tolist(), strict=True) if kept]
            self._latest = sorted(chosen, key=lambda f: (f.partition, f.file_id))
        return [f for f in self._latest if partition is None or f.partition == partition]

    def slice_logs(self) -> dict[tuple[str, str], list[DataLog]]:
        """The log files of each group's latest slice, in read order (`data_logs.slice_logs`)."""
        if self._slice_logs is None:
            replaced = self.timeline.replaced_file_ids(self.as_of)
            self._slice_logs = slice_logs(self.latest_base_files(), self.logs, self.as_of, replaced)
        return self._slice_logs

    def _newest_of_live_groups(self) -> list[BaseFile]:
        """`latest_mask`'s rule in Python, for a view of a few files (a partition lookup), where Arrow's fixed
        cost per call is most of the work: replaced groups dropped, the first newest file of each group kept."""
        replaced = self.timeline.replaced_file_ids(self.as_of)
        newest: dict[tuple[str, str], BaseFile] = {}
        for f in self.committed:
            group = (f.partition, f.file_id)
            if group not in replaced and (group not in newest or f.instant > newest[group].instant):
                newest[group] = f
        return list(newest.values())

    def all_base_files(self) -> list[BaseFile]:
        return [f for g in self.groups.values() for f in g.base_files]

    def all_base_files_including_replaced(self) -> list[BaseFile]:
        """Every committed file, also of replaced file groups (what clean must see)."""
        return list(self.committed)


def files_table(files: list[BaseFile]) -> pa.Table:
    return pa.table(
        {
            "partition": [f.partition for f in files],
            "file": [f.name for f in files],
            "size": [f.size for f in files],
            "file_id": [f.file_id for f in files],
            "instant": [f.instant for f in files],
        },
        schema=FILES_SCHEMA,
    )


def latest_files(listing: pa.Table, timeline: ActiveTimeline, as_of: str | None) -> pa.Table:
    """A listing of base files (FILES_SCHEMA) -> the latest base file of each live file group, as of `as_of`:
    the one rule, in Arrow kernels, for the MDT's listings and for `FileSystemView`.

    Partitions must be canonical (else the record is corrupt), files after `as_of` and replaced file groups
    are dropped, and the newest instant of each group wins. The listing holds files of completed (or
    archived) instants only.
    """
    files = listing.select(FILES_SCHEMA.names)
    canonical_all(pc.unique(files.column("partition")), "metadata table listing", CorruptInstantError)
    return files.filter(pa.array(latest_mask(files, timeline, as_of), pa.bool_()))


def latest_mask(files: pa.Table, timeline: ActiveTimeline, as_of: str | None) -> np.ndarray:
    """The one rule, over the `partition`, `file_id` and `instant` columns of a listing: which rows are the
    latest base file of a live file group as of `as_of` (files after it and replaced groups dropped, the newest
    instant of each group kept)."""
    live = np.ones(files.num_rows, dtype=bool)
    if as_of is not None:
        live &= pc.less_equal(files.column("instant"), as_of).to_numpy(zero_copy_only=False)
    replaced = timeline.replaced_file_ids(as_of)
    if replaced:
        groups = pc.binary_join_element_wise(files.column("partition"), files.column("file_id"), "\x00")
        gone = pc.is_in(groups, pa.array(["\x00".join(k) for k in replaced], pa.string()))
        live &= ~gone.to_numpy(zero_copy_only=False)
    if live.all():
        return _newest_of_each_group(files)
    rows = np.nonzero(live)[0]
    keep = np.zeros(files.num_rows, dtype=bool)
    keep[rows[_newest_of_each_group(files.take(rows))]] = True
    return keep


def _newest_of_each_group(files: pa.Table) -> np.ndarray:
    """The rows to keep: the newest instant of each (partition, file id) group. Most file ids occur once,
    so only the rows of file ids that occur several times are compared one by one."""
    codes = files.column("file_id").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    counts = np.bincount(codes) if len(codes) else np.zeros(0, dtype=np.int64)
    keep = counts[codes] == 1
    several = np.nonzero(~keep)[0]
    newest: dict[tuple[str, str], tuple[str, int]] = {}
    columns = [files.column(c).take(several).to_pylist() for c in ("partition", "file_id", "instant")]
    for row, partition, file_id, instant in zip(several, *columns, strict=True):
        group = (partition, file_id)
        if group not in newest or instant > newest[group][0]:
            newest[group] = (instant, row)
    keep[[row for _, row in newest.values()]] = True
    return keep
