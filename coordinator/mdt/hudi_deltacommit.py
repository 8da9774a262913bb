"""Delta commits, and their rollback, on a metadata table in Hudi's format (`file_group_writes` lays the files
down): the same protocol as the previous format, in Hudi's files.

- A delta commit writes, in each MDT partition the data table records as built, one log per file group its
  records map to, `files` first. `files` always gets one (every commit names its partitions in
  `__all_partitions__`), so its create-if-absent claim is every commit's fence, as the one log was before.
- Each group's writer slice is the one Hudi's writer picks: the slice of a pending compaction that plans the
  group, else its latest slice on the timeline. A slice whose last log is a seal with no plan yet is refused
  (housekeeping plans it first).
- `column_stats` records come from the Parquet footers of the base files the commit added, as Java builds
  them, and from the records of the log files it added (`hudi_log_stats`, read back and verified);
  `bloom_filters` records from the filters Tandem's writers built of each new file's keys (else a footer's, else
  the file's keys read back); a deleted file gets a tombstone for each column of the table's schema and its
  filter.
- A rollback (`deltacommit.rollback` claims the decision first) appends a rollback command block to every group
  of every kept partition: blocks are never deleted, so a writer with a stale view cannot reuse a version.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.mdt import steps
from timeline.crash_points import crash_point
from timeline.errors import ConflictError, CorruptInstantError, TandemError, UnreadableDataFileError
from timeline.format import avro_metadata
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_schema import avro_to_arrow
from timeline.format.data_logs import parse_data_log
from timeline.format.instant import COMPACTION, Instant, State
from timeline.format.keys import record_keys
from timeline.format.meta_fields import META_COLUMNS, RECORD_KEY
from timeline.format.partition_path import file_path
from timeline.format.table_config import TableConfig, read_config
from timeline.hudi_log import HudiLogError, read_intact
from timeline.index.hudi_bloom import DYNAMIC_V0, SIMPLE, create_bloom_filter, from_footer
from timeline.io.spill import loaded
from timeline.io.storage import Storage
from timeline.mdt import file_group_writes as writes
from timeline.mdt import hudi_commit_records, hudi_records
from timeline.mdt import records as rec
from timeline.mdt.file_slices import FileGroup, TimelineFacts, list_file_groups
from timeline.mdt.hudi_layout import BLOOM_FILTERS, COLUMN_STATS, FILES, KEPT_BY_TANDEM
from timeline.mdt.hudi_log_stats import log_column_stats
from timeline.mdt.slice_records import log_blocks
from timeline.mdt.table import MetadataTable
from timeline.metrics import METRICS, SYNC

SEAL_MAX_BYTES = 1024  # a seal (an empty delete block) is smaller; a data block carries a schema of several KB
FOOTER_THREADS = 16


def kept_partitions(mdt: MetadataTable) -> list[str]:
    """The built partitions a Tandem writer keeps in sync, `files` first."""
    built = mdt.hudi_partitions()
    return [p for p in KEPT_BY_TANDEM if p in built]


def planned_groups(timeline: ActiveTimeline) -> dict[str, str]:
    """file id -> the pending compaction that plans it (the latest, if several)."""
    planned: dict[str, str] = {}
    for instant in sorted(timeline.instants, key=lambda i: i.time):
        if instant.action == COMPACTION and instant.state != State.COMPLETED:
            plan = timeline.avro(Instant(instant.time, COMPACTION, State.REQUESTED))
            planned.update({op.file_id: instant.time for op in avro_metadata.compaction_operations(plan)})
    return planned


def writer_slices(mdt: Storage, timeline: ActiveTimeline, groups: Sequence[FileGroup]) -> dict[str, str]:
    """file id -> the base instant of the slice a new log of each group goes to; TandemError when a group's
    slice is sealed for a compaction that was never planned, or a group has no slice on the timeline."""
    facts = TimelineFacts.of(timeline)
    planned = planned_groups(timeline)
    out = {}
    for group in groups:
        counted = [b for b in group.slices if facts.counts(b)]
        if group.file_id in planned:
            counted.append(planned[group.file_id])
        if not counted:
            raise TandemError(f"metadata file group {group.file_id} has no slice on the metadata timeline")
        out[group.file_id] = max(counted)
        if out[group.file_id] not in facts.pending_compactions:
            _refuse_orphan_seal(mdt, group, out[group.file_id], facts)
    return out


def top_seal(mdt: Storage, group: FileGroup, base_instant: str) -> tuple[int, str] | None:
    """(version, compaction) when the last log of a group's slice is a seal; None otherwise."""
    found = group.slices.get(base_instant)
    if found is None or not found.logs:
        return None
    top = found.logs[-1]
    if top.size > SEAL_MAX_BYTES:
        return None
    try:
        blocks = log_blocks(mdt, top.path, top.size)
    except (HudiLogError, FileNotFoundError):
        return None
    target = next((t for t in map(writes.seal_target, blocks) if t is not None), None)
    return (top.name.version, target) if target is not None else None


