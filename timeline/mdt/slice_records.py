"""The merged records of one metadata-table file group: its base file's cells, then the valid blocks of its
logs, read as Hudi 0.15's log scanner reads them (AbstractHoodieLogRecordReader.scanInternalV1) so that
Tandem and Java answer alike from the same files:

- logs in Hudi's order (base instant, version, write token); torn or corrupt blocks are reported, never read;
- a block whose instant is after the last completed MDT instant ends the scan of the group (Java breaks there);
- data and delete blocks count only for a valid instant (`valid_instants`);
- a rollback command block drops the blocks queued so far whose instant is its target;
- a key's records fold oldest to newest (HoodieMetadataPayload.preCombine), a delete wipes what came before
  it, and the result is laid over the base record (a delete removes the base record too).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from timeline.errors import CorruptInstantError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import DELTA_COMMIT, RESTORE, ROLLBACK, State
from timeline.hfile import HFileError, HFileReader
from timeline.hudi_log import BlockType, HudiLogError, LogBlock, deleted_records, hfile_records, read_blocks
from timeline.hudi_log import rollback_target as command_target
from timeline.io.lru import LruCache
from timeline.io.storage import Storage
from timeline.mdt import hudi_merge, hudi_records
from timeline.mdt.file_slices import FileSlice, TimelineFacts

_DELETED = object()  # a key a delete block removed (with whatever the base file holds for it)
_ABSENT: dict[str, Any] = {}  # a key the base file does not hold (kept, so a miss is not looked up again)
_DATA_BLOCKS = {BlockType.HFILE_DATA_BLOCK, BlockType.DELETE_BLOCK}
_BASES: LruCache[tuple[str, str, int], HFileReader] = LruCache(16)
_LOGS: LruCache[tuple[str, str, int], list[LogBlock]] = LruCache(256)
# decoded base records, by file and key, and whole base files: a lookup that the logs leave alone then decodes
# nothing (records are shared: callers never change them)
_RECORDS: LruCache[tuple[str, str, int, str], dict[str, Any]] = LruCache(4096)
_WHOLE: LruCache[tuple[str, str, int], dict[str, dict[str, Any]]] = LruCache(4)
_BLOCK_RECORDS: LruCache[tuple[str, str, int, int], list[tuple[str, dict[str, Any]]]] = LruCache(256)
SOLO_PREFIX = "00000000000000"  # instants of partitions initialized on a table with no completed commit


def is_mdt_only_instant(time: str) -> bool:
    """An MDT-only delta commit Hudi 0.15 counts (HoodieTableMetadataUtil.isValidInstant): a partition's
    initialization (`<T>010` and up, or any `00000000000000…`), or a suffix `001`..`006` (restore sync, indexer)."""
    if time.startswith(SOLO_PREFIX):
        return True
    return len(time) == 20 and time[17:].isdigit() and ("001" <= time[17:] <= "006" or time[17:] >= "010")


def valid_instants(data_timeline: ActiveTimeline, mdt_timeline: ActiveTimeline) -> Callable[[str], bool]:
    """Whether a block's instant counts: completed on the data timeline (or archived from it), an MDT-only
    delta commit Hudi counts, or a completed MDT rollback or restore. Java 0.15 also counts instants that
    completed data rollbacks undid; Tandem does not (their blocks are rolled back in the MDT as well)."""
    mdt_valid = frozenset(
        i.time
        for i in mdt_timeline.instants
        if i.state == State.COMPLETED
        and ((i.action == DELTA_COMMIT and is_mdt_only_instant(i.time)) or i.action in (ROLLBACK, RESTORE))
    )
    completed = data_timeline.completed_times()
    return lambda time: time in completed or time in mdt_valid or data_timeline.is_completed_or_archived(time)


def forget_files() -> None:
    """Drop the readers and blocks kept per process: for a process that has itself rewritten an MDT file under
    the same name and size (damage tests)."""
    for cache in (_BASES, _LOGS, _RECORDS, _WHOLE, _BLOCK_RECORDS):
        cache.clear()


@dataclass
class GroupRecords:
    """A file group's merged records by key; `corrupt` describes every block or file that could not be read."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    corrupt: list[str] = field(default_factory=list)


