"""Archival (DESIGN §6): move old completed instants off both active timelines.

Runs under the lock. Each run writes one bundle to `archived/` holding every
state file of the instants it archives (lossless; Hudi's own archived-log
reader only opens `.commits_.archive*` files and skips ours), then removes
those instants from the active timeline oldest first, each one's completed
file last. A crash part-way leaves the oldest instants archived and the rest
still active and completed: readers count an instant older than the active
timeline as archived, hence completed.

Data archival stops before: the earliest pending instant, and every write
instant that was pending when a still-pending write began (it may have
completed after that write began, and the write's conflict check needs it:
each write records them in its inflight file); the latest completed MDT
compaction; a replacecommit whose replaced files still exist; an instant
whose MDT deltacommit has no completed data instant yet; an instant with a
leftover marker folder. MDT archival never archives an instant still on the
data active timeline, and keeps the slices MDT clean still retains.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.mdt import compaction
from coordinator.protocol import conflicts
from timeline.crash_points import crash_point, register
from timeline.errors import CorruptInstantError
from timeline.format import outcome, partition_path
from timeline.format.active_timeline import ARCHIVED_FOLDER, BUNDLE_PREFIX, ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.instant import (
    COMPACTION,
    DELTA_COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
)
from timeline.mdt import layout
from timeline.table import TEMP_DIR, Table

BUNDLE_WRITTEN = register("archive.bundle", "archive bundle written, instants still active")
INSTANT_ARCHIVED = register("archive.instant", "one archived instant removed from the active timeline")
MDT_BUNDLE_WRITTEN = register("archive.mdt.bundle", "MDT archive bundle written")


@dataclass
class ArchivalReport:
    data: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)


def _bundle(timeline: ActiveTimeline, instants: list[Instant]) -> bytes:
    lines = []
    for instant in instants:
        for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
            path = timeline.path(instant.with_state(state))
            if not timeline.storage.exists(path):
                continue
            body = timeline.storage.read_bytes(path)
            entry = {"time": instant.time, "action": instant.action, "state": state.value}
            entry["file"] = path.rpartition("/")[2]
            entry["content"] = base64.b64encode(body).decode()
            lines.append(json.dumps(entry, sort_keys=True))
    return ("\n".join(lines) + "\n").encode()


def _move(timeline: ActiveTimeline, instants: list[Instant], crash: str) -> None:
    """Bundle first, then remove from the active timeline oldest first, completed file last."""
    name = f"{timeline.meta_dir}/{ARCHIVED_FOLDER}/{BUNDLE_PREFIX}{instants[0].time}_{instants[-1].time}.jsonl"
    timeline.storage.create_if_absent(name, _bundle(timeline, instants))
    crash_point(crash)
    for instant in instants:
        for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
            timeline.storage.discard(timeline.path(instant.with_state(state)))
        crash_point(INSTANT_ARCHIVED)


def _prefix(instants: list[Instant], ok: Callable[[Instant], bool]) -> list[Instant]:
    """The oldest instants up to the first that may not go: the active timeline stays a suffix."""
    chosen = []
    for instant in instants:
        if not ok(instant):
            break
        chosen.append(instant)
    return chosen


def _watched_by_pending(timeline: ActiveTimeline) -> list[str]:
    """Write instants that pending writes watched at their begin (recorded in their inflight files).

    A pending write whose inflight file does not say (not yet written, or written
    by an older version) keeps the whole active timeline.
    """
    watched = []
    for pending in timeline.pending():
        if pending.action not in WRITE_ACTIONS or pending.action == COMPACTION:  # a compaction watches nothing
            continue
        try:
            doc = CommitMetadata.from_json_bytes(timeline.read(pending.with_state(State.INFLIGHT)), pending.time)
        except (FileNotFoundError, CorruptInstantError):
            doc = None
        recorded = None if doc is None else conflicts.watched_of(doc)
        if recorded is None:
            return [timeline.earliest_time()]
        watched += recorded
    return watched


def _data_boundary(table: Table, timeline: ActiveTimeline) -> str:
    """Archive only instants strictly older than this time: nothing at or after the first savepoint either
    (Hudi's default `hoodie.archive.beyond.savepoint=false`; savepoints themselves are never archived)."""
    limits = [i.time for i in timeline.pending()[:1]] + _watched_by_pending(timeline)
    limits += [i.time for i in timeline.completed() if i.action == SAVEPOINT][:1]
    mdt = table.metadata()
    if mdt.exists():
        mdt_timeline = mdt.timeline()
        limits.append(layout.latest_completed_compaction(mdt_timeline))
        done = timeline.completed_times()
        limits += [
            i.time
            for i in mdt_timeline.instants
            if i.action == DELTA_COMMIT and i.time not in done and i.time >= timeline.earliest_time()
        ][:1]
    limits += [i.base_name for i in table.storage.list_dir(TEMP_DIR) if i.base_name not in timeline.completed_times()]
    replaced = timeline.replaced_by()
    if replaced:
        live = {(f.partition, f.file_id) for f in table.view().all_base_files_including_replaced()}
        limits += [time for group, time in replaced.items() if group in live]
    return min(limits, default="9" * 17)


def _sweep_rolled_back_files(timeline: ActiveTimeline, rollbacks: list[Instant]) -> None:
    """Delete once more the files each archived rollback (or restore) deleted.

    A writer paused past its heartbeat can land a file after its instant was
    rolled back (its marker predates the rollback, the file does not). Once the
    rollback is archived the rolled-back instant is older than the active
    timeline, and readers would take its files as archived-completed; so they
    must be gone first. The paths are exact (from the rollback's plan), no listing.
    """
    for rollback in rollbacks:
        metadata = timeline.avro(rollback)
        if rollback.action == RESTORE:  # a restore: the rollback metadata of each instant it removed
            for undone in (m for ms in (metadata.get("hoodieRestoreMetadata") or {}).values() for m in ms or []):
                _sweep(timeline, rollback, undone)
            continue
        _sweep(timeline, rollback, metadata)


def _sweep(timeline: ActiveTimeline, rollback: Instant, metadata: dict) -> None:
    """The files one `HoodieRollbackMetadata` deleted, deleted again."""
    for partition in (metadata.get("partitionMetadata") or {}).values():
        for path in partition.get("successDeleteFiles") or []:
            relative = timeline.storage.relative(path)
            if relative is not None:
                where = f"{rollback.file_name}: successDeleteFiles"
                partition_path.split_file_path(relative, where, CorruptInstantError)
                timeline.storage.discard(relative)


def archive_data(table: Table, min_commits: int, max_commits: int) -> list[str]:
    """Archive the data timeline down to `min_commits` completed instants once it exceeds `max_commits`."""
    timeline = table.timeline()
    completed = timeline.completed()
    if len(completed) <= max_commits:
        return []
    boundary = _data_boundary(table, timeline)
    chosen = _prefix(completed[: len(completed) - min_commits], lambda i: i.time < boundary)
    chosen = [i for i in chosen if i.action != RESTORE]  # never archived (as Hudi): its plan fences what it removed
    if not chosen:
        return []
    _sweep_rolled_back_files(timeline, [i for i in chosen if i.action == ROLLBACK])
    _move(timeline, chosen, BUNDLE_WRITTEN)
    for instant in chosen:
        outcome.forget(table.storage, instant.time)
    return [i.time for i in chosen]


def archive_metadata(table: Table, min_commits: int) -> list[str]:
    """Archive MDT instants that the data active timeline and MDT clean no longer need."""
    mdt = table.metadata()
    if not mdt.exists():
        return []
    data_times = {i.time for i in table.timeline().instants}
    timeline = mdt.timeline()
    done = sorted(i.time for i in layout.compactions(timeline) if i.is_completed)
    if len(done) < compaction.DEFAULT_SLICES_RETAINED:
        return []
    boundary = done[-compaction.DEFAULT_SLICES_RETAINED]
    pending = [i.time for i in timeline.pending()]
    if pending:
        boundary = min(boundary, pending[0])
    completed = timeline.completed()
    chosen = _prefix(
        completed[: max(0, len(completed) - min_commits)], lambda i: i.time < boundary and i.time not in data_times
    )
    if not chosen:
        return []
    _move(timeline, chosen, MDT_BUNDLE_WRITTEN)
    return [i.time for i in chosen]


def archive(table: Table, min_commits: int = 20, max_commits: int = 30, force: bool = False) -> ArchivalReport:
    """Archive both timelines (call under the lock).

    The MDT can only archive what the data timeline let go, so after a commit
    it is looked at only when data archival moved; `force` (the CLI) always does.
    """
    report = ArchivalReport(data=archive_data(table, min_commits, max_commits))
    if report.data or force:
        report.metadata = archive_metadata(table, min_commits)
    return report