def is_history(compaction: str, facts: TimelineFacts) -> bool:
    """Whether a seal's compaction is on the timeline, or older than its first instant (archived)."""
    return compaction in facts.write_times or (facts.first_time is not None and compaction < facts.first_time)


def _refuse_orphan_seal(mdt: Storage, group: FileGroup, base_instant: str, facts: TimelineFacts) -> None:
    """A seal is history once its compaction is on the timeline or archived (a group the compaction found
    empty keeps its slice, as in Java); one whose compaction is not there yet must be planned before anything
    lands above. A writer that meets one lost a race with a scheduler (or follows one that crashed)."""
    seal = top_seal(mdt, group, base_instant)
    if seal is not None and not is_history(seal[1], facts):
        raise ConflictError(
            f"metadata file group {group.file_id} is sealed for compaction {seal[1]}, which is not planned; "
            "run `tandem recover`"
        )


def files_records(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `files` records, in Hudi's payload, of the seed-format records a commit, clean or rollback produces
    (`timeline.mdt.records`): the same keys, additions and tombstones, `__all_partitions__` always among them."""
    out = []
    for record in records:
        entries = record.get("filesystemMetadata") or {}
        added = {name: info["size"] for name, info in entries.items() if not info["isDeleted"]}
        deleted = sorted(name for name, info in entries.items() if info["isDeleted"])
        if record["key"] == rec.ALL_PARTITIONS:
            out.append(
                hudi_records.partition_list_record(
                    [rec.data_partition(k) for k in added], deleted=[rec.data_partition(k) for k in deleted]
                )
            )
        else:
            out.append(hudi_records.file_list_record(rec.data_partition(record["key"]), added, deleted))
    if not any(r["key"] == rec.ALL_PARTITIONS for r in out):
        out.insert(0, hudi_records.partition_list_record([]))
    return out


@dataclass
class _ChangedFiles:
    """The data files a commit's seed-format `files` records add and delete, as (partition, name): base files,
    and the log files it added with their sizes (a deleted log keeps its statistics: Hudi's clean tombstones
    base files only)."""

    added: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    added_logs: list[tuple[str, str, int]] = field(default_factory=list)


def _changed_files(records: Sequence[Mapping[str, Any]]) -> _ChangedFiles:
    changed = _ChangedFiles()
    for record in records:
        if record["key"] == rec.ALL_PARTITIONS:
            continue
        partition = rec.data_partition(record["key"])
        for name, info in (record.get("filesystemMetadata") or {}).items():
            if name.startswith("."):
                if not info["isDeleted"] and parse_data_log(partition, name) is not None:
                    changed.added_logs.append((partition, name, info["size"]))
                continue
            (changed.deleted if info["isDeleted"] else changed.added).append((partition, name))
    return changed


def base_stats_records(data: Storage, file: tuple[str, str], footer: pq.FileMetaData) -> list[dict]:
    """The `column_stats` records of base file (partition, name): from its footer, and for the float columns
    its footer keeps no statistics of, from their values read back."""
    floats = hudi_commit_records.unrecorded_floats(footer)
    values = {}
    if floats:
        path = file_path(*file)
        with _reading(path), data.open_input(path) as handle:
            read = pq.ParquetFile(handle).read(columns=floats)
        values = {name: read.column(name) for name in floats}
    return hudi_commit_records.column_stats_records(file[0], file[1], footer, values)


def log_stats_records(data: Storage, logs: Sequence[tuple[str, str, int]], indexed: Sequence[str]) -> list[dict]:
    """The `column_stats` records of each (partition, name, size) log, read back whole and verified."""
    records = []
    for partition, name, size in logs:
        path = file_path(partition, name)
        with _reading(path):
            try:
                stats = log_column_stats(name, read_intact(data.read_bytes(path), size or None), indexed)
            except (HudiLogError, KeyError, TypeError) as err:
                raise UnreadableDataFileError(f"log file {path} could not be read ({err})") from err
        records += [hudi_records.column_stats_record(partition, s) for s in stats]
    return records


def footers(data: Storage, files: Sequence[tuple[str, str]]) -> list[pq.FileMetaData]:
    """The Parquet footer of each (partition, name) data file, read in parallel on S3; ConflictError when
    one is gone (for a commit: its files rolled back by another process while it was paused)."""

    def footer(file: tuple[str, str]) -> pq.FileMetaData:
        path = file_path(*file)
        with _reading(path), data.open_input(path) as handle:
            return pq.ParquetFile(handle).metadata

    if not data.is_s3 or len(files) < 2:
        return [footer(f) for f in files]
    with ThreadPoolExecutor(min(FOOTER_THREADS, len(files))) as pool:
        return list(pool.map(footer, files))


def _file_keys(data: Storage, config: TableConfig, file: tuple[str, str]) -> list[str]:
    """The record keys a data file holds: its `_hoodie_record_key` column, else built from the key fields."""
    path = file_path(*file)
    with _reading(path), data.open_input(path) as handle:
        parquet = pq.ParquetFile(handle)
        if config.populate_meta_fields and RECORD_KEY in parquet.schema_arrow.names:
            keys = parquet.read(columns=[RECORD_KEY]).column(RECORD_KEY)
        else:
            keys = record_keys(parquet.read(columns=config.record_key_fields), config.record_key_fields)
    return [k for k in keys.to_pylist() if k]


@contextmanager
def _reading(path: str) -> Iterator[None]:
    """Reading data file `path`: gone means a rollback or clean by another process took it (this commit has
    lost), any other failure that the file cannot be read."""
    try:
        yield
    except FileNotFoundError as err:
        raise ConflictError(f"data file {path} is gone: another process rolled back or cleaned it") from err
    except (OSError, pa.ArrowException, ValueError) as err:
        raise UnreadableDataFileError(f"data file {path} is unreadable ({str(err).strip()})") from err


def bloom_filter_records(
    data: Storage,
    time: str,
    files: Sequence[tuple[tuple[str, str], pq.FileMetaData]],
    built: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    config: TableConfig | None = None,
) -> list[dict[str, Any]]:
    """The `bloom_filters` record of each data file: the filter its writer built (`built`, by (partition,
    name): Tandem's writer makes a SIMPLE filter of a new file's keys while they are at hand), else the one
    its footer carries (Java's files), else a SIMPLE filter of its record keys read back, at Hudi's default
    false-positive rate, sized for exactly those keys (a base file never grows). Every file needs one, or
    Java's bloom index fails on it. `config`: the table's, if the caller has it (else read when needed)."""
    built = built or {}
    records = [
        hudi_records.bloom_filter_record(p, n, time, built[(p, n)]["bloomType"], built[(p, n)]["bloomFilter"])
        for (p, n), _ in files
        if (p, n) in built
    ]
    rest = [(file, footer) for file, footer in files if file not in built]
    with_footer = [(p, n, f) for (p, n), f in rest if from_footer(f.metadata) is not None]
    records += hudi_commit_records.bloom_filter_records(time, with_footer)
    if config is None and len(with_footer) < len(rest):
        config = read_config(data)
    for (partition, name), footer in rest:
        if from_footer(footer.metadata) is None:
            keys = _file_keys(data, config, (partition, name))
            bloom = create_bloom_filter(max(len(keys), 1), type_code=SIMPLE)
            bloom.add_many(keys)
            data_bytes = bloom.serialize_to_string().encode()
            records.append(hudi_records.bloom_filter_record(partition, name, time, bloom.type_code, data_bytes))
    return records


def indexed_columns(data: Storage) -> list[str]:
    """The columns a deleted file's statistics are tombstoned for: the meta columns and the table schema's
    top-level fields (the columns Hudi indexes)."""
    schema = ActiveTimeline.load(data, ".hoodie").latest_schema()
    names = avro_to_arrow(schema).names if schema else []
    return list(dict.fromkeys([*META_COLUMNS, *names]))


def index_records(
    mdt: MetadataTable,
    time: str,
    partitions: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    built: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The `column_stats` and `bloom_filters` records of the files `records` add and delete; `built`: the
    index records the commit's writers made, by partition (only filters in Hudi's form are taken)."""
    wanted = [p for p in partitions if p in (COLUMN_STATS, BLOOM_FILTERS)]
    if not wanted:
        return {}
    changed = _changed_files(records)
    added, deleted = changed.added, changed.deleted
    read = list(zip(added, footers(mdt.data_storage, added), strict=True))
    out: dict[str, list[dict[str, Any]]] = {}
    if COLUMN_STATS in wanted:
        stats = [r for file, footer in read for r in base_stats_records(mdt.data_storage, file, footer)]
        columns = indexed_columns(mdt.data_storage) if deleted or changed.added_logs else []
        stats += log_stats_records(mdt.data_storage, changed.added_logs, columns)
        stats += [hudi_records.column_stats_tombstone(p, n, c) for p, n in deleted for c in columns]
        out[COLUMN_STATS] = stats
    if BLOOM_FILTERS in wanted:
        hudi_filters = {  # a large insert's filters wait on local disk until the commit: read back here
            (b["partition"], b["fileName"]): loaded(b)
            for b in (built or {}).get(BLOOM_FILTERS, [])
            if b.get("bloomType") in (SIMPLE, DYNAMIC_V0)
        }
        blooms = bloom_filter_records(mdt.data_storage, time, read, hudi_filters)
        blooms += [hudi_records.bloom_filter_tombstone(p, n, time) for p, n in deleted]
        out[BLOOM_FILTERS] = blooms
    return out


def apply(
    mdt: MetadataTable,
    time: str,
    records: list[dict],
    timeline: ActiveTimeline | None = None,
    footprint: set[tuple[str, str]] | None = None,
    built: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> list[str]:
    """MDT delta commit `time` of the seed-format `files` records: requested -> inflight (with the data
    instant's footprint) -> one log per file group written to -> completed. Returns the logs written.
    `built`: the index records the commit's writers made, by partition."""
    with METRICS.timed(SYNC):
        timeline = timeline or mdt.timeline()
        instant = steps.begin_deltacommit(timeline, time, footprint)
        partitions = kept_partitions(mdt)
        by_partition = {FILES: files_records(records), **index_records(mdt, time, partitions, records, built)}
        written: list[writes.WrittenFile] = []
        for partition in partitions:
            if not by_partition.get(partition):
                continue
            groups = list_file_groups(mdt.storage, partition)
            if not groups:
                raise CorruptInstantError(f"metadata partition {partition} has no file group")
            slices = writer_slices(mdt.storage, timeline, groups)
            written += writes.write_logs(mdt.storage, partition, time, by_partition[partition], groups, slices)
        crash_point(steps.DELTA_LOG)
        timeline.complete(instant, writes.delta_commit_metadata(written, "UPSERT_PREPPED"))
        crash_point(steps.DELTA_COMPLETE)
        return [w.path for w in written]


def undo(mdt: MetadataTable, timeline: ActiveTimeline, record_time: str, time: str, action: str) -> None:
    """A rollback command block naming `time` in every group of every kept partition, then `time`'s MDT
    instant files deleted. Repeating it appends the blocks again, which changes nothing a reader sees."""
    for partition in kept_partitions(mdt):
        groups = list_file_groups(mdt.storage, partition)
        if groups:
            slices = writer_slices(mdt.storage, timeline, groups)
            writes.write_rollback_logs(mdt.storage, record_time, time, groups, slices)
    crash_point(steps.ROLLBACK_LOGS)
    timeline.delete_instant_files(time, action)
    crash_point(steps.ROLLBACK_INSTANT)
