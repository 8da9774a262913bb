"""The metadata table's file groups, and the file slice of each that a reader merges, chosen as Hudi 0.15's
file-system view chooses it (HoodieTableFileSystemView over the MDT, getLatestMergedFileSlicesBeforeOrOn).

A partition folder (`files/`, `column_stats/`, `bloom_filters/`) holds file groups (`files-0000-0`,
`col-stats-0001-0`, ...): base files `{fileId}_{token}_{instant}.hfile` and log files
`.{fileId}_{baseInstant}.log.{version}_{token}`. A log belongs to the slice its name's base instant keys; a
slice counts once its base instant is on the MDT write timeline, in any state (a compaction plans a new slice
before it completes), or is older than that timeline's first instant (archived). The slice read is the latest
counted one at or before the last completed MDT instant; while its base instant is a pending compaction, the
previous slice (base and logs) is read and the new slice's logs merged on top, the new base hidden.

Tandem is stricter than Java in one place: a base file is read only once its instant completed on the MDT
timeline (Java reads the base file of an inflight deltacommit too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMMIT, COMPACTION, DELTA_COMMIT, LOG_COMPACTION, REPLACE_COMMIT, State
from timeline.hudi_log import LogFileName, parse_log_name
from timeline.io import read_once
from timeline.io.storage import Storage

BASE_FILE_RE = re.compile(r"^(?P<file_id>.+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d+)\.hfile$")
_WRITE_TIMELINE = {COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION, LOG_COMPACTION}


@dataclass(frozen=True)
class LogFile:
    path: str  # relative to the MDT base: `<partition>/<name>`
    name: LogFileName
    size: int


@dataclass
class FileSlice:
    partition: str
    file_id: str
    base_instant: str
    base_file: str | None = None  # relative to the MDT base
    base_size: int = 0
    logs: list[LogFile] = field(default_factory=list)  # in Hudi's log file order

    @property
    def max_version(self) -> int:
        return max((log.name.version for log in self.logs), default=0)


@dataclass
class FileGroup:
    partition: str
    file_id: str
    slices: dict[str, FileSlice] = field(default_factory=dict)  # by base instant

    def slice(self, base_instant: str) -> FileSlice:
        return self.slices.setdefault(base_instant, FileSlice(self.partition, self.file_id, base_instant))


def list_file_groups(mdt: Storage, partition: str) -> list[FileGroup]:
    """Every file group of MDT partition `partition` as storage lists it, sorted by file id (the order Java
    maps record keys to groups in). Inside `read_once.reuse_reads()` one listing serves the health check and
    the reads and writes that follow, until this thread writes below the partition; callers never change
    the groups they are given."""
    return read_once.remembered(mdt.full(partition), "file groups", lambda: _list_file_groups(mdt, partition))


@lru_cache(maxsize=1 << 14)
def base_file_parts(name: str) -> tuple[str, str] | None:
    """(file id, instant) of an MDT base file name, or None for a name of another kind (remembered per name)."""
    found = BASE_FILE_RE.match(name)
    return None if found is None else (found["file_id"], found["instant"])


def _list_file_groups(mdt: Storage, partition: str) -> list[FileGroup]:
    groups: dict[str, FileGroup] = {}
    try:
        infos = mdt.list_dir(partition)
    except FileNotFoundError:
        return []
    for info in infos:
        name = info.base_name
        base = base_file_parts(name)
        if base is not None:
            file_id, instant = base
            group = groups.setdefault(file_id, FileGroup(partition, file_id))
            found = group.slice(instant)
            if found.base_file is None or name < found.base_file.rsplit("/", 1)[-1]:
                found.base_file, found.base_size = f"{partition}/{name}", int(info.size or 0)
            continue
        log = parse_log_name(name) if ".log." in name and not name.endswith(".crc") else None
        # exactly a log's name: a temp file a killed create-if-absent left (`<log name>.<uuid>.tmp`) is no log
        if log is not None and log.name == name and log.extension == ".log" and not log.suffix:
            group = groups.setdefault(log.file_id, FileGroup(partition, log.file_id))
            group.slice(log.base_instant).logs.append(LogFile(f"{partition}/{name}", log, int(info.size or 0)))
    for group in groups.values():
        for found in group.slices.values():
            found.logs.sort(key=lambda log: log.name.order_key)
    return [groups[file_id] for file_id in sorted(groups)]


@dataclass(frozen=True)
class TimelineFacts:
    """What slice choice needs from the MDT timeline, worked out once per read."""

    write_times: frozenset[str]  # instants of write actions, any state
    first_time: str | None  # the timeline's first instant: older slices are archived, hence counted
    last_completed: str  # the last completed instant of any action ("" if none)
    completed: frozenset[str]
    pending_compactions: frozenset[str]

    @classmethod
    def of(cls, timeline: ActiveTimeline) -> TimelineFacts:
        instants = timeline.instants
        completed = frozenset(i.time for i in instants if i.state == State.COMPLETED)
        return cls(
            write_times=frozenset(i.time for i in instants if i.action in _WRITE_TIMELINE),
            first_time=min((i.time for i in instants), default=None),
            last_completed=max(completed, default=""),
            completed=completed,
            pending_compactions=frozenset(
                i.time for i in instants if i.action == COMPACTION and i.state != State.COMPLETED
            ),
        )

    def counts(self, base_instant: str) -> bool:
        if base_instant in self.write_times:
            return True
        return self.first_time is not None and base_instant < self.first_time


def slices_to_read(group: FileGroup, facts: TimelineFacts) -> list[FileSlice]:
    """The slices a reader merges for one file group, oldest first: the latest counted slice at or before the
    last completed instant, preceded by the previous slice while that one's compaction is pending. A base file
    whose instant has not completed is left out."""
    counted = sorted(b for b in group.slices if facts.counts(b) and b <= facts.last_completed)
    if not counted:
        return []
    latest = counted[-1]
    chosen = [latest]
    if latest in facts.pending_compactions and len(counted) > 1:
        chosen.insert(0, counted[-2])
    out = []
    for base_instant in chosen:
        found = group.slices[base_instant]
        if found.base_file is not None and base_instant not in facts.completed:
            found = FileSlice(found.partition, found.file_id, base_instant, None, 0, found.logs)
        out.append(found)
    return out
