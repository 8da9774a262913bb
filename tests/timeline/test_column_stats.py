"""Column statistics: every stored bound contains every value, exact bounds are the real extremes.

Property tests over random tables of every supported type (nulls, NaN, -0.0, infinities, long and
unicode strings, decimals, timestamps of every unit with and without a time zone), computed from
memory and from parquet files written with, without and with partial footer statistics.
"""

from __future__ import annotations

import io
import math
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timeline.index import column_ranges
from timeline.index import column_stats as cs
from timeline.index.column_ranges import STRING_PREFIX, RangeAccumulator, ranges_of_parquet, ranges_of_table
from timeline.index.column_stats import (
    COLUMN_STATS_ARROW_SCHEMA,
    COLUMN_STATS_SCHEMA,
    ColumnRange,
    decode_value,
    encode_value,
    file_tombstone,
    indexable_columns,
    stats_key,
)

MAX_CHAR = "\U0010ffff"
EPOCH = datetime(1970, 1, 1)
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
INT64 = (-(2**63), 2**63 - 1)
MIN_MICROS = (datetime.min - EPOCH) // timedelta(microseconds=1)
MAX_MICROS = (datetime.max - EPOCH) // timedelta(microseconds=1)
PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PARSED_SCHEMA = fastavro.parse_schema(COLUMN_STATS_SCHEMA)

# ---------------------------------------------------------------- strategies

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
DECIMAL_TYPES = [
    pa.decimal32(7, 3),
    pa.decimal64(18, 0),
    pa.decimal128(9, 2),
    pa.decimal128(38, 10),
    pa.decimal256(60, 5),
]
TIMESTAMP_TYPES = [
    pa.timestamp(unit, tz=tz) for unit in ("s", "ms", "us", "ns") for tz in (None, "UTC", "+05:30", "America/New_York")
]
TEXT = st.characters(exclude_categories=("Cs",))
EDGY_TEXT = st.sampled_from(["a", "z", "é", "\ud7ff", "\ue000", "\uffff", MAX_CHAR])
STRINGS = st.one_of(
    st.text(TEXT, max_size=20),
    # long strings, cheap to draw: a short pattern repeated around the 64-character prefix, then a tail
    st.builds(
        lambda a, n, b: (a * n)[: STRING_PREFIX + n - 40] + b,
        st.text(EDGY_TEXT, min_size=1, max_size=3),
        st.integers(30, 60),
        st.text(EDGY_TEXT, max_size=4),
    ),
    st.sampled_from(["", MAX_CHAR * (STRING_PREFIX + 3), "\ud7ff" * (STRING_PREFIX + 1)]),
)
BINARIES = st.one_of(
    st.binary(max_size=20),
    st.builds(
        lambda a, n, b: (a * 40)[: STRING_PREFIX + n] + b,
        st.binary(min_size=1, max_size=3),
        st.integers(-4, 30),
        st.sampled_from([b"", b"\x00", b"\xff", b"\xfe\xff"]),
    ),
    st.just(b"\xff" * 70),
)
FLOATS = st.one_of(st.floats(), st.sampled_from([-0.0, 0.0, math.inf, -math.inf, math.nan]))
FLOATS32 = st.one_of(st.floats(width=32), st.sampled_from([-0.0, 0.0, math.inf, -math.inf, math.nan]))
DATE_DAYS = st.one_of(
    st.integers(date.min.toordinal() - EPOCH_ORDINAL, date.max.toordinal() - EPOCH_ORDINAL),
    st.integers(-(2**31), 2**31 - 1),
)


