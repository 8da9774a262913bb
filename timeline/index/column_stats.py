"""Per-file column statistics for the metadata table's `column_stats` partition.

A reader skips a base file only if its statistics prove no row can match, so
every min/max stored here is a *valid bound* of the file's non-null, non-NaN
values, never a guess: a bound that is not the exact value is marked inexact,
and a bound that cannot be represented is left out (None). Statistics come from
the rows a writer just wrote (`ranges_of_table`) or from a parquet file
(`ranges_of_parquet`): its footer where that is trustworthy, else its data.
"""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

STRING_PREFIX = 64
BINARY_PREFIX = 64
DEFAULT_MAX_COLUMNS = 32
HOODIE_META_PREFIX = "_hoodie_"

_UTC = timezone.utc
_MAX_CHAR = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_PARQUET_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MIN_US = (datetime.min - _NAIVE_EPOCH) // timedelta(microseconds=1)
_MAX_US = (datetime.max - _NAIVE_EPOCH) // timedelta(microseconds=1)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_INT_RANGES = {
    **{f"int{b}": (-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (0, 2**b - 1) for b in (8, 16, 32, 64)},
}
_DECIMAL_RE = re.compile(r"decimal(32|64|128|256)\((\d+), (-?\d+)\)")
_TIMESTAMP_RE = re.compile(r"timestamp\[(s|ms|us|ns)(?:, tz=(.+))?\]")
_PARQUET_MR = re.compile(r"parquet-mr version (\d+)\.(\d+)")

# kinds of supported types (`type_kind`)
BOOL = "bool"
INT = "int"
FLOAT = "float"
DECIMAL = "decimal"
STRING = "string"
BINARY = "binary"
DATE = "date"
TIMESTAMP = "timestamp"


@dataclass(frozen=True)
class ColumnRange:
    """Statistics of one column of one base file (Hudi's HoodieMetadataColumnStats shape).

    `min`/`max` are valid lower/upper bounds of the non-null, non-NaN values (None: unknown or
    no such value; datetimes of zoned types are in UTC); `*_exact` says the bound is the actual
    minimum/maximum, which a reader needs before it may prune `col != v` on a file whose min = max = v.
    """

    column: str
    type: str
    min: Any | None
    max: Any | None
    min_exact: bool
    max_exact: bool
    null_count: int
    nan_count: int
    value_count: int
    total_size: int
    total_uncompressed_size: int

    def to_record(self, partition: str, file_name: str) -> dict:
        return {
            "key": stats_key(partition, file_name, self.column),
            "partition": partition,
            "fileName": file_name,
            "columnName": self.column,
            "columnType": self.type,
            "minValue": encode_value(self.type, self.min),
            "maxValue": encode_value(self.type, self.max),
            "minExact": self.min_exact,
            "maxExact": self.max_exact,
            "nullCount": self.null_count,
            "nanCount": self.nan_count,
            "valueCount": self.value_count,
            "totalSize": self.total_size,
            "totalUncompressedSize": self.total_uncompressed_size,
            "isDeleted": False,
        }

    @staticmethod
    def from_record(record: dict) -> ColumnRange:
        """The range a live record stores; ValueError for a tombstone or a malformed record."""
        try:
            if record["isDeleted"]:
                raise ValueError(f"column stats record {record['key']!r} is a tombstone")
            type_str = record["columnType"]
            counts = [record[f] for f in ("nullCount", "nanCount", "valueCount", "totalSize", "totalUncompressedSize")]
            flags = [record["minExact"], record["maxExact"]]
            column = record["columnName"]
            key_matches = record["key"] == stats_key(record["partition"], record["fileName"], column)
            low, high = decode_value(type_str, record["minValue"]), decode_value(type_str, record["maxValue"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed column stats record: {exc!r}") from exc
        if not isinstance(column, str) or not column or not key_matches:
            raise ValueError(f"malformed column stats record: key {record['key']!r}, column {column!r}")
        if any(type(c) is not int or c < 0 for c in counts) or any(type(f) is not bool for f in flags):
            raise ValueError(f"malformed column stats record for column {column!r}")
        return ColumnRange(column, type_str, low, high, flags[0], flags[1], *counts)


def stats_key(partition: str, file_name: str, column: str) -> str:
    return f"{partition or '.'}\x00{file_name}\x00{column}"


def file_tombstone(partition: str, file_name: str) -> dict:
    """The record that removes every stats record of one file (a key prefix of all of them)."""
    return {
        "key": stats_key(partition, file_name, ""),
        "partition": partition,
        "fileName": file_name,
        "columnName": "",
        "columnType": "",
        "minValue": None,
        "maxValue": None,
        "minExact": False,
        "maxExact": False,
        "nullCount": 0,
        "nanCount": 0,
        "valueCount": 0,
        "totalSize": 0,
        "totalUncompressedSize": 0,
        "isDeleted": True,
    }


COLUMN_STATS_SCHEMA = {
    "type": "record",
    "name": "TandemColumnStats",
    "namespace": "tandem.metadata",
    "fields": [
        {"name": "key", "type": "string"},
        {"name": "partition", "type": "string"},
        {"name": "fileName", "type": "string"},
        {"name": "columnName", "type": "string"},
        {"name": "columnType", "type": "string"},
        {"name": "minValue", "type": ["null", "string"], "default": None},
        {"name": "maxValue", "type": ["null", "string"], "default": None},
        {"name": "minExact", "type": "boolean"},
        {"name": "maxExact", "type": "boolean"},
        {"name": "nullCount", "type": "long"},
        {"name": "nanCount", "type": "long"},
        {"name": "valueCount", "type": "long"},
        {"name": "totalSize", "type": "long"},
        {"name": "totalUncompressedSize", "type": "long"},
        {"name": "isDeleted", "type": "boolean"},
    ],
}

COLUMN_STATS_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("partition", pa.string()),
        ("fileName", pa.string()),
        ("columnName", pa.string()),
        ("columnType", pa.string()),
        ("minValue", pa.string()),
        ("maxValue", pa.string()),
        ("minExact", pa.bool_()),
        ("maxExact", pa.bool_()),
        ("nullCount", pa.int64()),
        ("nanCount", pa.int64()),
        ("valueCount", pa.int64()),
        ("totalSize", pa.int64()),
        ("totalUncompressedSize", pa.int64()),
        ("isDeleted", pa.bool_()),
    ]
)


