"""Hudi 0.15's metadata-table records in pure Python: keys, value wrappers, encodings, merges, table facts.

The vectors below come from a metadata table Java Hudi 0.15 wrote; tests/interop/test_java_mdt_records.py
checks the same functions against Java itself.
"""

from __future__ import annotations

import io
import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.errors import CorruptInstantError
from timeline.mdt import hudi_keys, hudi_layout, hudi_records
from timeline.mdt.hudi_commit_records import column_stats
from timeline.mdt.hudi_merge import as_read, combine, merged
from timeline.mdt.hudi_records import BloomFilter, ColumnStats, FileInfo
from timeline.mdt.hudi_schema import RECORD_SCHEMA, STORED_SCHEMA, stored_schema_json
from timeline.mdt.hudi_values import Wrapped, missing_bound, order_key, to_python, wrap

FILE = "e9a36d61-4aff-434e-bd0d-fa7cc34ea600-0_0-88-164_20261126063512669.parquet"

# -- keys


def test_ids_are_the_ones_java_wrote():
    assert hudi_keys.column_index_id("part") == "+WGrmgkN3io="
    assert hudi_keys.partition_index_id("p0") == "Z+KNMU8CLlo="
    assert hudi_keys.column_stats_key("p0", FILE, "part") == "+WGrmgkN3io=Z+KNMU8CLlo=SXKJkPYCpbI6TxWLXmJjdQ=="
    assert hudi_keys.bloom_filter_key("p2", FILE) == "iBsANRlvpYk=" + hudi_keys.file_index_id(FILE)


def test_the_empty_partition_goes_by_a_dot():
    assert hudi_keys.files_key("") == "."
    assert hudi_keys.column_stats_key("", FILE, "c").startswith(hudi_keys.column_index_id("c") + "FXThHwelITM=")
    assert hudi_keys.column_stats_key("", FILE, "c") == hudi_keys.column_stats_key(".", FILE, "c")
    assert hudi_keys.files_key("a/b") == "a/b"


@given(st.text(), st.text(), st.text())
def test_key_shapes(partition, file_name, column):
    key = hudi_keys.column_stats_key(partition, file_name, column)
    assert len(key) == 12 + 12 + 24 and key.endswith("==")
    assert key[12:] == hudi_keys.bloom_filter_key(partition, file_name)


@pytest.mark.parametrize(
    ("key", "count", "index"),
    [
        ("", 7, 0),
        ("a", 10, 7),  # hashCode 97
        ("Aa", 1000, 112),  # hashCode 2112, as "BB"
        ("BB", 1000, 112),
        ("polygenelubricants", 3, 2),  # hashCode Integer.MIN_VALUE: Math.abs keeps it negative
        ("\U0001f600", 1 << 20, (31 * 0xD83D + 0xDE00) % (1 << 20)),  # two UTF-16 code units
    ],
)
def test_file_group_index_is_java_string_hash(key, count, index):
    assert hudi_keys.file_group_index(key, count) == index


@given(st.text(), st.integers(1, 10_000))
def test_file_group_index_in_range(key, count):
    assert 0 <= hudi_keys.file_group_index(key, count) < count


# -- schema


def test_stored_schema_puts_meta_fields_first():
    names = [f["name"] for f in STORED_SCHEMA["fields"]]
    assert names[:6] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key"] + [
        "_hoodie_partition_path",
        "_hoodie_file_name",
        "key",
    ]
    assert STORED_SCHEMA["fields"][5:] == RECORD_SCHEMA["fields"]
    text = stored_schema_json()
    assert text.startswith('{"type":"record","name":"HoodieMetadataRecord","namespace":"org.apache.hudi.avro.model"')
    assert '{"name":"_hoodie_commit_time","type":["null","string"],"doc":"","default":null}' in text
    assert json.loads(text) == STORED_SCHEMA


# -- records and their bytes