def _timestamp_counts(unit: str) -> st.SearchStrategy[int]:
    # parquet stores seconds as milliseconds: keep them inside int64 after that scaling
    low, high = (INT64[0] // 1000 + 1, INT64[1] // 1000) if unit == "s" else INT64
    ordinary = 10**17 // PER_SECOND["ms"] * PER_SECOND[unit] // 10**6  # about +-3000 years
    return st.one_of(st.integers(-ordinary, ordinary), st.integers(-5000, 5000), st.integers(low, high))


def _int_values(dtype: pa.DataType) -> st.SearchStrategy[int]:
    bits = dtype.bit_width
    if pa.types.is_signed_integer(dtype):
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


def _decimal_values(dtype: pa.DataType) -> st.SearchStrategy[Decimal]:
    bound = 10**dtype.precision - 1
    return st.integers(-bound, bound).map(lambda n: Decimal(f"{n}e-{dtype.scale}"))


def _specs() -> list[tuple[str, pa.DataType, st.SearchStrategy, pa.DataType | None]]:
    """(name, type, value strategy, storage type the values are drawn in (dates/timestamps: ints))."""
    specs = [("b", pa.bool_(), st.booleans(), None)]
    specs += [(f"i_{t}", t, _int_values(t), None) for t in INT_TYPES]
    specs += [("f32", pa.float32(), FLOATS32, None), ("f64", pa.float64(), FLOATS, None)]
    specs += [(f"d_{i}", t, _decimal_values(t), None) for i, t in enumerate(DECIMAL_TYPES)]
    specs += [("s", pa.string(), STRINGS, None), ("ls", pa.large_string(), STRINGS, None)]
    specs += [("bin", pa.binary(), BINARIES, None), ("lbin", pa.large_binary(), BINARIES, None)]
    specs += [("day", pa.date32(), DATE_DAYS, pa.int32())]
    specs += [(f"ts_{i}", t, _timestamp_counts(t.unit), pa.int64()) for i, t in enumerate(TIMESTAMP_TYPES)]
    return specs


SPECS = _specs()


@st.composite
def tables(draw, max_rows: int = 12, only: tuple[str, ...] | None = None) -> pa.Table:
    rows = draw(st.integers(0, max_rows))
    arrays, names = [], []
    for name, dtype, values, storage in SPECS:
        if only is not None and name not in only:
            continue
        items = draw(st.lists(st.one_of(st.none(), values, values), min_size=rows, max_size=rows))
        array = pa.array(items, storage).cast(dtype) if storage is not None else pa.array(items, dtype)
        arrays.append(array)
        names.append(name)
    nested = pa.array([[1]] * rows, pa.list_(pa.int64()))
    return pa.Table.from_arrays([*arrays, nested], names=[*names, "nested"])


# ---------------------------------------------------------------- oracle


def _plain(dtype: pa.DataType, column: pa.ChunkedArray) -> tuple[list, int]:
    """Non-null non-NaN values in a form python compares exactly (dates: days, timestamps: counts), NaN count."""
    if pa.types.is_date32(dtype):
        column = column.cast(pa.int32())
    elif pa.types.is_timestamp(dtype):
        column = column.cast(pa.int64())
    values = [v for v in column.to_pylist() if v is not None]
    if pa.types.is_floating(dtype):
        return [v for v in values if not math.isnan(v)], sum(1 for v in values if math.isnan(v))
    return values, 0


def _as_units(dtype: pa.DataType, bound) -> tuple[int, int]:
    """A date/timestamp bound as the fraction (numerator, denominator) of the column's unit."""
    if pa.types.is_date32(dtype):
        assert type(bound) is date
        return bound.toordinal() - EPOCH_ORDINAL, 1
    assert isinstance(bound, datetime)
    assert (bound.tzinfo is not None) == (dtype.tz is not None)
    naive = bound.astimezone(timezone.utc).replace(tzinfo=None) if dtype.tz else bound
    micros = (naive - EPOCH) // timedelta(microseconds=1)
    return micros * PER_SECOND[dtype.unit], 1_000_000


def _expected_bound(dtype: pa.DataType, extreme, upper: bool) -> tuple[object, bool] | None:
    """(bound, exact) the module must give for this true extreme, or None where only validity is checked."""
    kind = cs.type_kind(dtype)
    if kind in (cs.STRING, cs.BINARY):
        if len(extreme) <= STRING_PREFIX:
            return extreme, True
        prefix = extreme[:STRING_PREFIX]
        top = MAX_CHAR if kind == cs.STRING else b"\xff"
        if not upper:
            return prefix, False
        if prefix.strip(top) == prefix[:0]:
            return None, False
        return "valid-only", False
    if kind == cs.DATE:
        if not 1 <= extreme + EPOCH_ORDINAL <= date.max.toordinal():
            return "valid-only", False
        return date.fromordinal(extreme + EPOCH_ORDINAL), True
    if kind == cs.TIMESTAMP:
        per = PER_SECOND[dtype.unit]
        micros, rest = divmod(extreme * 1_000_000, per)
        micros += 1 if upper and rest else 0
        if not MIN_MICROS <= micros <= MAX_MICROS:
            return "valid-only", False
        bound = EPOCH + timedelta(microseconds=micros)
        return bound.replace(tzinfo=timezone.utc if dtype.tz else None), rest == 0
    return extreme, True


def _check_bound(dtype: pa.DataType, bound, exact: bool, values: list, upper: bool) -> None:
    extreme = max(values) if upper else min(values)
    expected = _expected_bound(dtype, extreme, upper)
    if expected is not None and expected[0] != "valid-only":
        assert bound == expected[0] and exact == expected[1], (bound, exact, expected)
        assert bound is None or type(bound) is type(expected[0])
        if bound is not None and cs.type_kind(dtype) == cs.TIMESTAMP:
            _as_units(dtype, bound)  # tz-aware iff the type has a zone
        return
    if expected is not None:
        assert exact == expected[1], (bound, exact, extreme)
    if bound is None:
        # only a value a python date/datetime cannot hold may leave a bound unknown
        assert cs.type_kind(dtype) in (cs.DATE, cs.TIMESTAMP, cs.STRING, cs.BINARY)
        if cs.type_kind(dtype) in (cs.DATE, cs.TIMESTAMP):
            assert expected == ("valid-only", False)
        return
    if cs.type_kind(dtype) in (cs.DATE, cs.TIMESTAMP):
        numerator, denominator = _as_units(dtype, bound)
        if upper:
            assert all(numerator >= v * denominator for v in values)
        else:
            assert all(numerator <= v * denominator for v in values)
        if exact:
            assert numerator == extreme * denominator
        return
    if upper:
        assert all(bound >= v for v in values)
    else:
        assert all(bound <= v for v in values)
    if exact:
        assert bound == extreme


def _check_range(r: ColumnRange, table: pa.Table) -> None:
    column = table.column(r.column)
    dtype = column.type
    assert r.type == str(dtype)
    values, nans = _plain(dtype, column)
    assert (r.null_count, r.nan_count, r.value_count) == (column.null_count, nans, table.num_rows)
    if not values:
        assert (r.min, r.max) == (None, None)
        return
    _check_bound(dtype, r.min, r.min_exact, values, upper=False)
    _check_bound(dtype, r.max, r.max_exact, values, upper=True)
    _check_encoding(r)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b and getattr(a, "tzinfo", None) == getattr(b, "tzinfo", None)


def _check_encoding(r: ColumnRange) -> None:
    for bound in (r.min, r.max):
        assert _same(decode_value(r.type, encode_value(r.type, bound)), bound)
    record = r.to_record("year=2024/month=01", "f1_0-0-0_20240101.parquet")
    assert record["key"] == f"year=2024/month=01\x00f1_0-0-0_20240101.parquet\x00{r.column}"
    assert ColumnRange.from_record(record) == r
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, PARSED_SCHEMA, record)
    buffer.seek(0)
    assert fastavro.schemaless_reader(buffer, PARSED_SCHEMA) == record
    assert pa.Table.from_pylist([record], schema=COLUMN_STATS_ARROW_SCHEMA).to_pylist() == [record]


