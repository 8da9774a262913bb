"""Compaction, and the choice of what to clean, on a metadata table in Hudi's format: the previous format's
protocol in Hudi's files and instants.

- Schedule (under the lock): compaction C is `<latest completed delta commit>001`, as Java names it (Java
  schedules its own next compaction only above every instant of the write timeline). Each group whose
  writer slice holds data above its last seal is sealed (`file_group_writes.write_seals`: its next version
  claimed with an empty delete block naming C), then `C.compaction.requested` plans the logs below each
  seal, with the sealed versions in the plan's `extraMetadata`. A writer with a stale view loses the race
  for the sealed version; one that sees a seal without a plan refuses, and housekeeping writes the plan from
  the seals.
- Execute (outside the lock when a worker runs it): each planned group's base merged with the blocks of
  valid instants is written as `{fileId}_0-0-0_C.hfile` with create-if-absent. The bytes are a function of
  the plan and of final decisions, so every attempt writes the same file. A block of an instant not decided
  yet defers the compaction. Readers never read a base file of a pending compaction.
- Publish (under the lock): `C.commit` names each base file with its size (the health check's reference).
- Clean: per group, every slice but its `retain` newest, and none newer than the `retain`-th latest completed
  compaction, so a reader with a slightly older view still finds its slice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from coordinator.mdt import hudi_deltacommit, steps
from timeline.crash_points import crash_point
from timeline.errors import CorruptInstantError, TandemError
from timeline.format import avro_metadata, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMMIT, COMPACTION, DELTA_COMMIT, LOG_COMPACTION, REPLACE_COMMIT, Instant, State
from timeline.hudi_log import BlockType, HudiLogError
from timeline.hudi_log import rollback_target as command_target
from timeline.io.storage import Storage
from timeline.mdt import file_group_writes as writes
from timeline.mdt import layout
from timeline.mdt.file_slices import FileGroup, FileSlice, LogFile, TimelineFacts, list_file_groups
from timeline.mdt.hudi_layout import CLEAN_SUFFIX, compaction_instant
from timeline.mdt.slice_records import log_blocks, valid_instants
from timeline.mdt.table import MetadataTable

SEALED_KEY = "tandem.sealed"  # plan extraMetadata: {file id: the version of its seal}
_WRITE_ACTIONS = {COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION, LOG_COMPACTION}


@dataclass
class StagedCompaction:
    """The base files of compaction `time`, written and waiting for the commit under the lock."""

    time: str
    written: list[writes.WrittenFile] = field(default_factory=list)


def _groups(mdt: MetadataTable) -> list[FileGroup]:
    return [g for p in hudi_deltacommit.kept_partitions(mdt) for g in list_file_groups(mdt.storage, p)]


def schedule(mdt: MetadataTable, timeline: ActiveTimeline) -> str | None:
    """Plan a compaction of every group with logs (call under the lock, `compaction.schedule` having found no
    orphan seal, no pending compaction and nothing undecided). None if nothing is to do."""
    latest = max((i.time for i in timeline.completed() if i.action == DELTA_COMMIT), default=None)
    if latest is None:
        return None
    time = compaction_instant(latest)
    if any(i.time >= time for i in timeline.instants if i.action in _WRITE_ACTIONS):
        return None
    groups = _groups(mdt)
    slices = hudi_deltacommit.writer_slices(mdt.storage, timeline, groups)
    due = [g for g in groups if _has_data(mdt.storage, g.slices.get(slices[g.file_id]))]
    if not due:
        return None
    seals = writes.write_seals(mdt.storage, time, latest, due, slices)
    crash_point(steps.SEALED)
    sealed = {s.file_id: (s.partition, s.base_instant, _version(s.path)) for s in seals}
    return _write_plan(mdt, timeline, time, sealed)


def _has_data(mdt: Storage, found: FileSlice | None) -> bool:
    """Whether a slice holds a log larger than a seal above its last seal: a group whose slice holds only
    empty blocks (its first log, seals of compactions that found it empty, blocks those compactions found
    rolled back) is not compacted again and again for nothing."""
    for log in reversed(found.logs if found is not None else []):
        if log.size > hudi_deltacommit.SEAL_MAX_BYTES:
            return True
        if any(writes.seal_target(b) is not None for b in log_blocks(mdt, log.path, log.size)):
            return False
    return False


def _version(path: str) -> int:
    return int(path.rsplit(".log.", 1)[1].split("_", 1)[0])


def _write_plan(
    mdt: MetadataTable, timeline: ActiveTimeline, time: str, sealed: dict[str, tuple[str, str, int]]
) -> str | None:
    """`time.compaction.requested` of the logs below each group's seal (`sealed`: file id -> (partition, slice,
    seal version)); None when another compaction sealed one of these slices lower (see `_sealed_below`)."""
    by_id = {g.file_id: g for p in {s[0] for s in sealed.values()} for g in list_file_groups(mdt.storage, p)}
    operations = []
    for file_id, (_, base_instant, version) in sorted(sealed.items()):
        found = by_id[file_id].slices[base_instant]
        below = [log for log in found.logs if log.name.version < version]
        if _sealed_below(mdt.storage, below, timeline):
            return None
        operations.append(writes.compaction_operation(found, below))
    versions = json.dumps({f: v for f, (_, _, v) in sorted(sealed.items())})
    plan = avro_metadata.compaction_plan(operations, {SEALED_KEY: versions})
    requested = Instant(time, COMPACTION, State.REQUESTED)
    timeline.create_requested(requested, avro_metadata.encode("HoodieCompactionPlan", plan))
    crash_point(steps.PLANNED)
    return time


def _sealed_below(mdt: Storage, logs: Sequence[LogFile], timeline: ActiveTimeline) -> bool:
    """Whether a log below this seal is the seal of a compaction not completed: another scheduler (one that
    only believed it held the lock) sealed the slice first, and the slice is its plan's. The lowest seal wins;
    a higher one stays, with no plan, above the winner's planned logs, and the winner's pending plan moves
    writers to its new slice. The seal of a completed (or archived) compaction that found the group empty is
    history."""
    done = {i.time for i in timeline.completed() if i.action == COMPACTION}
    first = min((i.time for i in timeline.instants), default=None)
    for log in logs:
        if log.size <= hudi_deltacommit.SEAL_MAX_BYTES:
            for target in filter(None, (writes.seal_target(b) for b in log_blocks(mdt, log.path, log.size))):
                if target not in done and not (first is not None and target < first):
                    return True
    return False


def plan_orphan_seals(mdt: MetadataTable, timeline: ActiveTimeline | None = None) -> str | None:
    """Finish a schedule that crashed between sealing and planning: the plan of the sealed groups."""
    timeline = timeline or mdt.timeline()
    facts = TimelineFacts.of(timeline)
    planned = hudi_deltacommit.planned_groups(timeline)
    orphans: dict[str, dict[str, tuple[str, str, int]]] = {}
    for group in _groups(mdt):
        counted = [b for b in group.slices if facts.counts(b)]
        counted += [planned[group.file_id]] if group.file_id in planned else []
        if not counted:
            continue
        base_instant = max(counted)
        seal = hudi_deltacommit.top_seal(mdt.storage, group, base_instant)
        if seal is not None and not hudi_deltacommit.is_history(seal[1], facts):
            orphans.setdefault(seal[1], {})[group.file_id] = (group.partition, base_instant, seal[0])
    for time, sealed in sorted(orphans.items()):
        if _write_plan(mdt, timeline, time, sealed) is not None:
            return time
    return None


def _undecided(
    mdt: MetadataTable, logs: Sequence[LogFile], is_valid: Callable[[str], bool], data_timeline: ActiveTimeline
) -> str | None:
    """The first instant whose blocks the planned `logs` hold and that is neither valid nor rolled back."""
    blocks = [b for log in logs for b in log_blocks(mdt.storage, log.path, log.size)]
    rolled_back = {command_target(b) for b in blocks if b.kind == BlockType.COMMAND_BLOCK}
    for block in blocks:
        if block.kind not in (BlockType.HFILE_DATA_BLOCK, BlockType.DELETE_BLOCK):
            continue
        time = block.header.get("INSTANT_TIME", "")
        if is_valid(time) or time in rolled_back:
            continue
        decided = outcome.read(mdt.data_storage, time)
        if decided is not None and decided.is_rollback:
            continue
        if decided is None and data_timeline.find(time) is None and time <= data_timeline.last_time():
            continue  # gone from the data timeline without completing: rolled back
        return time
    return None


def stage(mdt: MetadataTable, data_timeline: ActiveTimeline, time: str) -> StagedCompaction:
    """Write the base files of pending compaction `time` (safe outside the lock); CompactionDeferred while a
    planned block's instant is undecided."""
    timeline = mdt.timeline()
    if timeline.find(time) is None:
        raise TandemError(f"no metadata compaction {time} on the metadata timeline")
    plan = timeline.avro(Instant(time, COMPACTION, State.REQUESTED))
    if timeline.find(time).state == State.REQUESTED:  # Java's order too: inflight before any base file exists
        timeline.transition_to_inflight(Instant(time, COMPACTION, State.REQUESTED))
        crash_point(steps.STARTED)
    is_valid = valid_instants(data_timeline, timeline)
    facts = TimelineFacts.of(timeline)
    groups: dict[str, dict[str, FileGroup]] = {}
    staged = StagedCompaction(time)
    for op in avro_metadata.compaction_operations(plan):
        if op.partition not in groups:
            groups[op.partition] = {g.file_id: g for g in list_file_groups(mdt.storage, op.partition)}
        found = groups[op.partition].get(op.file_id, FileGroup(op.partition, op.file_id)).slices.get(op.base_instant)
        logs = [log for log in (found.logs if found else []) if log.path.rsplit("/", 1)[1] in op.log_files]
        if found is None or len(logs) != len(op.log_files) or (op.base_file and not found.base_file):
            raise CorruptInstantError(f"metadata compaction {time}: planned files of {op.file_id} are missing")
        try:
            waiting = _undecided(mdt, logs, is_valid, data_timeline)
        except HudiLogError as err:
            raise CorruptInstantError(f"metadata compaction {time} of {op.file_id}: {err}") from err
        if waiting is not None:
            raise steps.CompactionDeferred(f"metadata compaction {time} waits for instant {waiting}, not decided yet")
        written = writes.compact_group(mdt.storage, found, logs, facts, is_valid, time)
        if written is not None:
            staged.written.append(written)
    # the base files' entries and the plan's: C.commit without C.compaction.requested reads as a plain commit
    mdt.storage.sync_dirs([*sorted({w.partition for w in staged.written}), ".hoodie"])
    crash_point(steps.BASE_WRITTEN)
    return staged