# ---------------------------------------------------------------- types


def type_kind(dtype: pa.DataType) -> str | None:
    """The kind of a supported column type, None for a type that gets no statistics."""
    if pa.types.is_boolean(dtype):
        return BOOL
    if pa.types.is_integer(dtype):
        return INT
    if pa.types.is_float32(dtype) or pa.types.is_float64(dtype):
        return FLOAT
    if pa.types.is_decimal(dtype):
        return DECIMAL
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return STRING
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return BINARY
    if pa.types.is_date32(dtype):
        return DATE
    if pa.types.is_timestamp(dtype):
        return TIMESTAMP
    return None


def arrow_type(type_str: str) -> pa.DataType:
    """The Arrow type a `columnType` names (the inverse of `str(dtype)` for supported types)."""
    simple = {
        "bool": pa.bool_(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "large_string": pa.large_string(),
        "binary": pa.binary(),
        "large_binary": pa.large_binary(),
        "date32[day]": pa.date32(),
    }
    if type_str in simple:
        return simple[type_str]
    if type_str in _INT_RANGES:
        return pa.type_for_alias(type_str)
    if m := _DECIMAL_RE.fullmatch(type_str):
        width, precision, scale = int(m.group(1)), int(m.group(2)), int(m.group(3))
        factory = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}[width]
        try:
            return factory(precision, scale)
        except (ValueError, pa.ArrowInvalid) as exc:
            raise ValueError(f"unsupported column type {type_str!r}: {exc}") from exc
    if m := _TIMESTAMP_RE.fullmatch(type_str):
        return pa.timestamp(m.group(1), tz=m.group(2))
    raise ValueError(f"unsupported column type {type_str!r}")


def _kind_of(type_str: str) -> str:
    if type_str == "bool":
        return BOOL
    if type_str in _INT_RANGES:
        return INT
    if type_str in ("float", "double"):
        return FLOAT
    if type_str in ("string", "large_string"):
        return STRING
    if type_str in ("binary", "large_binary"):
        return BINARY
    if type_str == "date32[day]":
        return DATE
    if _DECIMAL_RE.fullmatch(type_str):
        return DECIMAL
    if _TIMESTAMP_RE.fullmatch(type_str):
        return TIMESTAMP
    raise ValueError(f"unsupported column type {type_str!r}")