def _parquet(table: pa.Table, **options) -> pq.ParquetFile:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **options)
    return pq.ParquetFile(io.BytesIO(buffer.getvalue()))


# ---------------------------------------------------------------- properties


@PROPERTY
@given(tables())
def test_ranges_of_table_bound_every_value(table):
    columns = indexable_columns(table.schema, max_columns=100)
    assert "nested" not in columns and len(columns) == len(SPECS)
    ranges = ranges_of_table(table, columns)
    assert [r.column for r in ranges] == columns
    for r in ranges:
        _check_range(r, table)
        assert (r.total_size, r.total_uncompressed_size) == (0, 0)


@PROPERTY
@given(tables(), st.data())
def test_ranges_of_parquet_bound_every_value(table, data):
    columns = indexable_columns(table.schema, max_columns=100)
    with_stats = data.draw(st.one_of(st.booleans(), st.lists(st.sampled_from(columns), unique=True)))
    row_group = data.draw(st.integers(1, 8))
    pf = _parquet(table, row_group_size=row_group, write_statistics=with_stats)
    ranges = ranges_of_parquet(pf, columns)
    assert [r.column for r in ranges] == columns
    written = pf.read()  # the file's own types: parquet keeps seconds as milliseconds
    from_memory = {r.column: r for r in ranges_of_table(written, columns)}
    meta, leaves = pf.metadata, column_ranges._leaf_indexes(pf)
    for r in ranges:
        _check_range(r, written)
        chunks = [meta.row_group(g).column(leaves[r.column]) for g in range(meta.num_row_groups)]
        assert r.total_size == sum(c.total_compressed_size for c in chunks)
        assert r.total_uncompressed_size == sum(c.total_uncompressed_size for c in chunks)
        # footer and data agree: an Arrow-written file gives the statistics of its rows
        sizes = {"total_size": r.total_size, "total_uncompressed_size": r.total_uncompressed_size}
        assert r == ColumnRange(**{**from_memory[r.column].__dict__, **sizes})


