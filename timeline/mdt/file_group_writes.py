"""Writing the metadata table's files in Hudi's format (Hudi 0.15, table version 6), so that Java Hudi lists
from them and continues them: a partition's initialization, and one delta commit's log file per file group.

- A partition folder gets `.hoodie_partition_metadata` (Java neither compacts, cleans nor rolls back a
  partition without one), and each of its file groups a first log, version 1 over the initial instant I,
  holding one empty delete block (as Java's `initializeFileGroups`), then a base file
  `{fileId}_0-0-0_{I}.hfile` when the initialization has records for it.
- A delta commit T writes, for each file group its records map to (Java's `mapRecordKeyToFileGroupIndex`
  over the groups sorted by file id), one new log `.{fileId}_{slice}.log.{top + 1}_0-0-0` holding one HFile
  data block (INSTANT_TIME T, SCHEMA the stored record schema). The write token is fixed, so a version has
  one name and claiming it with create-if-absent is the storage fence between writers.
- Base files carry the schema and the first and last record key in their file info, as Java's do. Java also
  stores a bloom filter of the record keys (a `bloomFilter` meta block, about 430 KB at Hudi's defaults);
  no reader of the metadata table asks for it, and Tandem writes none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from timeline.crash_points import crash_point, register
from timeline.errors import ConflictError, CorruptInstantError
from timeline.format import properties
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_metadata import CompactionOperation, slice_metrics
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.file_names import PARTITION_METADATA, partition_metadata
from timeline.format.instant import COMPACTION, DELTA_COMMIT, Instant, State
from timeline.hfile import write_hfile
from timeline.hudi_log import (
    BlockType,
    LogBlock,
    delete_block,
    deleted_records,
    hfile_block,
    log_file_name,
    rollback_block,
)
from timeline.io.storage import Storage
from timeline.mdt import hudi_keys, hudi_layout, hudi_records
from timeline.mdt.file_slices import FileGroup, FileSlice, LogFile, TimelineFacts
from timeline.mdt.hudi_schema import stored_schema_json
from timeline.mdt.slice_records import compacted_cells

TOKEN = "0-0-0"
PARTITION_BUILT = register("mdt.initialize.partition", "one MDT partition's initial delta commit completed")
# HFile blocks of metadata-table base files: HBase's default, not Hudi's 1 MB (hoodie.hfile.block.size), as a
# point lookup inflates and parses one whole block; every HFile reader takes any block size
BASE_BLOCK_SIZE = 64 * 1024


@dataclass(frozen=True)
class WrittenFile:
    """One file a metadata-table write created; `path` is relative to the MDT base."""

    partition: str
    file_id: str
    path: str
    size: int
    base_instant: str
    records: int

    def write_stat(self) -> WriteStat:
        return WriteStat(
            self.file_id,
            self.path,
            self.partition,
            prev_commit=self.base_instant,
            num_writes=self.records,
            num_inserts=self.records,
            total_write_bytes=self.size,
            file_size_in_bytes=self.size,
        )


def create_table(mdt: Storage, data_table_name: str) -> None:
    """The MDT's own `hoodie.properties` (every key Hudi 0.15 writes) and its timeline folders."""
    mdt.makedirs(".hoodie/archived")
    props = properties.dumps(hudi_layout.metadata_table_properties(data_table_name)).encode()
    if not mdt.create_if_absent(".hoodie/hoodie.properties", props):
        raise ConflictError(f"{mdt.uri('')} already exists")


def base_file_name(file_id: str, instant: str) -> str:
    return f"{file_id}_{TOKEN}_{instant}.hfile"


def encode_base_file(records: Iterable[Mapping], file_name: str) -> bytes:
    """A base file of `records` (distinct keys), as Java's HoodieAvroHFileWriter lays one out."""
    return base_file_of_cells(sorted((r["key"].encode(), hudi_records.encode_cell(r, file_name)) for r in records))


def base_file_of_cells(cells: Sequence[tuple[bytes, bytes]]) -> bytes:
    """A base file of encoded cells in key order (`encode_cell` with the file's own name)."""
    info = {b"schema": stored_schema_json().encode()}
    if cells:
        info[b"minRecordKey"], info[b"maxRecordKey"] = cells[0][0], cells[-1][0]
    return write_hfile(cells, info, block_size=BASE_BLOCK_SIZE, compression="gz")


def by_file_group(records: Iterable[Mapping], file_ids: Sequence[str]) -> dict[str, list[Mapping]]:
    """Records by the file group their key maps to, among `file_ids` sorted (Java maps keys to positions)."""
    ordered = sorted(file_ids)
    out: dict[str, list[Mapping]] = {}
    for record in records:
        out.setdefault(ordered[hudi_keys.file_group_index(record["key"], len(ordered))], []).append(record)
    return out


