"""A record is (record key, partition path) under the simple index, its key alone under the global one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.write.writer import LocalWriter
from tests.conftest import hudi_read, tandem
from timeline.errors import BadInputError
from timeline.query.reader import read_view
from timeline.table import Table

GLOBAL = {"hoodie.index.type": "GLOBAL_SIMPLE"}
GLOBAL_STAY = {"hoodie.index.type": "global_simple", "hoodie.simple.index.update.partition.path": "false"}


def indexed(settings: dict[str, str]) -> CoordinatorConfig:
    """The coordinator with index settings given by their Hudi names, as `--set` gives them."""
    return CoordinatorConfig.from_hudi(settings)


def batch(rows: list[tuple[int, str, int, str]]) -> pa.Table:
    """(id, city, ts, value) rows."""
    ids, cities, stamps, values = (list(c) for c in zip(*rows, strict=True))
    return pa.table({"id": ids, "city": cities, "ts": stamps, "v": values})


def records(table: Table) -> list[tuple]:
    """(id, partition path, city, v) of every record, as our reader and the `hudi` package both see it."""
    ours = read_view(table, table.view()).to_pylist()
    theirs = hudi_read(table.uri).to_pylist()
    seen = sorted((r["id"], r["_hoodie_partition_path"], r["city"], r["v"]) for r in ours)
    assert seen == sorted((r["id"], r["_hoodie_partition_path"], r["city"], r["v"]) for r in theirs)
    return seen


@pytest.fixture
def table(tmp_path: Path) -> Table:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], precombine_field="ts")
    LocalWriter(table).write(batch([(1, "ams", 0, "old-ams"), (2, "ber", 0, "old-ber")]), "insert")
    return table


def test_an_upsert_batch_keeps_the_same_key_in_two_partitions(table: Table) -> None:
    rows = [(1, "ams", 2, "ams-new"), (1, "ber", 1, "ber-first"), (1, "ams", 1, "ams-stale"), (1, "ber", 1, "ber-last")]
    result = LocalWriter(table).write(batch(rows), "upsert")
    assert records(table) == [(1, "ams", "ams", "ams-new"), (1, "ber", "ber", "ber-last"), (2, "ber", "ber", "old-ber")]
    stats = result.metadata.write_stats()
    assert sum(s.num_update_writes for s in stats) == 1 and sum(s.num_inserts for s in stats) == 1


def test_a_delete_removes_the_key_in_its_own_partition_only(table: Table) -> None:
    LocalWriter(table).write(batch([(1, "ber", 1, "ber")]), "insert")
    LocalWriter(table).write(batch([(1, "ams", 2, "-")]), "delete")
    assert records(table) == [(1, "ber", "ber", "ber"), (2, "ber", "ber", "old-ber")]


def test_the_global_index_moves_a_record_whose_partition_changed(table: Table) -> None:
    writer = LocalWriter(table, coordinator=indexed(GLOBAL))
    result = writer.write(batch([(1, "lis", 1, "moved"), (2, "ber", 1, "same"), (2, "ams", 0, "older")]), "upsert")
    assert records(table) == [(1, "lis", "lis", "moved"), (2, "ber", "ber", "same")]
    stats = result.metadata.write_stats()
    assert sum(s.num_deletes for s in stats) == 1 and sum(s.num_inserts for s in stats) == 1
    writer.write(batch([(1, "ams", 0, "-")]), "delete")
    assert records(table) == [(2, "ber", "ber", "same")]


def test_the_global_index_can_keep_a_record_in_its_old_partition(table: Table) -> None:
    LocalWriter(table, coordinator=indexed(GLOBAL_STAY)).write(batch([(1, "lis", 1, "stayed")]), "upsert")
    assert records(table) == [(1, "ams", "lis", "stayed"), (2, "ber", "ber", "old-ber")]
    assert not any(f.partition == "lis" for f in table.view().latest_base_files())


def test_the_index_settings_come_through_set(table: Table, tmp_path: Path) -> None:
    path = tmp_path / "move.parquet"
    pq.write_table(batch([(2, "lis", 1, "moved")]), path)
    write = ["write", table.uri, "--input", str(path), "--operation", "upsert"]
    refused = tandem(*write, "--set", "hoodie.index.type=HBASE")
    assert refused.returncode == 2 and "hoodie.index.type='HBASE' (one of SIMPLE" in refused.stderr
    assert tandem(*write, "--set", "hoodie.index.type=GLOBAL_SIMPLE").returncode == 0
    assert records(table) == [(1, "ams", "ams", "old-ams"), (2, "lis", "lis", "moved")]
    with pytest.raises(BadInputError, match="not a valid bool"):
        CoordinatorConfig.from_hudi({"hoodie.simple.index.update.partition.path": "maybe"})


def test_spark_writer_keys_records_alike(table: Table, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from coordinator.spark.session import local_session
    from coordinator.spark.writer import SparkWriter

    rows = [(1, "ams", 2, "ams-new"), (1, "ber", 1, "ber"), (1, "ams", 1, "ams-stale"), (3, "lis", 1, "new")]
    spark = local_session("tandem-identity")
    try:
        SparkWriter(spark, table).write(spark.createDataFrame(batch(rows)), "upsert")
        simple = [(1, "ams", "ams", "ams-new"), (1, "ber", "ber", "ber"), (2, "ber", "ber", "old-ber")]
        assert records(table) == [*simple, (3, "lis", "lis", "new")]
        stay = batch([(2, "ams", 1, "kept")])
        SparkWriter(spark, table, coordinator=indexed(GLOBAL_STAY)).write(spark.createDataFrame(stay), "upsert")
        assert records(table) == [*simple[:2], (2, "ber", "ams", "kept"), (3, "lis", "lis", "new")]
        moves = batch([(1, "lis", 3, "both moved"), (3, "ams", 0, "moved"), (3, "ber", 1, "moved last")])
        SparkWriter(spark, table, coordinator=indexed(GLOBAL)).write(spark.createDataFrame(moves), "upsert")
    finally:
        spark.stop()
    assert records(table) == [
        (1, "lis", "lis", "both moved"),
        (2, "ber", "ams", "kept"),
        (3, "ber", "ber", "moved last"),
    ]
