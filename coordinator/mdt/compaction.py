"""Metadata-table compaction and clean (DESIGN §5).

Schedule: seal the current slice by claiming its next log version with a seal
block (create-if-absent), then write the plan `C.compaction.requested` listing
the logs below the seal. A writer with a stale view either loses the race for
that version or sees the seal, so no log can land in a slice after its plan.
Execute: merge base + the blocks of *decided-committed* instants of the
planned logs into a staged file (outside the lock when a worker runs it), then
under the lock publish it as base file C with create-if-absent and complete
`C.commit`, which records each base file's CRC32: readers and writers verify
a base file against it before they use it (`health`). On Hudi's format
(`hudi_compaction`) the commit records sizes, and the HFile's own block
checksums vouch for its bytes. A block whose instant is still undecided (prepared by a writer
that claimed its log version before the seal) defers the compaction: merging
it would be a guess either way. Decisions are final, so every attempt of one
plan builds the same base, and an attempt never deletes a base another
published. A pending compaction is retried with the same instant, never
abandoned.
"""

from __future__ import annotations

import json
import posixpath
import uuid
import zlib
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.mdt import deltacommit, hudi_compaction, steps
from coordinator.mdt.hudi_compaction import StagedCompaction
from coordinator.mdt.steps import CompactionDeferred
from timeline.crash_points import crash_point
from timeline.errors import TandemError
from timeline.format import action_metadata, avro_metadata, outcome
from timeline.format.action_metadata import KEEP_LATEST_FILE_VERSIONS
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.instant import CLEAN, COMPACTION, DELTA_COMMIT, Instant, State
from timeline.format.table_config import read_config
from timeline.mdt import indexes, layout
from timeline.mdt import records as rec
from timeline.mdt.log import DATA, FILES, INDEX_PARTITIONS, SEAL, LogBlock, block_partition, rolled_back_targets
from timeline.mdt.reader import MetadataReader, base_records
from timeline.mdt.storage_listing import storage_records
from timeline.mdt.table import MetadataTable

DEFAULT_MAX_DELTA_COMMITS = 10
DEFAULT_SLICES_RETAINED = 3
STAGING_DIR = ".hoodie/.temp"


def deltacommits_since_last_compaction(timeline: ActiveTimeline) -> int:
    last = max((i.time for i in layout.compactions(timeline)), default="")
    return sum(1 for i in timeline.completed() if i.action == DELTA_COMMIT and i.time > last)


def is_due(mdt: MetadataTable, max_delta_commits: int = DEFAULT_MAX_DELTA_COMMITS) -> bool:
    return deltacommits_since_last_compaction(mdt.timeline()) >= max_delta_commits


def read_plan(mdt: MetadataTable, time: str) -> dict:
    timeline = mdt.timeline()
    instant = Instant(time, COMPACTION, State.REQUESTED)
    try:
        return json.loads(mdt.storage.read_bytes(timeline.path(instant)))
    except (ValueError, FileNotFoundError) as err:
        raise TandemError(f"metadata compaction plan {time} is unreadable: {err}") from err


def _orphan_seal(mdt: MetadataTable, timeline: ActiveTimeline) -> tuple[str, int, str] | None:
    """A sealed writer slice whose plan was never written: (slice, seal version, compaction instant)."""
    base_instant = layout.writer_slice(timeline)
    current = mdt.slices().get(base_instant)
    if current is None or not current.logs:
        return None
    top = current.max_version
    for block in mdt.read_log(layout.log_path(base_instant, top)).blocks:
        if block.block_type == SEAL:
            return base_instant, top, block.attributes["compaction"]
    return None


def plan_orphan_seal(mdt: MetadataTable, timeline: ActiveTimeline | None = None) -> str | None:
    """Finish a schedule that crashed between sealing the slice and writing the plan."""
    if mdt.is_hudi_format():
        return hudi_compaction.plan_orphan_seals(mdt, timeline)
    timeline = timeline or mdt.timeline()
    orphan = _orphan_seal(mdt, timeline)
    if orphan is None:
        return None
    base_instant, seal_version, time = orphan
    return _write_plan(mdt, timeline, base_instant, seal_version, time)


