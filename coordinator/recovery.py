"""Recovery: finish interrupted table services, roll back orphans in both tables, retry compactions.

EAGER policy (single writer): every pending write instant is an orphan. Pending
rollbacks and cleans are finished from their plans. A completed data instant
is never rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator import clean as clean_service
from coordinator import rollback as rollback_service
from timeline.instant import CLEAN, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, ROLLBACK
from timeline.mdt.maintenance import Housekeeping, housekeeping
from timeline.table import Table

ORPHAN_ACTIONS = {COMMIT, REPLACE_COMMIT, DELTA_COMMIT}


@dataclass
class RecoveryReport:
    resumed_rollbacks: list[str] = field(default_factory=list)
    rolled_back: dict[str, str] = field(default_factory=dict)  # orphan -> rollback instant
    resumed_cleans: list[str] = field(default_factory=list)
    metadata: Housekeeping | None = None


def roll_back_orphans(table: Table, report: RecoveryReport | None = None) -> RecoveryReport:
    """Finish pending rollbacks, roll back orphan writes, finish pending cleans.

    Run at every `begin`; the MDT's own housekeeping waits for the commit step.
    """
    report = report or RecoveryReport()
    pending = table.timeline().pending()
    for instant in pending:
        if instant.action == ROLLBACK:
            rollback_service.resume(table, instant)
            report.resumed_rollbacks.append(instant.time)
    if report.resumed_rollbacks:  # finished rollbacks removed their targets from the timeline
        pending = table.timeline().pending()
    for instant in pending:
        if instant.action in ORPHAN_ACTIONS:
            report.rolled_back[instant.time] = rollback_service.rollback(table, instant)
    for instant in pending:
        if instant.action == CLEAN:
            clean_service.resume(table, instant)
            report.resumed_cleans.append(instant.time)
    return report


def recover(table: Table) -> RecoveryReport:
    """`tandem recover`: orphans in both tables, then MDT housekeeping (pending compactions)."""
    report = roll_back_orphans(table)
    mdt = table.metadata()
    if mdt.exists():
        report.metadata = housekeeping(mdt, table.timeline(), table.max_delta_commits)
    return report
