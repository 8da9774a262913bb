"""Spark writes and reads every type the local writer does; float statistics never make a reader skip a row wrongly."""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.write.writer import LocalWriter, WriteOptions
from tests.conftest import hudi_read, rows_by_key
from timeline.errors import BadInputError
from timeline.format.meta_fields import META_COLUMNS
from timeline.query.reader import read_view
from timeline.table import Table

pytest.importorskip("pyspark")

POINT = pa.struct([("x", pa.float64()), ("label", pa.string()), ("inner", pa.struct([("n", pa.int32())]))])
ITEMS = pa.list_(pa.struct([("k", pa.string()), ("v", pa.int64())]))
TYPED = pa.schema(
    [
        ("id", pa.int64()),
        ("part", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ts_ntz", pa.timestamp("us")),
        ("day", pa.date32()),
        ("amount", pa.decimal128(12, 2)),
        ("blob", pa.binary()),
        ("small", pa.int16()),
        ("f32", pa.float32()),
        ("flag", pa.bool_()),
        ("point", POINT),
        ("tags", pa.list_(pa.string())),
        ("items", ITEMS),
        ("attrs", pa.map_(pa.string(), pa.float64())),
    ]
)


@pytest.fixture(scope="module")
def spark():
    from coordinator.spark.session import local_session

    session = local_session("tandem-types")
    yield session
    session.stop()


def typed_rows(ids: list[int], version: int) -> pa.Table:
    """Every type, with values that catch a shifted time zone, a truncated fraction or a lost sign."""
    start = datetime(2024, 3, 31, 0, 59, 59, 123456, tzinfo=timezone.utc)  # an hour before Europe's DST jump
    rows = [
        {
            "id": i,
            "part": "a" if i % 2 else "b",
            "ts": start + timedelta(hours=i, microseconds=version),
            "ts_ntz": datetime(2024, 3, 31, 2, 30, 0, 654321) + timedelta(days=i),  # a wall time DST skips
            "day": date(1969, 12, 31) + timedelta(days=i * version),
            "amount": Decimal(f"-{i}{version}.05"),
            "blob": bytes([i, 0, 255, version]),
            "small": -i,
            "f32": i + 0.5,
            "flag": i % 3 == 0,
            "point": {"x": i / 4, "label": f"p{version}", "inner": {"n": version}},
            "tags": [f"t{i}", None] if i % 2 else [],
            "items": [{"k": "a", "v": i * version}] if i % 3 else None,
            "attrs": [("w", i / 8), ("z", -0.0)] if i % 2 else None,
        }
        for i in ids
    ]
    return pa.Table.from_pylist(rows, schema=TYPED)


def data_rows(table: pa.Table) -> list[dict]:
    return rows_by_key(table.drop_columns([c for c in META_COLUMNS if c in table.column_names]), ["id"])


def test_spark_and_local_writers_store_every_type_alike_for_every_reader(spark, tmp_path: Path) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from coordinator.spark.reader import read_table
    from coordinator.spark.writer import SparkWriter

    steps = [("insert", typed_rows(list(range(6)), 1)), ("upsert", typed_rows([1, 4, 6, 7], 2))]
    expected: dict[int, dict] = {}
    for _, rows in steps:
        expected.update({r["id"]: r for r in rows.to_pylist()})
    local = Table.create(str(tmp_path / "local"), "typed", ["id"], ["part"])
    spark_written = Table.create(str(tmp_path / "spark"), "typed", ["id"], ["part"])
    for operation, rows in steps:
        LocalWriter(local).write(rows, operation)
        frame = spark.createDataFrame(rows, schema=from_arrow_schema(rows.schema))  # naive: TimestampNTZ
        SparkWriter(spark, spark_written).write(frame, operation)

    want = [expected[k] for k in sorted(expected)]
    for table in (local, spark_written):
        readers = {
            "local": read_view(table, table.view()),
            "spark": read_table(spark, table.uri).toArrow(),
            "hudi": hudi_read(table.uri),
        }
        for reader, rows in readers.items():
            got = data_rows(rows)
            if reader == "hudi":  # it has no wall-clock type: the same digits come back labelled UTC
                assert {str(r["ts_ntz"].tzinfo) for r in got} == {"UTC"}
                got = [{**r, "ts_ntz": r["ts_ntz"].replace(tzinfo=None)} for r in got]
            assert got == want, f"{table.uri} read by {reader}"
            assert got[0]["ts"].utcoffset() == timedelta(0) and got[0]["ts_ntz"].tzinfo is None, reader
    spark_file = spark_written.view().latest_base_files()[0]
    columns = {c.name: c for c in pq.ParquetFile(spark_written.storage.full(spark_file.path)).schema}
    assert "isAdjustedToUTC=true, timeUnit=microseconds" in str(columns["ts"].logical_type)
    assert "isAdjustedToUTC=false, timeUnit=microseconds" in str(columns["ts_ntz"].logical_type)
    assert columns["small"].physical_type == "INT32" and columns["amount"].logical_type.type == "DECIMAL"


def test_spark_writer_applies_the_schema_rules_before_any_task_runs(spark, tmp_path: Path) -> None:
    from coordinator.spark.reader import read_table
    from coordinator.spark.writer import SparkWriter

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"])
    writer = SparkWriter(spark, table)
    writer.write(spark.createDataFrame([(1, "ams", 10)], "id long, city string, v int"), "insert")
    writer.write(spark.createDataFrame([(2, "ber")], "id long, city string"), "upsert")
    files_before = sorted(f.path for f in table.view().latest_base_files())
    with pytest.raises(BadInputError, match=r"column 'v': the table has int32, the input has string"):
        writer.write(spark.createDataFrame([(3, "ams", "xyz")], "id long, city string, v string"), "insert")
    assert sorted(f.path for f in table.view().latest_base_files()) == files_before
    writer.write(spark.createDataFrame([(4, "lis", 2.5)], "id long, city string, v double"), "insert")
    rows = {r["id"]: r["v"] for r in read_table(spark, table.uri).toArrow().to_pylist()}
    assert rows == {1: 10.0, 2: None, 4: 2.5}
    assert {r["id"]: r["v"] for r in hudi_read(table.uri).to_pylist()} == rows


def test_spark_takes_input_files_with_nanosecond_timestamps(spark, tmp_path: Path) -> None:
    """pandas writes nanoseconds, which Spark's parquet reader refuses; the local writer stores them as micros."""
    from coordinator.spark.inputs import read_input_frame
    from coordinator.spark.writer import SparkWriter

    path = tmp_path / "in.parquet"
    wall = datetime(2024, 3, 31, 2, 30, 0, 654321)
    nanos = {"ts": pa.array([wall], pa.timestamp("ns")), "at": pa.array([wall], pa.timestamp("ns", tz="UTC"))}
    pq.write_table(pa.table({"id": [1], **nanos}), path)
    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    SparkWriter(spark, table).write(read_input_frame(spark, str(path)), "insert")
    (row,) = read_view(table, table.view()).to_pylist()
    assert row["ts"] == wall and row["at"] == wall.replace(tzinfo=timezone.utc)
    pq.write_table(pa.table({"id": [2], "ts": pa.array([1], pa.timestamp("ns"))}), path)
    with pytest.raises(BadInputError, match=r"column 'ts': cannot write timestamp\[ns\] values as timestamp\[us\]"):
        read_input_frame(spark, str(path))


def test_one_csv_or_json_file_makes_one_schema_whichever_engine_reads_it(spark, tmp_path: Path) -> None:
    from coordinator.spark.inputs import read_input_frame
    from coordinator.spark.writer import SparkWriter
    from coordinator.write.input_files import read_input

    (tmp_path / "in.csv").write_text("id,when,amount\n1,2024-03-31 02:30:00,1.5\n")
    (tmp_path / "in.jsonl").write_text('{"id": 2, "when": "2024-03-31T02:30:00", "amount": 2.5}\n')
    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    for name in ("in.csv", "in.jsonl"):
        path = str(tmp_path / name)
        LocalWriter(table).write(read_input(path), "upsert")
        SparkWriter(spark, table).write(read_input_frame(spark, path), "upsert")
    rows = read_view(table, table.view()).select(["id", "when", "amount"]).to_pylist()
    wall = datetime(2024, 3, 31, 2, 30)
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": 1, "when": wall, "amount": 1.5},
        {"id": 2, "when": wall, "amount": 2.5},
    ]