def test_file_list_record():
    record = hudi_records.file_list_record("", {"a.parquet": 10, "b.parquet": 20}, ["b.parquet", "c.parquet"])
    assert record["key"] == "." and record["type"] == hudi_records.TYPE_FILE_LIST
    assert hudi_records.files_of(record) == {
        "a.parquet": FileInfo(10, False),
        "b.parquet": FileInfo(0, True),
        "c.parquet": FileInfo(0, True),
    }
    assert hudi_records.decode(hudi_records.encode(record)) == record
    with pytest.raises(ValueError, match="size 0"):
        hudi_records.file_list_record("p", {"a.parquet": 0})


def test_partition_list_record():
    record = hudi_records.partition_list_record(["", "a/b"])
    assert record["key"] == "__all_partitions__" and record["type"] == hudi_records.TYPE_PARTITION_LIST
    assert hudi_records.files_of(record) == {".": FileInfo(0, False), "a/b": FileInfo(0, False)}
    assert hudi_records.files_of(hudi_records.partition_list_record(["x"], is_deleted=True)) == {"x": FileInfo(0, True)}
    assert hudi_records.files_of(hudi_records.partition_list_record([])) == {}


def test_empty_partition_list_bytes_are_javas():
    """The initial `files` record of an empty table, as Java wrote it (key emptied, no file name: a log)."""
    cell = hudi_records.encode_cell(hudi_records.partition_list_record([]))
    assert cell == b"\x00" * 6 + b"\x02\x02\x00\x00\x00\x00"


def test_column_stats_record_round_trips():
    stats = ColumnStats(FILE, "part", Wrapped("StringWrapper", "p0"), Wrapped("StringWrapper", "p9"), 8, 0, 70, 60)
    record = hudi_records.column_stats_record("p0", stats)
    assert record["key"] == "+WGrmgkN3io=Z+KNMU8CLlo=SXKJkPYCpbI6TxWLXmJjdQ=="
    assert hudi_records.column_stats_of(hudi_records.decode(hudi_records.encode(record))) == stats


def test_column_stats_tombstone_is_a_stub():
    stats = hudi_records.column_stats_of(hudi_records.column_stats_tombstone("p", FILE, "c"))
    assert stats == ColumnStats(FILE, "c", None, None, -1, -1, -1, -1, is_deleted=True)


def test_bloom_filter_records():
    record = hudi_records.bloom_filter_record("p", FILE, "20240101000000000", "DYNAMIC_V0", b"/////wAA")
    assert hudi_records.bloom_filter_of(hudi_records.decode(hudi_records.encode(record))) == BloomFilter(
        "DYNAMIC_V0", "20240101000000000", b"/////wAA", False
    )
    tombstone = hudi_records.bloom_filter_tombstone("p", FILE, "20240102000000000")
    assert hudi_records.bloom_filter_of(tombstone) == BloomFilter("", "20240102000000000", b"", True)
    with pytest.raises(ValueError, match="base file"):
        hudi_records.bloom_filter_record("p", "p/" + FILE, "1", "DYNAMIC_V0", b"")


def test_cells_carry_no_key_and_base_files_their_name():
    record = hudi_records.file_list_record("p0", {FILE: 5})
    log_cell = hudi_records.encode_cell(record)
    base_cell = hudi_records.encode_cell(record, "files-0000-0_0-1-1_001.hfile")
    assert b"p0" not in log_cell.replace(FILE.encode(), b"")
    assert hudi_records.decode_cell("p0", log_cell) == record
    assert hudi_records.decode_cell("p0", base_cell) == record
    stored = fastavro.schemaless_reader(io.BytesIO(base_cell), fastavro.parse_schema(STORED_SCHEMA), None)
    assert stored["_hoodie_file_name"] == "files-0000-0_0-1-1_001.hfile" and stored["key"] == ""


