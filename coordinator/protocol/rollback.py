"""Rolling back a failed data instant in both tables (DESIGN §4).

Before anything of T is touched, the rollback decision on T is claimed on
storage (`timeline.format.outcome`); if T's writer claimed its commit first, T is
rolled forward instead (its completed file is written from the decision), so
a process acting on a stale view never removes a committed instant. The
rollback is itself an instant R: `R.rollback.requested` holds the plan
(Hudi's HoodieRollbackPlan), then the files are deleted, the instant is
rolled back in the MDT, R's tombstones are mirrored into the MDT, T's
instant files, markers and heartbeat are removed, and R completes. Every step
is idempotent, so a crash inside a rollback is finished from R's plan.

A plan only proposes: the files deleted are those `provenance.undoable` proves
T wrote, on a timeline read when they are deleted, and a plan whose target is
completed or archived (crafted, or left by something else) is reported and
left pending, never carried out.
"""

from __future__ import annotations

import time as clock

from coordinator.mdt import deltacommit
from coordinator.protocol import markers, provenance
from timeline.crash_points import crash_point, register
from timeline.errors import TandemError
from timeline.format import action_metadata, avro_metadata, bootstrap_index, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.data_logs import parse_log_listing
from timeline.format.file_names import group_by_partition
from timeline.format.fs_view import list_table_files, parse_listing
from timeline.format.instant import ROLLBACK, Instant, State
from timeline.format.source_file import METADATA_BOOTSTRAP_INSTANT
from timeline.format.table_config import read_config
from timeline.mdt import indexes as mdt_indexes
from timeline.mdt import records as mdt_records
from timeline.mor.rollback_logs import write_rollback_log
from timeline.table import HEARTBEAT_DIR, Table

PLANNED = register("rollback.planned", "R.rollback.requested written")
STARTED = register("rollback.inflight", "R.rollback.inflight written")
FILES_DELETED = register("rollback.files", "the rolled-back instant's data files deleted")
COMMANDS_WRITTEN = register("rollback.commands", "command blocks after the rolled-back instant's logs written")
MDT_ROLLED_BACK = register("rollback.mdt", "the instant rolled back in the metadata table")
MDT_MIRRORED = register("rollback.mdt.mirror", "MDT deltacommit R written")
INSTANT_REMOVED = register("rollback.instant", "the rolled-back instant's files removed")
COMPLETED = register("rollback.complete", "R.rollback completed")


def files_of(table: Table, time: str) -> list[str]:
    """Data files instant `time` may have written: from its markers, else by listing."""
    marked = markers.marked_files(table.storage, time)
    if marked:
        return marked
    listed = list_table_files(table.storage)
    found = [f.path for f in parse_listing(listed) if f.instant == time]
    if table.config.merge_on_read:  # a log's name carries no instant: its blocks say who wrote it
        found += provenance.logs_written_by(table.storage, time, [g.path for g in parse_log_listing(listed)])
    return sorted(found)


def roll_forward(table: Table, target: Instant, decided: outcome.Outcome) -> None:
    """Complete `target` from its commit decision (its writer died between the decision and T.commit)."""
    table.timeline().complete_decided(target, decided.payload)


def rollback(table: Table, target: Instant) -> str | None:
    """Plan and run the rollback of pending instant `target`; returns R (None: rolled forward or gone)."""
    if target.is_completed:
        raise TandemError(f"{target.time} is completed; recovery never rolls back a completed instant")
    decided = outcome.claim(table.storage, target.time, outcome.ROLLBACK)
    if decided.is_commit:
        roll_forward(table, target, decided)
        return None
    timeline = table.timeline()  # read after the decision: nothing can complete T any more
    current = timeline.find(target.time)
    if current is None:
        return None
    if current.is_completed:
        raise TandemError(f"{target.time} completed without a commit decision; refusing to roll it back")
    written = files_of(table, target.time)
    paths = provenance.undoable(timeline, target.time, written)
    return _plan_and_run(
        table, timeline, target, paths, provenance.logs_written_by(table.storage, target.time, written)
    )


def rollback_late_logs(table: Table, target: Instant, logs: list[str]) -> str | None:
    """Command blocks for logs `target` wrote after another process had rolled it back (its writer was paused
    past that rollback): `target` is gone from the timeline and only its writer knows these logs, so it plans a
    rollback of its own for them, as Hudi rolls back any log (Java would otherwise read their blocks once the
    instants around them are archived). Logs a rollback on the timeline already planned are left out. Returns
    R, or None when nothing is left to do (`target` still on the timeline: the ordinary rollback covers it)."""
    timeline = table.timeline()
    if timeline.find(target.time) is not None or outcome.claim(table.storage, target.time, outcome.ROLLBACK).is_commit:
        return None
    covered = {
        path
        for instant in timeline.instants
        if instant.action == ROLLBACK
        for request in _plan_requests(timeline, instant, target.time)
        for path in request.get("logBlocksToBeDeleted") or {}
    }
    late = sorted(set(logs) - covered)
    return _plan_and_run(table, timeline, target, [], late) if late else None


def _plan_and_run(table: Table, timeline: ActiveTimeline, target: Instant, paths: list[str], logs: list[str]) -> str:
    """Rollback R of `target`: its Hudi plan (base files deleted, logs given command blocks) written, then run."""
    time = table.new_instant_time(timeline)
    plan = action_metadata.rollback_plan(
        target.time, target.action, group_by_partition(paths), group_by_partition(logs)
    )
    requested = timeline.create_requested(
        Instant(time, ROLLBACK, State.REQUESTED), avro_metadata.encode("HoodieRollbackPlan", plan)
    )
    crash_point(PLANNED)
    resume(table, requested)
    return time


