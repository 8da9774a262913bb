"""The value wrappers of Hudi's column statistics: how a column's min/max sits in `HoodieMetadataColumnStats`.

Avro unions cannot hold two branches of one primitive type, so Hudi wraps each bound in a one-field record
(`IntWrapper`, `StringWrapper`, ...) and stores the union of the wrappers. Which wrapper a bound gets follows
from the Java value Hudi 0.15 reads out of the Parquet footer (`ParquetUtils.convertToNativeJavaType`), then
`HoodieAvroUtils.wrapValueIntoAvro`:

- INT32 columns (int8/16/32, uint8/16/32) -> Integer -> IntWrapper (uint32 as the signed int it is stored as);
  INT64 columns (int64, uint64) -> Long -> LongWrapper (uint64 likewise).
- float32 -> FloatWrapper, float64 -> DoubleWrapper, bool -> BooleanWrapper.
- UTF8 strings -> String -> StringWrapper; other BINARY -> ByteBuffer -> BytesWrapper.
- DATE -> java.sql.Date -> DateWrapper (days since the epoch). The detour through java.sql.Date reads the
  date's fields in the Julian-Gregorian calendar, which has no 1582-10-05 to 1582-10-14: those ten days
  come out ten days later.
- timestamps -> the stored Long, untouched -> LongWrapper in the file's unit (ms, us or ns); Hudi makes no
  TimestampMicrosWrapper out of a Parquet footer.
- DECIMAL -> BigDecimal -> DecimalWrapper, rescaled to the wrapper's fixed decimal(30, 15)
  (`HoodieTableMetadataUtil.tryUpcastDecimal`: exact or it fails, at most 30 digits after rescaling).
- FIXED_LEN_BYTE_ARRAY other than decimal (fixed-size binary, float16), INT96: Java fails
  (`wrapValueIntoAvro` has no branch for parquet's `Binary`); `wrap` refuses them too.

`Wrapped.value` keeps the wrapper's Avro value as stored (days, epoch units, a Decimal of scale 15), so a
decoded record re-encodes to the same bytes; `to_python` gives the value as Hudi's reader unwraps it.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, localcontext
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from timeline.mdt.hudi_schema import full_name

BOOLEAN = "BooleanWrapper"
INT = "IntWrapper"
LONG = "LongWrapper"
FLOAT = "FloatWrapper"
DOUBLE = "DoubleWrapper"
BYTES = "BytesWrapper"
STRING = "StringWrapper"
DATE = "DateWrapper"
DECIMAL = "DecimalWrapper"
TIME_MICROS = "TimeMicrosWrapper"
TIMESTAMP_MICROS = "TimestampMicrosWrapper"
WRAPPERS = (BOOLEAN, INT, LONG, FLOAT, DOUBLE, BYTES, STRING, DATE, DECIMAL, TIME_MICROS, TIMESTAMP_MICROS)

DECIMAL_PRECISION = 30  # DecimalWrapper.value: bytes, logicalType decimal(30, 15)
DECIMAL_SCALE = 15

_EPOCH = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)
# the days of the Gregorian cutover gap, which java.sql.Date.valueOf(...).toLocalDate() moves forward by ten
_CUTOVER_GAP = ((date(1582, 10, 5) - _EPOCH_DATE).days, (date(1582, 10, 14) - _EPOCH_DATE).days)
_CUTOVER_SHIFT = 10
_UNITS_PER_SECOND = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


class Wrapped(NamedTuple):
    """One bound: the wrapper's short name and its Avro value."""

    wrapper: str
    value: Any


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _epoch_units(value: datetime | int, unit: str) -> int:
    """A timestamp bound as the Parquet column stores it: whole `unit`s since the epoch (UTC)."""
    if isinstance(value, int):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    delta = value - _EPOCH
    nanos = ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1_000
    nanos += getattr(value, "nanosecond", 0)  # a pandas.Timestamp's nanoseconds past the microsecond
    per_unit = 1_000_000_000 // _UNITS_PER_SECOND[unit]
    if nanos % per_unit:
        raise ValueError(f"timestamp {value!r} is no whole number of {unit}")
    return nanos // per_unit


def unscaled(value: Decimal | int) -> int:
    """`value` as DecimalWrapper stores it, an integer count of 10**-15; the rescaling must be exact and leave
    at most 30 digits (`HoodieTableMetadataUtil.tryUpcastDecimal`)."""
    value = Decimal(value)
    if not value.is_finite():
        raise ValueError(f"decimal {value} has no Avro encoding")
    with localcontext() as context:
        context.prec = max(DECIMAL_PRECISION, len(value.as_tuple().digits)) + DECIMAL_SCALE + 2
        scaled = value.scaleb(DECIMAL_SCALE)
        if scaled != scaled.to_integral_value():
            raise ValueError(f"decimal {value} has more than {DECIMAL_SCALE} digits after the point")
    count = int(scaled)
    if len(str(abs(count))) > DECIMAL_PRECISION:
        raise ValueError(f"decimal {value} needs more than {DECIMAL_PRECISION} digits at scale {DECIMAL_SCALE}")
    return count


def _upcast_decimal(value: Decimal | int) -> Decimal:
    with localcontext() as context:
        context.prec = DECIMAL_PRECISION
        return Decimal(unscaled(value)).scaleb(-DECIMAL_SCALE)