def test_a_stored_key_wins_over_the_cells():
    stored = dict.fromkeys(f["name"] for f in STORED_SCHEMA["fields"][:5])
    stored.update(hudi_records.file_list_record("p0", {FILE: 5}))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(STORED_SCHEMA), stored)
    assert hudi_records.decode_cell("elsewhere", out.getvalue())["key"] == "p0"


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_damaged_bytes_are_corrupt(cut):
    data = hudi_records.encode(hudi_records.file_list_record("p0", {FILE: 5}))
    with pytest.raises(CorruptInstantError):
        hudi_records.decode(data[:-cut])
    with pytest.raises(CorruptInstantError, match="past the end"):
        hudi_records.decode(data + b"\x00")


# -- value wrappers

TYPES = {
    "string": (pa.string(), st.text(max_size=20)),
    "int8": (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "float32": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "float64": (pa.float64(), st.floats(allow_nan=False)),
    "bool": (pa.bool_(), st.booleans()),
    "date": (pa.date32(), st.dates()),
    "timestamp_us": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(timezone.utc))),
    "timestamp_ms": (
        pa.timestamp("ms"),
        st.datetimes().map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)),
    ),
    "decimal": (pa.decimal128(38, 10), st.decimals(-(10**14), 10**14, places=10)),
    "binary": (pa.binary(), st.binary(max_size=20)),
}


@settings(max_examples=300)
@given(st.sampled_from(sorted(TYPES)).flatmap(lambda name: st.tuples(st.just(name), TYPES[name][1])))
def test_wrapped_bounds_round_trip(case):
    name, value = case
    dtype = TYPES[name][0]
    bound = wrap(value, dtype)
    stats = ColumnStats(FILE, name, bound, bound, 1, 0, 1, 1)
    back = hudi_records.column_stats_of(
        hudi_records.decode(hudi_records.encode(hudi_records.column_stats_record("", stats)))
    )
    assert back == stats
    if name == "date" and not date(1582, 10, 5) <= value <= date(1582, 10, 14):
        assert to_python(back.min_value) == value
    elif name.startswith("timestamp") or name == "decimal":
        assert back.min_value.wrapper == ("LongWrapper" if name != "decimal" else "DecimalWrapper")
    elif name not in ("date", "float32"):
        assert to_python(back.min_value) == value


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        (4_000_000_000, pa.uint32(), Wrapped("IntWrapper", 4_000_000_000 - 2**32)),
        (2**64 - 1, pa.uint64(), Wrapped("LongWrapper", -1)),
        (200, pa.uint8(), Wrapped("IntWrapper", 200)),
        (date(1970, 1, 2), pa.date32(), Wrapped("DateWrapper", 1)),
        (date(1582, 10, 5), pa.date32(), Wrapped("DateWrapper", (date(1582, 10, 15) - date(1970, 1, 1)).days)),
        (date(1582, 10, 4), pa.date32(), Wrapped("DateWrapper", (date(1582, 10, 4) - date(1970, 1, 1)).days)),
        (datetime(1970, 1, 1, 0, 0, 1), pa.timestamp("ms"), Wrapped("LongWrapper", 1000)),
        (datetime(1970, 1, 1, 0, 0, 1), pa.timestamp("s"), Wrapped("LongWrapper", 1000)),
        (datetime(1970, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), pa.timestamp("us"), Wrapped("LongWrapper", 0)),
        (datetime(1970, 1, 1, 0, 0, 0, 1), pa.timestamp("ns"), Wrapped("LongWrapper", 1000)),
        (-5, pa.timestamp("us"), Wrapped("LongWrapper", -5)),
        (Decimal("1.5"), pa.decimal128(5, 1), Wrapped("DecimalWrapper", Decimal("1.500000000000000"))),
        (Decimal("1.5000000000000000000"), pa.decimal128(38, 19), Wrapped("DecimalWrapper", Decimal("1.5"))),
        (
            Decimal("999999999999999.999999999999999"),
            pa.decimal128(30, 15),
            Wrapped("DecimalWrapper", Decimal("999999999999999.999999999999999")),
        ),
        (b"\x00\xff", pa.large_binary(), Wrapped("BytesWrapper", b"\x00\xff")),
        ("x", pa.large_string(), Wrapped("StringWrapper", "x")),
        (None, pa.int32(), None),
    ],
)
def test_wrappers_of_each_type(value, dtype, expected):
    assert wrap(value, dtype) == expected


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (Decimal("0.0000000000000001"), pa.decimal128(38, 16)),  # 16 places: not exact at scale 15
        (Decimal(10**15), pa.decimal128(16, 0)),  # 31 digits at scale 15
        (Decimal("NaN"), pa.decimal128(5, 1)),
        (datetime(1970, 1, 1, 0, 0, 0, 1), pa.timestamp("ms")),  # no whole millisecond
    ],
)
def test_bounds_hudi_cannot_store_are_refused(value, dtype):
    with pytest.raises(ValueError):
        wrap(value, dtype)


