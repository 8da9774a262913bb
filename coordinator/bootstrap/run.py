"""`tandem bootstrap`: a parquet dataset taken in as a Hudi table without copying it (RFC-12), in Hudi's two
modes, chosen per partition as Hudi's selector chooses them.

- metadata-only (instant 00000000000001): one skeleton file per source file, holding the five meta columns of
  its rows in the same order, the bootstrap index mapping each skeleton's file group to its source, and the
  table's `hoodie.bootstrap.base.path`; readers join skeleton and source by position (`skeleton_join`).
- full-record (instant 00000000000002): the rows copied into ordinary base files, one bulk insert.

The whole source is checked first (`source_layout`): a bad source changes nothing. Each instant is an
ordinary transaction (markers, the metadata table first, the commit decision), so a crash at any step leaves
an instant that `tandem recover` rolls back like any other (its rollback drops the bootstrap index too);
running the bootstrap again then starts over. The source is only ever read.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.bootstrap import source_layout
from coordinator.bootstrap.source_layout import ListedFile, SourceLayout
from coordinator.config import CoordinatorConfig
from coordinator.protocol.transaction import Transaction, WriteOutcome
from coordinator.write.new_files import BaseFileWriter
from coordinator.write.pool import each
from coordinator.write.rows import KEY, PARTITION
from coordinator.write.writer import LocalWriter
from locks.base import LockProvider
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.bootstrap_index import INDEX_CLASS, SourceMapping, write_index
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.instant import COMMIT
from timeline.format.keys import DEFAULT_PARTITION
from timeline.format.source_file import (
    BOOTSTRAP_BASE_PATH,
    BOOTSTRAP_INDEX_CLASS,
    FULL_BOOTSTRAP_INSTANT,
    METADATA_BOOTSTRAP_INSTANT,
)
from timeline.format.table_config import COPY_ON_WRITE, HOODIE_DIR, read_config
from timeline.io.storage import Storage
from timeline.table import Table

METADATA_ONLY = "metadata_only"
FULL_RECORD = "full_record"
MODES = (METADATA_ONLY, FULL_RECORD)
BOOTSTRAP_INSTANTS = (METADATA_BOOTSTRAP_INSTANT, FULL_BOOTSTRAP_INSTANT)
PROGRESS_EVERY = 1000  # skeletons between progress lines

CHECKED = register("bootstrap.checked", "source listed and checked, target not touched yet")
CREATED = register("bootstrap.created", "target table created, no instant yet")
SKELETONS = register("bootstrap.skeletons", "every skeleton written, bootstrap index not yet")
INDEXED = register("bootstrap.index", "bootstrap index written, instant 00000000000001 not committed yet")
METADATA_DONE = register("bootstrap.metadata_only", "instant 00000000000001 completed, full-record not yet")
LOG = logging.getLogger(__name__)


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


def bootstrap(
    request: BootstrapRequest, config: CoordinatorConfig | None = None, lock: LockProvider | None = None
) -> BootstrapResult:
    """Check the source, create the table, commit the metadata-only partitions, then the full-record ones."""
    config = config or CoordinatorConfig()
    if not request.record_key or len(set(request.record_key)) != len(request.record_key):
        raise BadInputError("--record-key needs distinct column names")
    storage, listed = source_layout.list_source(request.source, request.target)
    columns = source_layout.partition_columns(listed, request.partition_by)
    layout = source_layout.check_layout(storage, listed, columns, request.record_key, request.precombine)
    modes = select_modes(layout.partitions(), request)
    keys = source_layout.record_keys(storage, layout, request.record_key)
    crash_point(CHECKED)
    table = _target_table(request, layout, config)
    crash_point(CREATED)
    done = {i.time for i in table.timeline().completed()}
    instants, written = [], 0
    skeletal = [f for f in layout.files if modes[f.partition] == METADATA_ONLY]
    if skeletal and METADATA_BOOTSTRAP_INSTANT not in done:
        written += _metadata_only(table, storage, layout, skeletal, keys, config, lock)
        instants.append(METADATA_BOOTSTRAP_INSTANT)
    crash_point(METADATA_DONE)
    copied = [f for f in layout.files if modes[f.partition] == FULL_RECORD]
    if copied and FULL_BOOTSTRAP_INSTANT not in done:
        written += _full_record(table, storage, layout, copied, config, lock)
        instants.append(FULL_BOOTSTRAP_INSTANT)
    rows = sum(f.rows for f in layout.files)
    return BootstrapResult(table.uri, instants, len(skeletal), len(copied), rows, written)


def _target_table(request: BootstrapRequest, layout: SourceLayout, config: CoordinatorConfig) -> Table:
    """The new table, or the one an interrupted bootstrap of this source left (nothing but its instants)."""
    target = source_layout.absolute_uri(request.target)
    storage = Storage(target)
    if not storage.exists(f"{HOODIE_DIR}/hoodie.properties"):
        return Table.create(
            target,
            request.name or target.rstrip("/").rpartition("/")[2] or "bootstrapped",
            request.record_key,
            layout.partition_columns,
            hive_style=True,  # the key generator then names a row's partition as its source folder is named
            precombine_field=request.precombine,
            with_metadata=config.metadata_enabled,
            table_type=COPY_ON_WRITE,
            extra={BOOTSTRAP_BASE_PATH: layout.base_uri, BOOTSTRAP_INDEX_CLASS: INDEX_CLASS},
        )
    table = Table(storage, read_config(storage))
    recorded = table.config.raw.get(BOOTSTRAP_BASE_PATH)
    same = (
        recorded == layout.base_uri
        and table.config.record_key_fields == request.record_key
        and table.config.partition_fields == layout.partition_columns
    )
    others = [i.time for i in table.timeline().instants if i.time not in BOOTSTRAP_INSTANTS]
    if not same or others or table.timeline().archived_files:
        raise BadInputError(
            f"{target} is already a table"
            + (f" (bootstrapped from {recorded})" if recorded else "")
            + ": a bootstrap creates its table, or finishes one it started with the same source and keys"
        )
    return table


def _metadata_only(
    table: Table,
    storage: Storage,
    layout: SourceLayout,
    files: list[ListedFile],
    keys: dict[str, pa.ChunkedArray],
    config: CoordinatorConfig,
    lock: LockProvider | None,
) -> int:
    """Instant 01: a skeleton per source file, the bootstrap index, then the commit (checked: no source changed)."""
    writer = LocalWriter(table, coordinator=config, lock=lock)
    with Transaction(table, COMMIT, "BOOTSTRAP", config, lock, METADATA_BOOTSTRAP_INSTANT) as txn:
        schema = arrow_to_avro(layout.table_schema, table.config.name)
        metadata = CommitMetadata(operation_type="BOOTSTRAP", schema=schema)

        def skeleton(task: int) -> tuple[WriteStat, SourceMapping]:
            source = files[task]
            if task and task % PROGRESS_EVERY == 0:
                LOG.info("bootstrap: %d of %d skeletons written", task, len(files))
            out = BaseFileWriter(writer, txn, source.partition, str(uuid.uuid4()), task, None)
            keyed = pa.table({KEY: keys[source.path], PARTITION: pa.repeat(source.partition, source.rows)})
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

        made = each(skeleton, range(len(files)), writer.io_threads)
        crash_point(SKELETONS)
        for stat, _ in made:
            metadata.add(stat)
        write_index(table.storage, layout.base_uri, [m for _, m in made])
        crash_point(INDEXED)
        source_layout.unchanged(storage, files)
        txn.commit(WriteOutcome(metadata, frozenset(), marked_here=True))
    return sum(stat.file_size_in_bytes for stat, _ in made)


def _hadoop_uri(storage: Storage, path: str) -> str:
    """A source file as Hadoop prints its path (`file:/x/y`, `s3a://b/k`): what Java Hudi's index holds."""
    full = storage.uri(path)
    return full if "://" in full else f"file:{full}"


