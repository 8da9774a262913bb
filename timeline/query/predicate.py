"""Engine-neutral filter predicates parsed from SQL WHERE text, for pruning partitions and files.

A filter is parsed once (sqlglot, in DuckDB's or Spark SQL's dialect) into a small
tree whose leaves compare one column with literal values. Literals become the
python values the engines type them as (5 an int, 1.5 a Decimal like SQL's decimal
literal, 1e3 a float, DATE '...' a date), so `timeline.query.skipping` can cast them to a
column's type as the engines do. Anything else (functions, arithmetic, two columns,
literals whose value the two engines might read differently) is kept as `Opaque`,
which never prunes: the engine applies the full filter to the rows anyway.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from timeline.errors import BadInputError

DIALECTS = ("duckdb", "spark")
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
MAX_DIGITS = 38  # both engines type wider numeric literals as floating point (or refuse them)


class LocalTimestamp(datetime):
    """A timestamp literal without offset that the engine reads in its session time zone.

    Spark's TIMESTAMP '...' and DuckDB's TIMESTAMPTZ '...': an instant somewhere
    within the zones' ±18 h of the wall-clock time it spells, never compared exactly.
    """


@dataclass(frozen=True)
class Comparison:
    column: str
    op: str  # one of OPERATORS
    value: Any  # None: SQL NULL


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple  # None entries: NULL
    negated: bool = False


@dataclass(frozen=True)
class Between:
    column: str
    low: Any
    high: Any
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """`pattern` uses `\\` as its escape character (Spark's default), whatever the dialect it came from."""

    column: str
    pattern: str
    negated: bool = False


@dataclass(frozen=True)
class And:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not:
    child: Expr


@dataclass(frozen=True)
class Opaque:
    """A part of the filter that is not translated; `columns` are the plain column names it reads, as written."""

    text: str
    columns: tuple[str, ...] = ()


Expr = Comparison | InList | Between | IsNull | Like | And | Or | Not | Opaque


class _NotLiteral:
    """Marks a node that is no literal both engines read alike."""


NOT_LITERAL = _NotLiteral()

_COMPARISONS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_INT_TYPES = {
    exp.DataType.Type.TINYINT: 8,
    exp.DataType.Type.SMALLINT: 16,
    exp.DataType.Type.INT: 32,
    exp.DataType.Type.BIGINT: 64,
}
_STRING_TYPES = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT}
_WALL_TIMESTAMPS = {"duckdb": {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ}}
_WALL_TIMESTAMPS["spark"] = {exp.DataType.Type.TIMESTAMPNTZ}
# Spark's plain TIMESTAMP is the session-zone one unless spark.sql.timestampType says otherwise: read as such,
# which also covers the other setting (a session-zone literal is never compared exactly)
_ZONED_TIMESTAMPS = {
    "duckdb": {exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ},
    "spark": {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ},
}
_INT_TEXT = re.compile(r"[0-9]+")
_DECIMAL_TEXT = re.compile(r"[0-9]+\.[0-9]*|\.[0-9]+")
_FLOAT_TEXT = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+")
_SIGNED_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INFINITY_TEXT = re.compile(r"[+-]?inf(inity)?")
DATE_TEXT = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})")
TIMESTAMP_TEXT = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})?"
)
# escapes in Spark string literals that sqlglot reads as Spark does; any other makes the filter's strings untrusted
_SPARK_ESCAPES = set("\\'\"%_ntr")


def parse_sql(where: str, dialect: str = "duckdb") -> Expr:
    """The predicate tree of a SQL filter; BadInputError (one line) when it is not one valid SQL expression.

    Column references keep their spelling: `resolve` maps them to a schema's.
    """
    if dialect not in DIALECTS:
        raise BadInputError(f"unknown SQL dialect {dialect!r} (one of {', '.join(DIALECTS)})")
    if not where or not where.strip():
        raise BadInputError("the filter is empty")
    try:
        tree = sqlglot.parse_one(where, read=dialect)
        if not isinstance(tree, exp.Condition):
            raise BadInputError(f"filter {where!r} is not a single {dialect} SQL expression")
        return _Translator(dialect, _strings_trusted(where, dialect)).expr(tree)
    except sqlglot.errors.SqlglotError as err:
        raise BadInputError(f"filter {where!r} is not valid {dialect} SQL: {_first_line(err)}") from err
    except RecursionError as err:
        raise BadInputError(f"filter {where[:200]!r} is nested too deeply") from err