@pytest.mark.parametrize("dtype", [pa.binary(4), pa.float16(), pa.time64("us"), pa.list_(pa.int32())])
def test_types_without_a_wrapper_are_refused(dtype):
    with pytest.raises(TypeError, match="no column-statistics wrapper"):
        wrap(b"\x00\x00\x00\x00", dtype)


def test_to_python_unwraps_as_java():
    assert to_python(Wrapped("DateWrapper", -1)) == date(1969, 12, 31)
    assert to_python(Wrapped("TimestampMicrosWrapper", 1)) == datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc)
    assert to_python(Wrapped("LongWrapper", 1)) == 1
    assert to_python(None) is None


# -- merges


def _files(record: dict) -> dict:
    return hudi_records.files_of(record)


def test_files_merge():
    older = hudi_records.file_list_record("p", {"a": 10, "b": 10, "c": 10}, ["d"])
    newer = hudi_records.file_list_record("p", {"a": 5, "e": 1}, ["b", "d", "f"])
    assert _files(combine(older, newer)) == {
        "a": FileInfo(10, False),  # the larger size
        "c": FileInfo(10, False),
        "d": FileInfo(0, True),  # deleted twice: the tombstone stays
        "e": FileInfo(1, False),
        "f": FileInfo(0, True),  # not listed before: the tombstone is kept for the base below
    }
    revived = combine(hudi_records.file_list_record("p", {}, ["a"]), hudi_records.file_list_record("p", {"a": 3}))
    assert _files(revived) == {"a": FileInfo(3, False)}


def test_partition_list_merge():
    older = hudi_records.partition_list_record(["x", "y"])
    assert _files(combine(older, hudi_records.partition_list_record(["y"], is_deleted=True))) == {
        "x": FileInfo(0, False)
    }
    assert _files(combine(older, hudi_records.partition_list_record(["z"]))) == {
        "x": FileInfo(0, False),
        "y": FileInfo(0, False),
        "z": FileInfo(0, False),
    }


def test_files_merge_refuses_a_live_empty_file():
    bad = hudi_records.file_list_record("p", {"a": 1})
    bad["filesystemMetadata"]["a"]["size"] = 0
    with pytest.raises(ValueError, match="size > 0"):
        combine(hudi_records.file_list_record("p", {}), bad)


def _stats(low, high, wrapper="LongWrapper", counts=(1, 2, 3, 4), deleted=False, file=FILE) -> dict:
    bounds = [None if v is None else Wrapped(wrapper, v) for v in (low, high)]
    return hudi_records.column_stats_record("p", ColumnStats(file, "c", *bounds, *counts, is_deleted=deleted))


def test_column_stats_merge_widens_and_adds():
    out = hudi_records.column_stats_of(combine(_stats(5, 9), _stats(1, 7, counts=(10, 20, 30, 40))))
    assert (out.min_value, out.max_value) == (Wrapped("LongWrapper", 1), Wrapped("LongWrapper", 9))
    assert (out.value_count, out.null_count, out.total_size, out.total_uncompressed_size) == (11, 22, 33, 44)
    only_old = hudi_records.column_stats_of(combine(_stats(5, 9), _stats(None, None)))
    assert (only_old.min_value, only_old.max_value) == (Wrapped("LongWrapper", 5), Wrapped("LongWrapper", 9))


