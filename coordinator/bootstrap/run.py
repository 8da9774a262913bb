"""`tandem bootstrap`: a parquet dataset taken in as a Hudi table without copying it (RFC-12), in Hudi's two
modes, chosen per partition as Hudi's selector chooses them.

- metadata-only (instant 00000000000001): one skeleton file per source file, holding the five meta columns of
  its rows in the same order, the bootstrap index mapping each skeleton's file group to its source, and the
  table's `hoodie.bootstrap.base.path`; readers join skeleton and source by position (`skeleton_join`).
- full-record (instant 00000000000002): the rows copied into ordinary base files, one bulk insert.

The whole source is checked first (`source_layout`): a bad source changes nothing. Each instant is an
ordinary transaction (markers, the metadata table first, the commit decision), so a crash at any step leaves
an instant that `tandem recover` rolls back like any other (its rollback drops the bootstrap index too). Hudi's
bootstrap instants are fixed times, so an attempt rolled back cannot be made again in the same table: the
target is removed and the bootstrap run again (said so when it is tried). The source is only ever read.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.bootstrap import source_layout
from coordinator.bootstrap.source_layout import ListedFile, SourceLayout
from coordinator.config import CoordinatorConfig
from coordinator.protocol.transaction import Transaction, WriteOutcome
from coordinator.write.new_files import BaseFileWriter, InstantSink
from coordinator.write.pool import each
from coordinator.write.rows import KEY, PARTITION
from coordinator.write.writer import LocalWriter
from locks.base import LockProvider
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.bootstrap_index import INDEX_CLASS, SourceMapping, read_index, write_index
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.instant import COMMIT, ROLLBACK, Instant
from timeline.format.keys import DEFAULT_PARTITION
from timeline.format.source_file import (
    BOOTSTRAP_BASE_PATH,
    BOOTSTRAP_INDEX_CLASS,
    BOOTSTRAP_INSTANTS,
    COPIES_FOLLOW,
    FULL_BOOTSTRAP_INSTANT,
    METADATA_BOOTSTRAP_INSTANT,
)
from timeline.format.table_config import COPY_ON_WRITE, HOODIE_DIR, read_config
from timeline.io.storage import Storage
from timeline.table import Table

METADATA_ONLY = "metadata_only"
FULL_RECORD = "full_record"
MODES = (METADATA_ONLY, FULL_RECORD)
PROGRESS_EVERY = 1000  # skeletons between progress lines

CHECKED = register("bootstrap.checked", "source listed and checked, target not touched yet")
CREATED = register("bootstrap.created", "target table created, no instant yet")
SKELETONS = register("bootstrap.skeletons", "every skeleton written, bootstrap index not yet")
INDEXED = register("bootstrap.index", "bootstrap index written, instant 00000000000001 not committed yet")
METADATA_DONE = register("bootstrap.metadata_only", "instant 00000000000001 completed, full-record not yet")
LOG = logging.getLogger(__name__)
# hudi-rs (0.5) reads a skeleton without its source: every data column null, silently. It validates this key
# of its own (no Java Hudi version defines it) and refuses the table for a value it does not know; Java ignores
# it. Written only when the table has skeletons; `tests/coordinator/test_bootstrap.py` checks hudi-rs refuses.
HUDI_RS_GUARD = {"hoodie.table.record.merge.strategy": "BOOTSTRAPPED_SKELETONS_NEED_THEIR_SOURCE_FILES"}


@dataclass(frozen=True)
class BootstrapRequest:
    """What to bootstrap, and how: `mode` for every partition, or with `mode_regex` the partitions whose source
    folder matches it get `regex_mode` and the others the other mode (Hudi's BootstrapRegexModeSelector)."""

    source: str
    target: str
    record_key: list[str]
    partition_by: list[str] | None = None
    mode: str = METADATA_ONLY
    mode_regex: str | None = None
    regex_mode: str = METADATA_ONLY
    precombine: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class BootstrapResult:
    table: str
    instants: list[str]
    metadata_only_files: int
    full_record_files: int
    rows: int
    bytes_written: int


def select_modes(partitions: list[str], request: BootstrapRequest) -> dict[str, str]:
    """Each partition's mode: RFC-12's selector, matched against the source folder."""
    for mode in (request.mode, request.regex_mode):
        if mode not in MODES:
            raise BadInputError(f"unknown bootstrap mode {mode!r} (one of {', '.join(MODES)})")
    if request.mode_regex is None:
        return dict.fromkeys(partitions, request.mode)
    try:
        pattern = re.compile(request.mode_regex)
    except re.error as err:
        raise BadInputError(f"--mode-regex {request.mode_regex!r}: {err}") from None
    other = METADATA_ONLY if request.regex_mode == FULL_RECORD else FULL_RECORD
    return {p: request.regex_mode if pattern.fullmatch(p) else other for p in partitions}


class Engine(Protocol):
    """Where the bootstrap's work on the rows runs: this process (`LocalEngine`) or Spark's executors."""

    def check_keys(self, storage: Storage, layout: SourceLayout, record_key: list[str]) -> None:
        """Refuse null, empty and repeated record keys (`source_layout.record_keys`'s words)."""

    def skeletons(
        self, table: Table, txn: Transaction, storage: Storage, files: list[ListedFile]
    ) -> list[tuple[WriteStat, SourceMapping]]:
        """A skeleton per source file, under `txn`."""

    def copy(
        self, table: Table, storage: Storage, layout: SourceLayout, files: list[ListedFile], lock: LockProvider | None
    ) -> list[WriteStat]:
        """The rows of `files` as one bulk insert at instant 02."""


def bootstrap(
    request: BootstrapRequest,
    config: CoordinatorConfig | None = None,
    lock: LockProvider | None = None,
    engine: Engine | None = None,
) -> BootstrapResult:
    """Check the source, create the table, commit the metadata-only partitions, then the full-record ones."""
    config = config or CoordinatorConfig()
    engine = engine or LocalEngine(config)
    if not request.record_key or len(set(request.record_key)) != len(request.record_key):
        raise BadInputError("--record-key needs distinct column names")
    storage, listed = source_layout.list_source(request.source, request.target)
    columns = source_layout.partition_columns(listed, request.partition_by)
    layout = source_layout.check_layout(storage, listed, columns, request.record_key, request.precombine)
    modes = select_modes(layout.partitions(), request)
    engine.check_keys(storage, layout, request.record_key)
    crash_point(CHECKED)
    table = _target_table(request, layout, config, skeletons=METADATA_ONLY in modes.values())
    crash_point(CREATED)
    done = {i.time for i in table.timeline().completed()}
    instants, written = [], 0
    skeletal = [f for f in layout.files if modes[f.partition] == METADATA_ONLY]
    copied = [f for f in layout.files if modes[f.partition] == FULL_RECORD]
    _check_resumed(table, storage, done, skeletal, copied)
    if skeletal and METADATA_BOOTSTRAP_INSTANT not in done:
        written += _metadata_only(table, storage, layout, skeletal, engine, config, lock, copies_follow=bool(copied))
        instants.append(METADATA_BOOTSTRAP_INSTANT)
    crash_point(METADATA_DONE)
    if copied and FULL_BOOTSTRAP_INSTANT not in done:
        written += sum(s.file_size_in_bytes for s in engine.copy(table, storage, layout, copied, lock))
        instants.append(FULL_BOOTSTRAP_INSTANT)
    rows = sum(f.rows for f in layout.files)
    return BootstrapResult(table.uri, instants, len(skeletal), len(copied), rows, written)


def _check_resumed(
    table: Table, storage: Storage, done: set[str], skeletal: list[ListedFile], copied: list[ListedFile]
) -> None:
    """A bootstrap run again to finish one must ask for what the finished instants took: the same files
    metadata-only (the index's), the same partitions full-record (instant 02's)."""
    finishing = f"{table.uri} was bootstrapped from other files or in other modes than asked now"
    if METADATA_BOOTSTRAP_INSTANT in done:
        index = read_index(table.storage, whole=False)
        taken = {storage.relative(m.uri) for m in index.mappings.values()} if index is not None else set()
        if taken != {f.path for f in skeletal}:
            raise BadInputError(f"{finishing} (metadata-only: {len(taken)} file(s) taken, {len(skeletal)} asked)")
    elif skeletal and FULL_BOOTSTRAP_INSTANT in done:
        raise BadInputError(f"{finishing} (metadata-only partitions asked after the full-record ones)")
    if FULL_BOOTSTRAP_INSTANT in done:
        metadata = table.timeline().commit_metadata(table.timeline().find(FULL_BOOTSTRAP_INSTANT))
        if set(metadata.partition_to_write_stats) != {f.partition for f in copied}:
            raise BadInputError(f"{finishing} (full-record: other partitions)")


def _target_table(request: BootstrapRequest, layout: SourceLayout, config: CoordinatorConfig, skeletons: bool) -> Table:
    """The new table, or the one an interrupted bootstrap of this source left (nothing but its instants). With
    `skeletons` it also carries the guard that makes hudi-rs refuse to read it (`HUDI_RS_GUARD`)."""
    target = source_layout.absolute_uri(request.target)
    storage = Storage(target)
    if not storage.exists(f"{HOODIE_DIR}/hoodie.properties"):
        bootstrap_keys = {BOOTSTRAP_BASE_PATH: layout.base_uri, BOOTSTRAP_INDEX_CLASS: INDEX_CLASS}
        return _created(
            target,
            request.name or target.rstrip("/").rpartition("/")[2] or "bootstrapped",
            request.record_key,
            layout.partition_columns,
            hive_style=True,  # the key generator then names a row's partition as its source folder is named
            precombine_field=request.precombine,
            with_metadata=config.metadata_enabled,
            table_type=COPY_ON_WRITE,
            extra={**bootstrap_keys, **(HUDI_RS_GUARD if skeletons else {})},
        )
    table = Table(storage, read_config(storage))
    recorded = table.config.raw.get(BOOTSTRAP_BASE_PATH)
    same = (
        recorded == layout.base_uri
        and table.config.record_key_fields == request.record_key
        and table.config.partition_fields == layout.partition_columns
    )
    timeline = table.timeline()
    if any(i.time in BOOTSTRAP_INSTANTS for i in timeline.pending()):
        raise BadInputError(
            f"the bootstrap of {target} was interrupted: run `tandem recover` once its writer is gone, then remove "
            "the folder and run the bootstrap again"
        )
    others = [i for i in timeline.instants if i.time not in BOOTSTRAP_INSTANTS]
    if same and others and all(_undid_a_bootstrap(timeline, i) for i in others):
        raise BadInputError(
            f"{target} holds a bootstrap that was rolled back and nothing else: remove the folder (its writer must "
            "be gone) and run the bootstrap again; its instants are Hudi's fixed ones and cannot be taken twice"
        )
    if not same or others or timeline.archived_files:
        raise BadInputError(
            f"{target} is already a table"
            + (f" (bootstrapped from {recorded})" if recorded else "")
            + ": a bootstrap creates its table, or finishes one it started with the same source and keys"
        )
    return table


def _created(target: str, *args, **kwargs) -> Table:
    """`Table.create`, a target that cannot be a folder (below a file, say) refused as bad input."""
    try:
        return Table.create(target, *args, **kwargs)
    except (NotADirectoryError, FileExistsError) as err:
        raise BadInputError(f"cannot create the table at {target}: {err}") from None


def _undid_a_bootstrap(timeline: ActiveTimeline, instant: Instant) -> bool:
    return instant.action == ROLLBACK and timeline.rollback_target(instant).get("commitTime") in BOOTSTRAP_INSTANTS


def _metadata_only(
    table: Table,
    storage: Storage,
    layout: SourceLayout,
    files: list[ListedFile],
    engine: Engine,
    config: CoordinatorConfig,
    lock: LockProvider | None,
    copies_follow: bool,
) -> int:
    """Instant 01: a skeleton per source file, the bootstrap index, then the commit (checked: no source changed);
    `copies_follow` says in it that instant 02 comes next, so that no other writer begins in between."""
    with Transaction(table, COMMIT, "BOOTSTRAP", config, lock, METADATA_BOOTSTRAP_INSTANT) as txn:
        schema = arrow_to_avro(layout.table_schema, table.config.name)
        metadata = CommitMetadata(operation_type="BOOTSTRAP", schema=schema)
        if copies_follow:
            metadata.extra_metadata[COPIES_FOLLOW] = "true"
        made = engine.skeletons(table, txn, storage, files)
        crash_point(SKELETONS)
        for stat, _ in sorted(made, key=lambda m: m[0].path):
            metadata.add(stat)
        write_index(table.storage, layout.base_uri, [m for _, m in made])
        crash_point(INDEXED)
        source_layout.unchanged(storage, files)
        txn.commit(WriteOutcome(metadata, frozenset(), marked_here=isinstance(engine, LocalEngine)))
    return sum(stat.file_size_in_bytes for stat, _ in made)


def write_skeleton(
    writer: LocalWriter, sink: InstantSink, storage: Storage, source: ListedFile, keys: pa.ChunkedArray, task: int,
    token: str | None = None,
) -> tuple[WriteStat, SourceMapping]:  # fmt: skip
    """One skeleton: the meta columns of `source`'s rows in its order (`keys`: their record keys), as a new file
    group in the same partition; and the index entry naming its source."""
    out = BaseFileWriter(writer, sink, source.partition, str(uuid.uuid4()), task, token)
    keyed = pa.table({KEY: keys, PARTITION: pa.repeat(pa.scalar(source.partition), len(keys))})
    try:
        out.write(keyed)
        stat = out.close()
    except BaseException:
        out.abandon()
        raise
    uri = _hadoop_uri(storage, source.path)
    mapping = SourceMapping(
        source.partition, out.file_id, source.partition, uri, source.size, source.mtime_ns // 1_000_000
    )
    return stat, mapping


def _hadoop_uri(storage: Storage, path: str) -> str:
    """A source file as Hadoop prints its path (`file:/x/y`, `s3a://b/k`): what Java Hudi's index holds."""
    full = storage.uri(path)
    return full if "://" in full else f"file:{full}"


def source_batches(storage: Storage, layout: SourceLayout, files: list[ListedFile]) -> Iterator[pa.RecordBatch]:
    """The rows of `files` in the table's schema, partition columns added from their folders (null for Hive's
    default partition); each file checked unchanged around its read."""
    for source in files:
        source_layout.unchanged(storage, [source])
        with storage.open_input(source.path) as handle:
            rows = pq.ParquetFile(handle).read()
        source_layout.unchanged(storage, [source])
        values = dict(part.split("=", 1) for part in source.partition.split("/")) if source.partition else {}
        for name in layout.partition_columns:
            value = None if values[name] == DEFAULT_PARTITION else values[name]
            rows = rows.append_column(name, pa.repeat(pa.scalar(value, pa.string()), rows.num_rows))
        yield from rows.cast(layout.table_schema).to_batches()


class LocalEngine:
    """The bootstrap in this process: keys read once for the duplicate check and the skeletons, skeletons
    written on the write pool, the full-record rows streamed through the local writer."""

    def __init__(self, config: CoordinatorConfig) -> None:
        self.config = config
        self.keys: dict[str, pa.ChunkedArray] = {}

    def check_keys(self, storage: Storage, layout: SourceLayout, record_key: list[str]) -> None:
        self.keys = source_layout.record_keys(storage, layout, record_key)

    def skeletons(
        self, table: Table, txn: Transaction, storage: Storage, files: list[ListedFile]
    ) -> list[tuple[WriteStat, SourceMapping]]:
        writer = LocalWriter(table, coordinator=self.config, lock=txn.lock)

        def one(task: int) -> tuple[WriteStat, SourceMapping]:
            if task and task % PROGRESS_EVERY == 0:
                LOG.info("bootstrap: %d of %d skeletons written", task, len(files))
            return write_skeleton(writer, txn, storage, files[task], self.keys[files[task].path], task)

        return each(one, range(len(files)), writer.io_threads)

    def copy(
        self, table: Table, storage: Storage, layout: SourceLayout, files: list[ListedFile], lock: LockProvider | None
    ) -> list[WriteStat]:
        writer = LocalWriter(table, coordinator=self.config, lock=lock)
        rows = pa.RecordBatchReader.from_batches(layout.table_schema, source_batches(storage, layout, files))
        result = writer.write(rows, "bulk_insert", instant_time=FULL_BOOTSTRAP_INSTANT)
        return result.metadata.write_stats()