@PROPERTY
@given(tables(max_rows=20, only=("f32", "f64", "i_int64", "s")))
def test_floats_without_footer_statistics_as_tandem_writes_them(table):
    """Tandem's writer leaves floats without statistics: they are computed from the data, NaN counted."""
    exact = [f.name for f in table.schema if not pa.types.is_floating(f.type) and f.name != "nested"]
    pf = _parquet(table, write_statistics=exact, use_dictionary=exact)
    for r in ranges_of_parquet(pf, ["f32", "f64"]):
        _check_range(r, table)


@PROPERTY
@given(st.lists(st.one_of(st.none(), FLOATS), min_size=1, max_size=30), st.integers(1, 5))
def test_float_nan_and_signed_zero(values, chunks):
    array = pa.chunked_array([values[i::chunks] for i in range(chunks)], pa.float64())
    table = pa.table({"f": array})
    (r,) = ranges_of_table(table, ["f"])
    finite = [v for v in values if v is not None and not math.isnan(v)]
    assert r.nan_count == sum(1 for v in values if v is not None and math.isnan(v))
    assert r.null_count == values.count(None)
    if finite:
        assert r.min == min(finite) and r.max == max(finite) and r.min_exact and r.max_exact
    else:
        assert r.min is None and r.max is None


# ---------------------------------------------------------------- values and records


def _values_of(dtype: pa.DataType) -> st.SearchStrategy:
    kind = cs.type_kind(dtype)
    if kind == cs.BOOL:
        return st.booleans()
    if kind == cs.INT:
        return _int_values(dtype)
    if kind == cs.FLOAT:
        return st.floats(allow_nan=False, width=32 if dtype == pa.float32() else 64)
    if kind == cs.DECIMAL:
        return _decimal_values(dtype)
    if kind == cs.STRING:
        return st.text(TEXT)
    if kind == cs.BINARY:
        return st.binary()
    if kind == cs.DATE:
        return st.dates()
    zone = st.just(None) if dtype.tz is None else st.just(timezone.utc)
    return st.datetimes(timezones=zone)


@PROPERTY
@given(st.data())
def test_encode_decode_round_trip(data):
    dtype = data.draw(st.sampled_from([t for _, t, _, _ in SPECS]))
    value = data.draw(_values_of(dtype))
    text = encode_value(str(dtype), value)
    assert isinstance(text, str)
    assert _same(decode_value(str(dtype), text), value)
    assert cs.arrow_type(str(dtype)) == dtype


