"""Compaction of a merge-on-read data table: each file slice with logs merged into a new base file, as Hudi's
compactor does (docs/hudi-mor-format.md §6), in three steps:

- Schedule (under the lock), Hudi's NUM_COMMITS strategy: when `max_delta_commits` delta commits completed
  since the last compaction (or when forced), compaction C plans every latest slice that has logs and no
  pending compaction (`C.compaction.requested`, a HoodieCompactionPlan). Never while a write instant is
  pending (Hudi's rule): a write that began before C and extended a planned slice would land its log in a
  slice C supersedes. A write that begins after C sees the plan and writes its logs to the slice C starts.
- Execute (outside the lock when a worker runs it): `C.compaction.inflight`, then each planned slice's base
  with the blocks of its planned logs that completed before C merged over it (`timeline.mor.slice_merge`),
  written as `{fileId}_0-0-0_C.parquet` by create-if-absent: the rows are a function of the plan and of
  decided instants, so any attempt's file is the file, and a retry or a second worker adds nothing.
  Readers never read a base file of a pending compaction.
- Complete (under the lock): a log that landed in a planned slice after the plan (a writer without a valid
  lock) abandons C; else MDT deltacommit C naming the new base files, the commit decision (the storage CAS a
  rollback of C would lose to), then `C.commit` (compacted, COMPACT) with each file's stored size. A crashed
  compaction is retried with the same instant by the next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from coordinator.mdt import deltacommit
from coordinator.mdt.maintenance import housekeeping
from coordinator.protocol import provenance
from coordinator.protocol.compaction_plan import RECORD_BLOCKS
from coordinator.write.parquet_files import open_parquet
from timeline.crash_points import crash_point, register
from timeline.errors import ConflictError, CorruptInstantError, TandemError
from timeline.format import avro_metadata, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_metadata import CompactionOperation
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.data_logs import DataLog, parse_data_log
from timeline.format.file_names import base_file_name, parse_base_file
from timeline.format.instant import COMPACTION, Instant, State
from timeline.format.meta_fields import FILE_NAME, META_COLUMNS
from timeline.hudi_log import read_blocks
from timeline.mdt import indexes as mdt_indexes
from timeline.mdt import records as mdt_records
from timeline.mdt.reader import MetadataReader
from timeline.mor.slice_merge import LogMerge
from timeline.query.reader import read_base_file
from timeline.table import Table

STARTED = register("compaction.data.inflight", "C.compaction.inflight written")
BASE_WRITTEN = register("compaction.data.base", "the compacted base files written, C not completed")
MDT_MIRRORED = register("compaction.data.mdt", "MDT deltacommit C completed, data C not yet")
COMPLETED = register("compaction.data.complete", "C.commit completed")

COMPACTION_TOKEN = "0-0-0"  # every attempt names a slice's new base file the same


@dataclass
class StagedCompaction:
    """The base files compaction `time` wrote, waiting for its commit under the lock."""

    time: str
    stats: list[WriteStat] = field(default_factory=list)
    schema: str | None = None


def pending(table: Table) -> list[str]:
    """Compactions of the data table scheduled and not completed, oldest first."""
    return sorted(i.time for i in table.timeline().pending() if i.action == COMPACTION)


def _planned_logs(table: Table, time: str, op: CompactionOperation) -> list[DataLog]:
    """The planned logs of `op`, with their stored sizes; a missing one is damage (a clean never takes the
    logs of a slice no completed base file supersedes yet)."""
    logs = []
    for name in op.log_files:
        log = parse_data_log(op.partition, name)
        if log is None:
            raise CorruptInstantError(f"compaction {time} plans {name!r}, which is no log file name")
        try:
            size = table.storage.size(log.path)
        except FileNotFoundError:
            raise CorruptInstantError(f"compaction {time}: planned log {log.path} is missing") from None
        logs.append(DataLog(log.partition, log.log, size))
    return logs


def _compacted_rows(table: Table, time: str, op: CompactionOperation, merge: LogMerge) -> pa.Table:
    """The slice's rows with its logs merged, log rows named for the new base file (`_hoodie_file_name`)."""
    base = parse_base_file(op.partition, op.base_file or "") if op.base_file else None
    if base is None:
        raise CorruptInstantError(f"compaction {time}: file group {op.file_id} has no base file to compact")
    rows = merge.merged(table.storage, read_base_file(table.storage, base.path), op.partition, op.file_id)
    name = base_file_name(op.file_id, COMPACTION_TOKEN, time)
    column = rows.column(FILE_NAME)
    renamed = pc.if_else(pc.equal(column, op.file_id), pa.scalar(name), column)
    return rows.set_column(rows.column_names.index(FILE_NAME), FILE_NAME, renamed)


