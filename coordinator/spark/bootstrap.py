"""Bootstrap (RFC-12) on Spark's executors, for sources too large for one process: the source's listing and
footers are checked on the driver (`source_layout`), the record keys read and checked for repeats by the
executors (one aggregation), each skeleton written by an executor, and the full-record rows copied by a Spark
bulk insert. Every file of the source is read by pyarrow on the executors, as the local engine reads it, so the
rows and keys are the same whichever engine ran."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, astuple
from functools import partial

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from coordinator.bootstrap import source_layout
from coordinator.bootstrap.run import source_batches, write_skeleton
from coordinator.bootstrap.source_layout import SHOWN, ListedFile, SourceLayout
from coordinator.config import CoordinatorConfig
from coordinator.protocol.transaction import Transaction
from coordinator.spark.writer import ExecutorInstant, SparkWriter, bad_input_in, stat_json, stats_from_json
from coordinator.write.writer import LocalWriter
from locks.base import LockProvider
from timeline.errors import BadInputError
from timeline.format.bootstrap_index import SourceMapping
from timeline.format.commit_metadata import WriteStat
from timeline.format.file_names import write_token
from timeline.format.source_file import FULL_BOOTSTRAP_INSTANT
from timeline.io.storage import Storage
from timeline.table import Table

FILES_SCHEMA = "partition string, path string, size long, mtime_ns long, rows long"
KEYS_ARROW = pa.schema([("partition", pa.string()), ("key", pa.string())])
KEYS_SCHEMA = "partition string, key string"
MADE_ARROW = pa.schema([("stat", pa.string()), ("mapping", pa.string())])
MADE_SCHEMA = "stat string, mapping string"


class SparkEngine:
    """`run.Engine` on a Spark session: one task per few source files."""

    def __init__(self, spark: SparkSession, config: CoordinatorConfig) -> None:
        self.spark = spark
        self.config = config
        self.record_key: list[str] = []

    def _files(self, files: list[ListedFile]):
        slices = max(1, min(len(files), self.spark.sparkContext.defaultParallelism * 4))
        return self.spark.createDataFrame([astuple(f) for f in files], FILES_SCHEMA).repartition(slices)

    def check_keys(self, storage: Storage, layout: SourceLayout, record_key: list[str]) -> None:
        self.record_key = record_key
        keyed = self._files(layout.files).mapInArrow(partial(keys_task, storage.base_uri, record_key), KEYS_SCHEMA)
        try:
            repeated = keyed.groupBy("partition", "key").count().filter(F.col("count") > 1).limit(SHOWN).collect()
        except Exception as err:  # noqa: BLE001 - Spark wraps what the executors raised
            bad = bad_input_in(err)
            if bad is None:
                raise
            raise bad from err
        if repeated:
            shown = "; ".join(
                f"{r['key']!r} {r['count']} times in {r['partition'] or 'the source'!r}" for r in repeated
            )
            raise BadInputError(f"record keys occur more than once in a partition of the source: {shown}")

    def skeletons(
        self, table: Table, txn: Transaction, storage: Storage, files: list[ListedFile]
    ) -> list[tuple[WriteStat, SourceMapping]]:
        task = partial(skeletons_task, table.uri, storage.base_uri, txn.time, self.record_key)
        made = self._files(files).mapInArrow(task, MADE_SCHEMA).collect()
        stats = stats_from_json([row["stat"] for row in made])
        return [(stat, SourceMapping(**json.loads(row["mapping"]))) for stat, row in zip(stats, made, strict=True)]

    def copy(
        self, table: Table, storage: Storage, layout: SourceLayout, files: list[ListedFile], lock: LockProvider | None
    ) -> list[WriteStat]:
        source_layout.unchanged(storage, files)  # on Spark, checked before the copy only
        schema = from_arrow_schema(layout.table_schema)
        rows = self._files(files).mapInArrow(partial(rows_task, storage.base_uri, layout), schema)
        writer = SparkWriter(self.spark, table, coordinator=self.config, lock=lock)
        return writer.write(rows, "bulk_insert", instant_time=FULL_BOOTSTRAP_INSTANT).metadata.write_stats()


def _listed(batches: Iterator[pa.RecordBatch]) -> Iterator[ListedFile]:
    for batch in batches:
        for row in batch.to_pylist():
            yield ListedFile(**row)


def keys_task(source_uri: str, record_key: list[str], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side of the key check: every row's (partition, record key)."""
    storage = Storage(source_uri)
    for source in _listed(batches):
        found = source_layout.read_keys(storage, source, record_key)
        partition = pa.repeat(pa.scalar(source.partition), len(found))
        yield from pa.Table.from_arrays([partition, found], schema=KEYS_ARROW).to_batches()


def skeletons_task(
    base_uri: str, source_uri: str, instant: str, record_key: list[str], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side of instant 01: a skeleton per source file routed here (this attempt's token in its name)."""
    table = Table.open(base_uri)
    storage = Storage(source_uri)
    writer = LocalWriter(table)
    sink = ExecutorInstant(table.storage, instant)
    context = TaskContext.get()
    token = write_token(context.partitionId(), context.stageId(), context.attemptNumber())
    stats, mappings = [], []
    for source in _listed(batches):
        found = source_layout.read_keys(storage, source, record_key)
        stat, mapping = write_skeleton(writer, sink, storage, source, found, context.partitionId(), token)
        stats.append(stat_json(stat))
        mappings.append(json.dumps(asdict(mapping)))
    yield pa.RecordBatch.from_pydict({"stat": stats, "mapping": mappings}, schema=MADE_ARROW)


def rows_task(source_uri: str, layout: SourceLayout, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side of instant 02: the rows of the full-record files routed here, in the table's schema."""
    yield from source_batches(Storage(source_uri), layout, list(_listed(batches)))
