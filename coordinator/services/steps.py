"""Table services run as their own steps (CLI verbs and workers), each taking the lock itself.

MDT compaction follows DESIGN §5: schedule under the lock, merge outside it,
publish and complete under it; a merge-on-read data table's compaction takes the
same three steps first (`data_compaction`). A clean plans and completes under the lock and
deletes outside it. Recovery and archival run wholly under the lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.config import CoordinatorConfig
from coordinator.mdt import compaction
from coordinator.mdt.maintenance import roll_back_failed_writes
from coordinator.protocol import clean as clean_service
from coordinator.protocol import compaction_plan
from coordinator.protocol.archival import ArchivalReport, archive
from coordinator.protocol.heartbeat import Heartbeat
from coordinator.protocol.locking import held, table_lock
from coordinator.protocol.recovery import RecoveryReport, recover, roll_back_orphans
from coordinator.services import data_compaction
from locks.base import LockProvider
from timeline.errors import BadInputError
from timeline.mdt import layout
from timeline.table import Table


@dataclass
class CompactionReport:
    rolled_back: list[str] = field(default_factory=list)
    compacted: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)  # planned logs hold an instant not decided yet
    cleaned_files: int = 0
    data_compacted: list[str] = field(default_factory=list)  # compactions of a merge-on-read data table


def compact(table: Table, config: CoordinatorConfig, lock: LockProvider, force: bool = False) -> CompactionReport:
    """Compact a merge-on-read data table (`compact_data`), then its MDT: retry pending MDT compactions and
    schedule one when due (or whenever logs exist, if `force`)."""
    data_compacted = compact_data(table, config, lock, force) if table.config.merge_on_read else []
    report = _compact_metadata(table, config, lock, force)
    report.data_compacted = data_compacted
    return report


def compact_data(table: Table, config: CoordinatorConfig, lock: LockProvider, force: bool = False) -> list[str]:
    """Retry the data table's pending compactions and schedule one when due (or whenever a slice has logs, if
    `force`): planned and completed under the lock, base files written outside it. Returns those completed."""
    with held(lock):
        roll_back_orphans(table, config)  # a failed write's pending instant would keep any compaction off
        compaction_plan.schedule(table, config.compaction_delta_commits, force)
        pending = data_compaction.pending(table)
    done = []
    for time in pending:
        staged = data_compaction.execute(table, time)
        with held(lock, time):
            if data_compaction.complete(table, staged, config.max_delta_commits):
                done.append(time)
    return done


def _compact_metadata(table: Table, config: CoordinatorConfig, lock: LockProvider, force: bool) -> CompactionReport:
    mdt = table.metadata()
    if not mdt.exists():
        raise BadInputError(f"{table.uri} has no metadata table (`tandem metadata create` builds one)")
    report = CompactionReport()
    with held(lock):
        timeline = table.timeline()
        table.check_writable(timeline)  # compacting a damaged MDT would bake the damage into a base file
        compaction.plan_orphan_seal(mdt)  # first: a rollback's blocks must not bury a seal whose plan is missing
        report.rolled_back = roll_back_failed_writes(mdt, timeline)
        if force or compaction.is_due(mdt, config.max_delta_commits):
            compaction.schedule(mdt, timeline)
        pending = sorted(i.time for i in layout.pending_compactions(mdt.timeline()))
    for time in pending:
        try:
            staged = compaction.stage(mdt, table.timeline(), time)
        except compaction.CompactionDeferred:
            report.deferred = pending[pending.index(time) :]
            break
        with held(lock, time):
            if compaction.publish(mdt, staged):
                report.compacted.append(time)
    if report.compacted:
        with held(lock):
            report.cleaned_files = len(compaction.clean(mdt, table.timeline()))
    return report


def clean(table: Table, config: CoordinatorConfig | None = None, lock: LockProvider | None = None) -> str | None:
    """Plan and run one clean under `lock` (the configured one if None); None when nothing to delete."""
    config = config or CoordinatorConfig()
    provider = lock or table_lock(table, config)
    try:
        with held(provider):
            roll_back_orphans(table, config)
            requested = clean_service.schedule(table, config.clean_policy, config.retained)
            if requested is None:
                return None
            heartbeat = Heartbeat.from_config(table.storage, requested.time, config)
            heartbeat.start()
        try:
            clean_service.resume(table, requested, provider)
        finally:
            heartbeat.stop()
        return requested.time
    finally:
        if lock is None:
            provider.close()


def recover_table(table: Table, config: CoordinatorConfig, lock: LockProvider) -> RecoveryReport:
    """Recovery (`recover`), then the data table's pending compactions finished (each idempotent)."""
    with held(lock):
        report = recover(table, config)
        if table.config.merge_on_read:
            for time in data_compaction.pending(table):
                if data_compaction.complete(table, data_compaction.execute(table, time), config.max_delta_commits):
                    report.compactions.append(time)
        return report


def archive_table(table: Table, config: CoordinatorConfig, lock: LockProvider) -> ArchivalReport:
    with held(lock):
        return archive(table, config.archive_min_commits, config.archive_max_commits, force=True)