SPECIAL = [math.nan, 1.0, -0.0, -0.0, math.inf, None, 0.0, 2.0, math.nan, math.nan, None, None, -math.inf, 3.0]
FILTERS = [
    "f64 > 5",
    "f64 = CAST('NaN' AS DOUBLE)",
    "f64 = 0",
    "f64 <= 0",
    "f64 < 0",
    "f64 >= 1",
    "f64 IN (0, 3)",
    "f64 IS NULL",
    "f32 > 5",
    "f32 = 0",
    "s.x > 5",
    "s.x = 0",
]


def test_float_statistics_never_make_spark_pushdown_drop_a_row(spark, tmp_path: Path) -> None:
    """Row groups of two values each: pyarrow's min/max would leave NaN out and keep -0.0 apart from 0.0."""
    import duckdb

    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    rows = pa.table(
        {
            "id": list(range(len(SPECIAL))),
            "f64": pa.array(SPECIAL, pa.float64()),
            "f32": pa.array(SPECIAL, pa.float32()),
            "s": pa.array([{"x": v} for v in SPECIAL], pa.struct([("x", pa.float64())])),
        }
    )
    LocalWriter(table, WriteOptions(row_group_size=2)).write(rows, "insert")
    (written,) = table.view().latest_base_files()
    path = table.storage.full(written.path)
    spark.conf.set("spark.sql.parquet.filterPushdown", "true")
    frame = spark.read.parquet(f"file://{path}")
    for where in FILTERS:
        pushed = sorted(r["id"] for r in frame.where(where).select("id").collect())
        sql = sorted(r[0] for r in duckdb.sql(f"SELECT id FROM rows WHERE {where}").fetchall())
        assert pushed == sql, where
    assert sorted(r[0] for r in duckdb.sql("SELECT id FROM rows WHERE f64 = 0").fetchall()) == [2, 3, 6]
    metadata = pq.ParquetFile(path).metadata
    assert metadata.num_row_groups == len(SPECIAL) // 2, "small row groups, or nothing could be skipped"
    chunks = {metadata.row_group(0).column(c).path_in_schema: metadata.row_group(0).column(c) for c in range(5, 9)}
    assert chunks["id"].is_stats_set and not any(chunks[c].is_stats_set for c in ("f64", "f32", "s.x"))
    assert not any("DICTIONARY" in e for c in ("f64", "f32", "s.x") for e in chunks[c].encodings)