def _full_record(
    table: Table,
    storage: Storage,
    layout: SourceLayout,
    files: list[ListedFile],
    config: CoordinatorConfig,
    lock: LockProvider | None,
) -> int:
    """Instant 02: the rows of the full-record partitions, partition columns added from their folders, as one
    bulk insert; each file is checked unchanged around its read."""
    schema = layout.table_schema

    def batches() -> Iterator[pa.RecordBatch]:
        for source in files:
            source_layout.unchanged(storage, [source])
            with storage.open_input(source.path) as handle:
                rows = pq.ParquetFile(handle).read()
            source_layout.unchanged(storage, [source])
            values = dict(part.split("=", 1) for part in source.partition.split("/")) if source.partition else {}
            for name in layout.partition_columns:
                value = None if values[name] == DEFAULT_PARTITION else values[name]
                rows = rows.append_column(name, pa.repeat(pa.scalar(value, pa.string()), rows.num_rows))
            yield from rows.cast(schema).to_batches()

    writer = LocalWriter(table, coordinator=config, lock=lock)
    result = writer.write(
        pa.RecordBatchReader.from_batches(schema, batches()), "bulk_insert", instant_time=FULL_BOOTSTRAP_INSTANT
    )
    return sum(s.file_size_in_bytes for s in result.metadata.write_stats())