def indexable_columns(
    schema: pa.Schema, column_list: list[str] | None = None, max_columns: int = DEFAULT_MAX_COLUMNS
) -> list[str]:
    """Top-level columns of supported types that get statistics, in schema order.

    `column_list` (hoodie.metadata.index.column.stats.column.list) picks columns by name (exact, else
    the one case-insensitive match); names not in the schema or of unsupported types are ignored.
    Without it: the first `max_columns` supported columns, Hudi's meta columns left out.
    """
    supported = [f.name for f in schema if type_kind(f.type) is not None]
    if column_list is None:
        return [n for n in supported if not n.startswith(HOODIE_META_PREFIX)][: max(max_columns, 0)]
    wanted = set()
    for name in column_list:
        if name in supported:
            wanted.add(name)
            continue
        folded = [n for n in supported if n.casefold() == name.casefold()]
        if len(folded) == 1:
            wanted.add(folded[0])
    return [n for n in supported if n in wanted]


# ---------------------------------------------------------------- bounds


def _upper_string(text: str) -> str | None:
    """An upper bound of every string that starts with `text`: `text` with its last character incremented."""
    chars = text.rstrip(chr(_MAX_CHAR))
    if not chars:
        return None
    code = ord(chars[-1]) + 1
    if code in _SURROGATES:
        code = _SURROGATES.stop
    return chars[:-1] + chr(code)


def _upper_bytes(data: bytes) -> bytes | None:
    body = data.rstrip(b"\xff")
    if not body:
        return None
    return body[:-1] + bytes([body[-1] + 1])


def _truncated(kind: str, value: Any, exact: bool, upper: bool) -> tuple[Any, bool]:
    """Strings and binaries longer than the prefix become the prefix (min) or an incremented prefix (max)."""
    limit = STRING_PREFIX if kind == STRING else BINARY_PREFIX
    if len(value) <= limit:
        return value, exact
    prefix = value[:limit]
    if not upper:
        return prefix, False
    return (_upper_string(prefix) if kind == STRING else _upper_bytes(prefix)), False


