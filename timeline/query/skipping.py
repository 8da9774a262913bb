"""Data skipping: whether a file with given column statistics may hold a row matching a filter.

Each predicate is evaluated three-valued over everything the statistics allow:
(may some row make it TRUE, may some row make it FALSE). A row where it is NULL
counts as neither, so NOT swaps the two and a NULL stays excluded, as in SQL's
WHERE. A file is skipped only when no row may make the filter TRUE, so every
doubt (a column without statistics, a literal the engines might cast differently,
an opaque part) answers "may" both ways. Comparisons follow Spark SQL and DuckDB
where they agree: the literal is cast to the column's type (an inexact cast is
widened to every value an engine might produce), NULL compares unknown, NaN equals
NaN and sorts above +inf, -0.0 equals 0.0, and a timestamp literal read in the
session time zone may be any instant within the zones' ±18 h. Partition pruning
(`partition_pruning`) evaluates the same way, a partition's path values as a one-row file.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta, timezone
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from timeline.index.column_stats import BINARY, BOOL, DATE, DECIMAL, FLOAT, INT, STRING, TIMESTAMP, ColumnRange
from timeline.query.column_facts import Facts, facts_of_range
from timeline.query.predicate import (
    And,
    Between,
    Comparison,
    Expr,
    InList,
    IsNull,
    Like,
    LocalTimestamp,
    Not,
    Opaque,
    Or,
    parse_date,
    parse_timestamp,
)

Outcome = tuple[bool, bool]  # (may be TRUE for some row, may be FALSE for some row)
UNDECIDED: Outcome = (True, True)
NEVER: Outcome = (False, False)  # NULL for every row, or no rows

ZONE_SPAN = timedelta(hours=18)  # the widest UTC offset a session time zone may have (java.time's bound)
_UTC = timezone.utc
_NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}  # decimal digits of an int as the engines widen it to a decimal
_INT_TEXT = re.compile(r"-?[0-9]{1,15}")  # exact also where an engine compares through a double
MAX_DECIMAL_DIGITS = 38


@functools.total_ordering
class _Lowest:
    """Below every key: an unknown lower bound."""

    def __eq__(self, other: object) -> bool:
        return other is self

    def __lt__(self, other: object) -> bool:
        return other is not self

    def __hash__(self) -> int:
        return 0


@functools.total_ordering
class _Highest:
    """Above every key: an unknown upper bound."""

    def __eq__(self, other: object) -> bool:
        return other is self

    def __lt__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 1


LOWEST, HIGHEST = _Lowest(), _Highest()
_NAN_KEY = (1, 0)  # numbers are keyed (0, value): NaN sorts above +inf and equals itself


# ---------------------------------------------------------------- public


def may_match(expr: Expr, ranges: Mapping[str, ColumnRange], types: Mapping[str, pa.DataType]) -> bool:
    """False only if no row of a file with these column statistics can satisfy `expr` (names as resolved).

    `types` are the table's column types (a file may hold a narrower one); a column
    without a range or a type decides nothing.
    """
    cache: dict[str, Facts | None] = {}

    def facts(column: str) -> Facts | None:
        if column not in cache:
            found, kind = ranges.get(column), types.get(column)
            cache[column] = facts_of_range(found, kind) if found is not None and kind is not None else None
        return cache[column]

    return evaluate(expr, facts)[0]


def evaluate(expr: Expr, facts: Callable[[str], Facts | None]) -> Outcome:
    """(may be TRUE, may be FALSE) of `expr` for some row of a file whose columns `facts` describes."""
    if isinstance(expr, And):
        left, right = evaluate(expr.left, facts), evaluate(expr.right, facts)
        return left[0] and right[0], left[1] or right[1]
    if isinstance(expr, Or):
        left, right = evaluate(expr.left, facts), evaluate(expr.right, facts)
        return left[0] or right[0], left[1] and right[1]
    if isinstance(expr, Not):
        true, false = evaluate(expr.child, facts)
        return false, true
    if isinstance(expr, Opaque):
        return UNDECIDED
    if isinstance(expr, Comparison) and expr.value is None:
        return NEVER  # `x = NULL` is NULL whatever x holds
    found = facts(expr.column)
    if found is None:
        return UNDECIDED
    try:
        outcome = _leaf(expr, found)
    except (TypeError, ValueError, OverflowError, ArithmeticError):
        return UNDECIDED  # values the statistics hold in an unexpected form
    if getattr(expr, "negated", False):
        return outcome[1], outcome[0]
    return outcome


# ---------------------------------------------------------------- leaves


def _leaf(expr: Expr, found: Facts) -> Outcome:
    if isinstance(expr, IsNull):
        return found.nulls, found.values or found.nan
    if isinstance(expr, Comparison):
        return _compare(expr.op, expr.value, found)
    if isinstance(expr, Between):
        return _between(expr.low, expr.high, found)
    if isinstance(expr, InList):
        return _in_list(expr.values, found)
    if isinstance(expr, Like):
        return _like(expr.pattern, found)
    return UNDECIDED


def _compare(op: str, value: Any, found: Facts) -> Outcome:
    """`column op value` (not negated) over the file's values."""
    if value is None:
        return NEVER
    literal = _literal(value, found)
    if literal is None:
        return UNDECIDED
    domain, low, high = literal
    pieces = _pieces(found, domain)
    if domain == "exact" and found.kind == INT and low == high and low[1] != int(low[1]):
        # an integer column and a fraction: never equal, and x < 2.5 is x <= 2
        if op in ("=", "!="):
            return (False, bool(pieces)) if op == "=" else (bool(pieces), False)
        rounding = ROUND_FLOOR if op in ("<", "<=") else ROUND_CEILING
        op, low = ("<=" if op in ("<", "<=") else ">="), (0, low[1].to_integral_value(rounding=rounding))
        high = low
    true = false = False
    for a, b in pieces:
        true = true or _may(op, a, b, low, high)
        false = false or _may(_NEGATED[op], a, b, low, high)
    return true, false