def publish(mdt: MetadataTable, staged: StagedCompaction) -> bool:
    """Under the lock: complete compaction `staged.time`; False if it was completed already."""
    timeline = mdt.timeline()
    instant = timeline.find(staged.time)
    if instant is None or instant.action != COMPACTION:
        raise TandemError(f"no metadata compaction {staged.time} on the metadata timeline")
    if instant.is_completed:
        return False
    writes.complete_compaction(timeline, staged.time, staged.written)
    crash_point(steps.COMPLETED)
    return True


def cleanable(mdt: MetadataTable, retain: int) -> tuple[str, str, list[str]] | None:
    """(clean instant, earliest compaction kept, paths) of the slices a clean may delete; None for nothing."""
    timeline = mdt.timeline()
    completed = sorted(i.time for i in layout.compactions(timeline) if i.is_completed)
    if len(completed) < retain:
        return None
    keep_from = completed[-retain]
    time = completed[-1][: -len(CLEAN_SUFFIX)] + CLEAN_SUFFIX
    if timeline.find(time) is not None:
        return None
    paths = []
    for group in _groups(mdt):
        newest = sorted(group.slices)[-retain:]
        for base_instant, found in group.slices.items():
            if base_instant < keep_from and base_instant not in newest:
                paths += [found.base_file] if found.base_file else []
                paths += [log.path for log in found.logs]
    return (time, keep_from, sorted(paths)) if paths else None
