"""Restore to a savepoint (Hudi's `restore` action, docs/hudi-savepoint-restore-format.md §5): every write
instant after the savepoint S, newest first, removed with its files, in both tables.

Under the table's lock: the plan `<R>.restore.requested` (Hudi's `HoodieRestorePlan`, naming S and the instants
to remove), `<R>.restore.inflight`, then the metadata table's delta commit R with the removed files' tombstones
(before any file goes, so that a crash never leaves files the metadata table lists without a record of their
going), then each instant unpublished, its base files deleted (a base file's name carries its instant: proof it is
the instant's) and its timeline files removed, then `<R>.restore` (`HoodieRestoreMetadata`). While R is pending,
readers read the table as of S (`ActiveTimeline.restoring_to`), the state R leaves, and writers wait; recovery
finishes a pending restore before anything else (never half way), repeating only what is left. Hudi writes a
rollback instant per removed instant and deletes them after; Tandem records the rollbacks only in the restore's
metadata, which is all that remains of Java's too.

Merge-on-read tables, as Hudi's `MergeOnReadRestoreActionExecutor` leaves them: a slice a removed instant began
(its base file named for it: an insert's new group, a compaction) goes whole, base file and logs, once every
block of its logs is proved a removed instant's (a slice's name is never taken again: instant times are unique);
a kept slice whose logs hold a removed instant's blocks gets a command block rolling that instant back, in a log
of its own after the slice's logs, before the metadata table's delta commit R (which lists them). A restore
whose removed slices hold blocks of an instant it keeps is refused: it would lose them."""

from __future__ import annotations

import time as clock
from dataclasses import dataclass, field

from coordinator.protocol import markers, provenance
from coordinator.protocol.rollback import mirror_deltacommit
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError
from timeline.format import action_metadata, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.data_logs import parse_log_listing
from timeline.format.file_names import group_by_partition
from timeline.format.fs_view import list_table_files, parse_listing
from timeline.format.instant import LOG_COMPACTION, RESTORE, SAVEPOINT, WRITE_ACTIONS, Instant, State
from timeline.format.restore_metadata import decode_plan, encode_metadata, encode_plan
from timeline.mor.rollback_logs import write_rollback_log
from timeline.table import HEARTBEAT_DIR, Table

PLANNED = register("restore.planned", "<R>.restore.requested written")
STARTED = register("restore.inflight", "<R>.restore.inflight written")
COMMANDS_WRITTEN = register(
    "restore.commands", "command blocks for the removed instants' blocks in kept slices written"
)
MDT_MIRRORED = register("restore.mdt", "metadata table delta commit R (the removed files' tombstones) written")
REMOVED = register("restore.instant", "one instant after the savepoint removed with its files")
COMPLETED = register("restore.complete", "<R>.restore written")

Slice = tuple[str, str, str]  # (partition, file id, base instant)


@dataclass
class Undo:
    """What removing the victims takes, from one listing: the files each victim's removal deletes (base files
    named for it, logs of slices it began), the kept slices holding its blocks, and what is refused."""

    files: dict[str, list[str]]
    needs_command: dict[tuple[Slice, str], str] = field(default_factory=dict)  # (slice, victim) -> a log of it
    commanded: dict[tuple[Slice, str], tuple[str, int]] = field(default_factory=dict)  # by R already: path, size
    shared: list[str] = field(default_factory=list)  # logs of removed slices with blocks of a kept instant


def restore(table: Table, savepoint: str) -> str:
    """Restore the table to savepoint `savepoint` (under the lock); returns R."""
    planned = schedule(table, savepoint)
    resume(table, planned)
    return planned.time


