"""Hudi's column statistics read as Tandem's `ColumnRange`s, so that the scan planner skips with a metadata
table in Hudi's format as it does with Tandem's own, whoever wrote the records (Tandem or Java Hudi).

Hudi's record says less than Tandem's, and every doubt widens, never narrows:
- No type: the bound's wrapper gives the file's physical type. A `LongWrapper` bound of a timestamp column
  is read in the unit of the table's type. Tandem writes microseconds; Java writes the unit of the table's
  Avro schema, which is the table's type.
- No NaN count: a float column may always hold NaN (`nan_count` -1, unknown), and a NaN bound is no bound.
- No exactness: bounds are bounds, never claimed exact.
- Java merges two records of one key by `compareTo`: strings by UTF-16 code units, bytes signed. Where that
  order parts from Parquet's (a character from U+D800 up, a byte from 0x80 up), the bound is dropped.
- `DateWrapper` moves the ten days of the 1582 cutover gap ten days later, so a low bound within ten days
  after the gap is moved back by ten.
- A count of -1 or none (Hudi's stub) makes the record unusable: nothing is skipped for it. A count of 0 is
  a file without rows (Hudi's record of a log holding deletes alone): nothing in it can match. A
  record of a column with nothing but nulls: Hudi builds the same record for a Parquet chunk without any
  statistics, which says nothing of its values.
- A column chunk without a value gives a bound of zero (`hudi_values.missing_bound`): a wider range, still
  a valid one.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa

from timeline.index.column_stats import DECIMAL, TIMESTAMP, ColumnRange, arrow_type, type_kind
from timeline.mdt import hudi_values as hv
from timeline.mdt.hudi_records import ColumnStats

UNKNOWN = -1  # ColumnRange.nan_count of a record that does not count NaNs
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_GAP_END = date(1582, 10, 14)
_SHIFTED_UNTIL = date(1582, 10, 24)  # the last day a gap day comes out as
_MICROS_PER = {"s": 1_000_000, "ms": 1_000, "us": 1}
_FIXED_TYPES = {
    hv.BOOLEAN: "bool",
    hv.INT: "int32",
    hv.FLOAT: "float",
    hv.DOUBLE: "double",
    hv.STRING: "string",
    hv.BYTES: "binary",
    hv.DATE: "date32[day]",
}


def column_range(stats: ColumnStats, dtype: pa.DataType) -> ColumnRange | None:
    """The range a live record gives a column of table type `dtype`; None when it gives nothing usable."""
    counts = (stats.value_count, stats.null_count)
    if stats.is_deleted or any(type(c) is not int or c < 0 for c in counts) or stats.null_count > stats.value_count:
        return None
    if stats.value_count == 0:  # a file without rows (a log of deletes alone): no value, no null, no NaN
        file_type = _no_bound_type(dtype)
        if file_type is None:
            return None
        return ColumnRange(stats.column_name, file_type, None, None, False, False, 0, 0, 0, 0, 0)
    if stats.null_count == stats.value_count:
        return None
    wrappers = {b.wrapper for b in (stats.min_value, stats.max_value) if b is not None}
    if len(wrappers) > 1:
        return None
    file_type = _file_type(next(iter(wrappers)), dtype) if wrappers else _no_bound_type(dtype)
    if file_type is None:
        return None
    low, high = (_bound(b, file_type, lower) for b, lower in ((stats.min_value, True), (stats.max_value, False)))
    return ColumnRange(
        column=stats.column_name,
        type=file_type,
        min=low,
        max=high,
        min_exact=False,
        max_exact=False,
        null_count=stats.null_count,
        nan_count=UNKNOWN,
        value_count=stats.value_count,
        total_size=max(stats.total_size or 0, 0),
        total_uncompressed_size=max(stats.total_uncompressed_size or 0, 0),
    )


def _file_type(wrapper: str, dtype: pa.DataType) -> str | None:
    """The column type of the file the bound came from, as `ColumnRange.type` names it."""
    kind = type_kind(dtype)
    if wrapper in _FIXED_TYPES:
        return _FIXED_TYPES[wrapper]
    if wrapper == hv.LONG:
        return str(dtype) if kind == TIMESTAMP else "int64"
    if wrapper == hv.DECIMAL:
        return str(dtype) if kind == DECIMAL else None
    if wrapper == hv.TIMESTAMP_MICROS and kind == TIMESTAMP:
        return str(pa.timestamp("us", tz=dtype.tz))
    return None


def _no_bound_type(dtype: pa.DataType) -> str | None:
    """A record without bounds (a column chunk with no value, of a byte-array type): only its counts speak."""
    return str(dtype) if type_kind(dtype) is not None else None


def _bound(wrapped: hv.Wrapped | None, file_type: str, lower: bool) -> Any:
    if wrapped is None:
        return None
    value = wrapped.value
    if wrapped.wrapper == hv.STRING:
        return value if isinstance(value, str) and all(c < "\ud800" for c in value) else None
    if wrapped.wrapper == hv.BYTES:
        return value if isinstance(value, bytes) and all(b < 0x80 for b in value) else None
    if wrapped.wrapper == hv.DATE:
        try:
            day = hv.to_python(wrapped)
        except (OverflowError, TypeError):
            return None
        return day - timedelta(days=10) if lower and _GAP_END < day <= _SHIFTED_UNTIL else day
    if wrapped.wrapper == hv.DECIMAL:
        return value if isinstance(value, Decimal) else None
    if file_type.startswith("timestamp"):
        return _instant(wrapped, arrow_type(file_type), lower)
    if wrapped.wrapper == hv.INT:
        return value if type(value) is int else None
    return value


def _instant(wrapped: hv.Wrapped, dtype: pa.TimestampType, lower: bool) -> datetime | None:
    """A timestamp bound in epoch units as the column's datetime (UTC when zoned), a nanosecond one rounded
    outwards to the microsecond; None out of Python's range."""
    if type(wrapped.value) is not int:
        return None
    unit = "us" if wrapped.wrapper == hv.TIMESTAMP_MICROS else dtype.unit
    if unit == "ns":
        micros = wrapped.value // 1_000 if lower else -(-wrapped.value // 1_000)
    else:
        micros = wrapped.value * _MICROS_PER[unit]
    try:
        moment = _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return None
    return moment if dtype.tz is not None else moment.replace(tzinfo=None)