def schedule(mdt: MetadataTable, data_timeline: ActiveTimeline) -> str | None:
    """Plan a compaction of the writer slice (call under the lock). None if not allowed or nothing to do."""
    finished = plan_orphan_seal(mdt)
    if finished is not None:
        return finished
    timeline = mdt.timeline()
    if layout.pending_compactions(timeline) or steps.schedule_blockers(timeline, data_timeline):
        return None
    if mdt.is_hudi_format():
        return hudi_compaction.schedule(mdt, timeline)
    base_instant = layout.writer_slice(timeline)
    current = mdt.slices().get(base_instant)
    if current is None or not current.logs:
        return None
    time = mdt.next_instant(data_timeline)
    version = deltacommit.append_block(mdt, LogBlock(time, SEAL, [], {"compaction": time}), base_instant)
    crash_point(steps.SEALED)
    if _sealed_below(mdt, base_instant, version):
        return None
    return _write_plan(mdt, timeline, base_instant, version, time)


def _sealed_below(mdt: MetadataTable, base_instant: str, version: int) -> bool:
    """Whether another compaction sealed this slice below `version`: then the slice is already its to plan.

    The lock alone keeps two schedulers apart; one frozen past its lease (or a faulty lock)
    reads the MDT timeline before the other's plan exists and seals the same slice one version
    higher. Planning from the same base would leave out everything the other compaction's new
    slice gathers, completed commits included, once this base is the newest. The lowest seal
    wins; a higher one is left as a seal with no plan, above the winner's planned logs.
    """
    for below in sorted(v for v in mdt.slices()[base_instant].logs if v < version):
        if any(b.block_type == SEAL for b in mdt.read_log(layout.log_path(base_instant, below)).blocks):
            return True
    return False


def _write_plan(mdt: MetadataTable, timeline: ActiveTimeline, base_instant: str, seal_version: int, time: str) -> str:
    current = mdt.slices()[base_instant]
    logs = current.log_paths(below=seal_version)
    plan = {
        "base_instant": base_instant,
        "base_file": current.base_file,
        "log_files": logs,
        "sealed_version": seal_version,
        # whose data blocks the planned logs hold: the health check's proof that a deltacommit this
        # compaction absorbs had its log, without reading that deltacommit's metadata
        "block_instants": sorted({b.instant for p in logs for b in mdt.read_log(p).blocks if b.block_type == DATA}),
    }
    timeline.create_requested(Instant(time, COMPACTION, State.REQUESTED), json.dumps(plan, indent=2).encode())
    crash_point(steps.PLANNED)
    return time


@dataclass
class StagedBase:
    """A compacted base file written aside, waiting to be published under the lock."""

    time: str
    path: str
    records: int
    size: int
    index_paths: dict[str, str] = field(default_factory=dict)  # index partition -> staged base
    index_sizes: dict[str, int] = field(default_factory=dict)  # index partition -> its size in bytes


def stage(mdt: MetadataTable, data_timeline: ActiveTimeline, time: str) -> StagedBase | StagedCompaction:
    """Merge C's plan into base files under temporary names (safe outside the lock).

    Index records survive only for files the merged `files` partition lists, and
    only for the indexes the table keeps: compaction is their garbage collector.
    """
    if mdt.is_hudi_format():
        return hudi_compaction.stage(mdt, data_timeline, time)
    plan = read_plan(mdt, time)
    index_tables: dict[str, pa.Table] = {}
    if plan.get("initialize"):
        records = storage_records(mdt.data_storage, data_timeline)
    else:
        records, index_tables = _merge_planned(mdt, data_timeline, plan)
    path = _staging_path(time)
    size = deltacommit.write_base(mdt, path, [rec.compacted(r) for r in records.values()])
    staged = StagedBase(time, path, len(records), size)
    live = {
        (rec.data_partition(r["key"]), name)
        for r in records.values()
        if r["key"] != rec.ALL_PARTITIONS
        for name in rec.live_files(r)
    }
    kept = set(read_config(mdt.data_storage).metadata_indexes)
    for partition, table in index_tables.items():
        if partition in kept:
            staged.index_paths[partition] = _staging_path(time)
            staged.index_sizes[partition] = deltacommit.write_index_base(
                mdt, partition, staged.index_paths[partition], indexes.keep_live(table, live)
            )
    return staged


def _staging_path(time: str) -> str:
    return f"{STAGING_DIR}/{time}-{uuid.uuid4().hex}.parquet"