def schedule(table: Table, savepoint: str) -> Instant:
    """The plan (under the lock); a pending restore to the same savepoint is taken up again, as Hudi does."""
    timeline = table.timeline()
    saved = [i.time for i in timeline.completed() if i.action == SAVEPOINT]
    if savepoint not in saved:
        raise BadInputError(f"{savepoint} is not a savepoint of {table.uri} (`tandem savepoint list`)")
    later = [t for t in saved if t > savepoint]
    if later:
        raise BadInputError(f"savepoint(s) {', '.join(later)} come after {savepoint}: delete them first, as Hudi asks")
    pending = [i for i in timeline.pending() if i.action == RESTORE]
    if pending:
        if timeline.restoring_to() != savepoint:
            raise BadInputError(
                f"a restore to {timeline.restoring_to()} is pending: finish it first (`tandem recover`)"
            )
        return pending[-1]
    log_compactions = [i.time for i in timeline.instants if i.action == LOG_COMPACTION and i.time > savepoint]
    if log_compactions:
        raise BadInputError(f"log compaction(s) {', '.join(log_compactions)} after {savepoint}: Hudi's restore "
                            "refuses them too; finish or roll them back first")  # fmt: skip
    victims = sorted((i for i in timeline.instants if i.action in WRITE_ACTIONS and i.time > savepoint),
                     key=lambda i: i.time, reverse=True)  # fmt: skip
    shared = plan_undo(table, timeline, {v.time for v in victims}, "").shared
    if shared:
        named = ", ".join(shared[:3])
        raise BadInputError(
            f"cannot restore to {savepoint}: {len(shared)} log(s) of file slices begun after it hold blocks of "
            f"instants it keeps (restoring would lose them): {named}"
        )
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
    present = {i.time: i for i in timeline.instants if i.action in WRITE_ACTIONS}
    victims = [present[time] for time, _ in planned if time in present]  # the rest went in an earlier attempt
    undo = plan_undo(table, timeline, {time for time, _ in planned}, restore_instant.time)  # gone ones wrote too
    provenance.refuse(undo.shared, "a log of a removed slice holding blocks of a kept instant (given command blocks)")
    commands = _command_blocks(table, restore_instant.time, undo)
    if table.metadata().exists():
        deleted = sorted(p for paths in undo.files.values() for p in paths)
        mirror_deltacommit(
            table, timeline, restore_instant.time, deleted, {p: size for p, (_, size) in commands.items()}
        )
        crash_point(MDT_MIRRORED)
    removed = []
    for victim in victims:
        own = {p: size for p, (target, size) in commands.items() if target == victim.time}
        removed.append((victim, _remove(table, timeline, restore_instant.time, victim, undo.files[victim.time], own)))
    for time, action in planned:  # those an earlier attempt removed: named too (the timeline's fence reads them)
        if time not in present:
            gone = Instant(time, action, State.REQUESTED)  # its action as the plan loaded it
            removed.append((gone, _rollback_metadata(restore_instant.time, gone, [], {})))
    removed.sort(key=lambda pair: pair[0].time, reverse=True)
    millis = int((clock.time() - started) * 1000)
    table.timeline().complete(restore_instant, encode_metadata(restore_instant.time, millis, removed))
    crash_point(COMPLETED)


def sweep_restored_away(table: Table, timeline: ActiveTimeline) -> list[str]:
    """Under the lock: what a writer that lost its lock left of an instant a completed restore removed (it
    completed, or wrote files, after the restore took it): the instant's timeline files, the base files named
    for it and the logs of slices it began (the restore's plan names it: proof), and a command block after
    its blocks in kept slices, for Java's readers. Readers never count it meanwhile (the timeline drops it)."""
    if not timeline.restored_away:
        return []
    gone = {i.time for i in timeline.restored_away}
    undo = plan_undo(table, timeline, gone, None)
    _command_blocks(table, table.new_instant_time(timeline), undo)
    swept = sorted(p for paths in undo.files.values() for p in paths)
    for path in swept:
        table.storage.discard(path)
    for instant in timeline.restored_away:
        outcome.forget(table.storage, instant.time)
        timeline.delete_instant_files(instant.time, instant.action)
        swept.append(timeline.path(instant))
    return swept


def pending(timeline: ActiveTimeline) -> list[Instant]:
    return [i for i in timeline.pending() if i.action == RESTORE]


