"""`tandem sync --glue` (Hudi's meta sync to AWS Glue) against a real Glue endpoint (moto's server): through random
sequences of commits the catalog holds the table's columns and partitions after every sync, a write's `--sync-glue`
keeps it in step, schema changes Hudi's sync takes appear and the ones it refuses are refused with the column named
and nothing changed, and a sync never puts an older state over a newer one.

Oracle: the table itself (its schema as Tandem reads it, its partitions as its view lists them) mapped by an
independent statement of Hudi's rules (docs/hudi-catalog-sync-format.md), not by the code under test."""

from __future__ import annotations

import json
import random
import uuid

import boto3
import pyarrow as pa
import pytest

from coordinator.catalog.glue import GlueCatalog
from coordinator.catalog.sync import SchemaSyncError, sync
from coordinator.config import CoordinatorConfig
from coordinator.protocol import restore, savepoint
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import recover_table
from coordinator.write.writer import LocalWriter
from tests.conftest import tandem
from timeline.crash_points import SimulatedCrash, simulate
from timeline.errors import ConflictError
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

CONFIG = CoordinatorConfig(lock_uri="memory")
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]  # fmt: skip
HIVE = {pa.int64(): "bigint", pa.int32(): "int", pa.float64(): "double", pa.float32(): "float", pa.string(): "string"}


@pytest.fixture
def glue(moto, aws_env, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", moto.url)
    return boto3.client("glue", endpoint_url=moto.url, region_name="us-east-1")


def _database() -> str:
    return f"db_{uuid.uuid4().hex[:10]}"


def _rows(ids: list[int], version: int, day: int | None = None, extra: dict | None = None) -> pa.Table:
    columns = {"id": ids, "day": [f"d{day if day is not None else i % 4}" for i in ids], "v": [version] * len(ids)}
    return pa.table({**columns, **(extra or {})})


def _catalog_state(glue, database: str, name: str) -> tuple[list[tuple[str, str]], set[str], dict]:
    table = glue.get_table(DatabaseName=database, Name=name)["Table"]
    columns = [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]]
    pages = glue.get_paginator("get_partitions").paginate(DatabaseName=database, TableName=name)
    values = {p["Values"][0] for page in pages for p in page["Partitions"]}
    return columns, values, table


def _expected(table: Table) -> tuple[list[tuple[str, str]], set[str]]:
    """Hudi's rules, stated apart from the code: meta columns first as strings, then the data columns in the
    table's order without the partition column; one partition per live partition folder, its value after `=`."""
    schema = read_plan(plan_scan(table)).schema
    data = [(f.name, HIVE[f.type]) for f in schema if f.name not in META and f.name != "day"]
    return [(m, "string") for m in META] + data, {p.split("=", 1)[1] for p in table.view().partitions()}


@pytest.mark.parametrize("seed", [1, 4, 5])  # seeds whose restores drop partitions
def test_glue_holds_the_tables_columns_and_partitions_through_random_commits(glue, tmp_path, seed):
    rng = random.Random(seed)
    database = _database()
    table = Table.create(str(tmp_path / "t"), "events", ["id"], ["day"], hive_style=True)
    writer = LocalWriter(table, coordinator=CONFIG)
    extra: dict[str, pa.DataType] = {}
    dropped = 0
    for version in range(1, 15):
        op = rng.choice(["insert", "upsert", "upsert", "delete", "insert_overwrite", "new_column", "restore"])
        ids = rng.sample(range(40), rng.randint(1, 6))
        day = rng.randint(0, 6) if op in ("insert", "insert_overwrite") else None
        if op == "restore":  # to the savepoint of an earlier commit: the partitions begun since go
            saved = savepoint.listed(table)
            if saved:
                restore.restore(table, saved[-1].time)
                extra = {k: v for k, v in extra.items() if k in read_plan(plan_scan(table)).schema.names}
            op, day = "insert", rng.randint(0, 6)
        if op == "new_column":
            extra[f"c{version}"] = rng.choice([pa.int64(), pa.string(), pa.float64()])
            op = "upsert"
        columns = {name: pa.array([None] * len(ids), kind) for name, kind in extra.items()}
        result = writer.write(_rows(ids, version, day, columns), op)
        if rng.random() < 0.3 and not savepoint.listed(table):
            savepoint.create(table, result.instant)
        if rng.random() < 0.6:
            report = sync(table, GlueCatalog(), database)
            dropped += report.dropped_partitions
            columns_now, partitions_now, stored = _catalog_state(glue, database, "events")
            assert (columns_now, partitions_now) == _expected(table)
            assert stored["Parameters"]["last_commit_time_sync"] == report.synced
            assert table.timeline().completed_writes()[-1].time == report.synced
    sync(table, GlueCatalog(), database)
    assert _catalog_state(glue, database, "events")[:2] == _expected(table)
    assert dropped, "a restore dropped a partition the catalog had"


