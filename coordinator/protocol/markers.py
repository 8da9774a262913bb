"""Markers: `.hoodie/.temp/T/<partition>/<file>.marker.<CREATE|MERGE>`, written before each file.

They name every file an instant may have written, so finalize and rollback
can find files that a crash or a retried task left behind.
"""

from __future__ import annotations

import warnings

from timeline.errors import BadInputError, CorruptInstantError, FencedError, RefusedDeleteWarning
from timeline.format import partition_path
from timeline.io.storage import Storage
from timeline.table import TEMP_DIR

MARKER_SUFFIX = ".marker."


def marker_dir(time: str) -> str:
    """`.hoodie/.temp/<time>`; `time` is one folder name (a listed one may be junk, never a path)."""
    found = partition_path.name_problem(time) or ("contains '/'" if "/" in time else None)
    if found is not None:
        raise BadInputError(f"marker folder of instant {partition_path.shown(time)}: the instant {found}")
    return f"{TEMP_DIR}/{time}"


def marker_path(time: str, path: str, kind: str) -> str:
    return f"{marker_dir(time)}/{path}{MARKER_SUFFIX}{kind}"


def create_marker(storage: Storage, time: str, path: str, kind: str = "CREATE") -> None:
    """Only a rollback removes a pending instant's marker folder; losing it mid-create means stop writing."""
    partition_path.split_file_path(path, f"marker of instant {time}")
    try:
        storage.create_if_absent(marker_path(time, path, kind), b"", durable=False)
    except FileNotFoundError as err:
        raise FencedError(f"instant {time}: its marker folder was removed: another process rolled it back") from err


def marked_files(storage: Storage, time: str) -> list[str]:
    """Data files (relative to the base) that instant `time` may have written.

    A marker that names no canonical data path is junk: reported, never a path to delete.
    """
    prefix = len(marker_dir(time)) + 1
    out = set()
    for entry in storage.list_files(marker_dir(time)):
        rel = entry.path[prefix:]
        cut = rel.rfind(MARKER_SUFFIX)
        if cut <= 0:
            continue
        try:
            partition_path.split_file_path(rel[:cut], f"marker {entry.path}", CorruptInstantError)
        except CorruptInstantError as err:
            warnings.warn(f"ignored marker: {err}", RefusedDeleteWarning, stacklevel=2)
            continue
        out.add(rel[:cut])
    return sorted(out)