def plan_undo(table: Table, timeline: ActiveTimeline, victims: set[str], restore_time: str | None) -> Undo:
    """From one listing: every base file named for a victim; on merge-on-read tables every log read, those of
    slices a victim began deleted with them, and each kept slice holding a victim's blocks noted for a command
    block (unless restore `restore_time`, any one when None, gave it one already). A log of a slice a victim
    began that holds a block of an instant the table keeps (completed, not a victim) is `shared`: kept, its
    victims' blocks given command blocks; an instant already undone (a rolled-back write, an earlier restore's
    victim) keeps nothing."""
    undo = Undo({time: [] for time in victims})
    listed = list_table_files(table.storage) if victims else []
    for base in parse_listing(listed):
        if base.instant in victims:
            undo.files[base.instant].append(base.path)
    if not table.config.merge_on_read:
        return undo
    for log in parse_log_listing(listed):
        written, rollbacks = provenance.log_instants(table.storage, log.path)
        slice_ = (log.partition, log.file_id, log.base_instant)
        if log.base_instant in victims:
            if not any(t not in victims and timeline.is_completed_or_archived(t) for t in written):
                undo.files[log.base_instant].append(log.path)
                continue
            undo.shared.append(log.path)
        for target in written & victims:
            undo.needs_command.setdefault((slice_, target), log.path)
        for instant, target in rollbacks:
            if (restore_time is None or instant == restore_time) and target in victims:
                undo.commanded[(slice_, target)] = (log.path, log.size)
    return undo


def _command_blocks(table: Table, restore_time: str, undo: Undo) -> dict[str, tuple[str, int]]:
    """The restore's command-block logs, path -> (victim, size): those an earlier attempt wrote, and one written
    now after each kept slice's logs for each victim with blocks there."""
    found = {path: (key[1], size) for key, (path, size) in undo.commanded.items()}
    todo = sorted((log, key[1]) for key, log in undo.needs_command.items() if key not in undo.commanded)
    for log, target in todo:
        path, size = write_rollback_log(table.storage, log, restore_time, target)
        found[path] = (target, size)
    if todo:
        table.storage.sync_dirs({path.rpartition("/")[0] for path in found})
        crash_point(COMMANDS_WRITTEN)
    return found


def _remove(
    table: Table,
    timeline: ActiveTimeline,
    restore_time: str,
    victim: Instant,
    paths: list[str],
    commands: dict[str, int],
) -> dict:
    """Unpublish `victim` (its completed file first: from then on no reader counts it; a pending one is decided
    rolled back first, so its writer can no longer commit it), delete its files, then its other timeline files,
    markers and heartbeat; its rollback metadata for the restore's. The metadata table's housekeeping rolls back
    its delta commit like any failed write's (what an MDT compaction folded in, delta commit R's tombstones take
    out)."""
    if victim.is_completed:  # its commit decision goes too: the metadata table then takes its delta commit as failed
        table.storage.discard(timeline.path(victim))
        outcome.forget(table.storage, victim.time)
    elif outcome.claim(table.storage, victim.time, outcome.ROLLBACK).is_commit:  # decided, not yet completed
        outcome.forget(table.storage, victim.time)  # if its writer completes it still, the timeline drops it
    for path in paths:
        table.storage.discard(path)
    timeline.delete_instant_files(victim.time, victim.action)
    table.storage.delete_dir(markers.marker_dir(victim.time))
    table.storage.discard(f"{HEARTBEAT_DIR}/{victim.time}")
    crash_point(REMOVED)
    return _rollback_metadata(restore_time, victim, paths, commands)


def _rollback_metadata(restore_time: str, victim: Instant, paths: list[str], commands: dict[str, int]) -> dict:
    """The `HoodieRollbackMetadata` the restore's metadata holds for one removed instant."""
    target = {"commitTime": victim.time, "action": victim.timeline_action}
    by_partition: dict[str, dict[str, int]] = {}
    for path, size in commands.items():
        by_partition.setdefault(path.rpartition("/")[0], {})[path] = size
    return action_metadata.rollback_metadata(restore_time, 0, target, group_by_partition(paths), by_partition)
