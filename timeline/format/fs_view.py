"""File groups and their latest slices, keeping only files of completed instants."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from timeline.format import partition_path
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.file_names import BaseFile, parse_base_file
from timeline.io.storage import FileEntry, Storage


@dataclass
class FileGroup:
    partition: str
    file_id: str
    base_files: list[BaseFile]

    @property
    def latest(self) -> BaseFile:
        return max(self.base_files, key=lambda f: f.instant)


LISTING_THREADS = 16


def list_table_files(storage: Storage) -> list[FileEntry]:
    """Every file outside `.hoodie/` in canonical partition folders, one top-level folder per thread.

    Folders that are not canonical partition paths (hidden ones, the timeline)
    cannot hold table data, and the listing never follows a symlink.
    """
    top = [i for i in storage.list_dir("") if not i.base_name.startswith(".")]
    entries = [FileEntry(i.base_name, int(i.size or 0)) for i in top if i.type.name == "File"]
    folders = [i.base_name for i in top if i.type.name == "Directory" and partition_path.problem(i.base_name) is None]
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

    def __init__(self, files: Iterable[BaseFile], timeline: ActiveTimeline, as_of: str | None = None) -> None:
        self.timeline = timeline
        self.as_of = as_of
        replaced = timeline.replaced_file_ids(as_of)
        self.committed = [
            f for f in files if not (as_of and f.instant > as_of) and timeline.is_completed_or_archived(f.instant)
        ]
        groups: dict[tuple[str, str], list[BaseFile]] = defaultdict(list)
        for f in self.committed:
            if (f.partition, f.file_id) not in replaced:
                groups[(f.partition, f.file_id)].append(f)
        self.groups = {key: FileGroup(key[0], key[1], fs) for key, fs in groups.items()}

    def partitions(self) -> list[str]:
        return sorted({p for p, _ in self.groups})

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        return [g for (p, _), g in sorted(self.groups.items()) if partition is None or p == partition]

    def latest_base_files(self, partition: str | None = None) -> list[BaseFile]:
        return [g.latest for g in self.file_groups(partition)]

    def all_base_files(self) -> list[BaseFile]:
        return [f for g in self.groups.values() for f in g.base_files]

    def all_base_files_including_replaced(self) -> list[BaseFile]:
        """Every committed file, also of replaced file groups (what clean must see)."""
        return list(self.committed)
