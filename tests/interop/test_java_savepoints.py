"""Savepoints shared with Java Hudi 0.15: a savepoint Tandem makes is one Java's `show_savepoints` lists and Java's
cleaner and archiver honour (its files survive Java's most aggressive clean, and both read the savepointed
instant as it was); a savepoint Java makes is one Tandem lists and whose files Tandem's clean and archival keep."""

from __future__ import annotations

import pyarrow as pa

from coordinator.config import CoordinatorConfig
from coordinator.protocol import savepoint
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import archive_table, clean
from coordinator.write.writer import LocalWriter
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

OPTIONS = {
    "hoodie.table.name": "sp",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.hive_style_partitioning": "true",
}
JAVA_CLEANS_HARD = {  # Java's inline clean after every commit, one file version kept; archival soon
    "hoodie.clean.automatic": "true",
    "hoodie.clean.max.commits": "1",
    "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
    "hoodie.cleaner.fileversions.retained": "1",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
}
TANDEM_CLEANS_HARD = CoordinatorConfig(
    lock_uri="memory",
    clean_policy="KEEP_LATEST_FILE_VERSIONS",
    file_versions_retained=1,
    commits_retained=1,
    archive_min_commits=2,
    archive_max_commits=3,
)


def _batch(ids: list[int], version: int) -> pa.Table:
    return pa.table({"id": ids, "p": [f"p{i % 2}" for i in ids], "v": [version] * len(ids), "ts": [version] * len(ids)})


def _tandem(path: str, as_of: str | None = None) -> dict[int, int]:
    rows = read_plan(plan_scan(Table.open(path), as_of=as_of))
    return {r["id"]: r["v"] for r in rows.select(["id", "v"]).to_pylist()}


def _java(java_hudi, path: str, as_of: str | None = None) -> dict[int, int]:
    rows = java_hudi.read(path, "as_of", as_of=as_of) if as_of else java_hudi.read(path)
    return {r["id"]: r["v"] for r in rows.select(["id", "v"]).to_pylist()}


def test_java_honours_a_savepoint_tandem_made(java_hudi, tmp_path):
    path = str(tmp_path / "t")
    table = Table.create(path, "sp", ["id"], ["p"], hive_style=True, precombine_field="ts")
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory"))
    first = writer.write(_batch([1, 2, 3, 4], 1), "upsert").instant
    made = savepoint.create(table, first, "tandem", "known good")
    java_hudi.sql(f"CREATE TABLE IF NOT EXISTS sp USING hudi LOCATION '{path}'")
    try:
        listed = java_hudi.sql("CALL show_savepoints(table => 'sp')")
    finally:
        java_hudi.sql("DROP TABLE sp")
    assert [row["savepoint_time"] for row in listed] == [first]
    for version in range(2, 7):
        java_hudi.write(path, _batch([1, 2, 3, 4], version), "upsert", {**OPTIONS, **JAVA_CLEANS_HARD})
    timeline = Table.open(path).timeline()
    assert any(i.action == "clean" for i in timeline.completed()), "Java cleaned"
    present = {f.name for f in Table.open(path).storage_view().all_base_files()}
    assert made.names <= present
    assert timeline.earliest_time() <= first, "Java's archival passed the savepoint"
    assert _java(java_hudi, path, as_of=first) == _tandem(path, as_of=first) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert _java(java_hudi, path) == _tandem(path) == {1: 6, 2: 6, 3: 6, 4: 6}


def test_tandem_honours_a_savepoint_java_made(java_hudi, tmp_path):
    path = str(tmp_path / "t")
    java_hudi.write(path, _batch([1, 2, 3], 1), "upsert", OPTIONS, mode="overwrite")
    first = Table.open(path).timeline().completed_writes()[-1].time
    java_hudi.sql(f"CREATE TABLE IF NOT EXISTS sp2 USING hudi LOCATION '{path}'")
    try:
        java_hudi.sql(f"CALL create_savepoint(table => 'sp2', commit_time => '{first}', user => 'java')")
    finally:
        java_hudi.sql("DROP TABLE sp2")
    table = Table.open(path)
    (found,) = savepoint.listed(table)
    assert found.time == first and found.by == "java" and found.names
    writer = LocalWriter(table, coordinator=TANDEM_CLEANS_HARD)
    for version in range(2, 8):
        writer.write(_batch([1, 2, 3], version), "upsert")
        clean(table, TANDEM_CLEANS_HARD)
        archive_table(table, TANDEM_CLEANS_HARD, table_lock(table, TANDEM_CLEANS_HARD))
    present = {f.name for f in Table.open(path).storage_view().all_base_files()}
    assert found.names <= present
    assert Table.open(path).timeline().earliest_time() <= first
    assert _tandem(path, as_of=first) == _java(java_hudi, path, as_of=first) == {1: 1, 2: 1, 3: 1}


def test_javas_incremental_clean_takes_a_deleted_savepoints_files(java_hudi, tmp_path):
    """Tandem's cleans record `savepointed_timestamps` as Java's do: once the savepoint is deleted, Java's
    incremental cleaner scans its partitions again, though no commit since touched them, and takes its files."""
    path = str(tmp_path / "t")
    table = Table.create(path, "sp", ["id"], ["p"], hive_style=True, precombine_field="ts")
    by_commits = CoordinatorConfig(lock_uri="memory", clean_policy="KEEP_LATEST_COMMITS", commits_retained=1)
    writer = LocalWriter(table, coordinator=by_commits)
    saved = writer.write(_batch([1, 2], 1), "upsert").instant
    made = savepoint.create(table, saved)
    for version in (2, 3):
        writer.write(_batch([1, 2], version), "upsert")
    writer.write(_batch([2], 4), "upsert")  # p0 only from here on
    writer.write(_batch([2], 5), "upsert")
    assert clean(table, by_commits)
    odd = {name for name in made.names if "p=p1" in _dir_of(table, name)}
    assert odd and odd <= _base_names(path), "the savepoint kept its p1 file"
    savepoint.delete(table, saved)
    java_cleans = {**OPTIONS, "hoodie.clean.automatic": "true", "hoodie.clean.max.commits": "1",
                   "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS", "hoodie.cleaner.commits.retained": "1"}  # fmt: skip
    for version in (6, 7):
        java_hudi.write(path, _batch([2], version), "upsert", java_cleans)
    assert not odd & _base_names(path), "Java's incremental clean scanned the deleted savepoint's partition"
    assert _java(java_hudi, path) == _tandem(path) == {1: 3, 2: 7}


def _base_names(path: str) -> set[str]:
    return {f.name for f in Table.open(path).storage_view().all_base_files()}


def _dir_of(table: Table, name: str) -> str:
    return next(f.partition for f in table.storage_view().all_base_files() if f.name == name)
