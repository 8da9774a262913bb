"""Restores shared with Java Hudi 0.15, on both table types: Java reads a table Tandem restored as the savepointed
instant (metadata table on and off); Tandem reads a table Java restored (Java's `rollback_to_savepoint` on a
Tandem table, with Tandem's savepoint) as that instant and writes on; and Tandem restores a table Java wrote to
Java's savepoint."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from chaos.checker import check_table
from coordinator.config import CoordinatorConfig
from coordinator.protocol import restore, savepoint
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import archive_table, compact_data
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.coordinator.test_connectors import hudi_rows
from tests.coordinator.test_restore import CONFIG as RANDOM
from tests.coordinator.test_restore import random_history
from tests.coordinator.test_savepoints import batch as random_batch
from tests.coordinator.test_savepoints import rows_at
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

CONFIG = CoordinatorConfig(lock_uri="memory")
ARCHIVING = CoordinatorConfig(lock_uri="memory", archive_min_commits=2, archive_max_commits=3, commits_retained=1)
OPTIONS = {
    "hoodie.table.name": "rs",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.hive_style_partitioning": "true",
}


def _batch(ids: list[int], version: int) -> pa.Table:
    return pa.table({"id": ids, "p": [f"p{i % 2}" for i in ids], "v": [version] * len(ids), "ts": [version] * len(ids)})


def _tandem(path: str) -> dict[int, int]:
    rows = read_plan(plan_scan(Table.open(path)))
    return {r["id"]: r["v"] for r in rows.select(["id", "v"]).to_pylist()}


def _java(java_hudi, path: str, metadata: bool = True) -> dict[int, int]:
    rows = java_hudi.read(path, metadata=metadata)
    return {r["id"]: r["v"] for r in rows.select(["id", "v"]).to_pylist()}


def _sql(java_hudi, path: str, call: str) -> list[dict]:
    java_hudi.sql(f"CREATE TABLE IF NOT EXISTS rs USING hudi LOCATION '{path}'")
    try:
        return java_hudi.sql(call)
    finally:
        java_hudi.sql("DROP TABLE rs")


def _tandem_table(path: str) -> tuple[Table, str]:
    table = Table.create(path, "rs", ["id"], ["p"], hive_style=True, precombine_field="ts")
    writer = LocalWriter(table, coordinator=CONFIG)
    writer.write(_batch([1, 2, 3], 1), "insert")
    kept = writer.write(_batch([1], 2), "upsert").instant
    savepoint.create(table, kept)
    writer.write(_batch([2, 4], 3), "upsert")
    writer.write(_batch([3], 4), "delete")
    return table, kept


AT_SAVEPOINT = {1: 2, 2: 1, 3: 1}


def test_java_reads_a_table_tandem_restored(java_hudi, tmp_path):
    table, kept = _tandem_table(str(tmp_path / "t"))
    restore.restore(table, kept)
    assert _tandem(table.uri) == AT_SAVEPOINT
    assert _java(java_hudi, table.uri) == _java(java_hudi, table.uri, metadata=False) == AT_SAVEPOINT
    LocalWriter(Table.open(table.uri), coordinator=CONFIG).write(_batch([5], 5), "upsert")
    assert _java(java_hudi, table.uri) == _tandem(table.uri) == {**AT_SAVEPOINT, 5: 5}


def test_tandem_reads_and_writes_on_a_table_java_restored(java_hudi, tmp_path):
    table, kept = _tandem_table(str(tmp_path / "t"))
    _sql(java_hudi, table.uri, f"CALL rollback_to_savepoint(table => 'rs', instant_time => '{kept}')")
    assert _java(java_hudi, table.uri) == _tandem(table.uri) == AT_SAVEPOINT
    LocalWriter(Table.open(table.uri), coordinator=CONFIG).write(_batch([5], 5), "upsert")
    expected = {**AT_SAVEPOINT, 5: 5}
    assert _tandem(table.uri) == _java(java_hudi, table.uri) == expected
    rows = {str(k): {"id": k, "p": f"p{k % 2}", "v": v, "ts": v} for k, v in expected.items()}
    assert check_table(Table.open(table.uri), "id", rows, use_hudi=False) == []


def test_tandem_restores_a_table_java_wrote_to_javas_savepoint(java_hudi, tmp_path):
    path = str(tmp_path / "t")
    java_hudi.write(path, _batch([1, 2, 3], 1), "upsert", OPTIONS, mode="overwrite")
    java_hudi.write(path, _batch([1], 2), "upsert", OPTIONS)
    kept = Table.open(path).timeline().completed_writes()[-1].time
    _sql(java_hudi, path, f"CALL create_savepoint(table => 'rs', commit_time => '{kept}')")
    java_hudi.write(path, _batch([2, 4], 3), "upsert", OPTIONS)
    table = Table.open(path)
    restore.restore(table, kept)
    assert _tandem(path) == _java(java_hudi, path) == _java(java_hudi, path, metadata=False) == AT_SAVEPOINT


def _tandem_mor_table(path: str) -> tuple[Table, str]:
    """A merge-on-read history whose restore takes every kind of undo: logs in a kept slice (command blocks), a
    new group's base file, a completed compaction's slice and the logs written into it."""
    table = Table.create(path, "rs", ["id"], ["p"], hive_style=True, precombine_field="ts", table_type="MERGE_ON_READ")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(_batch([1, 2, 3], 1), "insert")
    kept = writer.write(_batch([1], 2), "upsert").instant
    savepoint.create(table, kept)
    writer.write(_batch([2, 4], 3), "upsert")
    writer.write(_batch([3], 4), "delete")
    assert compact_data(table, CONFIG, table_lock(table, CONFIG), force=True)
    writer.write(_batch([1, 5], 5), "upsert")
    return table, kept


def test_java_reads_a_merge_on_read_table_tandem_restored(java_hudi, tmp_path):
    table, kept = _tandem_mor_table(str(tmp_path / "t"))
    restored = restore.restore(table, kept)
    assert _tandem(table.uri) == AT_SAVEPOINT
    assert _java(java_hudi, table.uri) == _java(java_hudi, table.uri, metadata=False) == AT_SAVEPOINT
    LocalWriter(Table.open(table.uri), coordinator=CONFIG).write(_batch([2, 6], 6), "upsert")
    expected = {**AT_SAVEPOINT, 2: 6, 6: 6}
    assert _java(java_hudi, table.uri) == _java(java_hudi, table.uri, metadata=False) == _tandem(table.uri) == expected
    savepoint.delete(table, kept)  # then archival passes the removed instants: only command blocks hide their blocks
    for version in range(7, 13):
        LocalWriter(Table.open(table.uri), coordinator=ARCHIVING).write(_batch([6], version), "upsert")
        archive_table(table, ARCHIVING, table_lock(table, ARCHIVING))
    assert table.timeline().earliest_write_time() > restored  # every removed instant is older than the timeline
    expected[6] = 12
    assert _java(java_hudi, table.uri) == _java(java_hudi, table.uri, metadata=False) == _tandem(table.uri) == expected


def test_tandem_reads_a_merge_on_read_table_java_restored(java_hudi, tmp_path):
    table, kept = _tandem_mor_table(str(tmp_path / "t"))
    _sql(java_hudi, table.uri, f"CALL rollback_to_savepoint(table => 'rs', instant_time => '{kept}')")
    assert _java(java_hudi, table.uri) == _tandem(table.uri) == AT_SAVEPOINT
    LocalWriter(Table.open(table.uri), coordinator=CONFIG).write(_batch([2, 6], 6), "upsert")
    expected = {**AT_SAVEPOINT, 2: 6, 6: 6}
    assert _tandem(table.uri) == _java(java_hudi, table.uri) == expected
    rows = {str(k): {"id": k, "p": f"p{k % 2}", "v": v, "ts": v} for k, v in expected.items()}
    assert check_table(Table.open(table.uri), "id", rows, use_hudi=False) == []


def test_tandem_restores_a_merge_on_read_table_java_wrote(java_hudi, tmp_path):
    path = str(tmp_path / "t")
    options = {**OPTIONS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    java_hudi.write(path, _batch([1, 2, 3], 1), "upsert", options, mode="overwrite")
    java_hudi.write(path, _batch([1], 2), "upsert", options)
    kept = Table.open(path).timeline().completed_writes()[-1].time
    _sql(java_hudi, path, f"CALL create_savepoint(table => 'rs', commit_time => '{kept}')")
    java_hudi.write(path, _batch([2, 4], 3), "upsert", options)
    java_hudi.write(path, _batch([3], 4), "delete", options)
    table = Table.open(path)
    restore.restore(table, kept)
    assert _tandem(path) == _java(java_hudi, path) == _java(java_hudi, path, metadata=False) == AT_SAVEPOINT


@pytest.mark.parametrize(("table_type", "seed"), [("COPY_ON_WRITE", 4), ("MERGE_ON_READ", 8)])
def test_random_savepoint_clean_archival_restore_histories_read_alike_in_java_hudi_rs_and_tandem(
    java_hudi, tmp_path, table_type, seed
):
    """Random writes (upserts, deletes, inserts, insert_overwrite; compactions, some left pending, on
    merge-on-read), savepoints, the most aggressive clean and archival, then a restore to a random savepoint
    and more of the same: after each phase Java (metadata table on and off), hudi-rs (copy-on-write: it merges
    no merge-on-read table without a precombine field the way Java does) and Tandem read the model, and every
    savepoint kept reads as the model at it, by time travel, in Java and Tandem."""
    rng = random.Random(seed)
    path = str(tmp_path / "t")
    table = Table.create(path, "rs", ["id"], ["p"], precombine_field="ts", table_type=table_type, hive_style=True)
    LocalWriter(table, coordinator=RANDOM).write(random_batch([0, 1, 2], 1), "insert")
    model: dict[int, int] = {0: 1, 1: 1, 2: 1}
    kept: dict[str, dict[int, int]] = {}
    random_history(table, rng, 14, model, kept)
    _three_readers_agree(java_hudi, table, model, kept)
    assert kept, "the seed savepoints something"
    target = rng.choice(sorted(kept))
    for later in [t for t in kept if t > target]:
        savepoint.delete(table, later)
        del kept[later]
    restore.restore(table, target)
    model = dict(kept[target])
    _three_readers_agree(java_hudi, table, model, kept)
    random_history(table, rng, 6, model, kept)
    _three_readers_agree(java_hudi, table, model, kept)


def _three_readers_agree(java_hudi, table: Table, model: dict[int, int], kept: dict[str, dict[int, int]]) -> None:
    path = table.uri
    assert _tandem(path) == model
    assert _java(java_hudi, path) == _java(java_hudi, path, metadata=False) == model
    if not table.config.merge_on_read:
        rows = hudi_rows(path).select(["id", "v"]).to_pylist()
        assert {r["id"]: r["v"] for r in rows} == model
    for saved, at in kept.items():
        java_at = java_hudi.read(path, "as_of", as_of=saved).select(["id", "v"]).to_pylist()
        assert {r["id"]: r["v"] for r in java_at} == rows_at(path, saved) == at, saved