@pytest.mark.parametrize(
    ("type_str", "value"),
    [
        ("double", -0.0),
        ("double", math.inf),
        ("float", -math.inf),
        ("uint64", 2**64 - 1),
        ("int64", -(2**63)),
        ("decimal128(5, -2)", Decimal("1.23E+4")),
        ("decimal256(76, 38)", Decimal("-1." + "9" * 38)),
        ("date32[day]", date.min),
        ("date32[day]", date.max),
        ("timestamp[ns]", datetime.min),
        ("timestamp[s, tz=UTC]", datetime.max.replace(tzinfo=timezone.utc)),
        ("timestamp[us, tz=Asia/Tokyo]", datetime(2024, 1, 1, 9, tzinfo=timezone(timedelta(hours=9)))),
        ("string", "\U0010ffff\x00\"\\'"),
        ("binary", b"\x00\xff"),
        ("large_string", None),
    ],
)
def test_encode_decode_edges(type_str, value):
    decoded = decode_value(type_str, encode_value(type_str, value))
    if isinstance(value, datetime) and value.tzinfo is not None:
        assert decoded == value and decoded.tzinfo == timezone.utc  # the instant, stored in UTC
    else:
        assert _same(decoded, value) or (value is None and decoded is None)


@pytest.mark.parametrize(
    ("type_str", "value"),
    [
        ("double", math.nan),
        ("int8", 128),
        ("uint8", -1),
        ("int32", True),
        ("bool", 1),
        ("decimal128(9, 2)", Decimal("NaN")),
        ("string", "\ud800"),
        ("date32[day]", datetime(2024, 1, 1)),
        ("timestamp[us]", datetime(2024, 1, 1, tzinfo=timezone.utc)),
        ("timestamp[us, tz=UTC]", datetime(2024, 1, 1)),
        ("time64[us]", 5),
        ("list<item: int64>", [1]),
    ],
)
def test_encode_refuses_values_that_are_not_bounds(type_str, value):
    with pytest.raises(ValueError):
        encode_value(type_str, value)


@pytest.mark.parametrize(
    ("type_str", "text"),
    [
        ("double", "NaN"),
        ("double", '"nan"'),
        ("int8", "300"),
        ("int64", "1.5"),
        ("int64", "not json"),
        ("bool", "1"),
        ("decimal128(9, 2)", '"abc"'),
        ("decimal128(9, 2)", "1.5"),
        ("binary", '"!!!"'),
        ("date32[day]", '"2024-13-01"'),
        ("timestamp[us, tz=UTC]", '"2024-01-01T00:00:00"'),
        ("timestamp[us]", '"2024-01-01T00:00:00+00:00"'),
        ("string", "5"),
        ("struct<a: int64>", "1"),
    ],
)
def test_decode_refuses_garbage(type_str, text):
    with pytest.raises(ValueError):
        decode_value(type_str, text)


@given(st.text(max_size=40), st.sampled_from([t for _, t, _, _ in SPECS]))
@settings(max_examples=60, deadline=None)
def test_decode_of_random_text_is_a_value_or_value_error(text, dtype):
    try:
        decode_value(str(dtype), text)
    except ValueError:
        pass


def test_records_and_tombstones():
    r = ColumnRange("c", "int64", 1, 5, True, True, 2, 0, 10, 100, 200)
    assert stats_key("", "f.parquet", "c") == ".\x00f.parquet\x00c"
    record = r.to_record("", "f.parquet")
    assert record["key"] == ".\x00f.parquet\x00c" and record["isDeleted"] is False
    tomb = file_tombstone("", "f.parquet")
    assert tomb["key"] == ".\x00f.parquet\x00" and tomb["isDeleted"] is True and tomb["columnName"] == ""
    assert record["key"].startswith(tomb["key"])
    assert set(tomb) == set(record) == {f["name"] for f in COLUMN_STATS_SCHEMA["fields"]}
    assert COLUMN_STATS_ARROW_SCHEMA.names == [f["name"] for f in COLUMN_STATS_SCHEMA["fields"]]
    fastavro.schemaless_writer(io.BytesIO(), PARSED_SCHEMA, tomb)
    with pytest.raises(ValueError):
        ColumnRange.from_record(tomb)
    for broken in (
        {**record, "nullCount": -1},
        {**record, "minValue": "x"},
        {k: v for k, v in record.items() if k != "key"},
    ):
        with pytest.raises(ValueError):
            ColumnRange.from_record(broken)


