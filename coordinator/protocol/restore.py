"""Restore to a savepoint (Hudi's `restore` action, docs/hudi-savepoint-restore-format.md §5): every write
instant after the savepoint S, newest first, removed with its files, in both tables.

Under the table's lock: the plan `<R>.restore.requested` (Hudi's `HoodieRestorePlan`, naming S and the instants
to remove), `<R>.restore.inflight`, then the metadata table's delta commit R with the removed files' tombstones
(before any file goes, so that a crash never leaves files the metadata table lists without a record of their
going), then each instant unpublished, its base files deleted (a base file's name carries its instant: proof it is
the instant's) and its timeline files removed, then `<R>.restore` (`HoodieRestoreMetadata`). While R is pending,
readers read the table as of S (`restore_metadata.restoring_to`), the state R leaves, and writers wait; recovery
finishes a pending restore before anything else (never half way), repeating only what is left. Hudi writes a
rollback instant per removed instant and deletes them after; Tandem records the rollbacks only in the restore's
metadata, which is all that remains of Java's too. Copy-on-write tables only: a merge-on-read restore needs
command blocks for the removed instants' log blocks, not built yet."""

from __future__ import annotations

import time as clock

from coordinator.protocol import markers
from coordinator.protocol.rollback import mirror_deltacommit
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError
from timeline.format import action_metadata, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.file_names import group_by_partition
from timeline.format.fs_view import list_base_files
from timeline.format.instant import RESTORE, SAVEPOINT, WRITE_ACTIONS, Instant, State
from timeline.format.restore_metadata import decode_plan, encode_metadata, encode_plan, restoring_to
from timeline.table import HEARTBEAT_DIR, Table

PLANNED = register("restore.planned", "<R>.restore.requested written")
STARTED = register("restore.inflight", "<R>.restore.inflight written")
MDT_MIRRORED = register("restore.mdt", "metadata table delta commit R (the removed files' tombstones) written")
REMOVED = register("restore.instant", "one instant after the savepoint removed with its files")
COMPLETED = register("restore.complete", "<R>.restore written")


def restore(table: Table, savepoint: str) -> str:
    """Restore the table to savepoint `savepoint` (under the lock); returns R."""
    planned = schedule(table, savepoint)
    resume(table, planned)
    return planned.time


def schedule(table: Table, savepoint: str) -> Instant:
    """The plan (under the lock); a pending restore to the same savepoint is taken up again, as Hudi does."""
    timeline = table.timeline()
    if table.config.merge_on_read:
        raise BadInputError("restore of merge-on-read tables is not supported yet (only copy-on-write ones)")
    saved = [i.time for i in timeline.completed() if i.action == SAVEPOINT]
    if savepoint not in saved:
        raise BadInputError(f"{savepoint} is not a savepoint of {table.uri} (`tandem savepoint list`)")
    later = [t for t in saved if t > savepoint]
    if later:
        raise BadInputError(f"savepoint(s) {', '.join(later)} come after {savepoint}: delete them first, as Hudi asks")
    pending = [i for i in timeline.pending() if i.action == RESTORE]
    if pending:
        if restoring_to(timeline) != savepoint:
            raise BadInputError(f"a restore to {restoring_to(timeline)} is pending: finish it first (`tandem recover`)")
        return pending[-1]
    victims = sorted((i for i in timeline.instants if i.action in WRITE_ACTIONS and i.time > savepoint),
                     key=lambda i: i.time, reverse=True)  # fmt: skip
    time = table.new_instant_time(timeline)
    requested = timeline.create_requested(Instant(time, RESTORE, State.REQUESTED), encode_plan(savepoint, victims))
    crash_point(PLANNED)
    return requested


def resume(table: Table, restore_instant: Instant) -> None:
    """Carry out (or finish) restore R from its plan (under the lock)."""
    started = clock.time()
    timeline = table.timeline()
    requested = restore_instant.with_state(State.REQUESTED)
    _, planned = decode_plan(timeline.read(requested), table.storage.uri(timeline.path(requested)))
    if restore_instant.state == State.REQUESTED:
        restore_instant = timeline.transition_to_inflight(restore_instant)
        crash_point(STARTED)
    present = {(i.time, i.action): i for i in timeline.instants}
    victims = [present[key] for key in planned if key in present]
    files = _files_of(table, {v.time for v in victims})
    if table.metadata().exists():
        mirror_deltacommit(table, timeline, restore_instant.time, sorted(p for paths in files.values() for p in paths))
        crash_point(MDT_MIRRORED)
    removed = [(v, _remove(table, timeline, restore_instant.time, v, files[v.time])) for v in victims]
    millis = int((clock.time() - started) * 1000)
    table.timeline().complete(restore_instant, encode_metadata(restore_instant.time, millis, removed))
    crash_point(COMPLETED)


def pending(timeline: ActiveTimeline) -> list[Instant]:
    return [i for i in timeline.pending() if i.action == RESTORE]


def _files_of(table: Table, times: set[str]) -> dict[str, list[str]]:
    """Each instant's base files, from one listing: a base file's name carries the instant that wrote it."""
    found: dict[str, list[str]] = {t: [] for t in times}
    for f in list_base_files(table.storage) if times else []:
        if f.instant in found:
            found[f.instant].append(f.path)
    return found


def _remove(table: Table, timeline: ActiveTimeline, restore_time: str, victim: Instant, paths: list[str]) -> dict:
    """Unpublish `victim` (its completed file first: from then on no reader counts it; a pending one is decided
    rolled back first, so its writer can no longer commit it), delete its files, then its other timeline files,
    markers and heartbeat; its rollback metadata for the restore's. The metadata table's housekeeping rolls back
    its delta commit like any failed write's (what an MDT compaction folded in, delta commit R's tombstones take
    out)."""
    if victim.is_completed:  # its commit decision goes too: the metadata table then takes its delta commit as failed
        table.storage.discard(timeline.path(victim))
        outcome.forget(table.storage, victim.time)
    else:
        outcome.claim(table.storage, victim.time, outcome.ROLLBACK)
    for path in paths:
        table.storage.discard(path)
    timeline.delete_instant_files(victim.time, victim.action)
    table.storage.delete_dir(markers.marker_dir(victim.time))
    table.storage.discard(f"{HEARTBEAT_DIR}/{victim.time}")
    crash_point(REMOVED)
    target = {"commitTime": victim.time, "action": victim.action}
    return action_metadata.rollback_metadata(restore_time, 0, target, group_by_partition(paths))
