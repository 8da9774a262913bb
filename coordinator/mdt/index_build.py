"""Turning an MDT index on or off for an existing table, and checking one against the files.

Building reads the footers (and, where a footer has no exact statistics, the
column; for bloom filters the key column) of every live file in parallel and
commits the records as an MDT-only `indexing` instant. That instant is requested
first, then the table property is set, so every writer that begins afterwards
(the property is read afresh under the lock) writes records for its own files;
instants pending at that moment would not, so the build refuses while any is
pending. A build that dies leaves its requested instant behind: MDT
housekeeping rolls it back and indexes the live files that have no records. A record is a
fact about one immutable file: a file left without one is never skipped, so a
build racing a writer that broke the lock costs speed, never rows.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.mdt import deltacommit, hudi_index_build
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError, FencedError
from timeline.format import outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import INDEXING, Instant, State
from timeline.format.keys import record_keys
from timeline.format.meta_fields import RECORD_KEY
from timeline.format.partition_path import file_path
from timeline.format.table_config import TableConfig, read_config, record_metadata_indexes
from timeline.index.bloom import BloomFilter
from timeline.index.column_ranges import ranges_of_parquet
from timeline.index.column_stats import ColumnRange
from timeline.io.storage import Storage
from timeline.mdt import indexes, layout
from timeline.mdt.log import BLOOM_FILTERS, COLUMN_STATS, DATA, PARTITION_ATTRIBUTE, LogBlock
from timeline.mdt.reader import MetadataReader
from timeline.mdt.table import MetadataTable

INDEX_TURNED_ON = register("mdt.index.turned_on", "index recorded in hoodie.properties, nothing indexed yet")
INDEX_LOGGED = register("mdt.index.logged", "index records of the build appended, instant not complete")
INDEX_COMPLETE = register("mdt.index.complete", "indexing instant completed")
BUILD_THREADS = 8
KEY_COLUMN = RECORD_KEY


@dataclass
class FileIndex:
    """The index records of one file; `error` when it could not be read."""

    partition: str
    name: str
    column_stats: list[dict] = field(default_factory=list)
    bloom: dict | None = None
    error: str | None = None


def index_file(config: TableConfig, mdt: MetadataTable, partition: str, name: str, wanted: list[str]) -> FileIndex:
    """Records of one live file, from its footer (and columns the footer cannot bound)."""
    path = file_path(partition, name)
    found = FileIndex(partition, name)
    try:
        with mdt.data_storage.open_input(path) as handle:
            parquet = pq.ParquetFile(handle)
            if COLUMN_STATS in wanted:
                columns = indexes.indexed_columns(config, parquet.schema_arrow)
                found.column_stats = [r.to_record(partition, name) for r in ranges_of_parquet(parquet, columns)]
            if BLOOM_FILTERS in wanted:
                keys = _keys(config, parquet)
                found.bloom = indexes.bloom_record(config, partition, name, len(keys), [keys])
    except FileNotFoundError:
        found.error = "deleted while indexing"
    except (OSError, pa.ArrowException, ValueError) as err:
        found.error = f"unreadable: {err}"
    return found


def _keys(config: TableConfig, parquet: pq.ParquetFile) -> pa.ChunkedArray:
    names = parquet.schema_arrow.names
    if config.populate_meta_fields and KEY_COLUMN in names:
        return parquet.read(columns=[KEY_COLUMN]).column(KEY_COLUMN)
    return record_keys(parquet.read(columns=config.record_key_fields), config.record_key_fields)


def index_files(
    config: TableConfig,
    mdt: MetadataTable,
    files: list[tuple[str, str]],
    wanted: list[str],
    progress: Callable[[int], None] | None = None,
) -> list[FileIndex]:
    """Index many files on threads (footer reads are I/O bound; pyarrow releases the GIL while decoding)."""
    out = []
    with ThreadPoolExecutor(BUILD_THREADS) as pool:
        for found in pool.map(lambda f: index_file(config, mdt, f[0], f[1], wanted), files):
            out.append(found)
            if progress is not None:
                progress(1)
    return out


def index_files_on_spark(
    spark: Any, config: TableConfig, mdt: MetadataTable, files: list[tuple[str, str]], wanted: list[str]
) -> list[FileIndex]:
    """`index_files` on the executors of a Spark session: each task opens the table and reads its files' footers."""
    if not files:
        return []
    slices = max(1, min(len(files), spark.sparkContext.defaultParallelism * 4))
    task = partial(_index_remote, mdt.data_storage.base_uri, wanted)
    return spark.sparkContext.parallelize(files, slices).map(task).collect()


def _index_remote(base_uri: str, wanted: list[str], file: tuple[str, str]) -> FileIndex:
    storage = Storage(base_uri)
    return index_file(read_config(storage), MetadataTable(storage), file[0], file[1], wanted)


def live_files(mdt: MetadataTable, data_timeline: ActiveTimeline) -> list[tuple[str, str]]:
    """Every file the MDT lists for completed instants (older versions too: as-of reads open them)."""
    listing = MetadataReader(mdt, data_timeline).listing()
    return list(zip(listing.column("partition").to_pylist(), listing.column("file").to_pylist(), strict=True))