# ---------------------------------------------------------------- columns and edge cases


def test_indexable_columns():
    schema = pa.schema(
        [
            ("_hoodie_record_key", pa.string()),
            ("Id", pa.int64()),
            ("tags", pa.list_(pa.string())),
            ("point", pa.struct([("x", pa.float64())])),
            ("t", pa.time64("us")),
            ("h", pa.float16()),
            ("cat", pa.dictionary(pa.int32(), pa.string())),
            ("ts", pa.timestamp("ns", tz="UTC")),
            ("amount", pa.decimal128(10, 2)),
        ]
    )
    assert indexable_columns(schema) == ["Id", "ts", "amount"]
    assert indexable_columns(schema, max_columns=2) == ["Id", "ts"]
    assert indexable_columns(schema, ["amount", "id", "_hoodie_record_key", "tags", "gone"]) == [
        "_hoodie_record_key",
        "Id",
        "amount",
    ]
    assert indexable_columns(schema, []) == []


def test_long_strings_are_truncated_to_valid_bounds():
    values = ["b" * 100, "a" * 65 + MAX_CHAR, "\ud7ff" * 70]
    (r,) = ranges_of_table(pa.table({"s": values}), ["s"])
    assert r.min == "a" * STRING_PREFIX and not r.min_exact
    assert r.max == "\ud7ff" * (STRING_PREFIX - 1) + "\ue000" and not r.max_exact
    (r,) = ranges_of_table(pa.table({"s": [MAX_CHAR * 65, "x"]}), ["s"])
    assert r.max is None and r.min == "x" and r.min_exact
    (r,) = ranges_of_table(pa.table({"b": [b"a" + b"\xff" * 80]}), ["b"])
    assert r.max == b"b" and r.min == b"a" + b"\xff" * (STRING_PREFIX - 1)


def test_values_too_large_for_footer_statistics_are_read():
    table = pa.table({"s": ["x" * 5000, "a"], "b": [b"\x01" * 5000, b"\x00"]})
    pf = _parquet(table)
    assert not pf.metadata.row_group(0).column(0).statistics.has_min_max
    ranges = ranges_of_parquet(pf, ["s", "b"])
    assert [(r.min, r.min_exact) for r in ranges] == [("a", True), (b"\x00", True)]
    assert ranges[0].max == "x" * (STRING_PREFIX - 1) + "y" and not ranges[0].max_exact


class _Written:
    """A parquet file as if another writer had written it (only `created_by` differs)."""

    def __init__(self, pf: pq.ParquetFile, created_by: str) -> None:
        self.schema = pf.schema
        self.metadata = self._Meta(pf.metadata, created_by)

    class _Meta:
        def __init__(self, meta, created_by: str) -> None:
            self._meta, self.created_by = meta, created_by

        def __getattr__(self, name):
            return getattr(self._meta, name)


@pytest.mark.parametrize(
    ("created_by", "decimals_from_footer"),
    [
        ("parquet-mr version 1.12.3 (build f8dced182c4c1fbdec6ccb3185537b5a01e6ed6b)", True),
        ("parquet-mr version 1.8.2 (build c6522788629e590a53eb79874b95f6c3ff11f16c)", False),
        ("impala version 4.0", False),
        ("", False),
    ],
)
def test_footers_of_other_writers(created_by, decimals_from_footer):
    """Strings from other writers may be truncated (never exact); decimals stored as bytes were
    compared bytewise by old parquet-mr, so only writers known to order them by value are trusted."""
    table = pa.table(
        {
            "s": ["abc", "abd"],
            "i": [1, 2],
            "d": pa.array([Decimal("-1.50"), Decimal("2.25")], pa.decimal128(20, 2)),
            "d_int": pa.array([Decimal("-1.50"), Decimal("2.25")], pa.decimal128(9, 2)),
        }
    )
    pf = _parquet(table, store_decimal_as_integer=True)
    assert pf.schema.column(2).physical_type == "FIXED_LEN_BYTE_ARRAY"
    assert pf.schema.column(3).physical_type == "INT32"
    other = _Written(pf, created_by)
    s = column_ranges._footer_range(other, "s", pa.string(), 0)
    assert (s.min, s.max, s.min_exact, s.max_exact) == ("abc", "abd", False, False)
    i = column_ranges._footer_range(other, "i", pa.int64(), 1)
    assert (i.min, i.max, i.min_exact, i.max_exact) == (1, 2, True, True)
    d = column_ranges._footer_range(other, "d", pa.decimal128(20, 2), 2)
    assert (d is not None) == decimals_from_footer
    if d is not None:
        assert (d.min, d.max, d.min_exact, d.max_exact) == (Decimal("-1.50"), Decimal("2.25"), True, True)
    d_int = column_ranges._footer_range(other, "d_int", pa.decimal128(9, 2), 3)
    assert (d_int.min, d_int.max) == (Decimal("-1.50"), Decimal("2.25"))


