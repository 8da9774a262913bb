"""PySpark in local mode: coordinated writes by the executors, MDT-backed reads, S3, retried tasks."""

from __future__ import annotations

import json
import os
import random
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chaos.checker import check_table
from tests.conftest import hudi_read, rows_by_key, tandem
from timeline.query.scan import plan_scan
from timeline.table import Table

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark(moto):
    """One local session for the module; the S3 settings are in place before the JVM starts,
    so the Python workers it forks inherit them."""
    os.environ.update(
        AWS_ENDPOINT_URL_S3=moto.url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    from coordinator.spark.session import local_session

    session = local_session("tandem-tests")
    yield session
    session.stop()


def _rows(ids: list[int], version: int) -> list[dict]:
    return [{"id": i, "city": ["ams", "ber", "lis"][i % 3], "v": float(version), "ts": version} for i in ids]


def _apply(expected: dict, rows: list[dict], operation: str) -> None:
    if operation == "delete":
        for row in rows:
            expected.pop(row["id"], None)
    elif operation == "insert_overwrite":
        cities = {r["city"] for r in rows}
        for key in [k for k, r in expected.items() if r["city"] in cities]:
            del expected[key]
        expected.update({r["id"]: r for r in rows})
    else:
        expected.update({r["id"]: r for r in rows})


def _keyed(expected: dict[int, dict]) -> dict[str, dict]:
    """The checker's form: rows by the key as a string."""
    return {str(k): row for k, row in expected.items()}


def _spark_rows(df) -> list[dict]:
    return rows_by_key(pa.Table.from_pylist([r.asDict() for r in df.collect()]), ["id"])


def test_every_operation_through_spark_matches_every_reader(spark, tmp_path: Path) -> None:
    from coordinator.spark.reader import read_table
    from coordinator.spark.writer import SparkWriter

    table = Table.create(str(tmp_path / "t"), "trips", ["id"], ["city"], hive_style=True, precombine_field="ts")
    writer = SparkWriter(spark, table)
    expected: dict[int, dict] = {}
    rng = random.Random(3)
    steps = [
        ("insert", _rows(list(range(300)), 1)),
        ("upsert", _rows(rng.sample(range(300), 40) + list(range(300, 330)), 2)),
        ("delete", _rows(rng.sample(range(330), 25), 3)),
        ("bulk_insert", _rows(list(range(400, 450)), 4)),
        ("insert_overwrite", _rows(list(range(1000, 1030, 3)), 5)),
    ]
    instants = []
    for operation, rows in steps:
        result = writer.write(spark.createDataFrame(rows), operation)
        instants.append(result.instant)
        _apply(expected, rows, operation)
        assert check_table(table, "id", _keyed(expected)) == []
        snapshot = _spark_rows(read_table(spark, table.uri))
        assert [r["id"] for r in snapshot] == sorted(expected)
        assert [r["v"] for r in snapshot] == [expected[k]["v"] for k in sorted(expected)]
    upsert_stats = table.timeline().commit_metadata(table.timeline().find(instants[1])).write_stats()
    assert any(s.prev_commit == instants[0] for s in upsert_stats), "updates rewrite existing file groups"
    assert sorted(r["id"] for r in hudi_read(table.uri).to_pylist()) == sorted(expected)


def test_a_merge_on_read_table_through_spark_matches_every_reader(spark, tmp_path: Path) -> None:
    """Executors write each group's updates and deletes as a log of its slice; Spark's readers (read_table on the
    executors, format("tandem")) merge them as the local reader does, before and after a compaction."""
    from coordinator.config import CoordinatorConfig
    from coordinator.protocol.locking import table_lock
    from coordinator.services.steps import compact_data
    from coordinator.spark.reader import read_table
    from coordinator.spark.writer import SparkWriter
    from coordinator.write.writer import WriteOptions
    from timeline.format.data_logs import parse_data_log

    table = Table.create(
        str(tmp_path / "t"), "trips", ["id"], ["city"], precombine_field="ts", table_type="MERGE_ON_READ"
    )
    small = WriteOptions(small_file_limit=0)  # every update goes to a log
    writer = SparkWriter(spark, table, small)
    expected: dict[int, dict] = {}
    rng = random.Random(5)
    steps = [
        ("insert", _rows(list(range(200)), 1)),
        ("upsert", _rows(rng.sample(range(200), 30) + list(range(200, 220)), 2)),
        ("delete", _rows(rng.sample(range(220), 20), 3)),
        ("upsert", _rows(rng.sample(range(220), 30), 4)),
    ]
    logs = 0
    for n, (operation, rows) in enumerate(steps):
        result = writer.write(spark.createDataFrame(rows), operation)
        assert table.timeline().find(result.instant).action == "deltacommit"
        logs += sum(1 for p in result.files_written if parse_data_log(*p.rsplit("/", 1)))
        _apply(expected, rows, operation)
        if n == 2:
            config = CoordinatorConfig(lock_uri="memory")
            assert compact_data(table, config, table_lock(table, config), force=True)
        assert check_table(table, "id", _keyed(expected)) == []
        for df in (read_table(spark, table.uri), spark.read.format("tandem").load(table.uri)):
            snapshot = _spark_rows(df)
            assert [r["id"] for r in snapshot] == sorted(expected)
            assert [r["v"] for r in snapshot] == [expected[k]["v"] for k in sorted(expected)]
    assert logs >= 3, "updates and deletes went to log files"


def test_upsert_tops_up_small_file_groups_and_spills_past_the_target_size(spark, tmp_path: Path) -> None:
    from coordinator.spark.writer import SparkWriter
    from coordinator.write.writer import WriteOptions

    table = Table.create(str(tmp_path / "t"), "trips", ["id"], ["city"], hive_style=True)
    expected: dict[int, dict] = {}
    groups = []
    for operation, ids in (("insert", range(30)), ("upsert", range(25, 60))):
        rows = _rows(list(ids), 1)
        SparkWriter(spark, table).write(spark.createDataFrame(rows), operation)
        _apply(expected, rows, operation)
        groups.append(len(table.view().latest_base_files()))
    assert groups[0] >= 3 and groups[1] == groups[0], "the upsert's new records went into the small groups"
    one_file = pq.read_table(table.storage.full(table.view().latest_base_files()[0].path))
    tight = WriteOptions(max_file_size=one_file.nbytes * 2)
    rows = _rows(list(range(100, 400)), 2)
    result = SparkWriter(spark, table, options=tight).write(spark.createDataFrame(rows), "upsert")
    _apply(expected, rows, "upsert")
    stats = result.metadata.write_stats()
    assert {s.prev_commit != "null" for s in stats} == {True, False}, "topped up old groups, spilled into new ones"
    assert sum(s.num_inserts for s in stats) == 300 and sum(s.num_update_writes for s in stats) == 0
    assert len(table.view().latest_base_files()) > 3
    assert check_table(table, "id", _keyed(expected)) == []


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_inserts_top_up_small_file_groups_as_the_local_writer_does(spark, tmp_path: Path, table_type: str) -> None:
    """A Spark insert routes the rows of each partition with a small group to one task that tops it up; on
    merge-on-read a stored key starts a new group. Same layout and rows as the local writer's."""
    from coordinator.spark.writer import SparkWriter
    from coordinator.write.writer import LocalWriter
    from timeline.query.reader import read_view

    steps = [list(range(30)), [*range(30, 45), 3]]  # the second insert repeats key 3 (ams): a second copy
    layouts, contents = [], []
    for engine in ("spark", "local"):
        table = Table.create(str(tmp_path / engine), "trips", ["id"], ["city"], table_type=table_type)
        for n, ids in enumerate(steps):
            rows = _rows(ids, n)
            if engine == "spark":
                frame = spark.createDataFrame(rows).coalesce(1)  # one task: as many new groups as the local writer
                result = SparkWriter(spark, table).write(frame, "insert")
            else:
                result = LocalWriter(table).write(pa.Table.from_pylist(rows), "insert")
        topped = {s.partition_path for s in result.metadata.write_stats() if s.prev_commit != "null"}
        assert topped == {"ams", "ber", "lis"}, "the second insert topped up every partition's group"
        files = table.view().latest_base_files()
        layouts.append(sorted((f.partition, f.instant == result.instant) for f in files))
        for f in files:
            keys = pq.read_table(table.storage.full(f.path), columns=["id"]).column(0).to_pylist()
            assert table_type == "COPY_ON_WRITE" or len(keys) == len(set(keys)), f"{f.path} holds a key twice"
        read = read_view(table, table.view()).to_pylist()
        contents.append(sorted((r["id"], r["v"]) for r in read))
    assert layouts[0] == layouts[1]
    assert contents[0] == contents[1] == sorted([(i, 0.0) for i in range(30)] + [(i, 1.0) for i in steps[1]])
    new_groups = 1 if table_type == "MERGE_ON_READ" else 0
    assert len(layouts[0]) == 3 + new_groups


def test_reads_prune_partitions_travel_in_time_and_read_incrementally(spark, tmp_path: Path) -> None:
    from coordinator.spark.reader import read_table, spark_filter
    from coordinator.spark.writer import SparkWriter

    table = Table.create(str(tmp_path / "t"), "trips", ["id"], ["city"], hive_style=True)
    writer = SparkWriter(spark, table)
    first = writer.write(spark.createDataFrame(_rows(list(range(60)), 1)), "insert").instant
    second = writer.write(spark.createDataFrame(_rows([0, 1, 2, 100], 2)), "upsert").instant
    third = writer.write(spark.createDataFrame(_rows([3, 101], 3)), "upsert").instant

    kept = {s.partition for s in plan_scan(table, spark_filter("city = 'ber'")).splits}
    assert kept == {"city=ber"}
    assert plan_scan(table, spark_filter("v > 1")).pruned_by_partition == 0  # a data column
    berlin = _spark_rows(read_table(spark, table.uri, where="city = 'ber'"))
    assert {r["city"] for r in berlin} == {"ber"} and len(berlin) == 21  # 20 inserted, id 100 upserted

    as_of_first = _spark_rows(read_table(spark, table.uri, as_of=first))
    assert len(as_of_first) == 60 and {r["v"] for r in as_of_first} == {1.0}

    changed = _spark_rows(read_table(spark, table.uri, since=first, until=second))
    assert [r["id"] for r in changed] == [0, 1, 2, 100]
    latest_changes = _spark_rows(read_table(spark, table.uri, since=second))
    assert [(r["id"], r["_hoodie_commit_time"]) for r in latest_changes] == [(3, third), (101, third)]


def test_spark_writes_and_reads_an_s3_table(spark, moto) -> None:
    import boto3

    from coordinator.spark.reader import read_table
    from coordinator.spark.writer import SparkWriter

    bucket = f"tandem-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto.url).create_bucket(Bucket=bucket)
    base = f"s3://{bucket}/trips"
    table = Table.create(base, "trips", ["id"], ["city"], hive_style=True)
    lock = f"dynamodb://spark-locks?region=us-east-1&endpoint={moto.url}"
    from coordinator.config import CoordinatorConfig

    writer = SparkWriter(spark, table, coordinator=CoordinatorConfig(lock_uri=lock))
    writer.write(spark.createDataFrame(_rows(list(range(30)), 1)), "insert")
    writer.write(spark.createDataFrame(_rows([5, 6, 40], 2)), "upsert")
    rows = _spark_rows(read_table(spark, base))
    assert [r["id"] for r in rows] == list(range(30)) + [40]
    assert {r["id"]: r["v"] for r in rows}[5] == 2.0
    expected = {r["id"]: r for r in _rows(list(range(30)), 1)}
    _apply(expected, _rows([5, 6, 40], 2), "upsert")
    assert check_table(Table.open(base), "id", _keyed(expected), use_hudi=False) == []


def test_a_retried_task_leaves_no_duplicate_file(tmp_path: Path) -> None:
    """The first task attempt dies after writing its file; the retry's file is the one committed."""
    base = tmp_path / "t"
    Table.create(str(base), "trips", ["id"], ["city"], hive_style=True)
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(_rows(list(range(90)), 1)), source)
    once = tmp_path / "crashed-once"
    env = {"TANDEM_CRASH_AT": "commit.write.file:1", "TANDEM_CRASH_ONCE": str(once)}
    done = tandem(
        "write", str(base), "--input", str(source), "--operation", "insert", "--engine", "spark", "--json", env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert once.exists(), "no task attempt died: the test exercised nothing"
    table = Table.open(str(base))
    committed = {s.path for s in table.timeline().commit_metadata(table.timeline().completed()[0]).write_stats()}
    on_disk = {str(p.relative_to(base)) for p in base.rglob("*.parquet")}
    assert on_disk == committed
    assert any(path.split("_")[1].endswith("-1") for path in committed), "the retry (attempt 1) wrote a file"
    assert json.loads(done.stdout)["files_written"] == len(committed)
    assert sorted(r["id"] for r in hudi_read(base).to_pylist()) == list(range(90))


def test_cli_reads_with_spark(tmp_path: Path) -> None:
    base = tmp_path / "t"
    Table.create(str(base), "trips", ["id"], ["city"], hive_style=True)
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(_rows(list(range(12)), 1)), source)
    assert tandem("write", str(base), "--input", str(source), "--operation", "insert").returncode == 0
    out = tmp_path / "out.parquet"
    done = tandem("read", str(base), "--engine", "spark", "--where", "city = 'lis'", "--output", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(pq.read_table(out).column("id").to_pylist()) == [2, 5, 8, 11]


def test_concurrent_spark_upserts_conflict_on_a_file_group_and_not_across_partitions(spark, tmp_path: Path) -> None:
    """B runs start to finish while A is between begin and its write: the commit check decides."""
    from coordinator.config import CoordinatorConfig
    from coordinator.spark.writer import SparkWriter
    from timeline.errors import ConflictError

    table = Table.create(str(tmp_path / "t"), "trips", ["id"], ["city"], hive_style=True)
    lazy = CoordinatorConfig(failed_writes_policy="LAZY")
    SparkWriter(spark, table, coordinator=lazy).write(spark.createDataFrame(_rows(list(range(30)), 1)), "insert")
    expected = {r["id"]: r for r in _rows(list(range(30)), 1)}

    def race(a_rows: list[dict], b_rows: list[dict]) -> None:
        def run_b(_: str) -> None:
            SparkWriter(spark, table, coordinator=lazy).write(spark.createDataFrame(b_rows), "upsert")
            _apply(expected, b_rows, "upsert")

        SparkWriter(spark, table, coordinator=lazy).write(spark.createDataFrame(a_rows), "upsert", on_begin=run_b)
        _apply(expected, a_rows, "upsert")

    with pytest.raises(ConflictError):
        race(_rows([1], 2), _rows([4], 3))  # ids 1 and 4: both in city 'ber', one file group
    assert check_table(table, "id", _keyed(expected)) == [], "the winner kept, the loser left nothing"
    race(_rows([0], 4), _rows([2], 5))  # 'ams' and 'lis': different partitions, both commit
    assert {expected[0]["v"], expected[2]["v"]} == {4.0, 5.0}
    assert check_table(table, "id", _keyed(expected)) == []


def test_a_spark_job_killed_mid_write_stage_leaves_nothing_visible(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from tests.conftest import wait_until

    base = tmp_path / "t"
    Table.create(str(base), "trips", ["id"], ["city"], hive_style=True)
    first = _rows(list(range(12)), 1)
    source = tmp_path / "first.parquet"
    pq.write_table(pa.Table.from_pylist(first), source)
    assert tandem("write", str(base), "--input", str(source), "--operation", "insert").returncode == 0
    update = tmp_path / "update.parquet"
    pq.write_table(pa.Table.from_pylist(_rows(list(range(6, 40)), 2)), update)
    env = {**os.environ, "TANDEM_LOCK": "file?lease_ms=2000", "TANDEM_PAUSE_AT": "commit.write.file"}
    job = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "write", str(base), "--input", str(update), "--operation", "upsert",
         "--engine", "spark"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    table = Table.open(str(base))
    try:
        wait_until(
            lambda: any(_pending_file(table, p) for p in base.rglob("*.parquet")),
            120,
            "an executor to write a file of the pending instant",
        )
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
    expected = {r["id"]: r for r in first}
    violations = check_table(table, "id", _keyed(expected))
    assert [v.invariant for v in violations] == ["3-no-orphans"], violations  # only the orphan: nothing visible
    done = tandem("recover", str(base))
    assert done.returncode == 0 and "rolled back" in done.stdout, done.stderr
    assert check_table(Table.open(str(base)), "id", _keyed(expected)) == []


def _pending_file(table: Table, path: Path) -> bool:
    """A data file of an instant that is on the timeline but not completed."""
    instant = path.stem.rsplit("_", 1)[1]
    found = table.timeline().find(instant)
    return found is not None and not found.is_completed


def test_keys_computed_by_spark_match_the_local_writer_and_null_keys_are_bad_input(spark, tmp_path: Path) -> None:
    """Composite keys from Spark's SQL expressions must be the keys the local writer makes, or upserts duplicate."""
    from coordinator.spark.writer import SparkWriter
    from coordinator.write.writer import LocalWriter
    from timeline.errors import BadInputError

    table = Table.create(str(tmp_path / "t"), "trips", ["id", "city"], ["city", "ts"], hive_style=False)
    rows = _rows(list(range(20)), 1)
    SparkWriter(spark, table).write(spark.createDataFrame(rows), "insert")
    LocalWriter(table).write(pa.Table.from_pylist(_rows([3, 4], 1)), "upsert")
    SparkWriter(spark, table).write(spark.createDataFrame(_rows([5], 1)), "upsert")
    keys_written = sorted(r["_hoodie_record_key"] for r in hudi_read(table.uri).to_pylist())
    assert len(keys_written) == 20 and keys_written[0].startswith("id:") and ",city:" in keys_written[0]
    with pytest.raises(BadInputError, match="'id' is null"):
        SparkWriter(spark, table).write(
            spark.createDataFrame(
                [{"id": None, "city": "ams", "v": 1.0, "ts": 1}], "id long, city string, v double, ts long"
            ),
            "upsert",
        )
    assert table.timeline().pending() == []


def test_the_public_face_writes_a_dataframe_by_the_executors_and_reads_one_back(spark, tmp_path: Path) -> None:
    import tandem

    table = tandem.create_table(str(tmp_path / "t"), "trips", record_key=["id"], partition_by=["city"])
    written = tandem.write(table, spark.createDataFrame(_rows(list(range(20)), 1)), "insert")
    assert written.files_written and written.rows_in == 20
    tandem.write(table, pa.Table.from_pylist(_rows([1, 2], 2)), "upsert")
    df = tandem.read_dataframe(spark, table.uri, where="v > 1")
    assert sorted(r["id"] for r in df.collect()) == [1, 2]
    old = tandem.read_dataframe(spark, table.uri, as_of=written.instant)
    assert old.count() == 20 and {r["v"] for r in old.collect()} == {1.0}


def test_a_bootstrap_on_the_executors_equals_the_local_one_and_spark_reads_it(spark, tmp_path: Path) -> None:
    """The Spark engine writes the skeletons (and copies the full-record partition) on the executors: the table
    reads as the source, through Spark's readers (read_table, format("tandem")) and Tandem's local one, with the
    same skeleton layout as the local engine's; a repeated key is refused by the executors' check."""
    from coordinator.bootstrap.run import BootstrapRequest, bootstrap
    from coordinator.config import CoordinatorConfig
    from coordinator.spark.bootstrap import SparkEngine
    from coordinator.spark.reader import read_table
    from tests.coordinator.test_bootstrap import table_rows, write_source

    source = str(tmp_path / "src")
    expected = sorted(write_source(source, {"city=a": [4, 0, 3], "city=b": [5], "city=c": [2]}), key=lambda r: r["id"])
    config = CoordinatorConfig(lock_uri="memory")
    regex = ".*=c"  # city=c copied (full record), the others metadata-only
    for target, engine in (("spark", SparkEngine(spark, config)), ("local", None)):
        request = BootstrapRequest(source, str(tmp_path / target), ["id"], mode_regex=regex, regex_mode="full_record")
        bootstrap(request, config, engine=engine)
        assert table_rows(str(tmp_path / target)) == expected
    spark_table = Table.open(str(tmp_path / "spark"))
    layout = {
        (f.partition, f.instant, f.source.path if f.source else None) for f in spark_table.view().latest_base_files()
    }
    local_table = Table.open(str(tmp_path / "local"))
    assert layout == {
        (f.partition, f.instant, f.source.path if f.source else None) for f in local_table.view().latest_base_files()
    }
    for df in (read_table(spark, spark_table.uri), spark.read.format("tandem").load(spark_table.uri)):
        assert sorted((r.asDict() for r in df.drop(*[c for c in df.columns if c.startswith("_hoodie")]).collect()),
                      key=lambda r: r["id"]) == expected  # fmt: skip
    pruned = read_table(spark, spark_table.uri, where="city = 'a' AND v > 0.5").select("id").collect()
    assert sorted(r["id"] for r in pruned) == [r["id"] for r in expected if r["city"] == "a" and (r["v"] or 0) > 0.5]
    pq.write_table(pq.read_table(f"{source}/city=a/part-00000.parquet"), f"{source}/city=a/part-00009.parquet")
    from timeline.errors import BadInputError

    with pytest.raises(BadInputError, match="more than once"):
        bootstrap(BootstrapRequest(source, str(tmp_path / "again"), ["id"]), config, engine=SparkEngine(spark, config))
    assert not (tmp_path / "again").exists()
