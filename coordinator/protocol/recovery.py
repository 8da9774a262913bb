"""Recovery: finish interrupted table services, roll back orphans in both tables, retry compactions.

A pending write instant whose commit decision stands (its writer died between
the decision and T.commit) is rolled forward, never back. Otherwise: EAGER
policy: every pending write instant is an orphan. LAZY (the default, safe for
several writers): only pending write instants whose heartbeat expired or whose
writer process is known dead (same host, pid gone), so `tandem recover` after a
crash on this machine is immediate while a live writer elsewhere is never
rolled back. Pending
rollbacks (which run wholly under the lock, so a pending one was interrupted)
are finished from their plans; pending cleans too, once their heartbeat
expired (a live one belongs to a running clean worker). Marker folders of
instants no longer on the timeline (a paused writer that kept writing after
its instant was rolled back) lose their files, those named for that instant
only (`provenance`). A completed data instant is never rolled back, and a
rollback plan that targets one is reported and left. Callers hold the lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.config import EAGER, CoordinatorConfig
from coordinator.mdt.bootstrap import finish_interrupted_initialization
from coordinator.mdt.compaction import plan_orphan_seal
from coordinator.mdt.index_build import catch_up
from coordinator.mdt.maintenance import Housekeeping, housekeeping
from coordinator.protocol import clean as clean_service
from coordinator.protocol import markers, provenance, savepoint
from coordinator.protocol import restore as restore_service
from coordinator.protocol import rollback as rollback_service
from coordinator.protocol.heartbeat import is_expired, writer_is_gone
from timeline.format import outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import CLEAN, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, ROLLBACK, Instant, is_instant_time
from timeline.table import TEMP_DIR, Table

ORPHAN_ACTIONS = {COMMIT, REPLACE_COMMIT, DELTA_COMMIT}


@dataclass
class RecoveryReport:
    resumed_rollbacks: list[str] = field(default_factory=list)
    rolled_back: dict[str, str] = field(default_factory=dict)  # orphan -> rollback instant
    rolled_forward: list[str] = field(default_factory=list)  # commit decided, T.commit written by recovery
    resumed_cleans: list[str] = field(default_factory=list)
    stray_files: list[str] = field(default_factory=list)
    timeline: ActiveTimeline | None = None  # the data timeline as recovery left it
    metadata: Housekeeping | None = None
    indexed: str | None = None  # the indexing instant that indexed live files an index was missing
    compactions: list[str] = field(default_factory=list)  # a merge-on-read table's pending compactions finished
    dropped_savepoints: list[str] = field(default_factory=list)  # savepoints whose creator died before completing
    resumed_restores: list[str] = field(default_factory=list)


def is_orphan(table: Table, instant: Instant, config: CoordinatorConfig) -> bool:
    if instant.action not in ORPHAN_ACTIONS | {CLEAN}:
        return False
    if instant.action != CLEAN and config.failed_writes_policy == EAGER:
        return True
    return is_expired(table.storage, instant.time, config.heartbeat_expiry_s) or writer_is_gone(
        table.storage, instant.time
    )


def remove_stray_markers(table: Table, report: RecoveryReport) -> None:
    """Marker folders whose instant is gone: delete the files they name (never a pending or completed instant's).

    The folders are judged by a timeline read after they were listed: an instant is requested
    before its first marker, so the read shows the instant of every folder listed unless it is
    gone for good. A timeline read earlier (this recovery's own, before a pause past its lock)
    does not show a write begun since, and would take that write's files from under it. A begin
    keeps its reads (`read_once`), so this read goes to storage past that memo.
    """
    folders = table.storage.list_dir(TEMP_DIR)
    if not folders:
        return
    timeline = ActiveTimeline.load(table.storage)  # not `table.timeline()`: inside `reuse_reads` that is the old one
    pending = {i.time for i in timeline.pending()}
    for entry in folders:
        time = entry.base_name
        if time in pending:
            continue
        if not is_instant_time(time):  # no instant's folder: junk, reported and left
            provenance.refuse([f"{TEMP_DIR}/{time}"], "not the marker folder of an instant")
            continue
        if not timeline.is_completed_or_archived(time):  # a completed one's folder is a commit's leftover
            for path in provenance.undoable(timeline, time, markers.marked_files(table.storage, time)):
                if table.storage.delete(path):
                    report.stray_files.append(path)
        table.storage.delete_dir(markers.marker_dir(time))


def roll_back_orphans(
    table: Table, config: CoordinatorConfig | None = None, report: RecoveryReport | None = None
) -> RecoveryReport:
    """Finish pending rollbacks, roll back orphan writes, finish abandoned cleans, drop stray files.

    Run under the lock at every `begin` and clean; the MDT's own housekeeping waits for the commit step.
    """
    config = config or CoordinatorConfig()
    report = report or RecoveryReport()
    mdt = table.metadata()
    if mdt.timeline_if_exists() is not None:  # a seal whose plan a crash never wrote would refuse every MDT write
        plan_orphan_seal(mdt)
    timeline = table.timeline()
    for instant in restore_service.pending(timeline):  # first: its victims must not be rolled forward
        restore_service.resume(table, instant)
        report.resumed_restores.append(instant.time)
    report.stray_files += restore_service.sweep_restored_away(table, timeline)
    if report.resumed_restores or timeline.restored_away:
        timeline = table.timeline()
    pending = timeline.pending()
    for instant in pending:
        if instant.action == ROLLBACK and rollback_service.resume(table, instant):
            report.resumed_rollbacks.append(instant.time)
    if report.resumed_rollbacks:  # finished rollbacks removed their targets from the timeline
        pending = table.timeline().pending()
    for instant in pending:
        if instant.action not in ORPHAN_ACTIONS:
            continue
        decided = outcome.read(table.storage, instant.time)
        if decided is not None and decided.is_commit:
            rollback_service.roll_forward(table, instant, decided)
            report.rolled_forward.append(instant.time)
        elif (decided is not None and decided.is_rollback) or is_orphan(table, instant, config):
            rolled_back = rollback_service.rollback(table, instant)
            if rolled_back is not None:
                report.rolled_back[instant.time] = rolled_back
    for instant in pending:
        if instant.action == CLEAN and is_orphan(table, instant, config):
            clean_service.resume(table, instant)
            report.resumed_cleans.append(instant.time)
    report.dropped_savepoints = savepoint.drop_unfinished(table, timeline, config.heartbeat_expiry_s)
    changed = report.resumed_rollbacks or report.rolled_back or report.rolled_forward or report.resumed_cleans
    changed = changed or report.dropped_savepoints
    report.timeline = table.timeline() if changed else timeline
    remove_stray_markers(table, report)
    return report


def recover(table: Table, config: CoordinatorConfig | None = None) -> RecoveryReport:
    """`tandem recover` (under the lock): orphans in both tables, MDT housekeeping, index catch-up."""
    config = config or CoordinatorConfig()
    report = roll_back_orphans(table, config)
    mdt = table.metadata()
    finish_interrupted_initialization(mdt, table.config.name, report.timeline or table.timeline())
    if mdt.exists():
        timeline = table.timeline()
        table.check_writable(timeline)  # housekeeping may compact: never over a damaged MDT
        report.metadata = housekeeping(mdt, timeline, config.max_delta_commits)
        report.indexed = catch_up(mdt, timeline)
    return report
