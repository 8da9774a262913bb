"""Each trap of reading Hudi's column statistics as ranges, one file each: the planner must keep the file
wherever a row may match (DuckDB says which), however Hudi's record came to be."""

from __future__ import annotations

import io
import math
from datetime import date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timeline.mdt import hudi_commit_records, hudi_records
from timeline.mdt.hudi_ranges import column_range
from timeline.mdt.hudi_records import ColumnStats
from timeline.mdt.hudi_values import DATE, STRING, Wrapped
from timeline.query.predicate import parse_sql, resolve
from timeline.query.skipping import may_match

duckdb = pytest.importorskip("duckdb")


def ranges(file: pa.Table, table_schema: pa.Schema, **write_options) -> dict:
    """The ranges Tandem's planner reads from Hudi's records of `file`: its Parquet footer made into records as
    Hudi builds them (`hudi_commit_records`), through Avro and back, read as the table's types."""
    sink = io.BytesIO()
    pq.write_table(file, sink, **write_options)
    footer = pq.read_metadata(io.BytesIO(sink.getvalue()))
    out = {}
    for record in hudi_commit_records.column_stats_records("p", "f.parquet", footer):
        stats = hudi_records.column_stats_of(hudi_records.decode(hudi_records.encode(record)))
        found = column_range(stats, table_schema.field(stats.column_name).type)
        if found is not None:
            out[stats.column_name] = found
    return out


def kept(file: pa.Table, where: str, table_schema: pa.Schema | None = None, **write_options) -> bool:
    schema = table_schema or file.schema
    return may_match(
        resolve(parse_sql(where), schema),
        ranges(file, schema, **write_options),
        dict(zip(schema.names, schema.types, strict=True)),
    )


def matches(file: pa.Table, where: str) -> bool:
    connection = duckdb.connect()
    connection.register("t", file)
    return connection.execute(f"SELECT count(*) FROM t WHERE {where}").fetchone()[0] > 0


CASES = [
    # Hudi's record counts no NaN: a file with a NaN beside 1.5 matches `> 5` (NaN sorts above everything)
    (pa.table({"x": pa.array([math.nan, 1.5])}), "x > 5"),
    (pa.table({"x": pa.array([math.nan, 1.5], pa.float32())}), "x > 5"),
    # a chunk whose strings are too long for its statistics (parquet-cpp keeps at most 4 KiB) beside one with bounds
    (pa.table({"s": ["z" * 5000, "a", "b"]}), "s > 'c'"),
    # timestamps in the table's unit: milliseconds and microseconds alike
    (pa.table({"t": pa.array([datetime(2020, 1, 1, 12)], pa.timestamp("ms"))}), "t >= TIMESTAMP '2020-01-01 11:00:00'"),
    (
        pa.table({"t": pa.array([datetime(2020, 1, 1, 12)], pa.timestamp("us", tz="UTC"))}),
        "t < TIMESTAMP '2020-01-01 13:00:00+00'",
    ),
    # a nanosecond bound rounds outwards
    (pa.table({"t": pa.array([1_577_880_000_000_000_001], pa.timestamp("ns"))}), "t > TIMESTAMP '2020-01-01 12:00:00'"),
    (pa.table({"d": pa.array([Decimal("1.25"), Decimal("-3.50")], pa.decimal128(9, 2))}), "d < -3.4"),
    (pa.table({"d": pa.array([date(1582, 10, 20)])}), "d = DATE '1582-10-20'"),
]


@pytest.mark.parametrize(("file", "where"), CASES, ids=[w for _, w in CASES])
def test_a_file_with_a_matching_row_is_kept(file: pa.Table, where: str) -> None:
    assert matches(file, where)
    for row_group_size in (1, 2, 3):
        assert kept(file, where, row_group_size=row_group_size), (where, row_group_size)


def test_files_without_a_match_are_still_skipped() -> None:
    """The widening stays narrow: the ordinary cases prune."""
    floats = pa.table({"x": pa.array([1.0, 2.0])})
    assert not kept(floats, "x < 0") and not kept(floats, "x = 5")
    assert kept(floats, "x > 5")  # NaN is above every number, and Hudi does not count NaNs
    assert not kept(pa.table({"s": ["a", "b"]}), "s > 'c'")
    assert not kept(pa.table({"i": pa.array([1, 2], pa.int32())}), "i > 5")
    promoted = pa.schema([("i", pa.int64())])
    assert not kept(pa.table({"i": pa.array([1, 2], pa.int32())}), "i > 5", promoted)
    assert not kept(pa.table({"t": pa.array([datetime(2020, 1, 1)], pa.timestamp("ms"))}), "t > TIMESTAMP '2021-01-01'")
    assert not kept(pa.table({"d": pa.array([date(2020, 1, 1)])}), "d > DATE '2021-01-01'")


def stats(low: Wrapped | None, high: Wrapped | None, nulls: int = 0, values: int = 3) -> ColumnStats:
    return ColumnStats("f.parquet", "c", low, high, values, nulls, 10, 10)


def test_records_that_say_nothing_sure_give_no_range() -> None:
    assert column_range(stats(None, None, nulls=3, values=3), pa.string()) is None  # also a chunk without statistics
    assert column_range(stats(None, None, nulls=-1, values=-1), pa.string()) is None  # Hudi's stub
    assert column_range(stats(Wrapped(STRING, "a"), Wrapped("IntWrapper", 1)), pa.string()) is None


def test_bounds_java_may_have_ordered_otherwise_are_dropped() -> None:
    """Java merges by UTF-16 units: U+FFFF sorts after U+10000 there, before it in Parquet's order."""
    found = column_range(stats(Wrapped(STRING, "\U00010000"), Wrapped(STRING, "\uffff")), pa.string())
    assert found is not None and found.min is None and found.max is None
    plain = column_range(stats(Wrapped(STRING, "a"), Wrapped(STRING, "é")), pa.string())
    assert plain is not None and (plain.min, plain.max) == ("a", "é")


def test_a_date_java_moved_out_of_the_cutover_gap_widens_the_low_bound() -> None:
    """java.sql.Date reads 1582-10-05..14 as ten days later: a stored 1582-10-20 may be a true 1582-10-10."""
    day = (date(1582, 10, 20) - date(1970, 1, 1)).days
    found = column_range(stats(Wrapped(DATE, day), Wrapped(DATE, day)), pa.date32())
    assert found is not None and found.min == date(1582, 10, 10) and found.max == date(1582, 10, 20)
