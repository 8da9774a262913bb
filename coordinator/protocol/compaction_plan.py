"""Scheduling a merge-on-read data table's compaction (Hudi's NUM_COMMITS strategy), under the lock: by
`tandem compact` and the compaction worker, and by a writer right after its commit when one is due (Hudi's
`hoodie.compact.schedule.inline`), so that a worker executes it while writers go on
(`coordinator.services.data_compaction`)."""

from __future__ import annotations

from timeline.crash_points import crash_point, register
from timeline.errors import TandemError
from timeline.format import avro_metadata, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_metadata import CompactionOperation
from timeline.format.data_logs import DataLog
from timeline.format.instant import COMPACTION, DELTA_COMMIT, WRITE_ACTIONS, Instant, State
from timeline.hudi_log import BlockType, read_blocks
from timeline.mor.pending import pending_compactions
from timeline.table import Table

PLANNED = register("compaction.data.planned", "C.compaction.requested written for the data table")
RECORD_BLOCKS = (BlockType.AVRO_DATA_BLOCK, BlockType.DELETE_BLOCK)
DEFAULT_DELTA_COMMITS = 5  # hoodie.compact.inline.max.delta.commits
OVERDUE = 2  # times the due number of delta commits after which writes in flight no longer hold a plan back


def delta_commits_since_compaction(timeline: ActiveTimeline) -> int:
    """Delta commits (any state) after the last completed compaction, as Hudi counts them."""
    done = [i.time for i in timeline.completed() if i.action == COMPACTION]
    last = done[-1] if done else ""
    return sum(1 for i in timeline.instants if i.action == DELTA_COMMIT and i.time > last)


def pending_writes(timeline: ActiveTimeline) -> list[str]:
    """Write instants not completed yet: while one is pending, no compaction may be scheduled."""
    return [i.time for i in timeline.pending() if i.action in WRITE_ACTIONS and i.action != COMPACTION]


def _decided(table: Table, timeline: ActiveTimeline, logs: list[DataLog]) -> bool:
    """Whether every record block of `logs` belongs to an instant that completed or never will (rolled back):
    a slice with a block of a write still in flight is not planned, since a compaction merges only completed
    blocks and that write could still commit into the slice it supersedes."""
    for log in logs:
        try:
            blocks = read_blocks(table.storage.read_bytes(log.path))
        except FileNotFoundError:
            return False
        for block in blocks:
            if block.kind not in RECORD_BLOCKS:
                continue
            writer = block.header.get("INSTANT_TIME", "")
            if timeline.is_completed_or_archived(writer):
                continue
            decided = outcome.read(table.storage, writer)
            if decided is None or decided.is_commit:
                return False
    return True


def plan_operations(table: Table, timeline: ActiveTimeline) -> list[CompactionOperation]:
    """One operation per latest slice with logs whose group no pending compaction holds and whose logs' every
    writer is decided (`_decided`)."""
    view = table.view()
    pending = pending_compactions(timeline)
    logs = view.slice_logs()
    operations = []
    for base in view.latest_base_files():
        group = (base.partition, base.file_id)
        found = [log for log in logs.get(group, []) if log.base_instant == base.instant]
        if not found or group in pending or not _decided(table, timeline, found):
            continue
        metrics = avro_metadata.slice_metrics(base.size, [log.size for log in found])
        names = tuple(log.name for log in found)
        operations.append(CompactionOperation(base.partition, base.file_id, base.instant, base.name, names, metrics))
    return operations


def schedule(table: Table, max_delta_commits: int = DEFAULT_DELTA_COMMITS, force: bool = False) -> str | None:
    """Under the lock: plan compaction C when due (or `force`); None when not due or no slice has logs.

    Hudi plans none while a write is pending (one that began before C and extends a planned slice would land
    in a slice C supersedes). So does Tandem, until the table is OVERDUE times past due or the plan is forced:
    with writers always in flight logs would otherwise pile up without end. Such a write then conflicts with
    the plan at its commit (`conflicts`), and C's completion checks storage for one that got through."""
    if not table.config.merge_on_read:
        raise TandemError(f"{table.uri} is a copy-on-write table: it has no log files to compact")
    timeline = table.timeline()
    due = delta_commits_since_compaction(timeline)
    if not force and due < max_delta_commits:
        return None
    if not force and pending_writes(timeline) and due < OVERDUE * max_delta_commits:
        return None
    operations = plan_operations(table, timeline)
    if not operations:
        return None
    time = table.new_instant_time(timeline)
    plan = avro_metadata.compaction_plan(operations)
    requested = Instant(time, COMPACTION, State.REQUESTED)
    timeline.create_requested(requested, avro_metadata.encode("HoodieCompactionPlan", plan))
    crash_point(PLANNED)
    return time
