"""Schema evolution on write: missing columns are nulls, new ones are added, types only widen, the rest is refused."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.write.writer import LocalWriter
from tests.conftest import FIXTURE_NAMES, hudi_read, tandem, unzip_fixture
from timeline.errors import BadInputError
from timeline.format.meta_fields import META_COLUMNS
from timeline.query.reader import read_view
from timeline.table import Table


def read_rows(table: Table) -> list[dict]:
    rows = read_view(table, table.view())
    return sorted(rows.drop_columns(META_COLUMNS).to_pylist(), key=lambda r: r["id"])


def commit_schema(table: Table) -> pa.Schema:
    from timeline.format.avro_schema import avro_to_arrow

    timeline = table.timeline()
    return avro_to_arrow(timeline.commit_metadata(timeline.completed_writes()[-1]).schema)


def test_a_column_given_another_type_is_refused_and_the_table_stays_readable(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    assert tandem("init", base, "--name", "t", "--record-key", "id", "--partition-by", "city").returncode == 0
    batches = [
        {"id": [1, 2], "city": ["ams", "ber"], "v": pa.array([10, 20], pa.int64())},
        {"id": [3], "city": ["ams"]},
        {"id": [4], "city": ["ber"], "v": ["xyz"]},
    ]
    results = []
    for i, batch in enumerate(batches):
        path = tmp_path / f"in{i}.parquet"
        pq.write_table(pa.table(batch), path)
        results.append(tandem("write", base, "--input", str(path), "--operation", "insert"))
    assert [r.returncode for r in results] == [0, 0, 2]
    refusal = results[2].stderr
    assert refusal.count("\n") == 1 and "column 'v': the table has int64, the input has string" in refusal
    table = Table.open(base)
    expected = [
        {"id": 1, "city": "ams", "v": 10},
        {"id": 2, "city": "ber", "v": 20},
        {"id": 3, "city": "ams", "v": None},
    ]
    assert read_rows(table) == expected
    assert sorted(hudi_read(base).select(["id", "city", "v"]).to_pylist(), key=lambda r: r["id"]) == expected
    assert tandem("read", base).returncode == 0
    (missing,) = [f for f in table.view().latest_base_files() if f.instant == table.timeline().completed()[1].time]
    assert pq.read_schema(table.storage.full(missing.path)).field("v").type == pa.int64()


def test_a_widened_column_rewrites_no_file_and_reads_as_the_wide_type(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table)
    writer.write(pa.table({"id": [1, 2], "p": ["a", "b"], "v": pa.array([1, 2], pa.int32())}), "insert")
    narrow = {f.path: f for f in table.view().latest_base_files()}
    writer.write(pa.table({"id": [3], "p": ["c"], "v": pa.array([2**40], pa.int64())}), "insert")
    writer.write(pa.table({"id": [4], "p": ["c"], "v": [2.5]}), "insert")
    assert commit_schema(table).field("v").type == pa.float64()
    assert {f.path for f in table.view().latest_base_files()} >= set(narrow), "older files stay as they are"
    assert {pq.read_schema(table.storage.full(p)).field("v").type for p in narrow} == {pa.int32()}
    expected = [{"id": 1, "p": "a", "v": 1.0}, {"id": 2, "p": "b", "v": 2.0}]
    expected += [{"id": 3, "p": "c", "v": float(2**40)}, {"id": 4, "p": "c", "v": 2.5}]
    assert read_rows(table) == expected
    assert sorted(hudi_read(table.uri).select(["id", "p", "v"]).to_pylist(), key=lambda r: r["id"]) == expected

    writer.write(pa.table({"id": [1], "p": ["a"], "v": pa.array([7], pa.int32())}), "upsert")
    rewritten = [f for f in table.view().latest_base_files() if f.partition == "a"]
    assert [pq.read_schema(table.storage.full(f.path)).field("v").type for f in rewritten] == [pa.float64()]
    assert read_rows(table)[0] == {"id": 1, "p": "a", "v": 7.0}


def test_stored_longs_past_a_doubles_precision_read_and_rewrite_rounded_after_widening(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table)
    writer.write(pa.table({"id": [1, 2], "p": ["a", "a"], "v": [2**53 + 1, 5]}), "insert")
    writer.write(pa.table({"id": [3], "p": ["b"], "v": [0.5]}), "insert")
    with pytest.raises(BadInputError, match="column 'v': cannot write int64 values as double"):
        writer.write(pa.table({"id": [4], "p": ["b"], "v": [2**53 + 1]}), "insert")
    assert [r["v"] for r in read_rows(table)] == [float(2**53), 5.0, 0.5]
    writer.write(pa.table({"id": [2], "p": ["a"], "v": [6]}), "upsert")
    assert [r["v"] for r in read_rows(table)] == [float(2**53), 6.0, 0.5]


def test_new_columns_are_appended_and_missing_ones_are_nulls_of_the_table_type(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    writer = LocalWriter(table)
    writer.write(pa.table({"id": [1], "when": pa.array([datetime(2024, 1, 1)], pa.timestamp("ns"))}), "insert")
    writer.write(pa.table({"extra": ["x"], "id": [2]}), "upsert")
    assert commit_schema(table).names == ["id", "when", "extra"]
    assert commit_schema(table).field("when").type == pa.timestamp("us")
    assert read_rows(table) == [
        {"id": 1, "when": datetime(2024, 1, 1), "extra": None},
        {"id": 2, "when": None, "extra": "x"},
    ]
    with pytest.raises(BadInputError, match=r"column 'when': cannot write timestamp\[ns\] values as timestamp\[us\]"):
        writer.write(pa.table({"id": [3], "when": pa.array([1_000_000_000_000_000_001], pa.timestamp("ns"))}), "insert")


def test_a_commit_schema_that_does_not_say_which_timestamps_are_wall_clock_follows_its_files(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    wall = datetime(2024, 3, 31, 2, 30)
    LocalWriter(table).write(pa.table({"id": [1], "at": pa.array([wall], pa.timestamp("us"))}), "insert")
    (instant,) = table.timeline().completed_writes()
    commit = Path(table.uri) / ".hoodie" / instant.file_name
    commit.write_text(commit.read_text().replace(',\\"adjust-to-utc\\":false', ""))  # as Tandem wrote it before
    assert "adjust-to-utc" not in commit.read_text()
    LocalWriter(table).write(pa.table({"id": [2], "at": pa.array([wall], pa.timestamp("us"))}), "insert")
    assert read_rows(table) == [{"id": 1, "at": wall}, {"id": 2, "at": wall}]


D = pa.decimal128
ACCEPTED = [
    (pa.int32(), pa.int64(), pa.int64()),
    (pa.int64(), pa.int32(), pa.int64()),
    (pa.int32(), pa.int16(), pa.int32()),
    (pa.int32(), pa.float32(), pa.float32()),
    (pa.int64(), pa.float64(), pa.float64()),
    (pa.float32(), pa.float64(), pa.float64()),
    (pa.float64(), pa.int64(), pa.float64()),
    (pa.string(), pa.int64(), pa.string()),
    (pa.string(), pa.float64(), pa.string()),
    (pa.string(), pa.large_string(), pa.string()),
    (pa.binary(), pa.string(), pa.binary()),
    (pa.string(), pa.binary(), pa.string()),
    (D(10, 2), D(12, 3), D(12, 3)),
    (D(12, 3), D(10, 2), D(12, 3)),
    (pa.int32(), D(12, 2), D(12, 2)),
    (pa.int64(), D(21, 2), D(21, 2)),
    (pa.timestamp("us", tz="UTC"), pa.timestamp("ns", tz="Europe/Amsterdam"), pa.timestamp("us", tz="UTC")),
    (pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int64())]), pa.struct([("a", pa.int64())])),
    (pa.list_(pa.int32()), pa.large_list(pa.int64()), pa.list_(pa.int64())),
    (pa.map_(pa.string(), pa.float32()), pa.map_(pa.string(), pa.float64()), pa.map_(pa.string(), pa.float64())),
]
REFUSED = [
    (pa.int64(), pa.string()),
    (pa.float64(), pa.string()),
    (pa.date32(), pa.string()),
    (pa.string(), pa.date32()),
    (pa.int32(), pa.bool_()),
    (pa.int64(), D(12, 2)),
    (D(12, 2), D(12, 4)),
    (D(12, 2), pa.float64()),
    (pa.timestamp("us", tz="UTC"), pa.timestamp("us")),
    (pa.date32(), pa.timestamp("us")),
    (pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int32()), ("b", pa.string())])),
    (pa.struct([("a", pa.int32())]), pa.struct([("b", pa.int32())])),
    (pa.struct([("a", pa.int64())]), pa.struct([("a", pa.string())])),
    (pa.list_(pa.int64()), pa.int64()),
]


@pytest.mark.parametrize("table_type, incoming, result", ACCEPTED, ids=[f"{t}<-{i}" for t, i, _ in ACCEPTED])
def test_promotions_follow_hudi(table_type: pa.DataType, incoming: pa.DataType, result: pa.DataType) -> None:
    from timeline.format.schema_evolution import evolve

    table = pa.schema([("id", pa.int64()), ("c", table_type)])
    evolved = evolve(table, pa.schema([("c", incoming), ("id", pa.int64())]))
    assert evolved == pa.schema([("id", pa.int64()), ("c", result)])


@pytest.mark.parametrize("table_type, incoming", REFUSED, ids=[f"{t}<-{i}" for t, i in REFUSED])
def test_other_changes_are_bad_input_naming_the_column_and_both_types(
    table_type: pa.DataType, incoming: pa.DataType
) -> None:
    from timeline.format.schema_evolution import evolve

    with pytest.raises(BadInputError, match=r"^column 'c[^']*': the table has .+, the input has .+") as refused:
        evolve(pa.schema([("c", table_type)]), pa.schema([("c", incoming)]))
    assert "\n" not in str(refused.value)


def test_the_avro_schema_a_commit_records_reads_back_as_the_table_schema() -> None:
    from timeline.format.avro_schema import arrow_to_avro, avro_to_arrow
    from timeline.format.schema_evolution import canonical_schema

    schema = pa.schema(
        [
            ("i8", pa.int8()),
            ("u32", pa.uint32()),
            ("ts", pa.timestamp("ms", tz="UTC")),
            ("wall", pa.timestamp("ns")),
            ("d", D(7, 3)),
            ("s", pa.struct([("x", pa.float32()), ("tags", pa.list_(pa.string()))])),
            ("m", pa.map_(pa.string(), pa.struct([("b", pa.binary())]))),
        ]
    )
    recorded = arrow_to_avro(canonical_schema(schema), "t")  # writers record the evolved, canonical schema
    assert avro_to_arrow(recorded) == canonical_schema(schema)
    wall = json.loads(recorded)["fields"][3]["type"][1]
    assert wall == {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n != "v6_empty"])
def test_hudi_commit_schemas_read_as_their_files(tmp_path: Path, name: str) -> None:
    from timeline.format.avro_schema import avro_to_arrow
    from timeline.format.schema_evolution import canonical_schema

    table = Table.open(str(unzip_fixture(name, tmp_path)))
    timeline = table.timeline()
    for instant in timeline.completed_writes():
        metadata = timeline.commit_metadata(instant)
        (stat, *_) = metadata.write_stats()
        written = pq.read_schema(table.storage.full(stat.path))
        data = pa.schema([f for f in written if f.name not in META_COLUMNS])
        assert avro_to_arrow(metadata.schema) == canonical_schema(data)


def test_a_hudi_table_takes_a_batch_in_its_recorded_schema(tmp_path: Path) -> None:
    base = unzip_fixture("v6_nonpartitioned", tmp_path)
    table = Table.open(str(base))
    before = read_view(table, table.view())
    recorded = commit_schema(table)
    row = {k: v for k, v in before.slice(0, 1).to_pylist()[0].items() if k not in META_COLUMNS}
    row.update(id=99, decimalField=Decimal("1.5"))
    batch = pa.Table.from_pylist([row], schema=recorded).drop_columns(["longField"])
    narrow = batch.set_column(batch.schema.get_field_index("byteField"), "byteField", pa.array([7], pa.int8()))
    LocalWriter(table).write(narrow, "upsert")
    assert commit_schema(table) == recorded
    after = {r["id"]: r for r in read_view(table, table.view()).to_pylist()}
    assert after[99]["decimalField"] == Decimal("1.50000") and after[99]["longField"] is None
    assert after[99]["byteField"] == 7 and len(after) == before.num_rows + 1
    assert sorted(r["id"] for r in hudi_read(base).to_pylist()) == sorted(after)


def test_rows_already_in_the_schema_come_back_ordered_without_their_files_metadata() -> None:
    from timeline.format.schema_evolution import conform

    schema = pa.schema([pa.field("b", pa.int64(), nullable=False), pa.field("a", pa.string())])
    stored = pa.table(
        {"_meta": ["m"], "a": ["x"], "b": [1]},
        schema=pa.schema([pa.field("_meta", pa.string()), pa.field("a", pa.string()), schema.field("b")]),
    ).replace_schema_metadata({"org.apache.hudi.bloomfilter": "of the file read, not of the one written"})
    out = conform(stored, schema)
    assert out.schema.names == ["b", "a", "_meta"] and out.schema.metadata is None
    assert out.schema.field("b").equals(schema.field("b")) and out.to_pylist() == [{"b": 1, "a": "x", "_meta": "m"}]
    nullable = conform(stored.cast(stored.schema.set(2, pa.field("b", pa.int64()))), schema)
    assert not nullable.schema.field("b").nullable and nullable.schema.metadata is None