def _may(op: str, a: Any, b: Any, low: Any, high: Any) -> bool:
    """Whether `v op L` may hold for some v in [a, b] and L in [low, high] (all keys)."""
    if op == "=":
        return a <= high and b >= low
    if op == "!=":
        return not (a == b == low == high)
    if op == "<":
        return a < high
    if op == "<=":
        return a <= high
    if op == ">":
        return b > low
    return b >= low


def _between(low_value: Any, high_value: Any, found: Facts) -> Outcome:
    """x BETWEEN l AND h: TRUE where x >= l and x <= h, FALSE where either fails (a NULL bound never passes)."""
    if low_value is None and high_value is None:
        return NEVER
    if low_value is None:  # NULL AND (x <= h): never TRUE, FALSE where x > h
        return False, _compare(">", high_value, found)[0]
    if high_value is None:
        return False, _compare("<", low_value, found)[0]
    if _literal_class(low_value) != _literal_class(high_value):
        return UNDECIDED  # DuckDB casts the column and both bounds to one common type, Spark each pair apart
    above, below = _compare(">=", low_value, found), _compare("<=", high_value, found)
    true, false = above[0] and below[0], above[1] or below[1]
    low, high = _literal(low_value, found), _literal(high_value, found)
    if true and low is not None and high is not None and low[0] == high[0]:
        # one value must pass both: some piece meets [lowest l, highest h]
        true = any(a <= high[2] and low[1] <= b and low[1] <= high[2] for a, b in _pieces(found, low[0]))
    return true, false


def _in_list(values: tuple, found: Facts) -> Outcome:
    """x IN (v, ...): TRUE where x equals one, FALSE where it equals none and the list holds no NULL."""
    present = [v for v in values if v is not None]
    if len({_literal_class(v) for v in present}) > 1:
        return UNDECIDED  # engines cast a mixed list to one common type, which may not be the column's
    if found.kind != STRING and any(isinstance(v, str) for v in present):
        return UNDECIDED  # Spark may compare such a list as strings
    outcomes = [_compare("=", v, found) for v in present]
    true = any(o[0] for o in outcomes)
    false = len(present) == len(values) and (found.values or found.nan) and all(o[1] for o in outcomes)
    return true, false


