"""Hudi's read-optimized query of a merge-on-read table (`hoodie.datasource.query.type=read_optimized`): the
latest base files alone, no log merged. Java Hudi 0.15 and Tandem's `read_optimized` read the same rows, before
a compaction (the logs' updates not seen) and after it (folded into the base files)."""

from __future__ import annotations

import pyarrow as pa

from coordinator.config import CoordinatorConfig
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import compact_data
from coordinator.write.writer import LocalWriter, WriteOptions
from tandem import api
from timeline.table import Table

CONFIG = CoordinatorConfig(lock_uri="memory", auto_archive=False)
READ_OPTIMIZED = {"hoodie.datasource.query.type": "read_optimized"}


def _batch(ids: list[int], values: list[int]) -> pa.Table:
    return pa.table({"id": ids, "p": [f"p{i % 2}" for i in ids], "v": values, "ts": values})


def _rows(data: pa.Table) -> dict[int, int]:
    return {r["id"]: r["v"] for r in data.select(["id", "v"]).to_pylist()}


def test_read_optimized_reads_base_files_alone_as_java_does(java_hudi, tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type="MERGE_ON_READ")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(_batch([1, 2, 3, 4], [1, 1, 1, 1]), "insert")
    writer.write(_batch([1, 2], [5, 5]), "upsert")
    writer.write(_batch([3], [0]), "delete")
    before = _rows(api.read(table.uri, read_optimized=True))
    assert before == {1: 1, 2: 1, 3: 1, 4: 1}, "the logs' updates and deletes are not merged"
    assert _rows(api.read(table.uri)) == {1: 5, 2: 5, 4: 1}
    assert _rows(java_hudi.read(table.uri, options=READ_OPTIMIZED)) == before
    compact_data(table, CONFIG, table_lock(table, CONFIG), force=True)
    after = _rows(api.read(table.uri, read_optimized=True))
    assert after == {1: 5, 2: 5, 4: 1}
    assert _rows(java_hudi.read(table.uri, options=READ_OPTIMIZED)) == after