def _first_line(err: Exception) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[0]) if lines else type(err).__name__


def _strings_trusted(where: str, dialect: str) -> bool:
    """Whether every string literal's value is certain: Spark's backslash escapes beyond the common ones are not."""
    if dialect != "spark" or "\\" not in where:
        return True
    for token in sqlglot.Dialect.get_or_raise(dialect).tokenize(where):
        raw = where[token.start : token.end + 1]
        if "\\" not in raw or token.token_type != sqlglot.TokenType.STRING:
            continue
        body, i = raw[1:-1], 0
        while i < len(body):
            if body[i] == "\\":
                if i + 1 >= len(body) or body[i + 1] not in _SPARK_ESCAPES:
                    return False
                i += 1
            i += 1
    return True


class _Translator:
    def __init__(self, dialect: str, strings_trusted: bool):
        self.dialect = dialect
        self.strings_trusted = strings_trusted

    def opaque(self, node: exp.Expression) -> Opaque:
        names = (c.this.this for c in node.find_all(exp.Column) if _plain_column(c) is not None)
        return Opaque(node.sql(dialect=self.dialect), tuple(dict.fromkeys(names)))

    def expr(self, node: exp.Expression) -> Expr:
        node = _unparen(node)
        if isinstance(node, (exp.And, exp.Or)):
            return self.chain(node)
        if isinstance(node, exp.Not):
            child = self.expr(node.this)
            if isinstance(node.this, (exp.In, exp.Between, exp.Is, exp.Like, exp.Escape)) and isinstance(
                child, (InList, Between, IsNull, Like)
            ):
                return replace(child, negated=not child.negated)
            return Not(child)
        translated = self.leaf(node)
        return translated if translated is not None else self.opaque(node)

    def chain(self, node: exp.And | exp.Or) -> Expr:
        """`a AND b AND c ...` read without recursing once per operand (long generated filters)."""
        kind = type(node)
        operands: list[Expr] = []
        stack: list[exp.Expression] = [node]
        while stack:
            item = stack.pop()
            if type(item) is kind:
                stack += [item.expression, item.this]
            else:
                operands.append(self.expr(item))
        return joined(And if kind is exp.And else Or, operands)

    def leaf(self, node: exp.Expression) -> Expr | None:
        column = _plain_column(node)
        if column is not None:  # a boolean column used as a condition
            return Comparison(column, "=", True)
        if type(node) in _COMPARISONS:
            return self.comparison(_COMPARISONS[type(node)], node.this, node.expression)
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            return self.null_safe(isinstance(node, exp.NullSafeNEQ), node.this, node.expression)
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            column = _plain_column(node.this)
            low, high = self.literal(node.args["low"]), self.literal(node.args["high"])
            if column is not None and NOT_LITERAL not in (low, high):
                return Between(column, low, high)
            return None
        if isinstance(node, exp.In):
            return self.in_list(node)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            column = _plain_column(node.this)
            return IsNull(column) if column is not None else None
        if isinstance(node, (exp.Like, exp.Escape)):
            return self.like(node)
        return None

    def comparison(self, op: str, left: exp.Expression, right: exp.Expression) -> Expr | None:
        column, value = _plain_column(left), self.literal(right)
        if column is None or value is NOT_LITERAL:
            column, value, op = _plain_column(right), self.literal(left), FLIPPED[op]
        if column is None or value is NOT_LITERAL:
            return None
        return Comparison(column, op, value)

    def null_safe(self, distinct: bool, left: exp.Expression, right: exp.Expression) -> Expr | None:
        """IS [NOT] DISTINCT FROM as plain comparisons with explicit null tests (never NULL itself)."""
        found = self.comparison("=", left, right)
        if found is None:
            return None
        if found.value is None:
            return IsNull(found.column, negated=distinct)
        if distinct:
            return Or(Comparison(found.column, "!=", found.value), IsNull(found.column))
        return And(found, IsNull(found.column, negated=True))

    def in_list(self, node: exp.In) -> Expr | None:
        column = _plain_column(node.this)
        if column is None or any(node.args.get(k) for k in ("query", "unnest", "field")) or not node.expressions:
            return None
        values = tuple(self.literal(v) for v in node.expressions)
        return None if NOT_LITERAL in values else InList(column, values)

    def like(self, node: exp.Expression) -> Expr | None:
        escape: str | None = "\\" if self.dialect == "spark" else None
        if isinstance(node, exp.Escape):
            escape = self.literal(node.expression)
            node = node.this
            if not isinstance(node, exp.Like) or not isinstance(escape, str):
                return None
        column, pattern = _plain_column(node.this), self.literal(node.expression)
        if column is None or not isinstance(pattern, str):
            return None
        canonical = canonical_pattern(pattern, escape)
        return None if canonical is None else Like(column, canonical, bool(node.args.get("negate")))

    def literal(self, node: exp.Expression) -> Any:
        """The python value of a literal, None for NULL, NOT_LITERAL for anything else."""
        node = _unparen(node)
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return node.this if self.strings_trusted else NOT_LITERAL
            return _number(node.this)
        if isinstance(node, exp.Neg):
            inner = self.literal(node.this)
            if isinstance(inner, (int, Decimal, float)) and not isinstance(inner, bool):
                return -inner
            return NOT_LITERAL
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(self.literal(node.this), node.args.get("to"))
        return NOT_LITERAL

    def cast(self, value: Any, to: exp.DataType | None) -> Any:
        """A literal cast, only where both engines give the same exact value (else NOT_LITERAL)."""
        if value is NOT_LITERAL or not isinstance(to, exp.DataType):
            return NOT_LITERAL
        if value is None:
            return None
        kind = to.this
        if kind == exp.DataType.Type.DATE:
            return parse_date(value) if isinstance(value, str) else NOT_LITERAL
        if kind in _WALL_TIMESTAMPS[self.dialect] or kind in _ZONED_TIMESTAMPS[self.dialect]:
            stamp = parse_timestamp(value) if isinstance(value, str) else None
            if stamp is None:
                return NOT_LITERAL
            if kind in _WALL_TIMESTAMPS[self.dialect]:
                return stamp if stamp.tzinfo is None else NOT_LITERAL
            return stamp if stamp.tzinfo is not None else LocalTimestamp(*stamp.timetuple()[:6], stamp.microsecond)
        if kind == exp.DataType.Type.DOUBLE:
            return _to_double(value)
        if kind == exp.DataType.Type.DECIMAL:
            return _to_decimal(value, to)
        if kind in _INT_TYPES:
            return _to_int(value, _INT_TYPES[kind])
        if kind in _STRING_TYPES and not to.expressions:
            return value if isinstance(value, str) else NOT_LITERAL
        if kind == exp.DataType.Type.BOOLEAN:
            return value if isinstance(value, bool) else NOT_LITERAL
        return NOT_LITERAL


