"""The metadata table's deltacommits and their rollback: the writer side of `timeline.mdt.table`.

A deltacommit claims the next log version of the writer slice with create-if-absent (the commit's fence
against every other writer); a rollback never deletes a claimed version, it appends a rollback-command block
that readers and compaction honour, and only after the rollback decision on the data instant is claimed.
"""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.mdt import hudi_deltacommit, steps
from timeline.crash_points import crash_point
from timeline.errors import ConflictError, RefusedDeleteWarning, TandemError
from timeline.format import action_metadata, avro_metadata, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.instant import ROLLBACK, Instant, State
from timeline.io.spill import loaded
from timeline.mdt import indexes, layout
from timeline.mdt.log import DATA, PARTITION_ATTRIBUTE, ROLLBACK_COMMAND, LogBlock, encode_block, encode_log
from timeline.mdt.table import BASE_SCHEMA, MetadataTable
from timeline.metrics import METRICS, SYNC

BASE_ROW_GROUP = 1024  # rows per row group of a `files` base file: small, for point lookups
INDEX_BLOCK_BYTES = 32 * 1024 * 1024  # an index partition's records per log block, about
RECORD_OVERHEAD = 256  # bytes an index record counts for beyond its bloom filter


def write_base(mdt: MetadataTable, path: str, records: list[dict]) -> int:
    """A base file sorted by key, in small row groups for point lookups."""
    ordered = sorted(records, key=lambda r: r["key"])
    rows = pa.Table.from_pylist(
        [
            {
                "key": r["key"],
                "type": r["type"],
                "filesystemMetadata": list((r.get("filesystemMetadata") or {}).items()),
            }
            for r in ordered
        ],
        schema=BASE_SCHEMA,
    )
    with mdt.storage.open_output(path) as out:
        pq.write_table(rows, out, row_group_size=BASE_ROW_GROUP)
        return out.tell()


def write_index_base(mdt: MetadataTable, partition: str, path: str, records: pa.Table) -> int:
    """An index partition's base file, sorted by key (so by data partition) for pruned reads."""
    ordered = records.sort_by("key")
    with mdt.storage.open_output(path) as out:
        pq.write_table(ordered, out, row_group_size=indexes.BASE_ROW_GROUP)
        return out.tell()


def apply(
    mdt: MetadataTable,
    time: str,
    records: list[dict],
    timeline: ActiveTimeline | None = None,
    footprint: set[tuple[str, str]] | None = None,
    index_records: dict[str, list[dict]] | None = None,
) -> str:
    """MDT deltacommit `time`: requested -> inflight -> one new log file -> completed.

    The log file claims the next version of the current slice with
    create-if-absent; losing that race means another writer believes it holds
    the lock too, and this commit aborts. The inflight file carries the data
    instant's footprint (the file groups it touches), so a writer that claims
    a later version can see what this one is about to commit. The records of
    the index partitions are further blocks of the same log file, so one claim
    commits all partitions together.
    """
    if mdt.is_hudi_format():
        return ", ".join(hudi_deltacommit.apply(mdt, time, records, timeline, footprint, index_records))
    with METRICS.timed(SYNC):
        timeline = timeline or mdt.timeline()
        instant = steps.begin_deltacommit(timeline, time, footprint)
        base_instant = layout.writer_slice(timeline)
        current = mdt.slices().get(base_instant)
        version = current.max_version if current else 0
        if version and mdt.is_seal(base_instant, version):
            raise TandemError(
                f"metadata slice {base_instant} is sealed but its compaction is not planned; run `tandem recover`"
            )
        path = layout.log_path(base_instant, version + 1)
        blocks = [LogBlock(time, DATA, records)] + index_blocks(time, index_records)
        sizes: list[int] = []
        encoded = (_sized(encode_block(_loaded(block)), sizes) for block in blocks)  # one block at a time
        if not mdt.storage.create_if_absent(path, encoded):
            raise ConflictError(f"metadata log {path} was claimed by another writer; aborting {time}")
        crash_point(steps.DELTA_LOG)
        mdt.storage.sync_dirs([layout.FILES_PARTITION])  # the log's entry, before the completion names it
        meta = CommitMetadata(operation_type="UPSERT_PREPPED")
        size = sum(sizes)
        meta.add(
            WriteStat(
                layout.FILE_ID,
                path,
                layout.FILES_PARTITION,
                num_writes=len(records),
                total_write_bytes=size,
                file_size_in_bytes=size,
            )
        )
        timeline.complete(instant, meta.to_json_bytes())
        crash_point(steps.DELTA_COMPLETE)
        return path


def append_block(mdt: MetadataTable, block: LogBlock, base_instant: str | None = None) -> int:
    """Append `block` as the next free log version of a slice (the writer slice by default); its version."""
    base_instant = base_instant or layout.writer_slice(mdt.timeline())
    current = mdt.slices().get(base_instant)
    version = (current.max_version if current else 0) + 1
    data = encode_log([block])
    while not mdt.storage.create_if_absent(layout.log_path(base_instant, version), data):
        version += 1
    return version