def initialize_partition(
    mdt: Storage, partition: str, instant: str, records: Sequence[Mapping], group_count: int = 1
) -> list[WrittenFile]:
    """The files of MDT partition `partition` initialized at `instant` (its delta commit is the caller's)."""
    mdt.makedirs(partition)
    mdt.create_if_absent(f"{partition}/{PARTITION_METADATA}", partition_metadata(instant, 1))
    file_ids = [hudi_layout.file_group_id(partition, i) for i in range(group_count)]
    written = []
    for file_id in file_ids:
        path = f"{partition}/{log_file_name(file_id, instant, 1, TOKEN)}"
        first = delete_block(instant, [])
        if not mdt.create_if_absent(path, first):
            raise ConflictError(f"metadata log {path} exists: partition {partition} is being initialized elsewhere")
        written.append(WrittenFile(partition, file_id, path, len(first), instant, 0))
    for file_id, group_records in by_file_group(records, file_ids).items():
        name = base_file_name(file_id, instant)
        data = encode_base_file(group_records, name)
        path = f"{partition}/{name}"
        if not mdt.create_if_absent(path, data):
            raise ConflictError(
                f"metadata base file {path} exists: partition {partition} is being initialized elsewhere"
            )
        written.append(WrittenFile(partition, file_id, path, len(data), instant, len(group_records)))
    mdt.sync_dirs([partition])
    return written


def initialize(
    mdt: Storage,
    data_table_name: str,
    partitions: Sequence[str],
    start: str,
    records_of: Callable[[str, str], Sequence[Mapping]],
) -> list[str]:
    """A new MDT under `mdt`: its `hoodie.properties`, then each of `partitions` (in Hudi's order) as a bulk
    insert delta commit at `<start><010 + n>` of `records_of(partition, instant)`; the instants, in order.
    `start` is the data table's last completed instant (`SOLO_COMMIT_TIMESTAMP` when it has none)."""
    create_table(mdt, data_table_name)
    timeline = ActiveTimeline.load(mdt, ".hoodie")
    times = []
    for offset, partition in enumerate(partitions):
        time = hudi_layout.partition_init_instant(start, offset)
        count = hudi_layout.DEFAULT_FILE_GROUP_COUNT[partition]
        written = initialize_partition(mdt, partition, time, records_of(partition, time), count)
        complete_delta_commit(timeline, time, written, "BULK_INSERT")
        crash_point(PARTITION_BUILT)
        times.append(time)
    return times


MAX_CLAIMS = 64  # versions a rollback command block tries above the listed top before it gives up


def _claim_next_log(
    mdt: Storage,
    group: FileGroup,
    base_instant: str,
    block: bytes,
    records: int,
    refused: str,
    anywhere_above: bool = False,
) -> WrittenFile:
    """`block` as the next log version of `group`'s slice `base_instant`, claimed with create-if-absent; a
    version already taken means another writer holds it: ConflictError naming what is `refused`. With
    `anywhere_above` (a rollback command block, which drops the blocks of its target wherever they sit
    below it) the next free version is taken instead."""
    current = group.slices.get(base_instant)
    version = (current.max_version if current is not None else 0) + 1
    for attempt in range(MAX_CLAIMS if anywhere_above else 1):
        path = f"{group.partition}/{log_file_name(group.file_id, base_instant, version + attempt, TOKEN)}"
        if mdt.create_if_absent(path, block):
            return WrittenFile(group.partition, group.file_id, path, len(block), base_instant, records)
    raise ConflictError(f"metadata log {path} was claimed by another writer; {refused}")


def write_logs(
    mdt: Storage,
    partition: str,
    instant: str,
    records: Sequence[Mapping],
    groups: Sequence[FileGroup],
    slices: Mapping[str, str],
) -> list[WrittenFile]:
    """One log per file group `records` map to, claimed at the next version of the group's writer slice
    (`slices`: file id -> base instant). A version already taken means another writer is committing: the
    claim is refused with ConflictError and nothing of this instant counts until it completes."""
    by_id = {g.file_id: g for g in groups}
    written = []
    for file_id, group_records in sorted(by_file_group(records, list(by_id)).items()):
        cells = [(r["key"], hudi_records.encode_cell(r)) for r in group_records]
        block = hfile_block(instant, stored_schema_json(), cells)
        claimed = _claim_next_log(
            mdt, by_id[file_id], slices[file_id], block, len(group_records), f"aborting {instant}"
        )
        written.append(claimed)
    mdt.sync_dirs({w.partition for w in written})
    return written


def write_rollback_logs(
    mdt: Storage,
    rollback_instant: str,
    target: str,
    groups: Sequence[FileGroup],
    slices: Mapping[str, str],
) -> list[WrittenFile]:
    """A rollback command block (INSTANT_TIME the MDT rollback instant, TARGET_INSTANT_TIME `target`) in a new
    log of each of `groups`, claimed like a delta commit's: readers then drop every earlier block of `target`.
    Claimed versions are never deleted, so a writer with a stale view cannot claim one again."""
    block = rollback_block(rollback_instant, target)
    return _claim_in_each(mdt, groups, slices, block, f"aborting the rollback of {target}", anywhere_above=True)