def joined(kind: type[And] | type[Or], operands: list[Expr]) -> Expr:
    """Operands joined left to right as SQL groups them; a long list as a balanced tree (shallow to walk)."""
    if len(operands) <= 32:
        return functools.reduce(kind, operands)
    middle = len(operands) // 2
    return kind(joined(kind, operands[:middle]), joined(kind, operands[middle:]))


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _plain_column(node: exp.Expression) -> str | None:
    """The name of an unqualified column reference (a qualified one may be a struct field)."""
    node = _unparen(node)
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        return None
    if any(node.args.get(k) for k in ("table", "db", "catalog")):
        return None
    return node.this.this


def _number(text: str) -> Any:
    """A numeric literal as the engines type it: integers -> int, decimals -> Decimal, exponents (DOUBLE) -> float."""
    if _INT_TEXT.fullmatch(text):
        return int(text) if len(text.lstrip("0")) <= MAX_DIGITS else NOT_LITERAL
    if _DECIMAL_TEXT.fullmatch(text):
        value = Decimal(text)
        return value if len(value.as_tuple().digits) <= MAX_DIGITS else NOT_LITERAL
    if _FLOAT_TEXT.fullmatch(text):
        value = float(text)
        return value if value - value == 0 else NOT_LITERAL  # finite
    return NOT_LITERAL