def build(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    wanted: list[str],
    progress: Callable[[int], None] | None = None,
    spark: Any = None,
) -> str | None:
    """Turn on the indexes `wanted` and build them for every live file (call under the lock).

    The files are read on local threads, or on the executors of `spark` when given.
    Returns the indexing instant, or None when every index was already on.
    """
    wanted = indexes.check_names(wanted)
    config = read_config(mdt.data_storage)
    if not config.metadata_enabled or not mdt.exists():
        raise BadInputError(f"{mdt.data_storage.uri('')} has no metadata table (`tandem metadata create` first)")
    have = config.java_metadata_partitions if mdt.is_hudi_format(config) else config.metadata_indexes
    new = [w for w in wanted if w not in have]
    if not new:
        return None
    pending = [f"{i.time}.{i.action}" for i in data_timeline.pending()]
    if pending:
        raise BadInputError(f"cannot build an index while instants are pending: {', '.join(pending)}")
    if mdt.is_hudi_format():
        return hudi_index_build.add_partitions(mdt, data_timeline, new, live_files(mdt, data_timeline), progress, spark)
    instant = begin_indexing(mdt, data_timeline)
    config = record_metadata_indexes(mdt.data_storage, config.metadata_indexes + new)
    crash_point(INDEX_TURNED_ON)
    return index_all(mdt, data_timeline, config, new, progress, instant, spark)


def index_all(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    config: TableConfig,
    wanted: list[str],
    progress: Callable[[int], None] | None = None,
    instant: Instant | None = None,
    spark: Any = None,
) -> str:
    """Records of the indexes `wanted` for every live file, committed as one indexing instant."""
    files = live_files(mdt, data_timeline)
    if spark is not None:
        found = index_files_on_spark(spark, config, mdt, files, wanted)
    else:
        found = index_files(config, mdt, files, wanted, progress)
    records = {
        COLUMN_STATS: [r for f in found for r in f.column_stats],
        BLOOM_FILTERS: [f.bloom for f in found if f.bloom is not None],
    }
    return commit_records(mdt, data_timeline, {p: records[p] for p in wanted}, instant)


def catch_up(mdt: MetadataTable, data_timeline: ActiveTimeline) -> str | None:
    """Index the live files that have no records in an index the table keeps (a build that died, a writer that
    began before the index was turned on). Call under the lock; None when nothing was missing."""
    config = read_config(mdt.data_storage)
    if not config.metadata_indexes or not mdt.exists() or mdt.is_hudi_format(config):
        return None  # Hudi's format: a partition is built whole before it is recorded, then every commit keeps it
    reader = MetadataReader(mdt, data_timeline)
    live = live_files(mdt, data_timeline)
    records: dict[str, list[dict]] = {}
    for partition in config.metadata_indexes:
        index = reader.index(partition)
        have = set(zip(index.column("partition").to_pylist(), index.column("fileName").to_pylist(), strict=True))
        missing = [f for f in live if f not in have]
        found = index_files(config, mdt, missing, [partition])
        records[partition] = [r for f in found for r in f.column_stats] if partition == COLUMN_STATS else []
        records[partition] += [f.bloom for f in found if f.bloom is not None]
    if not any(records.values()):
        return None
    return commit_records(mdt, data_timeline, records)


def finish_failed_builds(mdt: MetadataTable, data_timeline: ActiveTimeline, pending: list[str]) -> list[str]:
    """Complete the pending builds whose commit was decided; roll back the others (returned)."""
    rolled_back = []
    for time in pending:
        decided = outcome.read(mdt.data_storage, time)
        if decided is not None and decided.is_commit:
            mdt.timeline().complete(Instant(time, INDEXING, State.INFLIGHT), b"{}")
        elif deltacommit.rollback(mdt, time, data_timeline):
            rolled_back.append(time)
    return rolled_back


def begin_indexing(mdt: MetadataTable, data_timeline: ActiveTimeline) -> Instant:
    """A requested `indexing` instant on the MDT timeline, written before anything else the build does.

    If the build dies, that pending instant is the evidence: MDT housekeeping
    rolls it back and indexes whatever live files were left without records.
    """
    instant = Instant(mdt.next_instant(data_timeline), INDEXING, State.REQUESTED)
    mdt.timeline().create_requested(instant)
    return instant


def commit_records(
    mdt: MetadataTable, data_timeline: ActiveTimeline, records: dict[str, list[dict]], instant: Instant | None = None
) -> str:
    """An MDT-only `indexing` instant carrying `records`: requested, log blocks, decision, completed."""
    instant = instant or begin_indexing(mdt, data_timeline)
    time = instant.time
    timeline = mdt.timeline()
    timeline.transition_to_inflight(instant)
    for partition, rows in sorted(records.items()):
        if rows:
            deltacommit.append_block(mdt, LogBlock(time, DATA, rows, {PARTITION_ATTRIBUTE: partition}))
    crash_point(INDEX_LOGGED)
    mdt.storage.sync_dirs([layout.FILES_PARTITION])  # the blocks' log entries, before the decision names them
    if not outcome.claim(mdt.data_storage, time, outcome.COMMIT).is_commit:
        raise FencedError(f"indexing instant {time} was rolled back by another process")
    timeline.complete(instant.with_state(State.INFLIGHT), b"{}")
    crash_point(INDEX_COMPLETE)
    return time