def test_column_stats_merge_a_tombstone_wins_whole():
    tombstone = hudi_records.column_stats_tombstone("p", FILE, "c")
    assert hudi_records.column_stats_of(combine(_stats(1, 2), tombstone)).is_deleted
    assert combine(tombstone, _stats(1, 2)) == _stats(1, 2)


def test_column_stats_merge_orders_as_java():
    strings = hudi_records.column_stats_of(
        combine(_stats("\uffff", "\uffff", "StringWrapper"), _stats("\U0001f600", "\U0001f600", "StringWrapper"))
    )
    assert strings.min_value.value == "\U0001f600"  # UTF-16: a surrogate (D83D) sorts before U+FFFF
    raw = hudi_records.column_stats_of(
        combine(_stats(b"\x80", b"\x80", "BytesWrapper"), _stats(b"\x01", b"\x01", "BytesWrapper"))
    )
    assert (raw.min_value.value, raw.max_value.value) == (b"\x80", b"\x01")  # ByteBuffer: signed bytes
    zeros = hudi_records.column_stats_of(
        combine(_stats(0.0, 0.0, "DoubleWrapper"), _stats(-0.0, -0.0, "DoubleWrapper"))
    )
    assert str(zeros.min_value.value) == "-0.0" and str(zeros.max_value.value) == "0.0"
    with pytest.raises(TypeError, match="do not compare"):
        combine(_stats(1, 1, "IntWrapper"), _stats(1, 1, "LongWrapper"))
    with pytest.raises(ValueError):
        combine(_stats(1, 1), _stats(1, 1, file="other.parquet"))


def test_read_records_carry_raw_wrappers():
    typed = ColumnStats(
        FILE, "c", Wrapped("DateWrapper", 3), Wrapped("DecimalWrapper", Decimal("-1.280000000000000")), 1, 0, 1, 1
    )
    held = hudi_records.column_stats_of(as_read(hudi_records.column_stats_record("p", typed)))
    assert held.min_value == Wrapped("IntWrapper", 3)
    assert held.max_value == Wrapped("BytesWrapper", (-1_280_000_000_000_000).to_bytes(7, "big", signed=True))
    assert as_read(_stats(1, 2)) == _stats(1, 2)
    micros = hudi_records.column_stats_of(as_read(_stats(0, 1, "TimestampMicrosWrapper")))
    assert (micros.min_value, micros.max_value) == (Wrapped("LongWrapper", 0), Wrapped("LongWrapper", 1))


def test_bloom_filters_newer_wins():
    older = hudi_records.bloom_filter_record("p", FILE, "1", "DYNAMIC_V0", b"a")
    newer = hudi_records.bloom_filter_tombstone("p", FILE, "2")
    assert combine(older, newer) == newer and combine(newer, older) == older


def test_merge_refuses_two_keys_or_types():
    with pytest.raises(ValueError, match="keys differ"):
        combine(hudi_records.file_list_record("a", {}), hudi_records.file_list_record("b", {}))
    with pytest.raises(ValueError, match="Cannot combine 1 with 2"):
        combine(hudi_records.partition_list_record([]), hudi_records.file_list_record("b", {}))


def test_merged_folds_logs_then_the_base():
    base = hudi_records.file_list_record("p", {"a": 1})
    logs = [hudi_records.file_list_record("p", {"b": 2}), hudi_records.file_list_record("p", {}, ["a", "c"])]
    assert _files(merged(base, logs)) == {"b": FileInfo(2, False), "c": FileInfo(0, True)}
    assert merged(base, []) == base and merged(None, []) is None
    typed = hudi_records.column_stats_record("p", ColumnStats(FILE, "c", Wrapped("DateWrapper", 1), None, 1, 0, 1, 1))
    assert hudi_records.column_stats_of(merged(None, [typed])).min_value == Wrapped("IntWrapper", 1)
    assert merged(typed, []) == typed  # a base record nothing updated is copied as it is


# -- table facts


