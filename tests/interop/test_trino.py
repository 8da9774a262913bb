"""A real Trino (476, its Hudi connector, RFC-40) reads Tandem's tables where users find them: registered in AWS Glue
by `tandem sync`, stored on S3 (moto's server for both), and returns exactly the rows Tandem's reader returns.

Classes: random histories on copy-on-write tables, partitioned and not (inserts, upserts, deletes,
insert_overwrite, cleans, archival, a write killed after its metadata-table commit), read whole and through
random filters on partition and data columns; every type Tandem writes; merge-on-read tables (Trino 476 reads
their base files only, on every table Hudi's sync makes: it is compared with Tandem's read-optimized read); a
column added and synced. Oracle: Tandem's own reader, itself judged against Java Hudi and hudi-rs elsewhere.

Trino 476 lists storage: its `hudi.metadata-enabled` is a defunct setting there (docs/design.md, "Trino").
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from coordinator.catalog.glue import GlueCatalog
from coordinator.catalog.sync import sync
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import archive_table, clean
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.interop.test_java_savepoints import TANDEM_CLEANS_HARD
from timeline.crash_points import SimulatedCrash, simulate
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

CONFIG = TANDEM_CLEANS_HARD  # one file version kept, archival after a few commits
FILTERS = ["day = 'd1'", "v > 4", "day IN ('d0', 'd2') AND v <= 6", "id % 3 = 0", "name LIKE 'n1%'"]


@pytest.fixture
def lake(trino, s3_base, monkeypatch):
    """(a fresh S3 table base, its Glue database, the Glue client of the endpoint Trino reads)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", trino.endpoint)
    return s3_base, f"lake_{uuid.uuid4().hex[:10]}", GlueCatalog(trino.endpoint)


def _batch(ids: list[int], version: int, partitioned: bool = True) -> pa.Table:
    columns = {"id": ids, "v": [version] * len(ids), "name": [f"n{i}" for i in ids]}
    if partitioned:
        columns["day"] = [f"d{i % 3}" for i in ids]
    return pa.table(columns)


def _tandem(table: Table, where: str | None = None, read_optimized: bool = False) -> list[tuple]:
    rows = read_plan(plan_scan(Table.open(table.uri), where, read_optimized=read_optimized))
    data = [c for c in rows.column_names if not c.startswith("_hoodie_")]
    return sorted(tuple(r[c] for c in sorted(data)) for r in rows.select(data).to_pylist())


def _trino(trino, database: str, name: str, columns: list[str], where: str | None = None) -> list[tuple]:
    sql = f"SELECT {', '.join(sorted(columns))} FROM {name}" + (f" WHERE {where}" if where else "")
    return sorted(tuple(row) for row in trino.query(sql, database))


@pytest.mark.parametrize(("seed", "partitioned"), [(1, True), (2, False)])
def test_trino_reads_what_tandem_reads_through_random_histories(trino, lake, seed, partitioned):
    base, database, catalog = lake
    rng = random.Random(seed)
    table = Table.create(base, "events", ["id"], ["day"] if partitioned else [], hive_style=True)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    lock = table_lock(table, CONFIG)
    columns = ["id", "v", "name"] + (["day"] if partitioned else [])
    writer.write(_batch(list(range(12)), 1, partitioned), "insert")
    for version in range(2, 9):
        op = rng.choice(["upsert", "upsert", "delete", "insert", "insert_overwrite", "killed"])
        ids = rng.sample(range(20), rng.randint(1, 5))
        if op == "killed":  # dies after its metadata-table commit: pending, never read
            with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
                writer.write(_batch(ids, version, partitioned), "upsert")
            writer = LocalWriter(Table.open(base), WriteOptions(small_file_limit=0), CONFIG)
        else:
            writer.write(_batch(ids, version, partitioned), op)
        clean(table, CONFIG)
        archive_table(table, CONFIG, lock)
        sync(table, catalog, database)
        assert _trino(trino, database, "events", columns) == _tandem(table)
    for where in FILTERS if partitioned else [f for f in FILTERS if "day" not in f]:
        assert _trino(trino, database, "events", columns, where) == _tandem(table, where), where


def test_trino_reads_every_type_tandem_writes(trino, lake):
    base, database, catalog = lake
    stamp = dt.datetime(2024, 5, 6, 7, 8, 9, 123000)  # Trino's Hudi connector reads milliseconds
    rows = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "i": pa.array([-5, None], pa.int32()),
            "f": pa.array([1.5, None], pa.float32()),
            "d": pa.array([2.25, -0.5], pa.float64()),
            "b": pa.array([True, False]),
            "s": pa.array(["é ü", None]),
            "bin": pa.array([b"\x00\xff", b""], pa.binary()),
            "day": pa.array([dt.date(2024, 1, 31), None], pa.date32()),
            "ts": pa.array([stamp, None], pa.timestamp("us")),
            "dec": pa.array([Decimal("12.34"), Decimal("-0.01")], pa.decimal128(10, 2)),
            "arr": pa.array([[1, 2], []], pa.list_(pa.int64())),
            "st": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int64()), ("b", pa.string())])),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
            "p": ["x", "y"],
        }
    )
    table = Table.create(base, "typed", ["id"], ["p"], hive_style=True)
    LocalWriter(table, coordinator=CONFIG).write(rows, "insert")
    sync(table, catalog, database)
    found = trino.query("SELECT id, i, f, d, b, s, bin, day, ts, dec, arr, st, m, p FROM typed ORDER BY id", database)
    expected = rows.to_pylist()
    for got, want in zip(found, expected, strict=True):
        assert got[:10] == [want[k] for k in ("id", "i", "f", "d", "b", "s", "bin", "day", "ts", "dec")]
        assert got[10] == want["arr"]
        assert (None if got[11] is None else {"a": got[11][0], "b": got[11][1]}) == want["st"]
        assert got[12] == (dict(want["m"]) if want["m"] is not None else None)
        assert got[13] == want["p"]


def test_trino_reads_a_merge_on_read_tables_base_files_on_every_table_hudis_sync_makes(trino, lake):
    base, database, catalog = lake
    table = Table.create(base, "m", ["id"], ["day"], hive_style=True, table_type="MERGE_ON_READ")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(_batch(list(range(9)), 1), "insert")
    writer.write(_batch([1, 4, 20], 2), "upsert")  # logs over base files, and a new group
    report = sync(table, catalog, database)
    assert sorted(report.tables) == ["m", "m_ro", "m_rt"]
    columns = ["id", "v", "name", "day"]
    read_optimized = _tandem(table, read_optimized=True)
    assert read_optimized != _tandem(table)  # the logs matter
    for name in report.tables:  # Trino 476 merges no log: its snapshot of a merge-on-read table is read-optimized
        assert _trino(trino, database, name, columns) == read_optimized, name


def test_a_column_added_by_a_write_is_read_by_trino_after_the_sync(trino, lake):
    base, database, catalog = lake
    table = Table.create(base, "grow", ["id"], ["day"], hive_style=True)
    writer = LocalWriter(table, coordinator=CONFIG)
    writer.write(_batch([1, 2], 1), "insert")
    sync(table, catalog, database)
    writer.write(_batch([3], 2).append_column("extra", pa.array(["new"])), "upsert")
    sync(table, catalog, database)
    found = trino.query("SELECT id, extra FROM grow ORDER BY id", database)
    assert found == [[1, None], [2, None], [3, "new"]]