def drop(mdt: MetadataTable, unwanted: list[str]) -> list[str]:
    """Turn indexes off: writers stop at once (the property), readers ignore the partition, its base files go."""
    unwanted = indexes.check_names(unwanted)
    if mdt.is_hudi_format():
        return hudi_index_build.drop_partitions(mdt, unwanted)
    config = read_config(mdt.data_storage)
    dropped = [u for u in unwanted if u in config.metadata_indexes]
    record_metadata_indexes(mdt.data_storage, [i for i in config.metadata_indexes if i not in dropped])
    for partition in dropped:
        mdt.storage.delete_dir(partition)
    return dropped


@dataclass
class IndexReport:
    """Differences between an index and the records recomputed from the live files."""

    partition: str
    files: int = 0
    missing: list[str] = field(default_factory=list)  # live files without records
    wrong: list[str] = field(default_factory=list)  # records that differ from the file
    stale: list[str] = field(default_factory=list)  # records of files that are not live
    unreadable: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return len(self.missing) + len(self.wrong) + len(self.stale)

    def to_json(self) -> dict:
        return {
            "partition": self.partition,
            "files": self.files,
            "errors": self.errors,
            "missing": self.missing,
            "wrong": self.wrong,
            "stale": self.stale,
            "unreadable": self.unreadable,
        }


def validate(
    mdt: MetadataTable, data_timeline: ActiveTimeline, being_deleted: AbstractSet[str] = frozenset()
) -> list[IndexReport]:
    """Recompute every index the table keeps from the live files' footers and compare, record by record.
    `being_deleted`: paths a pending clean is deleting (the MDT lists them until the clean mirrors)."""
    if mdt.is_hudi_format():
        files = [f for f in live_files(mdt, data_timeline) if file_path(*f) not in being_deleted]
        return [
            IndexReport(
                c.partition,
                files=len(files),
                missing=[file_path(*f) for f in c.missing],
                wrong=[file_path(*f) for f in c.wrong],
                stale=[f"record {key}" for key in c.stale],
            )
            for c in hudi_index_build.validate(mdt, data_timeline, files, being_deleted)
        ]
    config = read_config(mdt.data_storage)
    kept = config.metadata_indexes
    if not kept:
        return []
    files = live_files(mdt, data_timeline)
    found = {(f.partition, f.name): f for f in index_files(config, mdt, files, kept)}
    reader = MetadataReader(mdt, data_timeline)
    reports = []
    for partition in kept:
        stored = reader.index(partition).to_pylist()
        report = IndexReport(partition, files=len(files))
        report.unreadable = [file_path(p, n) + f": {f.error}" for (p, n), f in found.items() if f.error]
        by_file: dict[tuple[str, str], list[dict]] = {}
        for record in stored:
            by_file.setdefault(indexes.file_of(record), []).append(record)
        report.stale = sorted(file_path(*k) for k in by_file if k not in found)
        for key, computed in found.items():
            if computed.error:
                continue
            have = by_file.get(key)
            if not have:
                report.missing.append(file_path(*key))
            elif not _same(partition, have, computed):
                report.wrong.append(file_path(*key))
        reports.append(report)
    return reports


def _same(partition: str, stored: list[dict], computed: FileIndex) -> bool:
    """Stored records agree with the recomputed ones: ranges contain the file's values, counts are exact."""
    if partition == BLOOM_FILTERS:
        mine, theirs = stored[0], computed.bloom or {}
        try:
            BloomFilter.from_bytes(mine["bloomFilter"])  # a filter no reader can use is as good as missing
        except ValueError:
            return False
        return (mine["minRecordKey"], mine["maxRecordKey"]) == (theirs.get("minRecordKey"), theirs.get("maxRecordKey"))
    have = {r["columnName"]: ColumnRange.from_record(r) for r in stored}
    for record in computed.column_stats:
        truth = ColumnRange.from_record(record)
        mine = have.get(truth.column)
        if mine is None or not _contains(mine, truth):
            return False
    return True


def _contains(mine: ColumnRange, truth: ColumnRange) -> bool:
    """`mine` is a valid summary of the values `truth` describes exactly (bounds may be wider, never narrower)."""
    counts = (mine.null_count, mine.nan_count, mine.value_count) == (
        truth.null_count,
        truth.nan_count,
        truth.value_count,
    )
    low = truth.min is None or (mine.min is not None and mine.min <= truth.min) or mine.min is None
    high = truth.max is None or (mine.max is not None and mine.max >= truth.max) or mine.max is None
    return counts and low and high