def publish(mdt: MetadataTable, staged: StagedBase | StagedCompaction) -> bool:
    """Under the lock: move the staged base into place and complete C; False if C was done already."""
    if isinstance(staged, StagedCompaction):
        return hudi_compaction.publish(mdt, staged)
    timeline = mdt.timeline()
    instant = timeline.find(staged.time)
    if instant is None or instant.action != COMPACTION:
        mdt.storage.discard(staged.path)
        raise TandemError(f"no metadata compaction {staged.time} on the metadata timeline")
    if instant.is_completed:
        for path in [staged.path, *staged.index_paths.values()]:
            mdt.storage.discard(path)
        return False
    if instant.state == State.REQUESTED:
        timeline.transition_to_inflight(instant)
        crash_point(steps.STARTED)
    published = {layout.base_path(staged.time): staged.path}
    published.update({layout.index_base_path(p, staged.time): path for p, path in staged.index_paths.items()})
    checksums: dict[str, int] = {}
    for target, source in published.items():
        if mdt.storage.exists(target):  # a retry: an earlier attempt published it
            data = mdt.storage.read_bytes(target)
        else:
            data = mdt.storage.read_bytes(source)
            mdt.storage.create_if_absent(target, data)
        checksums[target] = zlib.crc32(data)
        mdt.storage.discard(source)
    # The base files' entries and the plan's: C.commit without C.compaction.requested reads as a plain commit.
    mdt.storage.sync_dirs([*(posixpath.dirname(target) for target in published), ".hoodie"])
    crash_point(steps.BASE_WRITTEN)
    meta = CommitMetadata(operation_type="COMPACT", compacted=True)
    meta.add(
        WriteStat(
            layout.FILE_ID,
            layout.base_path(staged.time),
            layout.FILES_PARTITION,
            num_writes=staged.records,
            total_write_bytes=staged.size,
            file_size_in_bytes=staged.size,
        )
    )
    for partition, size in sorted(staged.index_sizes.items()):  # readers learn each base's size here
        path = layout.index_base_path(partition, staged.time)
        meta.add(WriteStat(layout.FILE_ID, path, partition, total_write_bytes=size, file_size_in_bytes=size))
    meta.extra_metadata[layout.BASE_CHECKSUMS_KEY] = json.dumps(checksums, sort_keys=True)
    timeline.complete(Instant(staged.time, COMPACTION, State.INFLIGHT), meta.to_json_bytes())
    crash_point(steps.COMPLETED)
    return True


def execute(mdt: MetadataTable, data_timeline: ActiveTimeline, time: str) -> None:
    """Run (or re-run) pending compaction `time` to completion, inline (the caller holds the lock)."""
    instant = mdt.timeline().find(time)
    if instant is None or instant.action != COMPACTION:
        raise TandemError(f"no metadata compaction {time} on the metadata timeline")
    if not instant.is_completed:
        publish(mdt, stage(mdt, data_timeline, time))


def is_committed(mdt: MetadataTable, reader: MetadataReader, time: str) -> bool:
    """Whether the blocks of `time` belong in a compacted base; CompactionDeferred while undecided.

    Completed on the data timeline, or a completed MDT-only action: yes. Otherwise the
    instant's decision record answers. Without one: still on the data timeline means
    undecided; older than it (archived) means committed; gone from it means rolled back;
    newer than this view of the timeline means undecided.
    """
    data_timeline = reader.data_timeline
    if time in data_timeline.completed_times() or time in reader.completed_mdt_only:
        return True
    decided = outcome.read(mdt.data_storage, time)
    if decided is not None:
        return decided.is_commit
    if data_timeline.find(time) is None:
        if data_timeline.is_completed_or_archived(time):
            return True
        if time <= data_timeline.last_time():
            return False
    raise CompactionDeferred(f"metadata compaction waits for instant {time}, which is not decided yet")


def _merge_planned(
    mdt: MetadataTable, data_timeline: ActiveTimeline, plan: dict
) -> tuple[dict[str, dict], dict[str, pa.Table]]:
    """The `files` records and each index partition's records after merging the plan's logs into its base."""
    reader = MetadataReader(mdt, data_timeline)
    records: dict[str, dict] = {}
    if plan.get("base_file"):
        base = mdt.read_base(plan["base_file"])
        records = base_records(base, base.column("key").to_pylist())
    blocks = [block for path in plan["log_files"] for block in mdt.read_log(path).blocks]
    rolled_back = rolled_back_targets(blocks)
    index_logs: dict[str, tuple[dict[str, dict], set]] = {p: ({}, set()) for p in INDEX_PARTITIONS}
    for block in blocks:
        partition = block_partition(block)
        if block.block_type != DATA or block.instant in rolled_back:
            continue
        if partition not in index_logs and partition != FILES:
            continue
        if not is_committed(mdt, reader, block.instant):
            continue
        if partition == FILES:
            for record in block.records:
                records[record["key"]] = rec.merge(records.get(record["key"]), record)
        else:
            indexes.apply_records(*index_logs[partition], block.records)
    merged = {}
    for partition, (log_records, dead) in index_logs.items():
        base = _index_base(mdt, partition, plan["base_instant"]) if plan.get("base_file") else None
        if base is not None or log_records:
            merged[partition] = indexes.merged_table(partition, base, log_records, dead)
    return records, merged