def test_the_catalog_table_is_what_hudis_sync_writes(glue, tmp_path):
    database = _database()
    table = Table.create(str(tmp_path / "t"), "Events", ["id"], ["day"], hive_style=True)
    LocalWriter(table, coordinator=CONFIG).write(_rows([1, 2], 1), "insert")
    sync(table, GlueCatalog(), database)
    _, _, stored = _catalog_state(glue, database, "events")  # lower case, as Hudi names it
    sd = stored["StorageDescriptor"]
    assert sd["InputFormat"] == "org.apache.hudi.hadoop.HoodieParquetInputFormat"
    assert sd["OutputFormat"] == "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
    assert sd["SerdeInfo"]["SerializationLibrary"] == "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    assert sd["Location"] == f"file:{table.uri}" == sd["SerdeInfo"]["Parameters"]["path"]
    assert stored["PartitionKeys"] == [{"Name": "day", "Type": "string"}]
    params = stored["Parameters"]
    assert params["spark.sql.sources.provider"] == "hudi" and params["EXTERNAL"] == "TRUE"
    spark = json.loads(params["spark.sql.sources.schema.part.0"])
    assert [f["name"] for f in spark["fields"]][-1] == "day"  # partition columns last, as Spark orders them
    assert params["spark.sql.sources.schema.partCol.0"] == "day"


def test_a_merge_on_read_table_gets_hudis_three_tables(glue, tmp_path):
    database = _database()
    table = Table.create(str(tmp_path / "t"), "m", ["id"], ["day"], hive_style=True, table_type="MERGE_ON_READ")
    LocalWriter(table, coordinator=CONFIG).write(_rows([1, 2], 1), "insert")
    report = sync(table, GlueCatalog(), database)
    assert sorted(report.tables) == ["m", "m_ro", "m_rt"]
    formats = {n: _catalog_state(glue, database, n)[2]["StorageDescriptor"] for n in report.tables}
    assert formats["m_ro"]["InputFormat"].endswith(".HoodieParquetInputFormat")
    assert formats["m_rt"]["InputFormat"].endswith(".realtime.HoodieParquetRealtimeInputFormat")
    assert formats["m"]["InputFormat"] == formats["m_rt"]["InputFormat"]
    assert formats["m_ro"]["SerdeInfo"]["Parameters"]["hoodie.query.as.ro.table"] == "true"


@pytest.mark.parametrize(
    ("first", "then", "taken"),
    [
        (pa.int32(), pa.int64(), True),
        (pa.float32(), pa.float64(), True),
        (pa.int32(), pa.float64(), False),  # Tandem widens these; Hudi's sync refuses them
        (pa.int64(), pa.float64(), False),
        (pa.decimal128(10, 2), pa.decimal128(12, 2), False),
    ],
)
def test_a_column_type_change_syncs_exactly_when_hudis_sync_takes_it(glue, tmp_path, first, then, taken):
    database = _database()
    table = Table.create(str(tmp_path / "t"), "w", ["id"], ["day"], hive_style=True)
    writer = LocalWriter(table, coordinator=CONFIG)
    writer.write(_rows([1], 1, extra={"x": pa.array([1], first)}), "insert")
    sync(table, GlueCatalog(), database)
    before = _catalog_state(glue, database, "w")
    writer.write(_rows([2], 2, extra={"x": pa.array([2], then)}), "upsert")
    assert read_plan(plan_scan(table)).schema.field("x").type == then  # Tandem took the change
    if taken:
        sync(table, GlueCatalog(), database)
        assert _catalog_state(glue, database, "w")[:2] == _expected(table)
    else:
        with pytest.raises(SchemaSyncError, match="x "):
            sync(table, GlueCatalog(), database)
        assert _catalog_state(glue, database, "w")[:2] == before[:2]
        refused = tandem("sync", table.uri, "--glue", database)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "x " in refused.stderr