def execute(table: Table, time: str) -> StagedCompaction:
    """Write the base files of pending compaction `time` (safe outside the lock, and to repeat)."""
    timeline = table.timeline()
    instant = timeline.find(time)
    if instant is None or instant.action != COMPACTION or instant.is_completed:
        raise TandemError(f"no pending compaction {time} on the timeline of {table.uri}")
    plan = timeline.avro(Instant(time, COMPACTION, State.REQUESTED))
    if instant.state == State.REQUESTED:  # Java's order: inflight before any base file exists
        timeline.transition_to_inflight(instant)
        crash_point(STARTED)
    staged = StagedCompaction(time, schema=timeline.latest_schema())
    for op in avro_metadata.compaction_operations(plan):
        logs = _planned_logs(table, time, op)
        merge = LogMerge.of({(op.partition, op.file_id): logs}, timeline, time, table.config.precombine_field)
        rows = _compacted_rows(table, time, op, merge)
        staged.stats.append(_write_base(table, op, time, rows, logs))
    table.storage.sync_dirs(sorted({s.partition_path for s in staged.stats}) + [".hoodie"])
    crash_point(BASE_WRITTEN)
    return staged


def _write_base(table: Table, op: CompactionOperation, time: str, rows: pa.Table, logs: list[DataLog]) -> WriteStat:
    """The slice's new base file, created whole unless an earlier attempt created it; its write stat."""
    name = base_file_name(op.file_id, COMPACTION_TOKEN, time)
    path = f"{op.partition}/{name}" if op.partition else name
    rows = rows.select([*META_COLUMNS, *[c for c in rows.column_names if c not in META_COLUMNS]])
    out = pa.BufferOutputStream()
    writer = open_parquet(out, rows.schema)
    writer.write_table(rows, row_group_size=128 * 1024)
    writer.close()
    table.storage.create_if_absent(path, out.getvalue().to_pybytes())
    size = table.storage.size(path)
    return WriteStat(
        file_id=op.file_id,
        path=path,
        partition_path=op.partition,
        prev_commit=op.base_instant,
        num_writes=rows.num_rows,
        num_update_writes=rows.num_rows,
        total_write_bytes=size,
        file_size_in_bytes=size,
    )


def compaction_metadata(staged: StagedCompaction) -> CommitMetadata:
    """`C.commit`'s content: Hudi's compaction metadata (compacted, operation COMPACT) of the new base files."""
    metadata = CommitMetadata(operation_type="COMPACT", schema=staged.schema, compacted=True)
    for stat in staged.stats:
        metadata.add(stat)
    return metadata


def _landed_after_plan(
    table: Table, timeline: ActiveTimeline, time: str, logs: Sequence[DataLog]
) -> tuple[str, str] | None:
    """(log, writer) of a log in a slice compaction `time` folds that its plan does not name, written by an
    instant that completed; a writer still in flight is fenced here (its rollback decision claimed), so it can
    no longer commit into the slice. (Writers that see the plan write to the slice it starts, and a write on
    an older view conflicts with the plan at its commit; this is the check on storage, for a writer that got
    past that check without a valid lock.) `logs`: the table's, as one listing shows them."""
    operations = avro_metadata.compaction_operations(timeline.avro(Instant(time, COMPACTION, State.REQUESTED)))
    planned = {(op.partition, op.file_id): op for op in operations}
    for log in logs:
        op = planned.get((log.partition, log.file_id))
        if op is None or log.base_instant != op.base_instant or log.name in op.log_files:
            continue
        try:
            blocks = read_blocks(table.storage.read_bytes(log.path))
        except FileNotFoundError:
            continue
        # records only: a rollback's command block adds none (it names a write that never completes)
        for writer in sorted({b.header.get("INSTANT_TIME", "") for b in blocks if b.kind in RECORD_BLOCKS}):
            if (
                timeline.is_completed_or_archived(writer)
                or outcome.claim(table.storage, writer, outcome.ROLLBACK).is_commit
            ):
                return log.path, writer
    return None


