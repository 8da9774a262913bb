"""Cleaning old file versions (KEEP_LATEST_COMMITS / KEEP_LATEST_FILE_VERSIONS).

Plan (`K.clean.requested`, Hudi's HoodieCleanerPlan) under the lock, delete
the files outside it (a heartbeat marks the clean as alive meanwhile), then
under the lock mirror the deletions into the MDT as deltacommit K and complete
`K.clean`. The plan only proposes: a file is deleted only when
`provenance.cleanable` shows a newer completed version supersedes it, so a
crafted or stale plan never takes a file of the latest snapshot. Recovery
finishes a clean its worker abandoned (`resume`); `coordinator.services.steps.clean`
runs one as a table service.
"""

from __future__ import annotations

import time as clock
from collections import defaultdict

from coordinator.protocol import provenance
from coordinator.protocol.heartbeat import heartbeat_path
from coordinator.protocol.locking import held
from coordinator.protocol.rollback import mirror_deltacommit
from locks.base import LockProvider
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError
from timeline.format import action_metadata, avro_metadata
from timeline.format.action_metadata import KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.data_logs import DataLog
from timeline.format.file_names import BaseFile, group_by_partition
from timeline.format.fs_view import FileSystemView
from timeline.format.instant import CLEAN, SAVEPOINT, Instant, State
from timeline.format.savepoint_metadata import savepointed_names
from timeline.table import Table

PLANNED = register("clean.planned", "K.clean.requested written")
STARTED = register("clean.inflight", "K.clean.inflight written")
FILES_DELETED = register("clean.files", "planned files deleted")
MDT_MIRRORED = register("clean.mdt", "MDT deltacommit K written")
COMPLETED = register("clean.complete", "K.clean completed")

POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS)


def plan_files(view: FileSystemView, timeline: ActiveTimeline, policy: str, retained: int) -> tuple[list[str], str]:
    """Paths to delete, and the earliest instant retained; a slice any savepoint names (its base file or a log)
    is never among them, as in Hudi's CleanPlanner (it may still count among the versions retained)."""
    if policy not in POLICIES:
        raise BadInputError(f"unknown clean policy {policy!r} (one of {', '.join(POLICIES)})")
    if retained < 1:
        raise BadInputError("clean retention must be at least 1")
    writes = [i.time for i in timeline.completed_writes()]
    earliest = writes[-retained] if policy == KEEP_LATEST_COMMITS and len(writes) >= retained else ""
    replaced = timeline.replaced_by()
    groups: dict[tuple[str, str], list[BaseFile]] = defaultdict(list)
    for f in view.all_base_files_including_replaced():
        groups[(f.partition, f.file_id)].append(f)
    logs: dict[tuple[str, str], list[DataLog]] = defaultdict(list)
    for log in view.logs:
        logs[(log.partition, log.file_id)].append(log)
    saved = savepointed_names(timeline)
    doomed: list[str] = []
    for key, files in groups.items():
        files.sort(key=lambda f: f.instant, reverse=True)
        if key in replaced:
            replacer = replaced[key]
            gone = files if policy == KEEP_LATEST_FILE_VERSIONS or (earliest and replacer < earliest) else []
        elif policy == KEEP_LATEST_FILE_VERSIONS:
            gone = files[retained:]
        elif earliest:
            gone = [f for f in files if f.instant < earliest][1:]
        else:
            gone = []
        slices = {f.instant for f in gone if not _saved(f, logs[key], saved)}  # a slice goes with its logs
        doomed += [f.path for f in gone if f.instant in slices]
        doomed += [log.path for log in logs[key] if log.base_instant in slices]
    return sorted(doomed), earliest


def _saved(base: BaseFile, logs: list[DataLog], saved: frozenset[str]) -> bool:
    """Whether a savepoint names the slice of `base` (its base file or one of its logs)."""
    return base.name in saved or any(log.name in saved for log in logs if log.base_instant == base.instant)