def _claim_in_each(
    mdt: Storage,
    groups: Sequence[FileGroup],
    slices: Mapping[str, str],
    block: bytes,
    refused: str,
    anywhere_above: bool = False,
) -> list[WrittenFile]:
    """`block` as a new log of each of `groups` (in file-id order), their folders' entries made durable."""
    written = [
        _claim_next_log(mdt, group, slices[group.file_id], block, 0, refused, anywhere_above)
        for group in sorted(groups, key=lambda g: g.file_id)
    ]
    mdt.sync_dirs({w.partition for w in written})
    return written


def write_seals(
    mdt: Storage,
    compaction: str,
    latest_delta_commit: str,
    groups: Sequence[FileGroup],
    slices: Mapping[str, str],
) -> list[WrittenFile]:
    """Seal each group's writer slice for `compaction`: a new log holding one empty delete block whose
    TARGET_INSTANT_TIME names the compaction. A Tandem writer refuses to log above a seal whose compaction is
    not planned yet, and one with a stale view collides with its version, so no delta commit's log lands in a
    slice after its plan (a rollback command block may: it only drops blocks). Its INSTANT_TIME is
    the latest completed delta commit: a later one would end Java's scan of the slice there (hiding the
    planned slice's new logs); an empty delete block is nothing to Java's readers and compactor."""
    block = delete_block(latest_delta_commit, [], {"TARGET_INSTANT_TIME": compaction})
    return _claim_in_each(mdt, groups, slices, block, f"compaction {compaction} not sealed")


def seal_target(block: LogBlock) -> str | None:
    """The compaction a seal block names, or None for any other block."""
    if block.kind != BlockType.DELETE_BLOCK or "TARGET_INSTANT_TIME" not in block.header:
        return None
    return block.header["TARGET_INSTANT_TIME"] if not deleted_records(block) else None


def complete_delta_commit(
    timeline: ActiveTimeline, instant: str, written: Sequence[WrittenFile], operation: str
) -> None:
    """`instant.deltacommit` (requested, inflight, completed) naming every file it wrote, by MDT partition."""
    found = timeline.find(instant)
    pending = Instant(instant, DELTA_COMMIT, State.REQUESTED)
    if found is None:
        timeline.create_requested(pending)
    if found is None or found.state == State.REQUESTED:
        timeline.transition_to_inflight(pending)
    timeline.complete(pending, delta_commit_metadata(written, operation))


def delta_commit_metadata(written: Sequence[WrittenFile], operation: str) -> bytes:
    """A delta commit's completed content: the files it wrote, by MDT partition, and the record schema."""
    meta = CommitMetadata(operation_type=operation, schema=stored_schema_json())
    for file in written:
        meta.add(file.write_stat())
    return meta.to_json_bytes()


def compaction_operation(found: FileSlice, logs: Sequence[LogFile]) -> CompactionOperation:
    """The plan's operation for one file group: its slice's base instant and base file, and the logs to
    merge into the new base, by name in Hudi's log order."""
    return CompactionOperation(
        found.partition,
        found.file_id,
        found.base_instant,
        found.base_file.rsplit("/", 1)[1] if found.base_file else None,
        tuple(log.path.rsplit("/", 1)[1] for log in logs),
        slice_metrics(found.base_size if found.base_file else None, [log.size for log in logs]),
    )


def compact_group(
    mdt: Storage,
    found: FileSlice,
    logs: Sequence[LogFile],
    facts: TimelineFacts,
    is_valid: Callable[[str], bool],
    instant: str,
) -> WrittenFile | None:
    """The new base file of one file group at compaction `instant`: its slice's base merged with the valid
    blocks of the planned `logs` (HoodieMetadataPayload's merge, as Java's compactor applies it), published
    with create-if-absent; None when the group holds no record at all."""
    planned = FileSlice(
        found.partition, found.file_id, found.base_instant, found.base_file, found.base_size, list(logs)
    )
    name = base_file_name(found.file_id, instant)
    cells, corrupt = compacted_cells(mdt, [planned], facts, is_valid, name)
    if corrupt:
        raise CorruptInstantError(f"compaction {instant} of {found.file_id}: {'; '.join(corrupt)}")
    if not cells and found.base_file is None:
        return None
    data = base_file_of_cells(cells)
    path = f"{found.partition}/{name}"
    if not mdt.create_if_absent(path, data) and mdt.read_bytes(path) != data:
        raise ConflictError(f"metadata base file {path} exists with other content; compaction {instant} refused")
    return WrittenFile(found.partition, found.file_id, path, len(data), found.base_instant, len(cells))


def complete_compaction(timeline: ActiveTimeline, instant: str, written: Sequence[WrittenFile]) -> None:
    """`instant.commit` of a compaction, naming each new base file with the slice it replaced."""
    meta = CommitMetadata(operation_type="COMPACT", schema=stored_schema_json(), compacted=True)
    for file in written:
        meta.add(file.write_stat())
    timeline.complete(Instant(instant, COMPACTION, State.INFLIGHT), meta.to_json_bytes())
