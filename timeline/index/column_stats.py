"""The `column_stats` partition's records: which columns get statistics, and how a range is stored.

A file's statistics are one `ColumnRange` per column (computed by `column_ranges`), stored as one record
per (partition, file, column) under a key whose (partition, file) prefix a tombstone removes at once. A
bound is stored as JSON text exact for its column type, so a reader gets back the very value written.
"""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from timeline.format.meta_fields import META_PREFIX

DEFAULT_MAX_COLUMNS = 32


_UTC = timezone.utc
_INT_RANGES = {
    **{f"int{b}": (-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (0, 2**b - 1) for b in (8, 16, 32, 64)},
}
_DECIMAL_RE = re.compile(r"decimal(32|64|128|256)\((\d+), (-?\d+)\)")
_TIMESTAMP_RE = re.compile(r"timestamp\[(s|ms|us|ns)(?:, tz=(.+))?\]")

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
    `nan_count` is -1 where it is not known (a range read from Hudi's own records, `hudi_ranges`).
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
        return [n for n in supported if not n.startswith(META_PREFIX)][: max(max_columns, 0)]
    wanted = set()
    for name in column_list:
        if name in supported:
            wanted.add(name)
            continue
        folded = [n for n in supported if n.casefold() == name.casefold()]
        if len(folded) == 1:
            wanted.add(folded[0])
    return [n for n in supported if n in wanted]


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