def test_file_groups_and_instants():
    assert [hudi_layout.file_group_id(p, 1) for p in hudi_layout.INIT_ORDER] == [
        "files-0001-0",
        "bloom-filters-0001-0",
        "col-stats-0001-0",
        "record-index-0001-0",
    ]
    assert (
        hudi_layout.file_group_for("column_stats", "+WGrmgkN3io=Z+KNMU8CLlo=SXKJkPYCpbI6TxWLXmJjdQ==", 2)
        == "col-stats-0000-0"
    )
    assert hudi_layout.partition_init_instant(hudi_layout.SOLO_COMMIT_TIMESTAMP, 0) == "00000000000000010"
    assert hudi_layout.partition_init_instant("20240101000000000", 2) == "20240101000000000012"
    assert hudi_layout.compaction_instant("00000000000000012") == "00000000000000012001"
    assert hudi_layout.clean_instant("1") == "1002"
    assert hudi_layout.log_compaction_instant("1") == "1005"
    assert hudi_layout.rollback_instant("1") == "1006"
    assert hudi_layout.metadata_partitions_value(["files", "column_stats", "files", "bloom_filters"]) == (
        "bloom_filters,column_stats,files"
    )


def test_metadata_table_properties_are_javas():
    props = hudi_layout.metadata_table_properties("j")
    assert props["hoodie.table.name"] == "j_metadata"
    assert props["hoodie.table.checksum"] == "4269139038"  # as Java wrote it for table `j`
    assert len(props) == 13


# -- a commit's column statistics, over row groups

_TYPES = {
    "i": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "n": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    # no infinities: pyarrow 16 writes DBL_MAX as the min of an all-infinite chunk (a looser bound, which is what
    # Hudi then reads too), so the footer and the rows part ways there on the lowest supported pyarrow
    "d": (pa.float64(), st.floats(allow_nan=False, allow_infinity=False, width=64)),
    "s": (pa.string(), st.text(max_size=6)),
    "b": (pa.bool_(), st.booleans()),
    "t": (pa.date32(), st.dates(min_value=date(1900, 1, 1), max_value=date(2100, 1, 1))),
}


def _fold(a, b, pick):
    if a is None or b is None:
        return a if b is None else b
    return pick(a, b, key=order_key)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.fixed_dictionaries({c: st.none() | s for c, (_, s) in _TYPES.items()}), min_size=1, max_size=40),
    st.integers(1, 7),
)
def test_column_stats_over_row_groups_fold_each_groups_bounds(tmp_path_factory, rows, group_rows):
    """Each row group's bounds (or, with no value, the zero parquet-mr's statistics hold, as Hudi reads it)
    folded min of mins and max of maxes; counts summed over the groups. The oracle works from the rows."""
    schema = pa.schema([(c, t) for c, (t, _) in _TYPES.items()])
    path = tmp_path_factory.mktemp("groups") / "f.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema), path, row_group_size=group_rows)
    footer = pq.read_metadata(path)
    found = {s.column_name: s for s in column_stats(path.name, footer, schema)}
    assert list(found) == list(_TYPES)
    for i, (column, (dtype, _)) in enumerate(_TYPES.items()):
        low = high = None
        for start in range(0, len(rows), group_rows):
            values = [r[column] for r in rows[start : start + group_rows] if r[column] is not None]
            physical = footer.row_group(start // group_rows).column(i).physical_type
            bounds = [wrap(v, dtype) for v in values] or [missing_bound(dtype, physical)]
            bounds = [b for b in bounds if b is not None]
            for bound in bounds:
                low, high = _fold(low, bound, min), _fold(high, bound, max)
        stats = found[column]
        assert (stats.min_value, stats.max_value) == (low, high), column
        assert stats.value_count == len(rows)
        assert stats.null_count == sum(r[column] is None for r in rows)
        sizes = [footer.row_group(g).column(i) for g in range(footer.num_row_groups)]
        assert stats.total_size == sum(c.total_compressed_size for c in sizes)