def _plan_requests(timeline: ActiveTimeline, rollback_instant: Instant, victim: str) -> list[dict]:
    """The requests of rollback R's plan when it targets `victim` (none otherwise, or when R has no plan)."""
    try:
        plan = timeline.avro(rollback_instant.with_state(State.REQUESTED))
    except FileNotFoundError:
        return []
    if (plan.get("instantToRollback") or {}).get("commitTime") != victim:
        return []
    return plan.get("RollbackRequests") or []


def resume(table: Table, rollback_instant: Instant) -> bool:
    """Carry out (or finish) rollback R from its plan; False if its target is completed (R is left pending)."""
    started = clock.time()
    timeline = table.timeline()
    plan = timeline.avro(rollback_instant.with_state(State.REQUESTED))
    target = plan["instantToRollback"]
    victim = target["commitTime"]
    if provenance.is_committed(timeline, victim):
        provenance.refuse([rollback_instant.file_name], f"the rollback plan targets completed instant {victim}")
        return False
    decided = outcome.claim(table.storage, target["commitTime"], outcome.ROLLBACK)
    if decided.is_commit:  # a plan written before decisions existed, for an instant that then committed
        timeline.delete_instant_files(rollback_instant.time, ROLLBACK)
        roll_forward(table, Instant(target["commitTime"], target["action"], State.INFLIGHT), decided)
        return True
    if rollback_instant.state == State.REQUESTED:
        timeline.transition_to_inflight(rollback_instant)
        crash_point(STARTED)
    requests = plan["RollbackRequests"] or []
    planned = [p for request in requests for p in request["filesToBeDeleted"]]
    paths = provenance.undoable(table.timeline(), target["commitTime"], planned)  # read after the claim
    for path in paths:
        table.storage.delete(path)
    drop_bootstrap_index(table, victim)
    crash_point(FILES_DELETED)
    mdt = table.metadata()
    commands = _command_blocks(table, rollback_instant.time, victim, requests)
    if mdt.exists():
        deltacommit.rollback(mdt, target["commitTime"], timeline)
        crash_point(MDT_ROLLED_BACK)
        mirror_deltacommit(table, timeline, rollback_instant.time, paths, commands)
        crash_point(MDT_MIRRORED)
    timeline.delete_instant_files(target["commitTime"], target["action"])
    table.storage.delete_dir(markers.marker_dir(target["commitTime"]))
    table.storage.discard(f"{HEARTBEAT_DIR}/{target['commitTime']}")
    crash_point(INSTANT_REMOVED)
    millis = int((clock.time() - started) * 1000)
    by_partition: dict[str, dict[str, int]] = {}
    for path, size in commands.items():
        by_partition.setdefault(path.rpartition("/")[0], {})[path] = size
    metadata = action_metadata.rollback_metadata(
        rollback_instant.time, millis, target, group_by_partition(paths), by_partition
    )
    timeline.complete(rollback_instant, avro_metadata.encode("HoodieRollbackMetadata", metadata))
    crash_point(COMPLETED)
    return True


def drop_bootstrap_index(table: Table, victim: str) -> None:
    """Hudi's `dropBootstrapIndexIfNeeded`: the bootstrap index is instant 00000000000001's (both files are
    named for it), so it goes when that instant is undone."""
    if victim == METADATA_BOOTSTRAP_INSTANT:
        bootstrap_index.drop_index(table.storage)


def _command_blocks(table: Table, rollback_time: str, victim: str, requests: list[dict]) -> dict[str, int]:
    """The rollback's command-block logs (path -> size), one after each planned log still proved the victim's.
    Written once: when the MDT already holds deltacommit R a crash came after they were written and mirrored."""
    planned = [p for request in requests for p in (request.get("logBlocksToBeDeleted") or {})]
    if not planned:
        return {}
    mdt = table.metadata()
    found = mdt.timeline().find(rollback_time) if mdt.exists() else None
    if found is not None and found.is_completed:
        return {}
    logs = provenance.logs_written_by(table.storage, victim, planned)
    provenance.refuse(sorted(set(planned) - set(logs)), f"no log of instant {victim}: no command block")
    written = dict(write_rollback_log(table.storage, log, rollback_time, victim) for log in logs)
    table.storage.sync_dirs({path.rpartition("/")[0] for path in written})
    crash_point(COMMANDS_WRITTEN)
    return written


def mirror_deltacommit(
    table: Table, timeline: ActiveTimeline, time: str, deleted: list[str], added: dict[str, int] | None = None
) -> None:
    """Apply MDT deltacommit `time` for deleted files once: tombstones in `files` and in every index partition;
    `added`: files the action wrote (a rollback's command-block logs, path -> size).

    A retry after a partial attempt appends the same records again: claimed log
    versions are never deleted, and applying the same tombstones twice is idempotent.
    """
    mdt = table.metadata()
    existing = mdt.timeline().find(time)
    if existing is not None and existing.is_completed:
        return
    indexes = read_config(table.storage).metadata_indexes
    records = mdt_records.from_changed_paths(added or {}, deleted)
    tombstones = mdt_indexes.tombstones(deleted, indexes)
    deltacommit.apply(mdt, time, records, index_records=tombstones)