def base_reader(mdt: Storage, path: str, size: int) -> HFileReader:
    """A base file's reader, kept per process: base files are immutable, so (path, size) names the bytes."""
    key = (mdt.base_uri, path, size)
    found = _BASES.get(key)
    if found is None:
        found = HFileReader(mdt.read_bytes(path))
        _BASES.put(key, found)
    return found


def log_blocks(mdt: Storage, path: str, size: int) -> list[LogBlock]:
    key = (mdt.base_uri, path, size)
    found = _LOGS.get(key)
    if found is None:
        found = read_blocks(mdt.read_bytes(path))
        _LOGS.put(key, found)
    return found


@dataclass
class _Queued:
    instant: str
    block: LogBlock
    where: str
    cached_as: tuple[str, str, int, int]  # (MDT uri, log path, log size, block offset): names the block's bytes


def _scan(
    mdt: Storage, slices: Sequence[FileSlice], facts: TimelineFacts, is_valid: Callable[[str], bool], out: GroupRecords
) -> list[_Queued]:
    queue: list[_Queued] = []
    completed_commits = facts.completed
    for found in slices:
        for log in found.logs:
            for block in log_blocks(mdt, log.path, log.size):
                where = f"{log.path} at byte {block.offset}"
                if block.corrupt:
                    out.corrupt.append(f"{where}: {block.reason or 'corrupt block'}")
                    continue
                instant = block.header.get("INSTANT_TIME", "")
                if instant > facts.last_completed:
                    return queue
                if block.kind in _DATA_BLOCKS:
                    counted = instant in completed_commits or (
                        facts.first_time is not None and instant < facts.first_time
                    )
                    if counted and is_valid(instant):
                        queue.append(_Queued(instant, block, where, (mdt.base_uri, log.path, log.size, block.offset)))
                elif block.kind == BlockType.COMMAND_BLOCK:
                    try:
                        target = command_target(block)
                    except HudiLogError as err:
                        out.corrupt.append(f"{where}: {err}")
                        continue
                    queue = [q for q in queue if q.instant != target]
                else:
                    out.corrupt.append(f"{where}: a {block.kind.name} has no place in the metadata table")
    return queue


def _block_records(queued: _Queued) -> list[tuple[str, dict[str, Any]]]:
    """The decoded records of an HFile data block, kept per process: a log never changes, so (path, size,
    offset) names the block (records are shared: callers never change them)."""
    found = _BLOCK_RECORDS.get(queued.cached_as)
    if found is None:
        found = [(key, hudi_records.decode_cell(key, value)) for key, value in hfile_records(queued.block)]
        _BLOCK_RECORDS.put(queued.cached_as, found)
    return found


def _wanted(key: str, keys: Collection[str] | None, prefixes: Sequence[str] | None) -> bool:
    if keys is not None and key not in keys:
        return False
    return prefixes is None or key.startswith(tuple(prefixes))


def _base_records(
    mdt: Storage, path: str, size: int, keys: Collection[str] | None, prefixes: Sequence[str] | None
) -> dict[str, dict[str, Any]]:
    """The decoded records of a base file: of `keys`, of `prefixes`, or all (kept per process)."""
    whole = _WHOLE.get((mdt.base_uri, path, size))
    if keys is not None:
        found = {}
        for key in keys:
            if whole is not None:
                record = whole.get(key)
            else:
                cached = (mdt.base_uri, path, size, key)
                record = _RECORDS.get(cached)
                if record is None:
                    value = base_reader(mdt, path, size).get(key.encode())
                    record = _ABSENT if value is None else hudi_records.decode_cell(key, value)
                    _RECORDS.put(cached, record)
            if record is not None and record is not _ABSENT:
                found[key] = record
        return found
    if whole is None and prefixes is not None:  # a prefix scan decodes only what it reads
        found = {}
        for prefix in sorted(set(prefixes)):
            for raw_key, value in base_reader(mdt, path, size).scan_prefix(prefix.encode()):
                key = raw_key.decode()
                found[key] = hudi_records.decode_cell(key, value)
        return found
    if whole is None:
        whole = {}
        for raw_key, value in base_reader(mdt, path, size).items():
            key = raw_key.decode()
            whole[key] = hudi_records.decode_cell(key, value)
        _WHOLE.put((mdt.base_uri, path, size), whole)
    if prefixes is None:
        return whole
    starts = tuple(prefixes)
    return {key: record for key, record in whole.items() if key.startswith(starts)}