def test_nanoseconds_are_widened_to_microseconds():
    array = pa.array([1_500, 2_000_001, None], pa.int64()).cast(pa.timestamp("ns", tz="UTC"))
    for r in (
        ranges_of_table(pa.table({"t": array}), ["t"])[0],
        ranges_of_parquet(_parquet(pa.table({"t": array})), ["t"])[0],
    ):
        assert r.min == datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) and not r.min_exact
        assert r.max == datetime(1970, 1, 1, 0, 0, 0, 2001, tzinfo=timezone.utc) and not r.max_exact
        assert r.null_count == 1


def test_missing_unsupported_and_empty():
    table = pa.table({"a": pa.array([], pa.int64()), "l": pa.array([], pa.list_(pa.int64()))})
    assert ranges_of_table(table, ["a", "l", "gone"]) == [
        ColumnRange("a", "int64", None, None, False, False, 0, 0, 0, 0, 0)
    ]
    (r,) = ranges_of_parquet(_parquet(table), ["gone", "a", "l"])
    assert (r.column, r.min, r.max, r.value_count) == ("a", None, None, 0)
    nulls = pa.table({"n": pa.array([None, None], pa.string())})
    for r in ranges_of_table(nulls, ["n"]) + ranges_of_parquet(_parquet(nulls, row_group_size=1), ["n"]):
        assert (r.min, r.max, r.null_count, r.value_count) == (None, None, 2, 2)


def test_parquet_from_a_path(tmp_path):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"x": [3, 1, 2], "a.b": ["q", "r", None]}), path)
    ranges = ranges_of_parquet(str(path), ["a.b", "x"])
    assert [(r.column, r.min, r.max, r.null_count) for r in ranges] == [("a.b", "q", "r", 1), ("x", 1, 3, 0)]
    with pa.OSFile(str(path)) as handle:
        assert ranges_of_parquet(handle, ["a.b", "x"]) == ranges


@given(tables(max_rows=30), st.data())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_ranges_accumulated_part_by_part_are_the_whole_tables(table, data):
    """A streaming writer's ranges (one `add` per part it writes) equal those of all its rows at once, bound
    for bound and flag for flag, wherever the parts are cut."""
    cuts = sorted(data.draw(st.lists(st.integers(0, table.num_rows), max_size=5)))
    parts = RangeAccumulator(table.schema, table.column_names)
    for start, end in zip([0, *cuts], [*cuts, table.num_rows], strict=True):
        parts.add(table.slice(start, end - start))
    whole = ranges_of_table(table, table.column_names)
    got = parts.ranges()
    assert [r.column for r in got] == [r.column for r in whole]
    for a, b in zip(got, whole, strict=True):
        assert (a.min_exact, a.max_exact, a.null_count, a.nan_count, a.value_count) == (
            b.min_exact,
            b.max_exact,
            b.null_count,
            b.nan_count,
            b.value_count,
        )
        assert a.min == b.min and a.max == b.max  # -0.0 and 0.0 are one bound: Arrow orders them either way
        assert type(a.min) is type(b.min) and type(a.max) is type(b.max)