def _literal_class(value: Any) -> str:
    """Literals typed alike: a list or range mixing classes is cast to a type that may not be the column's."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, Decimal)):
        return "exact"
    if isinstance(value, datetime):
        return "zoned" if isinstance(value, LocalTimestamp) or value.utcoffset() is not None else "wall"
    return type(value).__name__


def _like(pattern: str, found: Facts) -> Outcome:
    """LIKE on a string column: a literal prefix bounds the matches; only `prefix%` and exact patterns bound misses."""
    if found.kind != STRING:
        return UNDECIDED
    shape = like_shape(pattern)
    if shape is None:
        return UNDECIDED
    prefix, form = shape
    if form == "exact":
        return _compare("=", prefix, found)
    upper = _after_prefix(prefix)
    pieces = _pieces(found, "plain")
    true = any(b >= prefix and (upper is None or a < upper) for a, b in pieces)
    if form == "other":
        return true, bool(pieces)
    return true, any(not (a >= prefix and upper is not None and b < upper) for a, b in pieces)


def like_shape(pattern: str) -> tuple[str, str] | None:
    """(literal prefix, "exact" | "prefix" | "other") of a pattern escaped with `\\`; None if malformed."""
    prefix: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1] not in "%_\\":
                return None
            prefix.append(pattern[i + 1])
            i += 2
            continue
        if char in "%_":
            return "".join(prefix), "prefix" if set(pattern[i:]) == {"%"} else "other"
        prefix.append(char)
        i += 1
    return "".join(prefix), "exact"


def _after_prefix(prefix: str) -> str | None:
    """The least string above every string starting with `prefix`; None when there is none (or prefix is empty)."""
    body = prefix.rstrip(chr(0x10FFFF))
    if not body:
        return None
    return body[:-1] + chr(ord(body[-1]) + 1)


# ---------------------------------------------------------------- domains


def _pieces(found: Facts, domain: str) -> list[tuple[Any, Any]]:
    """The file's non-null values as intervals of keys of `domain`."""
    pieces = []
    if found.values:
        low = LOWEST if found.low is None else found.low
        high = HIGHEST if found.high is None else found.high
        if domain == "exact":
            low, high = _number_key(low), _number_key(high)
        elif domain == "double":
            if found.kind != FLOAT:  # an int or decimal compared as a double: rounded, by up to one step
                low = low if low is LOWEST else _near_double(low)[0]
                high = high if high is HIGHEST else _near_double(high)[1]
            low, high = _number_key(low), _number_key(high)
        pieces.append((low, high))
    if found.nan and domain == "double":
        pieces.append((_NAN_KEY, _NAN_KEY))
    return pieces


def _number_key(value: Any) -> Any:
    return value if value is LOWEST or value is HIGHEST else (0, value)


def _near_double(value: int | Decimal) -> tuple[float, float]:
    """An interval holding every double an engine may round `value` to."""
    try:
        nearest = float(value)
    except OverflowError:
        return (-math.inf, math.inf)
    if nearest == value:
        return nearest, nearest
    return math.nextafter(nearest, -math.inf), math.nextafter(nearest, math.inf)


def _literal(value: Any, found: Facts) -> tuple[str, Any, Any] | None:
    """(domain, lowest key, highest key) the engines may compare the column's values with; None: undecided."""
    kind = found.kind
    if kind in (INT, DECIMAL):
        return _exact_number_literal(value, found)
    if kind == FLOAT:
        return _float_literal(value, found.dtype)
    if kind == STRING:
        return ("plain", value, value) if isinstance(value, str) else None
    if kind == BINARY:
        return ("plain", value, value) if isinstance(value, bytes) else None
    if kind == BOOL:
        return ("plain", value, value) if isinstance(value, bool) else None
    if kind == DATE:
        if isinstance(value, str):
            value = parse_date(value)
        return ("plain", value, value) if type(value) is date else None
    if kind == TIMESTAMP:
        return _timestamp_literal(value, found.dtype.tz is not None)
    return None