def rollback(mdt: MetadataTable, time: str, data_timeline: ActiveTimeline) -> bool:
    """Undo MDT deltacommit (or index build) `time` without touching the log chain.

    First the decision on data instant `time` is claimed as a rollback: if a
    commit decision stands instead, nothing is undone (a stale caller's view
    must never cost a committed instant). Claimed log versions are never
    deleted (a hole would let a writer with a stale view claim that version
    again); a rollback-command block naming `time` makes readers and
    compaction ignore its blocks. Then `time`'s MDT instant files go and an
    MDT rollback instant records it. Idempotent. Returns False when nothing
    was rolled back.
    """
    timeline = mdt.timeline()
    target = timeline.find(time)
    if target is None or not steps.undoable(data_timeline, time):
        return False
    if not outcome.claim(mdt.data_storage, time, outcome.ROLLBACK).is_rollback:
        return False
    plan = action_metadata.rollback_plan(time, target.action, {})
    record = Instant(mdt.next_instant(data_timeline), ROLLBACK, State.REQUESTED)
    timeline.create_requested(record, avro_metadata.encode("HoodieRollbackPlan", plan))
    _undo(mdt, timeline, record.time, time, target.action)
    _complete_rollback(timeline, record, time, target.action)
    return True


def retract(mdt: MetadataTable, time: str, data_timeline: ActiveTimeline) -> None:
    """Undo the unfinished MDT deltacommit `time` of a data instant that is retried under the same time (a
    compaction's completion): `rollback`'s blocks, instant files and record, without claiming the data
    instant's rollback decision, since that instant still completes. Re-applying `time` afterwards writes its
    blocks after the rollback blocks, which drop only the earlier ones (a deltacommit applied twice would
    count its column statistics twice)."""
    timeline = mdt.timeline()
    target = timeline.find(time)
    if target is None or target.is_completed:
        return
    plan = action_metadata.rollback_plan(time, target.action, {})
    record = Instant(mdt.next_instant(data_timeline), ROLLBACK, State.REQUESTED)
    timeline.create_requested(record, avro_metadata.encode("HoodieRollbackPlan", plan))
    _undo(mdt, timeline, record.time, time, target.action)
    _complete_rollback(timeline, record, time, target.action)


def finish_rollbacks(mdt: MetadataTable, timeline: ActiveTimeline, data_timeline: ActiveTimeline) -> list[str]:
    """Complete the rollback records a crash left requested, repeating their (idempotent) undo.

    A record whose target is completed on the data timeline was never written by a
    rollback here (`rollback` refuses those): it is reported and left.
    """
    finished = []
    for record in timeline.pending():
        if record.action == ROLLBACK:
            target = timeline.rollback_target(record)
            if not steps.undoable(data_timeline, target["commitTime"]):
                message = f"metadata rollback {record.time} targets completed {target['commitTime']}; left pending"
                warnings.warn(message, RefusedDeleteWarning, stacklevel=2)
                continue
            _undo(mdt, timeline, record.time, target["commitTime"], target["action"])
            _complete_rollback(timeline, record, target["commitTime"], target["action"])
            finished.append(record.time)
    return finished


def _undo(mdt: MetadataTable, timeline: ActiveTimeline, record_time: str, time: str, action: str) -> None:
    if mdt.is_hudi_format():
        hudi_deltacommit.undo(mdt, timeline, record_time, time, action)
        return
    append_block(mdt, LogBlock(record_time, ROLLBACK_COMMAND, [], {"target": time}))
    crash_point(steps.ROLLBACK_LOGS)
    timeline.delete_instant_files(time, action)
    crash_point(steps.ROLLBACK_INSTANT)


def _complete_rollback(timeline: ActiveTimeline, record: Instant, time: str, action: str) -> None:
    done = action_metadata.rollback_metadata(record.time, 0, {"commitTime": time, "action": action}, {})
    timeline.complete(record, avro_metadata.encode("HoodieRollbackMetadata", done))


def index_blocks(time: str, index_records: dict[str, list[dict]] | None) -> list[LogBlock]:
    """Data blocks of each index partition with records, tagged with its partition; a partition's records
    are cut into blocks of about INDEX_BLOCK_BYTES (bloom filters are sized by their files' keys), so a
    commit encodes one block of them at a time."""
    blocks = []
    for partition, records in sorted((index_records or {}).items()):
        part: list[dict] = []
        size = 0
        for record in records:
            part.append(record)
            size += len(record.get("bloomFilter") or b"") + RECORD_OVERHEAD
            if size >= INDEX_BLOCK_BYTES:
                blocks.append(LogBlock(time, DATA, part, {PARTITION_ATTRIBUTE: partition}))
                part, size = [], 0
        if part:
            blocks.append(LogBlock(time, DATA, part, {PARTITION_ATTRIBUTE: partition}))
    return blocks


def _loaded(block: LogBlock) -> LogBlock:
    """The block with its records' spilled bytes read back (a large insert's bloom filters wait on disk)."""
    return LogBlock(block.instant, block.block_type, [loaded(r) for r in block.records], block.attributes)


def _sized(chunk: bytes, sizes: list[int]) -> bytes:
    sizes.append(len(chunk))
    return chunk
