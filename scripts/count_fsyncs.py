"""fsyncs per commit on local storage: `.venv/bin/python scripts/count_fsyncs.py`.

Counts `os.fsync` calls around `LocalWriter.write` of 100 rows over 5
partitions (default settings: file lock, metadata table with its indexes),
listing what each flushed for one steady commit, so the numbers in
docs/design.md ("Durability") can be checked.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coordinator.write.writer import LocalWriter  # noqa: E402
from timeline.table import Table  # noqa: E402

FLUSHED: list[tuple[str, bool]] = []  # (path, is a folder)
_REAL_FSYNC = os.fsync


def _recording_fsync(fd: int) -> None:
    FLUSHED.append((os.readlink(f"/proc/self/fd/{fd}"), stat.S_ISDIR(os.fstat(fd).st_mode)))
    _REAL_FSYNC(fd)


def rows(start: int, value: float) -> pa.Table:
    ids = list(range(start, start + 100))
    return pa.table({"id": ids, "p": [f"p{i % 5}" for i in ids], "v": [value] * 100})


def flushed_by(base: str, data: pa.Table, operation: str) -> list[tuple[str, bool]]:
    FLUSHED.clear()
    LocalWriter(Table.open(base)).write(data, operation)
    return [(path.removeprefix(base), is_dir) for path, is_dir in FLUSHED]


def kind(path: str, is_dir: bool) -> str:
    """What a flushed path is: instant times as T, temp-file suffixes and data file names folded away."""
    if is_dir:
        return f"folder {path or '/'}"
    path = re.sub(r"\.[0-9a-f]{32}\.tmp$", "", re.sub(r"\d{17}", "T", path))
    return "file " + re.sub(r"/[^/]+\.parquet$", "/*.parquet", path)


def main() -> None:
    os.fsync = _recording_fsync
    base = tempfile.mkdtemp() + "/t"
    Table.create(base, "t", ["id"], ["p"])
    print("first commit (5 new partitions):", len(flushed_by(base, rows(0, 1.0), "insert")))
    steady = flushed_by(base, rows(100, 2.0), "insert")
    print("insert into existing partitions:", len(steady))
    for what, count in sorted(Counter(kind(*flushed) for flushed in steady).items()):
        print(f"  {count} x {what}")
    print("upsert (rewrites 5 files):", len(flushed_by(base, rows(0, 3.0), "upsert")))
    counts = [len(flushed_by(base, rows(1000 + 100 * i, 4.0), "insert")) for i in range(30)]
    print(f"30 more inserts (MDT compaction, clean, archival as they come): mean {sum(counts) / len(counts):.2f}")


if __name__ == "__main__":
    main()
