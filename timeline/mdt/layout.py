"""Where the metadata table keeps things, and the file slices of its partitions.

One file group, `files-0000`. A slice is named by its base instant B: the base
file `files/files-0000_0-0-0_B.parquet` (absent for the initial slice) and log
files `files/.files-0000_B.log.<version>_0-0-0`, one per MDT deltacommit. The
log file name carries no per-writer token, so claiming a version with
create-if-absent is the storage-side fence between writers.

The index partitions (`column_stats`, `bloom_filters`) share that log chain:
an instant's records for every partition are blocks of its one log file, so one
claim fences them all. Each index partition has its own base file per slice,
`<partition>/<partition>-0000_0-0-0_B.parquet`, written by the same compaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMPACTION, State
from timeline.io.storage import Storage

MDT_DIR = ".hoodie/metadata"
MDT_META_DIR = f"{MDT_DIR}/.hoodie"
MDT_PROPERTIES = f"{MDT_META_DIR}/hoodie.properties"
FILES_PARTITION = "files"
FILE_ID = "files-0000"
TOKEN = "0-0-0"
INITIAL_SLICE = "00000000000000000"
BASE_CHECKSUMS_KEY = "tandem.base.crc32"  # compaction commit metadata: {base file path: CRC32 of its bytes}

_LOG_RE = re.compile(rf"^\.{FILE_ID}_(\d{{17}})\.log\.(\d+)_{TOKEN}$")
_BASE_RE = re.compile(rf"^{FILE_ID}_{TOKEN}_(\d{{17}})\.parquet$")


def log_name(base_instant: str, version: int) -> str:
    return f".{FILE_ID}_{base_instant}.log.{version}_{TOKEN}"


def base_name(base_instant: str) -> str:
    return f"{FILE_ID}_{TOKEN}_{base_instant}.parquet"


def log_path(base_instant: str, version: int) -> str:
    """Path relative to the MDT base (`.hoodie/metadata`)."""
    return f"{FILES_PARTITION}/{log_name(base_instant, version)}"


def base_path(base_instant: str) -> str:
    return f"{FILES_PARTITION}/{base_name(base_instant)}"


def index_base_path(partition: str, base_instant: str) -> str:
    """The base file of index partition `partition` in slice `base_instant` (absent until a compaction writes it)."""
    return f"{partition}/{partition}-0000_{TOKEN}_{base_instant}.parquet"


@dataclass
class Slice:
    base_instant: str
    base_file: str | None = None
    base_size: int = 0
    logs: dict[int, int] = field(default_factory=dict)  # version -> size
    stamps: dict[int, int] = field(default_factory=dict)  # version -> last-modified time in ns (0: unknown)

    def log_paths(self, below: int | None = None) -> list[str]:
        return [log_path(self.base_instant, v) for v in sorted(self.logs) if below is None or v < below]

    @property
    def max_version(self) -> int:
        return max(self.logs, default=0)


def list_slices(mdt: Storage) -> dict[str, Slice]:
    """Every slice present in storage, by base instant."""
    slices: dict[str, Slice] = {}
    for info in mdt.list_dir(FILES_PARTITION):
        name = info.base_name
        log = _LOG_RE.match(name)
        if log:
            s = slices.setdefault(log.group(1), Slice(log.group(1)))
            s.logs[int(log.group(2))] = int(info.size or 0)
            s.stamps[int(log.group(2))] = int(info.mtime_ns or 0)
            continue
        base = _BASE_RE.match(name)
        if base:
            s = slices.setdefault(base.group(1), Slice(base.group(1)))
            s.base_file = f"{FILES_PARTITION}/{name}"
            s.base_size = int(info.size or 0)
    return slices


def load_timeline(mdt: Storage) -> ActiveTimeline:
    return ActiveTimeline.load(mdt, ".hoodie")


def compactions(timeline: ActiveTimeline) -> list:
    return [i for i in timeline.instants if i.action == COMPACTION]


def latest_completed_compaction(timeline: ActiveTimeline) -> str:
    done = [i.time for i in compactions(timeline) if i.state == State.COMPLETED]
    return max(done, default=INITIAL_SLICE)


def pending_compactions(timeline: ActiveTimeline) -> list:
    return [i for i in compactions(timeline) if i.state != State.COMPLETED]


def writer_slice(timeline: ActiveTimeline) -> str:
    """New deltacommits go to the slice of the latest compaction, planned or done."""
    return max((i.time for i in compactions(timeline)), default=INITIAL_SLICE)
