"""Is a metadata table in Hudi's own format fit to serve a read? The files side of `health`.

Hudi's log blocks carry no checksum, so a torn or flipped log is only caught where a block's framing breaks;
what vouches for a log is the deltacommit that wrote it: its write stats name each log with its size. So, in
the slices a reader merges, every file a valid completed MDT instant wrote must be there at the size it
recorded, hold no damaged block, hold an intact block of that instant (for a delta commit) and state the
record schema Tandem decodes with (the header is the one part of a block nothing checks); and each base file
read must pass every HFile checksum, once per process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from timeline.errors import CorruptInstantError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMPACTION, DELTA_COMMIT, Instant
from timeline.hfile import HFileError
from timeline.hudi_log import BlockType, HudiLogError, deleted_records, hfile_records, parse_log_name
from timeline.io.lru import LruCache
from timeline.io.storage import Storage
from timeline.mdt.file_slices import FileSlice, TimelineFacts, base_file_parts, list_file_groups, slices_to_read
from timeline.mdt.hudi_layout import FILES
from timeline.mdt.hudi_records import decode_cell
from timeline.mdt.hudi_schema import stored_schema_json
from timeline.mdt.slice_records import base_reader, log_blocks

_VERIFIED: LruCache[tuple[str, str, int], bool] = LruCache(1024)  # files whose every block checked out
_WRITTEN: LruCache[tuple[str, str, str], list[tuple[str, int]]] = LruCache(4096)  # (uri, time, action) -> stats
# (uri, the valid completed writing instants) -> what they wrote: one entry per state of the timeline
_WRITTEN_BY: LruCache[tuple[str, tuple[tuple[str, str], ...]], list[_Written]] = LruCache(64)


def problems(
    mdt: Storage, mdt_timeline: ActiveTimeline, is_valid: Callable[[str], bool], partition: str = FILES
) -> list[str]:
    """What makes `partition` of the MDT under `mdt` unfit to read; empty when it is healthy."""
    groups = list_file_groups(mdt, partition)
    if not groups:
        return [f"metadata partition {partition} has no file group"]
    facts = TimelineFacts.of(mdt_timeline)
    read: dict[tuple[str, str], FileSlice] = {}
    for group in groups:
        for found in slices_to_read(group, facts):
            read[(found.file_id, found.base_instant)] = found
    present = {log.path: log.size for s in read.values() for log in s.logs}
    present.update({s.base_file: s.base_size for s in read.values() if s.base_file is not None})
    vouched: dict[str, str] = {}  # log path -> the delta commit that wrote it
    written, found = _written_files(mdt_timeline, is_valid)
    for file in written:
        if not file.path.startswith(f"{partition}/") or file.slice not in read:
            continue
        actual = present.get(file.path)
        of = f"{_shown(file.path)} of completed metadata instant {file.instant.time}"
        if actual is None:
            found.append(f"{of} is missing")
        elif file.size and actual != file.size:
            found.append(f"{of} is {actual} bytes, it wrote {file.size}")
        elif file.instant.action == DELTA_COMMIT and not file.is_base:
            vouched[file.path] = file.instant.time
    for path, time in sorted(vouched.items()):
        found += _log_problems(mdt, path, present[path], time)
    for base in sorted(s.base_file for s in read.values() if s.base_file is not None):
        found += _base_problems(mdt, base, present[base])
    return found


@dataclass(frozen=True)
class _Written:
    """A file a completed MDT instant wrote, as its commit metadata records it."""

    instant: Instant
    path: str
    size: int  # 0: not recorded
    slice: tuple[str, str] | None  # (file id, base instant) its name gives
    is_base: bool


def _written_files(mdt_timeline: ActiveTimeline, is_valid: Callable[[str], bool]) -> tuple[list[_Written], list[str]]:
    """Every file a valid completed delta commit or compaction wrote; and the instants whose commit metadata
    cannot be read (nothing they wrote can then be vouched for). Worked out once per set of such instants."""
    storage = mdt_timeline.storage
    instants = [
        i
        for i in mdt_timeline.completed()
        if i.action == COMPACTION or (i.action == DELTA_COMMIT and is_valid(i.time))  # else never read
    ]
    key = (storage.base_uri, tuple((i.time, i.action) for i in instants))
    known = _WRITTEN_BY.get(key)
    if known is not None:
        return known, []
    written: list[_Written] = []
    unreadable: list[str] = []
    for instant in instants:
        per_instant = (storage.base_uri, instant.time, instant.action)
        stats = _WRITTEN.get(per_instant)
        if stats is None:
            try:
                stats = [(s.path, s.file_size_in_bytes) for s in mdt_timeline.commit_metadata(instant).write_stats()]
            except FileNotFoundError:
                stats = []  # archived meanwhile
            except CorruptInstantError as err:
                unreadable.append(f"metadata instant {instant.time} is unreadable: {err}")
                continue
            _WRITTEN.put(per_instant, stats)
        for path, size in stats:
            if path:
                name = path.rsplit("/", 1)[-1]
                written.append(
                    _Written(instant, path, int(size or 0), _slice_of(name), base_file_parts(name) is not None)
                )
    if not unreadable:
        _WRITTEN_BY.put(key, written)
    return written, unreadable


def _slice_of(name: str) -> tuple[str, str] | None:
    """(file id, base instant) of a metadata-table file name; None for a name of neither kind."""
    base = base_file_parts(name)
    if base is not None:
        return base
    log = parse_log_name(name) if ".log." in name else None
    return (log.file_id, log.base_instant) if log is not None else None


def _log_problems(mdt: Storage, path: str, size: int, time: str) -> list[str]:
    """A log's blocks and their contents, checked once per process (a log never changes: (path, size) names
    its bytes)."""
    key = (mdt.base_uri, path, size)
    if _VERIFIED.get(key):
        return []
    found = _log_damage(mdt, path, size, time)
    if not found:
        _VERIFIED.put(key, True)
    return found


def _log_damage(mdt: Storage, path: str, size: int, time: str) -> list[str]:
    of = f"log {_shown(path)} of completed metadata delta commit {time}"
    try:
        blocks = log_blocks(mdt, path, size)
    except FileNotFoundError:
        return [f"{of} is missing"]
    damaged = [b for b in blocks if b.corrupt]
    if damaged:
        return [f"{of} has a damaged block at byte {damaged[0].offset} ({damaged[0].reason or 'corrupt block'})"]
    if not any(b.header.get("INSTANT_TIME") == time for b in blocks):
        return [f"{of} holds no block of that instant"]
    for block in blocks:
        try:  # the content's own checksums: an HFile's blocks carry CRC32C, the framing around them none
            if block.kind == BlockType.HFILE_DATA_BLOCK:
                if block.header.get("SCHEMA") != stored_schema_json():
                    return [f"{of} has a block at byte {block.offset} written with a schema Tandem does not know"]
                for key, value in hfile_records(block):
                    decode_cell(key, value)
            elif block.kind == BlockType.DELETE_BLOCK:
                deleted_records(block)
        except (HudiLogError, HFileError, CorruptInstantError, ValueError) as err:
            return [f"{of} has a damaged block at byte {block.offset} ({err})"]
    return []


def _base_problems(mdt: Storage, path: str, size: int) -> list[str]:
    key = (mdt.base_uri, path, size)
    if _VERIFIED.get(key):
        return []
    try:
        base_reader(mdt, path, size).verify()  # the reader's own (one fetch of the file): every block's checksum
    except FileNotFoundError:
        return [f"base file {_shown(path)} is missing"]
    except HFileError as err:
        return [f"base file {_shown(path)} is damaged ({err})"]
    _VERIFIED.put(key, True)
    return []


def _shown(path: str) -> str:
    return f".hoodie/metadata/{path}"