def wrap(value: Any, dtype: pa.DataType) -> Wrapped | None:
    """The wrapper Hudi 0.15 stores for a bound `value` of a column stored in Parquet as Arrow type `dtype`.

    Timestamps take a datetime (naive: UTC) or the stored integer; `timestamp[s]` counts as `[ms]`, the unit
    Parquet stores it in.
    """
    if value is None:
        return None
    if pa.types.is_boolean(dtype):
        return Wrapped(BOOLEAN, bool(value))
    if pa.types.is_integer(dtype):
        bits = 64 if dtype.bit_width == 64 else 32
        return Wrapped(LONG if bits == 64 else INT, _signed(int(value), bits))
    if pa.types.is_float32(dtype):
        return Wrapped(FLOAT, float(value))
    if pa.types.is_float64(dtype):
        return Wrapped(DOUBLE, float(value))
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return Wrapped(STRING, str(value))
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return Wrapped(BYTES, bytes(value))
    if pa.types.is_date(dtype):
        days = (value - _EPOCH_DATE).days
        return Wrapped(DATE, days + _CUTOVER_SHIFT if _CUTOVER_GAP[0] <= days <= _CUTOVER_GAP[1] else days)
    if pa.types.is_timestamp(dtype):
        unit = "ms" if dtype.unit == "s" else dtype.unit
        return Wrapped(LONG, _epoch_units(value, unit))
    if pa.types.is_decimal(dtype):
        return Wrapped(DECIMAL, _upcast_decimal(value))
    raise TypeError(f"Hudi 0.15 has no column-statistics wrapper for a column of type {dtype}")


def float_bounds(values: pa.Array | pa.ChunkedArray, dtype: pa.DataType) -> tuple[Wrapped | None, Wrapped | None]:
    """The bounds recorded for a float column's values (Tandem writes floats without footer statistics, see
    `coordinator/write/parquet_files.py`, so they come from the values): their least and greatest, or, when a
    NaN is among them, -inf and +inf. SQL engines order NaN above every number, but Java 0.15's data skipping
    rules a file out when its bound is NaN (observed: `f > 340` then misses the NaN rows), so no NaN bound is
    written; the infinite range keeps the file for every comparison but `> +inf` and `= NaN`."""
    if values.null_count == len(values):
        return None, None
    if pc.any(pc.is_nan(values)).as_py():
        return wrap(-math.inf, dtype), wrap(math.inf, dtype)
    extremes = pc.min_max(values)
    return wrap(extremes["min"].as_py(), dtype), wrap(extremes["max"].as_py(), dtype)


def missing_bound(dtype: pa.DataType, physical_type: str) -> Wrapped | None:
    """What Hudi 0.15 stores as min and max of a Parquet column chunk without a non-null value: parquet-mr's
    statistics of a numeric or boolean physical type then hold its zero, which ParquetUtils converts as if it
    were a value (0, 0.0, false, 1970-01-01, a timestamp of 0); BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY hold none.
    Across row groups such a zero joins the file's min/max like any bound."""
    if physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
        return None
    if pa.types.is_date(dtype):
        return wrap(_EPOCH_DATE, dtype)
    return wrap(0, dtype)


def to_avro(wrapped: Wrapped | None) -> tuple[str, dict] | None:
    """The union branch fastavro writes: named, since every wrapper's one field is called `value`."""
    if wrapped is None:
        return None
    if wrapped.wrapper not in WRAPPERS:
        raise ValueError(f"no value wrapper {wrapped.wrapper!r}")
    return full_name(wrapped.wrapper), {"value": wrapped.value}


def from_avro(branch: tuple[str, dict] | None) -> Wrapped | None:
    if branch is None:
        return None
    name, record = branch
    return Wrapped(name.rsplit(".", 1)[-1], record["value"])


def to_python(wrapped: Wrapped | None) -> Any:
    """The bound as `HoodieAvroUtils.unwrapAvroValueWrapper` gives it: a date for DateWrapper, a UTC datetime
    for TimestampMicrosWrapper (Java's Instant); every other wrapper's value as it is."""
    if wrapped is None:
        return None
    if wrapped.wrapper == DATE:
        return _EPOCH_DATE + timedelta(days=wrapped.value)
    if wrapped.wrapper == TIMESTAMP_MICROS:
        return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=wrapped.value)
    return wrapped.value


def _float_key(value: float) -> tuple:
    """`Float.compare`/`Double.compare`: -0.0 below 0.0, NaN above everything and equal to itself."""
    if math.isnan(value):
        return (1,)
    return (0, value, math.copysign(1.0, value) > 0)


def order_key(wrapped: Wrapped) -> tuple:
    """The order Java's `compareTo` puts unwrapped bounds in, for merging ranges as Hudi does: String by
    UTF-16 code units, ByteBuffer by signed bytes, floats as `Float.compare`; bounds of two wrappers do not
    compare (Java throws ClassCastException)."""
    value = wrapped.value
    if wrapped.wrapper == STRING:
        return (wrapped.wrapper, value.encode("utf-16-be"))
    if wrapped.wrapper == BYTES:
        return (wrapped.wrapper, bytes(b ^ 0x80 for b in value))
    if wrapped.wrapper in (FLOAT, DOUBLE):
        return (wrapped.wrapper, _float_key(value))
    return (wrapped.wrapper, value)