def schedule(table: Table, policy: str, retained: int) -> Instant | None:
    """Write the plan `K.clean.requested` (under the lock); None when nothing is to be deleted."""
    timeline = table.timeline()
    view = table.view()
    paths, earliest = plan_files(view, timeline, policy, retained)
    if not paths:
        return None
    time = table.new_instant_time(timeline)
    by_partition = group_by_partition(paths)
    retain = {"timestamp": earliest, "action": "commit"} if earliest else None
    plan = action_metadata.clean_plan(policy, retain, by_partition, _savepointed(table, timeline))
    requested = timeline.create_requested(
        Instant(time, CLEAN, State.REQUESTED), avro_metadata.encode("HoodieCleanerPlan", plan)
    )
    crash_point(PLANNED)
    return requested


def _savepointed(table: Table, timeline: ActiveTimeline) -> dict[str, str]:
    """Java's `savepointed_timestamps` (partitioned tables with completed savepoints): its incremental cleaner
    compares the last clean's list with the savepoints, to scan again the partitions of a deleted one."""
    saved = [i.time for i in timeline.completed() if i.action == SAVEPOINT]
    if not saved or not table.config.partition_fields:
        return {}
    return {action_metadata.SAVEPOINTED_TIMESTAMPS: ",".join(saved)}


def files_being_cleaned(timeline: ActiveTimeline) -> set[str]:
    """Files the pending cleans' plans delete: gone from storage before the MDT hears of it."""
    paths: set[str] = set()
    for instant in timeline.pending():
        if instant.action == CLEAN:
            for files in avro_metadata.planned_deletions(timeline.avro(instant.with_state(State.REQUESTED))).values():
                paths.update(files)
    return paths


def _earliest(plan: dict) -> str:
    """The plan's earliest retained instant; empty when every version but the latest may go."""
    return (plan.get("earliestInstantToRetain") or {}).get("timestamp") or ""


def resume(table: Table, clean_instant: Instant, lock: LockProvider | None = None) -> None:
    """Carry out (or finish) clean K from its plan; `lock` is taken for the finish, else the caller holds it."""
    started = clock.time()
    timeline = table.timeline()
    plan = timeline.avro(clean_instant.with_state(State.REQUESTED))
    if clean_instant.state == State.REQUESTED:
        timeline.transition_to_inflight(clean_instant)
        crash_point(STARTED)
    planned = [p for files in avro_metadata.planned_deletions(plan).values() for p in files]
    paths = provenance.cleanable(table.view(), timeline, planned, _earliest(plan))
    for path in paths:
        table.storage.discard(path)
    crash_point(FILES_DELETED)
    per_partition = group_by_partition(paths)
    if lock is None:
        _finish(table, clean_instant, plan, per_partition, started)
    else:
        with held(lock, clean_instant.time):
            _finish(table, clean_instant, plan, per_partition, started)


def _finish(table: Table, clean_instant: Instant, plan: dict, per_partition: dict, started: float) -> None:
    """Mirror into the MDT, then complete K (under the lock); a no-op if someone finished it."""
    timeline = table.timeline()
    current = timeline.find(clean_instant.time)
    if current is None or current.is_completed:
        return
    paths = [p for files in per_partition.values() for p in files]
    table.storage.discard(heartbeat_path(clean_instant.time))
    if table.metadata().exists():
        mirror_deltacommit(table, timeline, clean_instant.time, paths)
        crash_point(MDT_MIRRORED)
    earliest = _earliest(plan)
    writes = [i.time for i in timeline.completed_writes()]
    millis = int((clock.time() - started) * 1000)
    last = writes[-1] if writes else ""
    extra = plan.get("extraMetadata")
    metadata = action_metadata.clean_metadata(
        plan["policy"], clean_instant.time, millis, earliest, last, per_partition, extra
    )
    timeline.complete(clean_instant, avro_metadata.encode("HoodieCleanMetadata", metadata))
    crash_point(COMPLETED)