def _slice_started(logs: Sequence[DataLog], time: str) -> list[str]:
    """Logs named for compaction `time`: writes that extended the slice it starts (abandoning it would orphan
    them: every reader drops logs named for a base file that never comes)."""
    return [log.path for log in logs if log.base_instant == time]


def abandon(table: Table, time: str, written: list[str]) -> bool:
    """Under the lock: give compaction `time` up (a rollback decision, its base files and MDT deltacommit
    undone, its plan removed); False when a commit decision on it stands instead (then it is completed)."""
    if outcome.claim(table.storage, time, outcome.ROLLBACK).is_commit:
        return False
    timeline = table.timeline()
    for path in provenance.undoable(timeline, time, written):
        table.storage.discard(path)
    mdt = table.metadata()
    if mdt.exists():
        deltacommit.retract(mdt, time, timeline)
    timeline.delete_instant_files(time, COMPACTION)
    return True


def complete(table: Table, staged: StagedCompaction, max_delta_commits: int) -> bool:
    """Under the lock: mirror compaction `staged.time` into the MDT, then decide and complete it; False if
    done already. ConflictError (the compaction abandoned) when a write landed in a slice it folds."""
    timeline = table.timeline()
    instant = timeline.find(staged.time)
    if instant is None or instant.action != COMPACTION:
        raise TandemError(f"no compaction {staged.time} on the timeline of {table.uri}")
    if instant.is_completed:
        return False
    logs = table.view().logs
    landed = _landed_after_plan(table, timeline, staged.time, logs)
    if landed is not None:
        started = _slice_started(logs, staged.time)
        if started:  # neither completing nor abandoning loses nothing: left pending, named
            raise ConflictError(
                f"compaction {staged.time} cannot complete: {landed[0]} (instant {landed[1]}) was committed to a "
                f"slice it folds after it was planned, and {len(started)} log(s) already extend the slice it "
                "starts; it stays pending (completing it would hide the first, giving it up would orphan the rest)"
            )
        if abandon(table, staged.time, [s.path for s in staged.stats]):
            raise ConflictError(
                f"compaction {staged.time} abandoned: {landed[0]} was written to a slice it folds after it was "
                "planned; the next compaction plans it again"
            )
    metadata = compaction_metadata(staged)
    mdt = table.metadata()
    mdt_timeline = mdt.timeline_if_exists()
    if mdt_timeline is not None:
        found = mdt_timeline.find(staged.time)
        if found is not None and not found.is_completed:  # an earlier attempt died inside it: start it over
            deltacommit.retract(mdt, staged.time, timeline)
            mdt_timeline = mdt.timeline()
        if found is None or not found.is_completed:
            done = housekeeping(mdt, timeline, max_delta_commits, keep=staged.time, mdt_timeline=mdt_timeline)
            known = frozenset(MetadataReader(mdt, timeline).all_partitions())
            records = mdt_records.from_commit(metadata, known)
            kept = table.config.metadata_indexes + table.config.java_metadata_partitions
            index_records = mdt_indexes.from_write_stats(metadata.write_stats(), kept)
            footprint = metadata.touched_file_groups()
            deltacommit.apply(mdt, staged.time, records, done.mdt_timeline, footprint, index_records)
        crash_point(MDT_MIRRORED)
    decided = outcome.claim(table.storage, staged.time, outcome.COMMIT, metadata.to_json_bytes())
    if not decided.is_commit:
        raise ConflictError(f"compaction {staged.time} was abandoned by another process; nothing was completed")
    timeline.complete_decided(instant.with_state(State.INFLIGHT), decided.payload)
    crash_point(COMPLETED)
    return True
