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


def recover(table: Table, skip: set[str] | None = None) -> RecoveryReport:
    report = RecoveryReport()
    for instant in table.timeline().pending():
        if instant.action == ROLLBACK:
            rollback_service.resume(table, instant)
            report.resumed_rollbacks.append(instant.time)
    for instant in table.timeline().pending():
        if instant.action in ORPHAN_ACTIONS and instant.time not in (skip or set()):
            report.rolled_back[instant.time] = rollback_service.rollback(table, instant)
    for instant in table.timeline().pending():
        if instant.action == CLEAN:
            clean_service.resume(table, instant)
            report.resumed_cleans.append(instant.time)
    mdt = table.metadata()
    if mdt.exists():
        report.metadata = housekeeping(mdt, table.timeline(), table.max_delta_commits)
    return report
