"""What statistics say about one column of a file, in the table's type: the input data skipping evaluates.

A file's stored range is read as the table's column type (a file may hold a narrower one after schema
evolution); a partition's path value is a one-row file. Anything in an unexpected form is unknown (None),
which skipping treats as "may match".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

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
    arrow_type,
    type_kind,
)

_UTC = timezone.utc


@dataclass(frozen=True)
class Facts:
    """What statistics say about one column of a file, in the table's type for that column."""

    kind: str  # column_stats kind of the table type
    dtype: pa.DataType
    low: Any  # bound of the non-null non-NaN values, None: unknown
    high: Any
    values: bool  # may hold a non-null non-NaN value
    nan: bool  # may hold NaN
    nulls: bool  # may hold NULL


def facts_of_range(found: ColumnRange, dtype: pa.DataType) -> Facts | None:
    """The facts of a file's range read as the table type `dtype`; None when the types do not allow it."""
    kind = type_kind(dtype)
    try:
        file_type = arrow_type(found.type)
    except ValueError:
        return None
    file_kind = type_kind(file_type)
    if kind is None or file_kind is None or not _readable_as(file_type, file_kind, dtype, kind):
        return None
    low, high = known_bound(found.min, file_kind, file_type), known_bound(found.max, file_kind, file_type)
    if file_kind == INT and kind == FLOAT:  # promoted: each value rounds to the float type, in order
        low, high = (None if b is None else _round_float(b, dtype) for b in (low, high))
    if low is not None and high is not None and high < low:
        low = high = None
    others = found.value_count - found.null_count - max(found.nan_count, 0)
    return Facts(
        kind=kind,
        dtype=dtype,
        low=low,
        high=high,
        values=others > 0 or low is not None or high is not None,
        nan=found.nan_count != 0 and kind == FLOAT,  # -1: not counted (Hudi's records), so NaN may be there
        nulls=found.null_count > 0,
    )


def facts_of_value(value: Any, dtype: pa.DataType) -> Facts | None:
    """The facts of a one-row file holding `value` (None: NULL) in a column of type `dtype`."""
    kind = type_kind(dtype)
    if kind is None:
        return None
    if value is None:
        return Facts(kind, dtype, None, None, values=False, nan=False, nulls=True)
    if kind == FLOAT and isinstance(value, float) and math.isnan(value):
        return Facts(kind, dtype, None, None, values=False, nan=True, nulls=False)
    bound = known_bound(value, kind, dtype)
    return Facts(kind, dtype, bound, bound, values=True, nan=False, nulls=False)


def known_bound(value: Any, kind: str, dtype: pa.DataType) -> Any:
    """A statistic's value if it is of the kind's python type, else None (unknown)."""
    if value is None:
        return None
    if kind == INT:
        return value if type(value) is int else None
    if kind == FLOAT:
        return float(value) if type(value) in (int, float) and not math.isnan(value) else None
    if kind == DECIMAL:
        return value if (isinstance(value, Decimal) and value.is_finite()) or type(value) is int else None
    if kind == TIMESTAMP:
        if not isinstance(value, datetime) or (value.utcoffset() is not None) != (dtype.tz is not None):
            return None
        return value.astimezone(_UTC) if dtype.tz is not None else datetime.combine(value.date(), value.time())
    expected = {BOOL: bool, STRING: str, BINARY: bytes, DATE: date}[kind]
    return value if type(value) is expected else None


def _readable_as(file_type: pa.DataType, file_kind: str, dtype: pa.DataType, kind: str) -> bool:
    """Whether a file's values read as the table type keep their order and values (schema evolution's promotions)."""
    if file_kind == INT and kind in (DECIMAL, FLOAT):
        return True
    if file_kind != kind:
        return False
    if kind == FLOAT:
        return not (pa.types.is_float64(file_type) and pa.types.is_float32(dtype))
    if kind == TIMESTAMP:
        return (file_type.tz is None) == (dtype.tz is None)
    return True


def _round_float(value: Any, dtype: pa.DataType) -> float:
    if pa.types.is_float32(dtype):
        with np.errstate(all="ignore"):
            return float(np.float32(float(value)))
    return float(value)
