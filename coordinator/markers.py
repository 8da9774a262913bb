"""Markers: `.hoodie/.temp/T/<partition>/<file>.marker.<CREATE|MERGE>`, written before each file.

They name every file an instant may have written, so finalize and rollback
can find files that a crash or a retried task left behind.
"""

from __future__ import annotations

from timeline.storage import Storage
from timeline.table import TEMP_DIR

MARKER_SUFFIX = ".marker."


def marker_dir(time: str) -> str:
    return f"{TEMP_DIR}/{time}"


def create_marker(storage: Storage, time: str, path: str, kind: str = "CREATE") -> None:
    storage.create_if_absent(f"{marker_dir(time)}/{path}{MARKER_SUFFIX}{kind}", b"", durable=False)


def marked_files(storage: Storage, time: str) -> list[str]:
    """Data files (relative to the base) that instant `time` may have written."""
    prefix = len(marker_dir(time)) + 1
    out = set()
    for entry in storage.list_files(marker_dir(time)):
        rel = entry.path[prefix:]
        cut = rel.rfind(MARKER_SUFFIX)
        if cut > 0:
            out.add(rel[:cut])
    return sorted(out)
