"""Savepoints (Hudi's `savepoint` action, docs/hudi-savepoint-restore-format.md §2): a completed commit marked
to keep. `<S>.savepoint` (with its empty `.inflight`, as Java writes them) lists the file names of every file
group's latest slice at S; clean never deletes them (`clean.plan_files`, and `provenance.cleanable` again when it
deletes) and archival stops at the first savepoint, Java's and Tandem's alike. Taken under the table's lock; a
savepoint is refused while a clean is pending, whose plan predates it (the clean's deletion checks again)."""

from __future__ import annotations

import time as clock

from coordinator.protocol.heartbeat import Heartbeat, heartbeat_path, is_expired
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError, ConflictError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    RESTORE,
    SAVEPOINT,
    Instant,
    State,
)
from timeline.format.savepoint_metadata import Savepoint, decode, encode, savepoints
from timeline.table import Table

STARTED = register("savepoint.inflight", "<S>.savepoint.inflight written, <S>.savepoint not yet")
COMPLETED = register("savepoint.complete", "<S>.savepoint written")
SAVEPOINTABLE = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION)  # a compaction completes as a commit


def create(table: Table, time: str, by: str = "", comments: str = "") -> Savepoint:
    """Savepoint completed commit `time` (under the lock): Hudi's checks, then `<S>.savepoint.inflight` and
    `<S>.savepoint`."""
    timeline = table.timeline()
    if not any(i.time == time and i.action in SAVEPOINTABLE for i in timeline.completed()):
        raise BadInputError(f"{time} is not a completed commit on {table.uri}'s active timeline")
    if any(i.time == time and i.action == SAVEPOINT and i.is_completed for i in timeline.instants):
        raise BadInputError(f"{time} is already savepointed")
    _refuse_pending(timeline, time)
    _check_kept_by_cleans(timeline, time)
    data = encode(by, int(clock.time() * 1000), comments, _slice_names(table, time))
    Heartbeat(table.storage, time, 1.0, 60.0).beat()  # alive while the inflight stands alone (recovery asks)
    inflight = Instant(time, SAVEPOINT, State.INFLIGHT)
    table.storage.create_if_absent(timeline.path(inflight), b"", durable=False)
    crash_point(STARTED)
    if any(i.action == CLEAN for i in table.timeline().pending()):  # again, on storage: cleans take no lock in Java
        table.storage.discard(timeline.path(inflight))
        raise ConflictError("a clean is in progress (its plan does not know the savepoint): try again after it")
    done = timeline.complete(inflight, data)
    table.storage.discard(heartbeat_path(time))
    crash_point(COMPLETED)
    return decode(time, data, table.storage.uri(timeline.path(done)))


def delete(table: Table, time: str) -> None:
    """Remove savepoint `time` (under the lock): the completed file, then its inflight, as Java does."""
    timeline = table.timeline()
    if not any(i.time == time and i.action == SAVEPOINT and i.is_completed for i in timeline.instants):
        raise BadInputError(f"{table.uri} has no savepoint {time}")
    table.storage.discard(timeline.path(Instant(time, SAVEPOINT, State.COMPLETED)))
    table.storage.discard(timeline.path(Instant(time, SAVEPOINT, State.INFLIGHT)))


def listed(table: Table) -> list[Savepoint]:
    return savepoints(table.timeline())


def drop_unfinished(table: Table, timeline: ActiveTimeline, expiry_s: float) -> list[str]:
    """A `<S>.savepoint.inflight` alone whose creator's heartbeat expired: it died before completing it (a
    savepoint counts once completed, for Java too). It would block the metadata table's initialization and
    archival. Left: Java's savepoint writes no heartbeat (and takes no lock), so one caught between its two
    files, a matter of milliseconds, is dropped too and fails."""
    dropped = []
    for instant in timeline.pending():
        if instant.action == SAVEPOINT and is_expired(table.storage, instant.time, expiry_s):
            table.storage.discard(timeline.path(instant))
            table.storage.discard(heartbeat_path(instant.time))
            dropped.append(instant.time)
    return dropped


def _refuse_pending(timeline: ActiveTimeline, time: str) -> None:
    """An instant at or before S still pending (a write, a compaction) would change what S reads once it
    completes; a pending clean could take files the savepoint does not know yet, a pending restore S itself."""
    found = [
        i for i in timeline.pending() if i.action != SAVEPOINT and (i.time <= time or i.action in (CLEAN, RESTORE))
    ]
    if found:
        raise ConflictError(f"{found[0].time} ({found[0].action}) is pending: savepoint {time} once it completes")


def _check_kept_by_cleans(timeline: ActiveTimeline, time: str) -> None:
    """Every file of S's snapshot must still be there: a clean since S that kept commits from an earliest one on
    (KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS) kept S's when that is at or before S (Hudi's lookup window); one
    that kept file versions only (no earliest commit) may have deleted versions S reads (stricter than Hudi,
    which checks nothing then)."""
    for clean in (i for i in timeline.completed() if i.action == CLEAN and i.time > time):
        earliest = timeline.avro(clean).get("earliestCommitToRetain") or ""
        if not earliest:
            raise BadInputError(f"{time}: clean {clean.time} kept only the latest file versions since, not {time}'s")
        if time < earliest:
            raise BadInputError(f"{time} is beyond the lookup window: clean {clean.time} kept commits from {earliest}")


def _slice_names(table: Table, time: str) -> dict[str, list[str]]:
    """Per partition, the names of each live file group's latest slice at `time`: its base file and every log
    file a read as of `time` merges over it (Java's `savepointDataFile`; with the logs a pending compaction's
    slice started, which such a read takes too)."""
    at = table.view(as_of=time)
    logs = at.slice_logs() if table.config.merge_on_read else {}
    files: dict[str, list[str]] = {p: [] for p in at.partitions()}
    for base in at.latest_base_files():
        names = sorted(log.name for log in logs.get((base.partition, base.file_id), []))
        files[base.partition] += [base.name, *names]
    return files
