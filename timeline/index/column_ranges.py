"""Computing a base file's column ranges, from the rows a writer just wrote or from a parquet file.

A reader skips a base file only if its statistics prove no row can match, so
every min/max computed here is a *valid bound* of the file's non-null, non-NaN
values, never a guess: a bound that is not the exact value is marked inexact,
and a bound that cannot be represented is left out (None). Statistics come from
the rows a writer just wrote (`ranges_of_table`) or from a parquet file
(`ranges_of_parquet`): its footer where that is trustworthy, else its data.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from timeline.index.column_stats import (
    BINARY,
    BOOL,
    DATE,
    DECIMAL,
    FLOAT,
    INT,
    STRING,
    TIMESTAMP,
    ColumnRange,
    type_kind,
)
from timeline.index.parquet_leaves import type_leaves

STRING_PREFIX = 64
BINARY_PREFIX = 64

_UTC = timezone.utc
_MAX_CHAR = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_PARQUET_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MIN_US = (datetime.min - _NAIVE_EPOCH) // timedelta(microseconds=1)
_MAX_US = (datetime.max - _NAIVE_EPOCH) // timedelta(microseconds=1)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_PARQUET_MR = re.compile(r"parquet-mr version (\d+)\.(\d+)")


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
    if kind == FLOAT and value == 0:
        return 0.0, exact  # -0.0 and 0.0 are one value: which one Arrow's min_max keeps depends on the order seen
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


def _extremes(column: pa.ChunkedArray) -> tuple[Any, Any, int]:
    """(raw min, raw max, NaN count) of one column's non-null, non-NaN values (None, None when there are none)."""
    values = _numeric_view(column)
    nan_count = 0
    if type_kind(column.type) == FLOAT:
        is_nan = pc.is_nan(column)
        nan_count = int(pc.sum(is_nan).as_py() or 0)
        if nan_count:
            values = column.filter(pc.invert(is_nan))
    extremes = pc.min_max(values)
    return extremes["min"].as_py(), extremes["max"].as_py(), nan_count


def _lower(a: Any, b: Any) -> Any:
    return b if a is None or (b is not None and b < a) else a


def _higher(a: Any, b: Any) -> Any:
    return b if a is None or (b is not None and b > a) else a


class RangeAccumulator:
    """Column ranges of rows that arrive part by part, equal to `ranges_of_table` of all of them at once.

    Raw extremes (integer counts for dates and timestamps, whole strings) are kept
    and finished (`_finish`: truncation, bounds) only at the end, so no part's
    rounding can move a bound. A streaming writer keeps one per file it writes.
    """

    def __init__(self, schema: pa.Schema, columns: list[str]) -> None:
        self._columns: list[tuple[str, int, pa.DataType]] = []
        for name in dict.fromkeys(columns):
            index = schema.get_field_index(name)  # -1 if missing or ambiguous
            if index >= 0 and type_kind(schema.field(index).type) is not None:
                self._columns.append((name, index, schema.field(index).type))
        self._seen = {name: [None, None, 0, 0] for name, _, _ in self._columns}  # low, high, nulls, NaNs
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        """One more part of the rows (the same schema every time)."""
        for name, index, _ in self._columns:
            column = table.column(index)
            low, high, nans = _extremes(column)
            seen = self._seen[name]
            seen[0], seen[1] = _lower(seen[0], low), _higher(seen[1], high)
            seen[2] += column.null_count
            seen[3] += nans
        self.rows += table.num_rows

    def ranges(self, sizes: dict[str, tuple[int, int]] | None = None) -> list[ColumnRange]:
        sizes = sizes or {}
        out = []
        for name, _, dtype in self._columns:
            low_raw, high_raw, nulls, nans = self._seen[name]
            low, min_exact = _finish(dtype, low_raw, True, upper=False)
            high, max_exact = _finish(dtype, high_raw, True, upper=True)
            compressed, uncompressed = sizes.get(name, (0, 0))
            out.append(
                ColumnRange(
                    name, str(dtype), low, high, min_exact, max_exact, nulls, nans, self.rows, compressed, uncompressed
                )
            )
        return out


def ranges_of_table(
    table: pa.Table, columns: list[str], sizes: dict[str, tuple[int, int]] | None = None
) -> list[ColumnRange]:
    """Exact statistics of `columns` of rows in memory (what a writer just wrote).

    Columns missing from the table or of unsupported types get no range; each column once.
    """
    ranges = RangeAccumulator(table.schema, columns)
    ranges.add(table)
    return ranges.ranges(sizes)


# ---------------------------------------------------------------- from a parquet file


def _leaf_indexes(pf: pq.ParquetFile) -> dict[str, int]:
    """Top-level primitive column name -> its parquet leaf index (names used twice are left out)."""
    out, index = {}, 0
    names = pf.schema_arrow.names
    for field in pf.schema_arrow:
        count = len(type_leaves(field.type))
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
        sizes = {name: _chunk_sizes(pf, leaves[name]) for name in to_read}
        for read in ranges_of_table(table, to_read, sizes):
            found[read.column] = read
    return [found[n] for n in dict.fromkeys(columns) if n in found]