def _to_double(value: Any) -> Any:
    if isinstance(value, bool):
        return NOT_LITERAL
    if isinstance(value, float):
        return value
    if isinstance(value, (int, Decimal)):
        try:
            result = float(value)
        except OverflowError:
            return NOT_LITERAL
        return result if result == value else NOT_LITERAL  # the engines may round an inexact one differently
    if not isinstance(value, str):
        return NOT_LITERAL
    if value.lower() == "nan":
        return math.nan
    if _INFINITY_TEXT.fullmatch(value.lower()):
        return -math.inf if value.startswith("-") else math.inf
    if not _SIGNED_NUMBER.fullmatch(value):
        return NOT_LITERAL
    result = float(value)
    return result if math.isfinite(result) else NOT_LITERAL


def _to_decimal(value: Any, to: exp.DataType) -> Any:
    params = [p.this for p in to.expressions if isinstance(p, exp.DataTypeParam)]
    if len(params) != 2 or not all(isinstance(p, exp.Literal) and _INT_TEXT.fullmatch(p.this) for p in params):
        return NOT_LITERAL  # the default precision and scale differ between the engines
    precision, scale = (int(p.this) for p in params)
    if isinstance(value, str) and _SIGNED_NUMBER.fullmatch(value) and "e" not in value.lower():
        value = Decimal(value)
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return NOT_LITERAL
    number = Decimal(value)
    exponent = number.as_tuple().exponent
    if not number.is_finite() or (isinstance(exponent, int) and -exponent > scale) or not 0 <= scale <= precision:
        return NOT_LITERAL  # rounding: the engines round differently
    if abs(number) >= Decimal(10) ** (precision - scale):
        return NOT_LITERAL
    return number


def _to_int(value: Any, bits: int) -> Any:
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return NOT_LITERAL  # from decimals: Spark truncates, DuckDB rounds
    return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else NOT_LITERAL


def parse_date(text: str) -> date | None:
    """A date both engines read the same from `text` (yyyy-m-d), else None."""
    match = DATE_TEXT.fullmatch(text)
    if match is None:
        return None
    try:
        return date(*(int(g) for g in match.groups()))
    except ValueError:
        return None


def parse_timestamp(text: str) -> datetime | None:
    """A timestamp both engines read the same from `text`, aware iff it gives an offset; None otherwise."""
    match = TIMESTAMP_TEXT.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micros = int((fraction or "").ljust(6, "0"))
    zone = None
    if offset:
        minutes = 0 if offset == "Z" else int(offset[1:3]) * 60 + int(offset[4:6])
        if minutes > 18 * 60:
            return None
        zone = timezone(timedelta(minutes=-minutes if offset.startswith("-") else minutes))
    try:
        parts = (int(p or 0) for p in (year, month, day, hour, minute, second))
        return datetime(*parts, micros, tzinfo=zone)
    except ValueError:
        return None


def canonical_pattern(pattern: str, escape: str | None) -> str | None:
    """A LIKE pattern rewritten with `\\` as its escape character; None where the engines might read it differently."""
    if escape is None:
        return pattern.replace("\\", "\\\\")
    if len(escape) != 1 or escape in "%_":
        return None
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == escape:
            if i + 1 >= len(pattern) or pattern[i + 1] not in ("%", "_", escape):
                return None  # Spark refuses it, DuckDB reads it some way
            following = pattern[i + 1]
            out.append("\\" + following if following in "%_\\" else following)
            i += 2
            continue
        out.append("\\\\" if char == "\\" else char)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- walking the tree


def columns_of(expr: Expr) -> set[str]:
    """Every column the filter names, in opaque parts too."""
    if isinstance(expr, (And, Or)):
        return columns_of(expr.left) | columns_of(expr.right)
    if isinstance(expr, Not):
        return columns_of(expr.child)
    if isinstance(expr, Opaque):
        return set(expr.columns)
    return {expr.column}