def _digits(value: int | Decimal) -> tuple[int, int]:
    """(integer digits, fractional digits) of a number as a SQL decimal."""
    if isinstance(value, int):
        return len(str(abs(value))), 0
    sign, digits, exponent = value.as_tuple()
    scale = max(0, -exponent)
    return max(len(digits) - scale, 1), scale


def _exact_number_literal(value: Any, found: Facts) -> tuple[str, Any, Any] | None:
    dtype = found.dtype
    if isinstance(value, bool):
        return None
    if isinstance(value, str):  # both engines cast such a string to the column's integer type
        if found.kind != INT or not _INT_TEXT.fullmatch(value):
            return None
        value = int(value)
        bits, signed = dtype.bit_width, pa.types.is_signed_integer(dtype)
        if not (-(2 ** (bits - 1)) if signed else 0) <= value < (2 ** (bits - 1) if signed else 2**bits):
            return None
    if isinstance(value, float):
        if math.isnan(value):
            return "double", _NAN_KEY, _NAN_KEY
        return "double", (0, value), (0, value)
    if isinstance(value, Decimal) and not value.is_finite():
        return None
    if not isinstance(value, (int, Decimal)):
        return None
    # compared as a decimal wide enough for both: beyond 38 digits the engines round
    integer, scale = _digits(value)
    if found.kind == INT:
        column_integer, column_scale = _INT_DIGITS.get(dtype.bit_width, 20), 0
    else:
        column_integer, column_scale = dtype.precision - dtype.scale, dtype.scale
    if max(integer, column_integer) + max(scale, column_scale) > MAX_DECIMAL_DIGITS:
        return None
    return "exact", (0, value), (0, value)


def _float_literal(value: Any, dtype: pa.DataType) -> tuple[str, Any, Any] | None:
    """A number compared with a float column: as a double, or (DuckDB, a decimal literal) as a float32."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return "double", _NAN_KEY, _NAN_KEY
    if isinstance(value, Decimal) and not value.is_finite():
        return None
    low, high = (value, value) if isinstance(value, float) else _near_double(value)
    if pa.types.is_float32(dtype) and not isinstance(value, float):  # a double literal widens the column instead
        try:
            nearest = float(value)
        except OverflowError:
            nearest = None  # already widened to every double
        if nearest is not None:
            with np.errstate(all="ignore"):
                single = np.float32(nearest)
            if float(single) != value:  # rounded to float32, perhaps by one step more
                low = min(low, float(np.nextafter(single, np.float32(-np.inf))))
                high = max(high, float(np.nextafter(single, np.float32(np.inf))))
    return "double", (0, low), (0, high)


def _timestamp_literal(value: Any, zoned_column: bool) -> tuple[str, Any, Any] | None:
    """The instants (zoned column) or wall-clock times (plain column) a timestamp literal may stand for."""
    if isinstance(value, str):
        value = parse_timestamp(value)
        if value is None or (value.tzinfo is not None and not zoned_column):
            return None  # an offset in a string cast to a zone-less timestamp: the engines differ
    if type(value) is date:
        value = datetime.combine(value, time())
    if not isinstance(value, datetime):
        return None
    if isinstance(value, LocalTimestamp):  # read in the session zone: within ZONE_SPAN of its wall-clock time
        wall = datetime.combine(value.date(), value.time())
        if zoned_column:
            return "plain", *_widened(wall.replace(tzinfo=_UTC), ZONE_SPAN)
        # the column's wall-clock times are read in the session zone too: each side moves by up to ZONE_SPAN
        return "plain", *_widened(wall, 2 * ZONE_SPAN)
    if value.utcoffset() is not None:
        instant = value.astimezone(_UTC)
        if zoned_column:
            return "plain", instant, instant
        return "plain", *_widened(instant.replace(tzinfo=None), ZONE_SPAN)
    wall = datetime.combine(value.date(), value.time())
    if zoned_column:
        return "plain", *_widened(wall.replace(tzinfo=_UTC), ZONE_SPAN)
    return "plain", wall, wall


def _widened(value: datetime, span: timedelta) -> tuple[Any, Any]:
    try:
        low = value - span
    except OverflowError:
        low = LOWEST
    try:
        high = value + span
    except OverflowError:
        high = HIGHEST
    return low, high