def _timestamp_bound(raw: int, unit: str, aware: bool, upper: bool) -> tuple[datetime | None, bool]:
    """A datetime bounding the `unit` count `raw`: nanoseconds are floored (min) or ceiled (max) to
    microseconds; a value outside datetime's years 1..9999 gives the nearest valid bound or None."""
    per = _PER_SECOND[unit]
    if per <= 1_000_000:
        micros, exact = raw * (1_000_000 // per), True
    else:
        micros, rest = divmod(raw, per // 1_000_000)
        exact = rest == 0
        if upper and not exact:
            micros += 1
    tz = _UTC if aware else None
    if micros < _MIN_US:
        return (datetime.min.replace(tzinfo=tz), False) if upper else (None, False)
    if micros > _MAX_US:
        return (None, False) if upper else (datetime.max.replace(tzinfo=tz), False)
    return (_NAIVE_EPOCH + timedelta(microseconds=micros)).replace(tzinfo=tz), exact


def _date_bound(days: int, upper: bool) -> tuple[date | None, bool]:
    ordinal = days + _EPOCH_ORDINAL
    if ordinal < 1:
        return (date.min, False) if upper else (None, False)
    if ordinal > date.max.toordinal():
        return (None, False) if upper else (date.max, False)
    return date.fromordinal(ordinal), True


def _finish(dtype: pa.DataType, value: Any, exact: bool, upper: bool, unit: str | None = None) -> tuple[Any, bool]:
    """A raw extreme (int units for dates and timestamps) -> the stored python bound."""
    if value is None:
        return None, False
    kind = type_kind(dtype)
    if kind in (STRING, BINARY):
        return _truncated(kind, value, exact, upper)
    if kind == DATE:
        bound, ok = _date_bound(value, upper)
        return bound, ok and exact
    if kind == TIMESTAMP:
        bound, ok = _timestamp_bound(value, unit or dtype.unit, dtype.tz is not None, upper)
        return bound, ok and exact
    return value, exact


# ---------------------------------------------------------------- from data


def _numeric_view(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Dates and timestamps as integer counts (python datetimes cannot hold every value); narrow decimals widened."""
    if pa.types.is_date32(column.type):
        return column.cast(pa.int32())
    if pa.types.is_timestamp(column.type):
        return column.cast(pa.int64())
    if pa.types.is_decimal(column.type) and column.type.bit_width < 128:
        return column.cast(pa.decimal128(column.type.precision, column.type.scale))  # no min_max kernel
    return column


def _range_of_column(
    name: str, column: pa.ChunkedArray | pa.Array, num_rows: int, sizes: tuple[int, int]
) -> ColumnRange:
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column], column.type)
    dtype = column.type
    nan_count = 0
    values = _numeric_view(column)
    if type_kind(dtype) == FLOAT:
        is_nan = pc.is_nan(column)
        nan_count = int(pc.sum(is_nan).as_py() or 0)
        if nan_count:
            values = column.filter(pc.invert(is_nan))
    extremes = pc.min_max(values)
    low, min_exact = _finish(dtype, extremes["min"].as_py(), True, upper=False)
    high, max_exact = _finish(dtype, extremes["max"].as_py(), True, upper=True)
    return ColumnRange(
        column=name,
        type=str(dtype),
        min=low,
        max=high,
        min_exact=min_exact,
        max_exact=max_exact,
        null_count=column.null_count,
        nan_count=nan_count,
        value_count=num_rows,
        total_size=sizes[0],
        total_uncompressed_size=sizes[1],
    )


def ranges_of_table(
    table: pa.Table, columns: list[str], sizes: dict[str, tuple[int, int]] | None = None
) -> list[ColumnRange]:
    """Exact statistics of `columns` of rows in memory (what a writer just wrote).

    Columns missing from the table or of unsupported types get no range; each column once.
    """
    sizes = sizes or {}
    ranges = []
    for name in dict.fromkeys(columns):
        index = table.schema.get_field_index(name)  # -1 if missing or ambiguous
        if index < 0 or type_kind(table.schema.field(index).type) is None:
            continue
        ranges.append(_range_of_column(name, table.column(index), table.num_rows, sizes.get(name, (0, 0))))
    return ranges


# ---------------------------------------------------------------- from a parquet file


def _leaf_count(dtype: pa.DataType) -> int:
    if pa.types.is_struct(dtype):
        return sum(_leaf_count(f.type) for f in dtype)
    if pa.types.is_map(dtype):
        return _leaf_count(dtype.key_type) + _leaf_count(dtype.item_type)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return _leaf_count(dtype.value_type)
    if hasattr(pa.types, "is_list_view") and (pa.types.is_list_view(dtype) or pa.types.is_large_list_view(dtype)):
        return _leaf_count(dtype.value_type)
    return 1


def _leaf_indexes(pf: pq.ParquetFile) -> dict[str, int]:
    """Top-level primitive column name -> its parquet leaf index (names used twice are left out)."""
    out, index = {}, 0
    names = pf.schema_arrow.names
    for field in pf.schema_arrow:
        count = _leaf_count(field.type)
        if count == 1 and index < pf.metadata.num_columns and names.count(field.name) == 1:
            leaf = pf.schema.column(index)
            if leaf.path == field.name and leaf.max_repetition_level == 0:
                out[field.name] = index
        index += count
    return out


def _stat_value(kind: str, stats: Any, which: str) -> tuple[Any, str | None] | None:
    """(raw bound, timestamp unit) of a footer statistic in `_finish`'s input form, None if unusable."""
    if kind == TIMESTAMP:
        if stats.physical_type != "INT64" or stats.logical_type.type != "TIMESTAMP":
            return None
        unit = _PARQUET_UNITS.get(json.loads(stats.logical_type.to_json()).get("timeUnit"))
        raw = getattr(stats, f"{which}_raw")
        return (raw, unit) if unit and type(raw) is int else None
    if kind == DATE:
        raw = getattr(stats, f"{which}_raw")
        return (raw, None) if stats.physical_type == "INT32" and type(raw) is int else None
    value = getattr(stats, which)
    if kind == STRING and isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    expected = {BOOL: bool, INT: int, DECIMAL: Decimal, STRING: str, BINARY: bytes}[kind]
    if type(value) is not expected or (kind == DECIMAL and not value.is_finite()):
        return None
    return value, None


def _footer_exact(stats: Any, which: str, kind: str, arrow_written: bool) -> bool:
    """Whether a footer bound is the actual value: Arrow's writer never truncates, other writers may."""
    flag = getattr(stats, f"is_{which}_value_exact", None)
    if flag is False:
        return False
    if kind in (STRING, BINARY):
        return arrow_written or flag is True
    return True


def _decimal_bytes_ordered(created_by: str) -> bool:
    """Whether a writer orders decimals stored as bytes by value: Arrow's, and parquet-mr since 1.10
    (older ones compared the bytes, which a footer cannot be told from, so such columns are read)."""
    if created_by.startswith("parquet-cpp-arrow"):
        return True
    version = _PARQUET_MR.match(created_by)
    return version is not None and (int(version.group(1)), int(version.group(2))) >= (1, 10)


def _footer_range(pf: pq.ParquetFile, name: str, dtype: pa.DataType, index: int) -> ColumnRange | None:
    """The range from row-group statistics, None when any row group lacks usable ones."""
    kind = type_kind(dtype)
    if kind in (None, FLOAT):
        return None  # floats: footers leave NaN out and may be absent; read the data
    meta = pf.metadata
    created_by = meta.created_by or ""
    arrow_written = created_by.startswith("parquet-cpp-arrow")
    if kind == DECIMAL and pf.schema.column(index).physical_type in ("FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
        if not _decimal_bytes_ordered(created_by):
            return None
    nulls = size = uncompressed = 0
    unit = None
    low: tuple[Any, bool] | None = None
    high: tuple[Any, bool] | None = None
    for r in range(meta.num_row_groups):
        group = meta.row_group(r)
        chunk = group.column(index)
        size += chunk.total_compressed_size
        uncompressed += chunk.total_uncompressed_size
        stats = chunk.statistics if chunk.is_stats_set else None
        if stats is None or not stats.has_null_count or not 0 <= stats.null_count <= group.num_rows:
            return None
        nulls += stats.null_count
        if stats.null_count == group.num_rows:
            continue
        if not stats.has_min_max:
            return None
        got_min, got_max = _stat_value(kind, stats, "min"), _stat_value(kind, stats, "max")
        if got_min is None or got_max is None or got_min[1] != got_max[1] or (unit and got_min[1] != unit):
            return None
        unit = got_min[1]
        if got_min[0] > got_max[0]:
            return None
        candidate_low = (got_min[0], _footer_exact(stats, "min", kind, arrow_written))
        candidate_high = (got_max[0], _footer_exact(stats, "max", kind, arrow_written))
        if low is None or candidate_low[0] < low[0] or (candidate_low[0] == low[0] and candidate_low[1]):
            low = candidate_low
        if high is None or candidate_high[0] > high[0] or (candidate_high[0] == high[0] and candidate_high[1]):
            high = candidate_high
    if meta.num_rows != sum(meta.row_group(r).num_rows for r in range(meta.num_row_groups)):
        return None
    min_value, min_exact = _finish(dtype, *(low or (None, False)), upper=False, unit=unit)
    max_value, max_exact = _finish(dtype, *(high or (None, False)), upper=True, unit=unit)
    return ColumnRange(
        name, str(dtype), min_value, max_value, min_exact, max_exact, nulls, 0, meta.num_rows, size, uncompressed
    )


def _chunk_sizes(pf: pq.ParquetFile, index: int) -> tuple[int, int]:
    meta = pf.metadata
    groups = [meta.row_group(r).column(index) for r in range(meta.num_row_groups)]
    return sum(c.total_compressed_size for c in groups), sum(c.total_uncompressed_size for c in groups)


def ranges_of_parquet(handle_or_path: Any, columns: list[str]) -> list[ColumnRange]:
    """Statistics of `columns` of one parquet file (a path, pyarrow NativeFile, file-like or ParquetFile).

    Footer statistics are used where every row group has them and they are valid bounds; any other
    column (floats always: NaN and -0.0 make footers unreliable, and Tandem's writer writes none) is
    computed by reading it. Columns missing from the file or of unsupported types get no range.
    """
    pf = handle_or_path if isinstance(handle_or_path, pq.ParquetFile) else pq.ParquetFile(handle_or_path)
    schema = pf.schema_arrow
    leaves = _leaf_indexes(pf)
    found: dict[str, ColumnRange] = {}
    to_read: list[str] = []
    for name in dict.fromkeys(columns):
        if name not in leaves or type_kind(schema.field(name).type) is None:
            continue
        footer = _footer_range(pf, name, schema.field(name).type, leaves[name])
        if footer is None:
            to_read.append(name)
        else:
            found[name] = footer
    if to_read:
        table = pf.read(columns=to_read, use_threads=False, use_pandas_metadata=False)
        for name in to_read:
            found[name] = _range_of_column(
                name, table.column(name), pf.metadata.num_rows, _chunk_sizes(pf, leaves[name])
            )
    return [found[n] for n in dict.fromkeys(columns) if n in found]


# ---------------------------------------------------------------- record values


def _check_int(type_str: str, value: Any) -> int:
    low, high = _INT_RANGES[type_str]
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{value!r} is not a {type_str} value")
    return value


def _check_float(value: Any) -> float:
    if type(value) not in (int, float) or math.isnan(value):
        raise ValueError(f"{value!r} is not a non-NaN floating value")
    return float(value)


def _check_decimal(value: Any) -> Decimal:
    if not isinstance(value, Decimal) or not value.is_finite():
        raise ValueError(f"{value!r} is not a finite Decimal")
    return value


def _check_string(value: Any) -> str:
    if type(value) is not str:
        raise ValueError(f"{value!r} is not a str")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{value!r} is not valid unicode: {exc}") from exc
    return value


def _check_date(value: Any) -> date:
    if type(value) is not date:
        raise ValueError(f"{value!r} is not a date")
    return value


def _check_timestamp(type_str: str, value: Any) -> datetime:
    aware = _TIMESTAMP_RE.fullmatch(type_str).group(2) is not None
    if not isinstance(value, datetime) or (value.tzinfo is not None and value.utcoffset() is not None) != aware:
        raise ValueError(f"{value!r} is not a {'tz-aware' if aware else 'naive'} datetime for {type_str}")
    if aware:
        try:
            value = value.astimezone(_UTC)
        except (OverflowError, ValueError) as exc:
            raise ValueError(f"{value!r} cannot be stored as UTC: {exc}") from exc
    return value


def encode_value(type_str: str, value: Any) -> str | None:
    """JSON text of a bound, exact for every supported type (None stays None).

    bool/int: JSON literals; float: JSON number ("Infinity"/"-Infinity" as strings, NaN refused);
    Decimal: its string; str: JSON string; bytes: base64 string; date: ISO date;
    timestamp: ISO datetime with microseconds (UTC offset iff the type has a time zone).
    """
    if value is None:
        return None
    kind = _kind_of(type_str)
    if kind == BOOL:
        if type(value) is not bool:
            raise ValueError(f"{value!r} is not a bool")
        payload: Any = value
    elif kind == INT:
        payload = _check_int(type_str, value)
    elif kind == FLOAT:
        number = _check_float(value)
        payload = number if math.isfinite(number) else ("Infinity" if number > 0 else "-Infinity")
    elif kind == DECIMAL:
        payload = str(_check_decimal(value))
    elif kind == STRING:
        payload = _check_string(value)
    elif kind == BINARY:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ValueError(f"{value!r} is not bytes")
        payload = base64.b64encode(bytes(value)).decode("ascii")
    elif kind == DATE:
        payload = _check_date(value).isoformat()
    else:
        payload = _check_timestamp(type_str, value).isoformat(timespec="microseconds")
    return json.dumps(payload, ensure_ascii=False, allow_nan=False)


def _decode_payload(kind: str, type_str: str, payload: Any) -> Any:
    if kind == BOOL:
        if type(payload) is not bool:
            raise ValueError("not a boolean")
        return payload
    if kind == INT:
        return _check_int(type_str, payload)
    if kind == FLOAT:
        if payload in ("Infinity", "-Infinity"):
            return float(payload)
        if type(payload) not in (int, float) or not math.isfinite(payload):
            raise ValueError("not a number")
        return float(payload)
    if type(payload) is not str:
        raise ValueError("not a JSON string")
    if kind == DECIMAL:
        return _check_decimal(Decimal(payload))
    if kind == STRING:
        return _check_string(payload)
    if kind == BINARY:
        return base64.b64decode(payload.encode("ascii"), validate=True)
    if kind == DATE:
        return _check_date(date.fromisoformat(payload))
    return _check_timestamp(type_str, datetime.fromisoformat(payload))


def decode_value(type_str: str, text: str | None) -> Any:
    """The bound `encode_value` wrote; ValueError for text that is not one of `type_str`."""
    if text is None:
        return None
    kind = _kind_of(type_str)
    if type(text) is not str:
        raise ValueError(f"stats value for {type_str} is {type(text).__name__}, not text")
    try:
        payload = json.loads(text, parse_constant=_refuse_constant)
        return _decode_payload(kind, type_str, payload)
    except (ValueError, InvalidOperation, UnicodeEncodeError) as exc:
        raise ValueError(f"bad stats value {text[:80]!r} for {type_str}: {exc}") from exc


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a stored bound")