def resolve(expr: Expr, schema: pa.Schema) -> Expr:
    """`expr` with its column names spelled as in `schema` (exact match first, else the one case-insensitive one).

    An unknown or ambiguous column of a translated leaf is bad input naming it; one
    inside an opaque part is left as written (the engine reports it, if it is one).
    """
    names = schema.names

    def spelled(name: str, strict: bool) -> str:
        if name in names:
            return name
        folded = [n for n in names if n.casefold() == name.casefold()]
        if len(folded) == 1:
            return folded[0]
        if not strict:
            return name
        if folded:
            raise BadInputError(f"filter column {name!r} is ambiguous: {', '.join(map(repr, folded))}")
        raise BadInputError(f"filter names column {name!r}, which the table lacks (columns: {', '.join(names)})")

    def walk(node: Expr) -> Expr:
        if isinstance(node, (And, Or)):
            return type(node)(walk(node.left), walk(node.right))
        if isinstance(node, Not):
            return Not(walk(node.child))
        if isinstance(node, Opaque):
            return Opaque(node.text, tuple(dict.fromkeys(spelled(c, False) for c in node.columns)))
        return replace(node, column=spelled(node.column, True))

    return walk(expr)


# ---------------------------------------------------------------- back to SQL


def to_sql(expr: Expr, dialect: str = "duckdb") -> str:
    """SQL text of `expr` in `dialect` that `parse_sql` reads back to the same tree (Opaque: its text as is).

    ValueError for a literal with no SQL spelling here (bytes, offsets with seconds).
    """
    if isinstance(expr, And):
        return f"({to_sql(expr.left, dialect)}) AND ({to_sql(expr.right, dialect)})"
    if isinstance(expr, Or):
        return f"({to_sql(expr.left, dialect)}) OR ({to_sql(expr.right, dialect)})"
    if isinstance(expr, Not):
        return f"NOT ({to_sql(expr.child, dialect)})"
    if isinstance(expr, Opaque):
        return f"({expr.text})"
    column = quote_identifier(expr.column, dialect)
    negation = "NOT " if getattr(expr, "negated", False) else ""
    if isinstance(expr, Comparison):
        return f"{column} {'<>' if expr.op == '!=' else expr.op} {sql_literal(expr.value, dialect)}"
    if isinstance(expr, InList):
        return f"{column} {negation}IN ({', '.join(sql_literal(v, dialect) for v in expr.values)})"
    if isinstance(expr, Between):
        low, high = sql_literal(expr.low, dialect), sql_literal(expr.high, dialect)
        return f"{column} {negation}BETWEEN {low} AND {high}"
    if isinstance(expr, IsNull):
        return f"{column} IS {negation}NULL"
    if isinstance(expr, Like):
        escape = " ESCAPE '\\'" if dialect == "duckdb" and "\\" in expr.pattern else ""
        return f"{column} {negation}LIKE {sql_literal(expr.pattern, dialect)}{escape}"
    raise TypeError(f"not a predicate: {expr!r}")


def quote_identifier(name: str, dialect: str) -> str:
    if dialect == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def sql_literal(value: Any, dialect: str) -> str:
    """A literal both engines (in `dialect`'s syntax) read as the python value `value`."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        text = format(value, "f")
        return text if "." in text else f"{text}.0"
    if isinstance(value, float):
        if value != value:
            return "CAST('NaN' AS DOUBLE)"
        if value in (float("inf"), float("-inf")) or (value == 0 and str(value).startswith("-")):
            return f"CAST('{'Infinity' if value > 0 else '-Infinity' if value < 0 else '-0.0'}' AS DOUBLE)"
        text = repr(value)
        return text if "e" in text else f"{text}e0"
    if isinstance(value, str):
        if dialect == "spark":
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return _timestamp_literal(value, dialect)
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    raise ValueError(f"no SQL literal for {value!r}")


def _timestamp_literal(value: datetime, dialect: str) -> str:
    text = value.replace(tzinfo=None).isoformat(sep=" ")
    offset = value.utcoffset()
    if offset is not None:
        minutes, rest = divmod(int(offset.total_seconds()), 60)
        if rest:
            raise ValueError(f"no SQL literal for {value!r}: its offset has seconds")
        sign = "-" if minutes < 0 else "+"
        text += f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    zoned = offset is not None or isinstance(value, LocalTimestamp)
    if dialect == "spark":
        return f"{'TIMESTAMP' if zoned else 'TIMESTAMP_NTZ'} '{text}'"
    return f"{'TIMESTAMPTZ' if zoned else 'TIMESTAMP'} '{text}'"
