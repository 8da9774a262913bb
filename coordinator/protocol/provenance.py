"""Proof that a data file may be deleted, asked right before every delete that undoes or cleans.

Nothing found in `.hoodie/` is evidence by itself: a marker, a rollback plan or a
clean plan may be junk, left over, or crafted. So the plans only propose, and
these checks, on a timeline read at the moment of deletion, decide:
- undoing instant T deletes a file only when the file's own name carries T and T
  is neither completed nor archived (no completed instant can reference a file
  named for an instant that never completed: every write names its files for
  itself); a merge-on-read log, whose name carries its slice's instant and may
  be taken again by the next writer once deleted, is never deleted by an undo:
  a rollback appends a command block naming T to a log of its own after every
  log whose blocks are all T's;
- a clean deletes a file only when its instant is completed and a newer completed
  version of its file group (or a completed replace of the group) supersedes it,
  within the plan's retention; a log file when a completed base file newer than
  its slice's supersedes the slice (no write extends a superseded slice: one that
  tried conflicts with the compaction that superseded it).
Whatever a plan proposes beyond that is refused, reported as a warning naming the
files, and left where it is.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from timeline.errors import BadInputError, RefusedDeleteWarning
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.data_logs import DataLog, parse_data_log
from timeline.format.file_names import BaseFile, parse_base_file, split_path
from timeline.format.fs_view import FileSystemView
from timeline.format.instant import SAVEPOINT
from timeline.format.savepoint_metadata import savepointed_names
from timeline.hudi_log import BlockType, read_blocks
from timeline.io.storage import Storage

SHOWN = 3  # refused paths named in one warning line


def _base_file(path: str) -> BaseFile | None:
    """The base file `path` names; None for anything else (no data path, or one that escapes the table)."""
    try:
        return parse_base_file(*split_path(path))
    except BadInputError:
        return None


def refuse(paths: list[str], why: str) -> None:
    """One warning line for files a plan proposed and Tandem will not delete."""
    if paths:
        named = ", ".join(paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")
        warnings.warn(f"left {len(paths)} file(s) in place ({why}): {named}", RefusedDeleteWarning, stacklevel=3)


def is_committed(timeline: ActiveTimeline, time: str) -> bool:
    """`time` completed on the active timeline, or held completed by one of its archive bundles."""
    return time in timeline.completed_times() or timeline.archived_completed(time)


def _data_log(path: str) -> DataLog | None:
    try:
        return parse_data_log(*split_path(path))
    except BadInputError:
        return None


def _log_written_by(storage: Storage, path: str, time: str) -> bool:
    """Whether the log file at `path` holds blocks of instant `time` only, every one whole (absent: no)."""
    try:
        blocks = read_blocks(storage.read_bytes(path))
    except FileNotFoundError:
        return False
    return bool(blocks) and all(not b.corrupt and b.header.get("INSTANT_TIME") == time for b in blocks)


def log_instants(storage: Storage, path: str) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """(the instants of the log's whole data and delete blocks, (instant, target) of each rollback command block
    in it); both empty when the log is gone. Damaged bytes name no instant: only a failed write leaves them."""
    try:
        blocks = read_blocks(storage.read_bytes(path))
    except FileNotFoundError:
        return frozenset(), frozenset()
    whole = [b for b in blocks if not b.corrupt and "INSTANT_TIME" in b.header]
    commands = [b for b in whole if b.kind is BlockType.COMMAND_BLOCK and "TARGET_INSTANT_TIME" in b.header]
    written = frozenset(b.header["INSTANT_TIME"] for b in whole if b.kind is not BlockType.COMMAND_BLOCK)
    return written, frozenset((b.header["INSTANT_TIME"], b.header["TARGET_INSTANT_TIME"]) for b in commands)


def logs_written_by(storage: Storage, time: str, paths: Iterable[str]) -> list[str]:
    """The merge-on-read logs among `paths` that hold blocks of instant `time` only, every one whole."""
    return sorted(p for p in set(paths) if _data_log(p) is not None and _log_written_by(storage, p, time))


def undoable(timeline: ActiveTimeline, time: str, paths: Iterable[str]) -> list[str]:
    """The base files among `paths` that undoing instant `time` may delete; `timeline` must be read after
    `time` was decided. Logs are never among them: a log's name carries no instant and the next writer of its
    slice may take a deleted log's name, so a second undoer of `time` would delete that writer's file; a
    rollback appends a command block instead (`logs_written_by`), and only the writer's own finalize deletes
    a log of its retried tasks (`orphan_logs`)."""
    paths = sorted(p for p in set(paths) if _data_log(p) is None)
    if timeline.is_completed_or_archived(time):
        refuse(paths, f"instant {time} is completed or archived")
        return []
    mine = [p for p in paths if (f := _base_file(p)) is not None and f.instant == time]
    refuse(sorted(set(paths) - set(mine)), f"not written by instant {time}")
    return mine


def orphan_logs(storage: Storage, time: str, marked: Iterable[str], kept: Iterable[str]) -> list[str]:
    """Logs instant `time` (pending, completing in this process) wrote under markers that its write stats do not
    name (a retried task's): deleted by its finalize before its decision, or they would count once it commits."""
    return logs_written_by(storage, time, set(marked) - set(kept))


def cleanable(
    view: FileSystemView, timeline: ActiveTimeline, paths: Iterable[str], earliest_retained: str
) -> list[str]:
    """The planned paths a clean may delete: superseded by a completed version older than the retained instant.

    `earliest_retained` is the plan's (empty: every version but the latest may go). `view` and
    `timeline` are read when the clean deletes: superseding is never undone by a writer, so a
    file superseded then stays superseded.
    """
    newest: dict[tuple[str, str], list[str]] = {}
    for f in view.all_base_files_including_replaced():
        newest.setdefault((f.partition, f.file_id), []).append(f.instant)
    replaced = timeline.replaced_by()
    horizon = earliest_retained or "~"  # "~" sorts after every instant time
    if any(i.action == SAVEPOINT for i in timeline.pending()):  # its files are not known yet: delete none now
        refuse(sorted(set(paths)), "a savepoint is being made")
        return []
    kept = _savepointed_slices(view, timeline)
    allowed: list[str] = []
    refused: list[str] = []
    saved: list[str] = []
    for path in sorted(set(paths)):
        f = _base_file(path)
        log = _data_log(path) if f is None else None
        if f is not None:  # a base file of a completed write, superseded
            ok, group, instant = timeline.is_completed_or_archived(f.instant), (f.partition, f.file_id), f.instant
        elif log is not None:  # a log of a superseded slice, whoever wrote it
            ok, group, instant = True, (log.partition, log.file_id), log.base_instant
        else:
            ok = False
        if ok and (*group, instant) in kept:
            saved.append(path)
            continue
        if ok:
            by_replace = group in replaced and replaced[group] < horizon
            by_version = any(instant < t < horizon for t in newest.get(group, ()))
            ok = by_replace or by_version
        (allowed if ok else refused).append(path)
    refuse(refused, "the clean plan names files no newer completed version supersedes")
    refuse(saved, "a savepoint keeps them")
    return allowed


def _savepointed_slices(view: FileSystemView, timeline: ActiveTimeline) -> set[tuple[str, str, str]]:
    """(partition, file id, base instant) of every slice a completed savepoint names a file of, read when the
    clean deletes: a savepoint made after the clean's plan is honoured too."""
    names = savepointed_names(timeline)
    if not names:
        return set()
    slices = {(f.partition, f.file_id, f.instant) for f in view.all_base_files_including_replaced() if f.name in names}
    return slices | {(log.partition, log.file_id, log.base_instant) for log in view.logs if log.name in names}