def read_group(
    mdt: Storage,
    slices: Sequence[FileSlice],
    facts: TimelineFacts,
    is_valid: Callable[[str], bool],
    keys: Collection[str] | None = None,
    prefixes: Sequence[str] | None = None,
) -> GroupRecords:
    """The merged records of one file group's `slices` (oldest first, as `slices_to_read` gives them), all of
    them or only those of `keys` / starting with one of `prefixes`. Raises CorruptInstantError when the base
    file is damaged: nothing can be answered without it."""
    out = GroupRecords()
    keys = None if keys is None else frozenset(keys)
    folded = _fold_logs(mdt, slices, facts, is_valid, keys, prefixes, out)
    base = next((s for s in slices if s.base_file is not None), None)
    if base is not None:
        try:
            for key, record in _base_records(mdt, base.base_file, base.base_size, keys, prefixes).items():
                update = folded.get(key)
                if update is None:
                    out.records[key] = record
                elif update is not _DELETED:
                    out.records[key] = hudi_merge.combine(record, update)
        except (HFileError, UnicodeDecodeError) as err:
            raise CorruptInstantError(f"metadata table base file {base.base_file}: {err}") from err
    for key, update in folded.items():
        if update is not _DELETED and key not in out.records:
            out.records[key] = update
    return out


def compacted_cells(
    mdt: Storage, slices: Sequence[FileSlice], facts: TimelineFacts, is_valid: Callable[[str], bool], file_name: str
) -> tuple[list[tuple[bytes, bytes]], list[str]]:
    """The cells, in key order, of a new base file `file_name` holding `read_group`'s records of `slices`, as
    `encode_cell` encodes them; and the blocks that could not be read (then no cells). A base cell no log
    touches is not decoded: its bytes passed their checksums, and only its `_hoodie_file_name` changes."""
    out = GroupRecords()
    folded = _fold_logs(mdt, slices, facts, is_valid, None, None, out)
    if out.corrupt:
        return [], out.corrupt
    cells: dict[bytes, bytes] = {}
    base = next((s for s in slices if s.base_file is not None), None)
    if base is not None:
        old_prefix = hudi_records.cell_prefix(base.base_file.rsplit("/", 1)[-1])
        new_prefix = hudi_records.cell_prefix(file_name)
        try:
            for raw_key, value in base_reader(mdt, base.base_file, base.base_size).items():
                key = raw_key.decode()
                update = folded.get(key)
                if update is _DELETED:
                    continue
                copied = hudi_records.renamed_cell(value, old_prefix, new_prefix) if update is None else None
                if copied is None:
                    record = hudi_records.decode_cell(key, value)
                    record = record if update is None else hudi_merge.combine(record, update)
                    copied = hudi_records.encode_cell(record, file_name)
                cells[raw_key] = copied
        except (HFileError, UnicodeDecodeError) as err:
            raise CorruptInstantError(f"metadata table base file {base.base_file}: {err}") from err
    for key, update in folded.items():
        if update is not _DELETED and key.encode() not in cells:
            cells[key.encode()] = hudi_records.encode_cell(update, file_name)
    return sorted(cells.items()), []


def _fold_logs(
    mdt: Storage,
    slices: Sequence[FileSlice],
    facts: TimelineFacts,
    is_valid: Callable[[str], bool],
    keys: frozenset[str] | None,
    prefixes: Sequence[str] | None,
    out: GroupRecords,
) -> dict[str, Any]:
    """Each wanted key's records in the valid blocks of the slices' logs, folded oldest to newest (`_DELETED`
    where a delete came last); what cannot be read goes to `out.corrupt`."""
    folded: dict[str, Any] = {}
    for queued in _scan(mdt, slices, facts, is_valid, out):
        try:
            if queued.block.kind == BlockType.DELETE_BLOCK:
                for deleted in deleted_records(queued.block):
                    if deleted.record_key is not None and _wanted(deleted.record_key, keys, prefixes):
                        folded[deleted.record_key] = _DELETED
                continue
            for key, record in _block_records(queued):
                if not _wanted(key, keys, prefixes):
                    continue
                before = folded.get(key)
                folded[key] = (
                    hudi_merge.as_read(record)
                    if before is None or before is _DELETED
                    else hudi_merge.combine(before, record)
                )
        except (HudiLogError, CorruptInstantError, ValueError) as err:
            out.corrupt.append(f"{queued.where}: {err}")
    return folded
