"""Savepoints (Hudi's `savepoint` action, docs/hudi-savepoint-restore-format.md §2): a completed commit marked
to keep. `<S>.savepoint` (with its empty `.inflight`, as Java writes them) lists the file names of every file
group's latest slice at S; clean never deletes them (`clean.plan_files`, and `provenance.cleanable` again when it
deletes) and archival stops at the first savepoint, Java's and Tandem's alike. Taken under the table's lock; a
savepoint is refused while a clean is pending, whose plan predates it (the clean's deletion checks again)."""

from __future__ import annotations

import time as clock

from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError, ConflictError
from timeline.format.action_metadata import KEEP_LATEST_COMMITS
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import CLEAN, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, SAVEPOINT, Instant, State
from timeline.format.savepoint_metadata import Savepoint, decode, encode, savepoints
from timeline.table import Table

STARTED = register("savepoint.inflight", "<S>.savepoint.inflight written, <S>.savepoint not yet")
COMPLETED = register("savepoint.complete", "<S>.savepoint written")
SAVEPOINTABLE = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)


def create(table: Table, time: str, by: str = "", comments: str = "") -> Savepoint:
    """Savepoint completed commit `time` (under the lock): Hudi's checks, then `<S>.savepoint.inflight` and
    `<S>.savepoint`."""
    timeline = table.timeline()
    if not any(i.time == time and i.action in SAVEPOINTABLE for i in timeline.completed()):
        raise BadInputError(f"{time} is not a completed commit on {table.uri}'s active timeline")
    if any(i.time == time and i.action == SAVEPOINT for i in timeline.instants):
        raise BadInputError(f"{time} is already savepointed")
    if any(i.action == CLEAN for i in timeline.pending()):
        raise ConflictError("a clean is in progress (its plan does not know the savepoint): try again after it")
    _check_kept_by_cleans(timeline, time)
    files = _slice_names(table, time)
    inflight = Instant(time, SAVEPOINT, State.INFLIGHT)
    table.storage.create_if_absent(timeline.path(inflight), b"", durable=False)
    crash_point(STARTED)
    data = encode(by, int(clock.time() * 1000), comments, files)
    done = timeline.complete(inflight, data)
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


def drop_unfinished(table: Table, timeline: ActiveTimeline) -> list[str]:
    """A `<S>.savepoint.inflight` alone, under the lock: its creator died before completing it (a savepoint
    counts once completed, for Java too). It would block the metadata table's initialization and archival."""
    dropped = []
    for instant in timeline.pending():
        if instant.action == SAVEPOINT:
            table.storage.discard(timeline.path(instant))
            dropped.append(instant.time)
    return dropped


def _check_kept_by_cleans(timeline: ActiveTimeline, time: str) -> None:
    """Every file of S's snapshot must still be there: a KEEP_LATEST_COMMITS clean since S kept commits from its
    earliest retained one on (Hudi's lookup window); a KEEP_LATEST_FILE_VERSIONS clean since S may have deleted
    versions S reads (stricter than Hudi, which checks nothing then)."""
    for clean in (i for i in timeline.completed() if i.action == CLEAN and i.time > time):
        metadata = timeline.avro(clean)
        earliest = metadata.get("earliestCommitToRetain") or ""
        if metadata.get("policy") != KEEP_LATEST_COMMITS or not earliest:
            raise BadInputError(f"{time}: clean {clean.time} kept only the latest file versions since, not {time}'s")
        if time < earliest:
            raise BadInputError(f"{time} is beyond the lookup window: clean {clean.time} kept commits from {earliest}")


def _slice_names(table: Table, time: str) -> dict[str, list[str]]:
    """Per partition, the names of each live file group's latest slice at `time`: its base file and every log
    file of that slice (Java's `savepointDataFile`)."""
    at = table.view(as_of=time)
    logs = table.view().logs if table.config.merge_on_read else []
    slices: dict[tuple[str, str, str], list[str]] = {}
    for log in logs:
        slices.setdefault((log.partition, log.file_id, log.base_instant), []).append(log.name)
    files: dict[str, list[str]] = {p: [] for p in at.partitions()}
    for base in at.latest_base_files():
        files[base.partition] += [base.name, *sorted(slices.get((base.partition, base.file_id, base.instant), []))]
    return files