def test_a_write_syncs_after_its_commit_and_a_failed_sync_keeps_the_commit(glue, moto, tmp_path):
    database = _database()
    path = str(tmp_path / "t")
    assert (
        tandem("init", path, "--name", "w", "--record-key", "id", "--partition-by", "day", "--hive-style").returncode
        == 0
    )
    source = tmp_path / "rows.csv"
    source.write_text("id,day,v\n1,d1,1\n2,d2,1\n")
    done = tandem("write", path, "--input", str(source), "--operation", "upsert", "--sync-glue", database,
                  "--glue-endpoint", moto.url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _catalog_state(glue, database, "w")[1] == {"d1", "d2"}
    source.write_text("id,day,v\n3,d3,2\n")
    failed = tandem("write", path, "--input", str(source), "--operation", "upsert", "--sync-glue", database,
                    "--glue-endpoint", "http://127.0.0.1:9")  # fmt: skip
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1
    committed = Table.open(path).timeline().completed_writes()[-1].time
    assert f"committed {committed}" in failed.stderr and "tandem sync" in failed.stderr
    assert {r["id"] for r in read_plan(plan_scan(Table.open(path))).to_pylist()} == {1, 2, 3}
    assert tandem("sync", path, "--glue", database).returncode == 0
    assert _catalog_state(glue, database, "w")[1] == {"d1", "d2", "d3"}


def test_a_sync_never_puts_an_older_state_over_a_newer_one(glue, tmp_path):
    database = _database()
    table = Table.create(str(tmp_path / "t"), "n", ["id"], ["day"], hive_style=True)
    writer = LocalWriter(table, coordinator=CONFIG)
    writer.write(_rows([1], 1, day=1), "insert")
    old_copy = tmp_path / "old"
    import shutil

    shutil.copytree(table.uri, old_copy)
    writer.write(_rows([2], 2, day=2), "insert")
    sync(table, GlueCatalog(), database)
    report = sync(Table.open(str(old_copy)), GlueCatalog(), database, name="n", location=f"file:{table.uri}")
    assert report.newer_in_catalog == ["n"]
    assert _catalog_state(glue, database, "n")[1] == {"d1", "d2"}


def test_a_sync_right_after_a_restore_takes_the_restored_state_and_none_runs_mid_restore(glue, tmp_path):
    database = _database()
    table = Table.create(str(tmp_path / "t"), "r", ["id"], ["day"], hive_style=True)
    writer = LocalWriter(table, coordinator=CONFIG)
    kept = writer.write(_rows([1], 1, day=1), "insert").instant
    savepoint.create(table, kept)
    writer.write(_rows([2], 2, day=2).append_column("extra", pa.array(["x"])), "insert")
    sync(table, GlueCatalog(), database)
    assert _catalog_state(glue, database, "r")[1] == {"d1", "d2"}
    with pytest.raises(SimulatedCrash), simulate("restore.mdt"):
        restore.restore(table, kept)
    with pytest.raises(ConflictError, match="restore is pending"):
        sync(table, GlueCatalog(), database)
    assert _catalog_state(glue, database, "r")[1] == {"d1", "d2"}
    recover_table(table, CONFIG, table_lock(table, CONFIG))
    report = sync(table, GlueCatalog(), database)  # no write since: the restore is the newest state
    assert report.newer_in_catalog == [] and report.dropped_partitions == 1
    assert _catalog_state(glue, database, "r")[1] == {"d1"}
