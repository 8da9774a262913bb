"""The one rule for partition paths, applied wherever a partition path is made or read.

A partition path is `""` (not partitioned) or `/`-separated folder names, as
Hudi's key generators make them (a `/` inside a value is a nested folder). A
path that is not canonical could name a folder other than the one the value
means (`a//b`, `a/`, `.`, `..`), reach into the timeline (`.hoodie...`), be
skipped by every reader's listing (any hidden `.name` folder), or fail only
once files are half written (too long for the file system); all are refused
before anything is written, and a file that holds one is corrupt.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from timeline.errors import BadInputError

MAX_NAME_BYTES = 255
MAX_PATH_CHARS = 1024
HOODIE = ".hoodie"
SHOWN_CHARS = 80  # characters of a value a message shows (`shown`)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc
# Paths of plain ASCII folder names, MAX_NAME_BYTES characters at most in all, are canonical on sight: no
# '.', '\\', control character or empty name. Checked in bulk; anything else goes through `problem`.
PLAIN_PATH = "^[A-Za-z0-9_=+-]+(/[A-Za-z0-9_=+-]+)*$"


@lru_cache(maxsize=1 << 14)
def name_problem(name: str, kind: str = "folder") -> str | None:
    """Why one folder or file name cannot be used below the table base, or None."""
    if name == "":
        return f"has an empty {kind} name (a leading, trailing or doubled '/')"
    if name == "..":
        return f"has '..' as a {kind} name, which escapes the table base or its folder"
    if name == ".":
        return f"has '.' as a {kind} name"
    if "\\" in name:
        return "contains a backslash"
    if _CONTROL.search(name):
        return "contains a control character"
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return f"has a {kind} name of {size} UTF-8 bytes (at most {MAX_NAME_BYTES})"
    return None


@lru_cache(maxsize=1 << 14)
def problem(path: str) -> str | None:
    """Why `path` is not a canonical partition path, or None (`""` is the non-partitioned table's)."""
    if path == "":
        return None
    if len(path) > MAX_PATH_CHARS:
        return f"is {len(path)} characters long (at most {MAX_PATH_CHARS})"
    for folder in path.split("/"):
        if folder.startswith(HOODIE):
            return f"has folder {shown(folder)}, which is reserved for the timeline"
        if folder.startswith(".") and folder not in (".", ".."):
            return f"has folder {shown(folder)}, which readers skip as hidden"
        found = name_problem(folder)
        if found is not None:
            return found
    return None


def shown(value: str) -> str:
    """`value` quoted for a one-line message, shortened when long."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"


def canonical(path: str, where: str, error: type[BadInputError] = BadInputError) -> str:
    """`path` itself when canonical; otherwise `error` naming `where` and the path."""
    found = problem(path)
    if found is not None:
        raise error(f"{where}: partition path {shown(path)} {found}")
    return path


def file_path(partition: str, name: str) -> str:
    """A file's path relative to the table base: `name` under `partition` ("" is the base itself)."""
    return f"{partition}/{name}" if partition else name


def split_file_path(path: str, where: str, error: type[BadInputError] = BadInputError) -> tuple[str, str]:
    """(partition, file name) of a file path relative to the table base, both checked.

    File names may start with `.` (`.hoodie_partition_metadata`, MDT log files);
    only the timeline folder itself is refused as a name.
    """
    partition, _, name = path.rpartition("/")
    canonical(partition, where, error)
    found = name_problem(name, "file") or ("is the timeline folder" if name == HOODIE else None)
    if found is not None:
        raise error(f"{where}: file name {shown(name)} {found}")
    return partition, name


def canonical_all(paths: pa.Array, where: str, error: type[BadInputError] = BadInputError) -> None:
    """`canonical` of every path of a string array: plain ones in one vectorized pass, the rest one by one."""
    for path in not_plain(paths):
        if path is None:
            raise error(f"{where} has a null partition path")
        canonical(path, where, error)


def not_plain(paths: pa.Array | pa.ChunkedArray) -> list[str | None]:
    """The paths (or folder names) that are not plain on sight (`PLAIN_PATH`): the ones to check one by one."""
    plain = pc.and_(pc.match_substring_regex(paths, PLAIN_PATH), pc.less_equal(pc.utf8_length(paths), MAX_NAME_BYTES))
    return paths.filter(pc.invert(pc.fill_null(plain, False))).to_pylist()