def _index_base(mdt: MetadataTable, partition: str, base_instant: str) -> pa.Table | None:
    try:
        with mdt.storage.open_input(layout.index_base_path(partition, base_instant)) as handle:
            return pq.read_table(handle)
    except FileNotFoundError:
        return None


def run_pending(
    mdt: MetadataTable, data_timeline: ActiveTimeline, mdt_timeline: ActiveTimeline | None = None
) -> list[str]:
    """Retry every pending compaction, oldest first (same instants, never abandoned)."""
    if plan_orphan_seal(mdt, mdt_timeline) is not None:
        mdt_timeline = None
    done = []
    for instant in sorted(layout.pending_compactions(mdt_timeline or mdt.timeline())):
        try:
            execute(mdt, data_timeline, instant.time)
        except CompactionDeferred:
            break  # later compactions build on this one
        done.append(instant.time)
    return done


def clean(mdt: MetadataTable, data_timeline: ActiveTimeline, retain: int = DEFAULT_SLICES_RETAINED) -> list[str]:
    """Delete slices older than the last `retain` completed compactions."""
    if mdt.is_hudi_format():
        chosen = hudi_compaction.cleanable(mdt, retain)
        return _plan_clean(mdt, *chosen) if chosen else []
    timeline = mdt.timeline()
    completed = sorted(i.time for i in layout.compactions(timeline) if i.is_completed)
    if len(completed) < retain:
        return []
    keep_from = completed[-retain]
    old = [s for b, s in mdt.slices().items() if b < keep_from]
    paths = [p for s in old for p in ([s.base_file] if s.base_file else []) + s.log_paths()]
    paths += [
        path
        for s in old
        for partition in INDEX_PARTITIONS
        if mdt.storage.exists(path := layout.index_base_path(partition, s.base_instant))
    ]
    for staged in mdt.storage.list_dir(STAGING_DIR):  # left by workers that died before publishing
        if staged.base_name.split("-", 1)[0] in completed:
            mdt.storage.discard(f"{STAGING_DIR}/{staged.base_name}")
    if not paths:
        return []
    return _plan_clean(mdt, mdt.next_instant(data_timeline), keep_from, paths)


def _plan_clean(mdt: MetadataTable, time: str, keep_from: str, paths: list[str]) -> list[str]:
    """Write MDT clean `time`'s plan (the exact `paths`), then carry it out."""
    timeline = mdt.timeline()
    per_partition = {
        partition: [p for p in paths if _partition_of(p) == partition]
        for partition in sorted({_partition_of(p) for p in paths})
    }
    plan = action_metadata.clean_plan(
        KEEP_LATEST_FILE_VERSIONS, {"timestamp": keep_from, "action": COMPACTION}, per_partition
    )
    requested = timeline.create_requested(
        Instant(time, CLEAN, State.REQUESTED), avro_metadata.encode("HoodieCleanerPlan", plan)
    )
    crash_point(steps.CLEAN_PLANNED)
    return _carry_out_clean(mdt, requested, plan)


def _partition_of(path: str) -> str:
    """The MDT partition a slice file lives in (`files`, `column_stats`, `bloom_filters`)."""
    return path.split("/", 1)[0]


def resume_cleans(mdt: MetadataTable, timeline: ActiveTimeline) -> list[str]:
    """Finish the MDT cleans a crash left pending; their plans name exact paths, so deleting again is safe."""
    resumed = []
    for instant in timeline.pending():
        if instant.action == CLEAN:
            _carry_out_clean(mdt, instant, timeline.avro(instant.with_state(State.REQUESTED)))
            resumed.append(instant.time)
    return resumed


def _carry_out_clean(mdt: MetadataTable, requested: Instant, plan: dict) -> list[str]:
    planned = avro_metadata.planned_deletions(plan)
    paths = [path for files in planned.values() for path in files]
    for path in paths:
        mdt.storage.discard(path)
    crash_point(steps.CLEAN_DELETED)
    timeline = mdt.timeline()
    completed = sorted(i.time for i in layout.compactions(timeline) if i.is_completed)
    earliest = plan["earliestInstantToRetain"]["timestamp"]
    done = action_metadata.clean_metadata(
        KEEP_LATEST_FILE_VERSIONS, requested.time, 0, earliest, completed[-1], planned
    )
    timeline.complete(requested, avro_metadata.encode("HoodieCleanMetadata", done))
    return paths
