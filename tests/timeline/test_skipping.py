"""Data skipping against an independent engine: a file or partition is skipped only where DuckDB finds no row.

Random rows of every supported type (nulls, NaN, -0.0, infinities, edge integers,
long and unicode strings, decimals, dates, timestamps with and without a zone)
are split into random files, and each file's statistics computed exactly
(`column_ranges.ranges_of_table`). Some columns are read as a wider table type
(schema evolution's promotions). Random predicate trees are rendered to SQL
(`predicate.to_sql`), must read back to the same tree in both dialects, and are
evaluated by DuckDB on the rows in a random session time zone. Wherever DuckDB
finds a matching row in a file `may_match` must say so; where it finds none,
`may_match` must prune often enough to show it is not trivially true. Single
leaves and their negations on one column are checked the same way (the casts of
literals, where they are subtle), and partition pruning on partition paths.
"""

from __future__ import annotations

import functools
import math
import os
from collections import Counter
from dataclasses import dataclass, fields, is_dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.timeline.test_hudi_ranges import ranges as hudi_ranges
from timeline.errors import BadInputError
from timeline.format.keys import DEFAULT_PARTITION, partition_paths
from timeline.index.column_ranges import ranges_of_table
from timeline.index.column_stats import ColumnRange
from timeline.query.partition_filter import typed_fields
from timeline.query.partition_pruning import prune_partitions
from timeline.query.predicate import (
    And,
    Between,
    Comparison,
    InList,
    IsNull,
    Like,
    LocalTimestamp,
    Not,
    Opaque,
    Or,
    columns_of,
    parse_sql,
    resolve,
    to_sql,
)
from timeline.query.skipping import may_match

duckdb = pytest.importorskip("duckdb")

# SKIPPING_EXAMPLES=N runs N examples of each property (at length: minutes)
FILE_EXAMPLES = int(os.environ.get("SKIPPING_EXAMPLES", 200))
PARTITION_EXAMPLES = int(os.environ.get("SKIPPING_EXAMPLES", 100))
PREDICATES = 10
MIN_PRUNE_SHARE = 0.4  # of the non-empty files (partitions) with no matching row

UTC = timezone.utc
NAN, INF = math.nan, math.inf
FILE_SCHEMA = pa.schema(
    [
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f64", pa.float64()),
        ("f32", pa.float32()),
        ("dec", pa.decimal128(9, 2)),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
    ]
)
COLUMNS = FILE_SCHEMA.names
# the table type a file's column is read as: its own, or a promotion
PROMOTIONS = {"i32": [pa.int32(), pa.int64(), pa.float64(), pa.float32(), pa.decimal128(12, 2)]}
PROMOTIONS["f32"] = [pa.float32(), pa.float64()]
ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Kiritimati", "Etc/GMT+12"]


def f32(value: float) -> float:
    return float(np.float32(value))


STRINGS = ["", "a", "ab", "abc", "b", "B", "Z", "é", "日本", "5", " ", "a b", "%", "_", "\\", "a%b", "'"]
STRINGS += ["\U0010ffff", "a\U0010ffff", "a" * 70, "a" * 64 + "b", "ab" + "\U0010ffff" * 70, "日" * 66]
DATES = [date(1970, 1, 1), date(2020, 1, 1), date(2020, 2, 29), date(2020, 3, 1), date(1, 1, 1), date(9999, 12, 31)]
TIMES = [datetime(1970, 1, 1), datetime(2020, 3, 8, 2, 30), datetime(2020, 3, 8, 10, 30), datetime(2020, 1, 1, 12, 30)]
TIMES += [datetime(2020, 1, 1, 12, 30, 0, 1), datetime(2020, 11, 1, 1, 30), datetime(1, 1, 2), datetime(9999, 12, 30)]
DELTAS = [timedelta(0)] * 3 + [timedelta(microseconds=1)] * 2 + [timedelta(hours=1)] * 2 + [timedelta(hours=6)]
DELTAS += [timedelta(hours=17), timedelta(hours=19), timedelta(hours=35), timedelta(hours=37), timedelta(days=1)]
OFFSETS = [timezone(timedelta(hours=h, minutes=m)) for h, m in ((0, 0), (2, 0), (-8, 0), (5, 30), (14, 0), (-12, 0))]
VALUES = {
    "i32": st.one_of(st.integers(-3, 12), st.sampled_from([-(2**31), 2**31 - 1, 16777217])),
    "i64": st.one_of(st.integers(-10, 10), st.sampled_from([-(2**63), 2**63 - 1, 2**53, 2**53 + 1])),
    "f64": st.one_of(
        st.sampled_from([NAN, -0.0, 0.0, INF, -INF]),
        st.sampled_from([1.5, -2.25, 3.0, 1e300, 5e-324, 0.1]),
        st.integers(-3, 3).map(float),
    ),
    "f32": st.one_of(
        st.sampled_from([NAN, -0.0, 0.0, INF, -INF]),
        st.sampled_from([1.5, f32(0.1), 16777216.0, f32(3.4e38), f32(1e-45)]),
        st.integers(-3, 3).map(float),
    ),
    "dec": st.sampled_from(["0.00", "-1.50", "1.50", "0.10", "2.00", "9999999.99", "-9999999.99", "0.01"]).map(Decimal),
    "s": st.one_of(st.sampled_from(STRINGS), st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=4)),
    "b": st.booleans(),
    "d": st.one_of(st.sampled_from(DATES), st.integers(0, 3).map(lambda n: date(2020, 2, 28) + timedelta(days=n))),
    "ts": st.sampled_from(TIMES),
    "tz": st.sampled_from(TIMES).map(lambda t: t.replace(tzinfo=UTC)),
}

Pools = dict[str, list]


# ---------------------------------------------------------------- literals of each kind


def kind_of(dtype: pa.DataType) -> str:
    if pa.types.is_integer(dtype):
        return "int"
    if pa.types.is_floating(dtype):
        return "float"
    if pa.types.is_decimal(dtype):
        return "decimal"
    if pa.types.is_string(dtype):
        return "string"
    if pa.types.is_boolean(dtype):
        return "bool"
    if pa.types.is_date(dtype):
        return "date"
    return "tz" if dtype.tz else "ts"


def own(pool: list) -> list:
    return [v for v in pool if v is not None]


def numbers(pool: list, kind: str) -> st.SearchStrategy:
    """Numeric literals near the column's values: ints, decimal literals and doubles (the engines' three kinds)."""
    near = [v for v in own(pool) if not (isinstance(v, float) and not math.isfinite(v))]
    ints = st.one_of(
        st.sampled_from([0, 1, 2, 3, -1, 12, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1]),
        st.sampled_from(near).map(lambda v: int(v) if abs(v) < 2**63 else 0) if near else st.just(5),
    )
    decimals = st.sampled_from(["2.5", "-0.5", "0.1", "1.50", "0.125", "9999999.99", "10000000", "1.505", "1.0"])
    doubles = st.sampled_from([NAN, INF, -INF, -0.0, 0.1, 1.5, 3.0, 1e300, 16777217.0, 2.0**53, f32(0.1), 2.0**31])
    own_values = st.sampled_from(own(pool)) if own(pool) else st.just(0)
    # a float32's shortest decimal: equal to it as a float32 (DuckDB), not as a double (Spark)
    spelled = [Decimal(str(np.float32(v))) for v in near if isinstance(v, float) and 1e-20 < abs(v) < 1e20]
    strategies = [ints, decimals.map(Decimal), doubles, own_values, *([st.sampled_from(spelled)] if spelled else [])]
    if kind == "int":
        strategies.append(st.sampled_from([0, 1, 2, 5, 12, -3]).map(str))
    return st.one_of(*strategies)


def timestamps(pool: list, zoned: bool) -> st.SearchStrategy:
    base = st.sampled_from(own(pool) or TIMES).map(lambda t: t.replace(tzinfo=None))
    shifted = st.tuples(base, st.sampled_from(DELTAS), st.sampled_from([1, -1])).map(lambda p: shift(p[0], p[1] * p[2]))
    return shifted.flatmap(
        lambda t: st.sampled_from(
            [
                t,
                LocalTimestamp(*t.timetuple()[:6], t.microsecond),
                *(t.replace(tzinfo=z) for z in OFFSETS[:3]),
                t.date(),
                t.isoformat(sep=" "),
                t.isoformat(),
                *([f"{t.isoformat(sep=' ')}+02:00", f"{t.isoformat(sep=' ')}Z"] if zoned else []),
            ]
        )
    )


def shift(value: datetime, delta: timedelta) -> datetime:
    try:
        return value + delta
    except OverflowError:
        return value


def literals(column: str, kind: str, pool: list, dtype: pa.DataType | None = None) -> st.SearchStrategy:
    """Literals DuckDB compares with the column: the rows' own values, their neighbours, and edge cases."""
    if kind in ("int", "float", "decimal"):
        found = numbers(pool, kind)
        if dtype is not None and pa.types.is_float32(dtype):  # the values as the table reads them
            rounded = [f32(v) for v in own(pool) if not isinstance(v, Decimal)]
            return st.one_of(found, st.sampled_from(rounded)) if rounded else found
        return found
    if kind == "string":
        prefixes = sorted({v[:n] for v in own(pool) for n in (1, 2)} | set(STRINGS))
        return st.sampled_from(prefixes + own(pool))
    if kind == "bool":
        return st.booleans()
    if kind == "date":
        days = st.sampled_from(own(pool) or DATES)
        near = st.tuples(days, st.integers(-1, 1)).map(
            lambda p: p[0] + timedelta(days=p[1]) if 1 < p[0].year < 9999 else p[0]
        )
        return near.flatmap(lambda d: st.sampled_from([d, d.isoformat()]))
    return timestamps(pool, kind == "tz")


def escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@st.composite
def like_patterns(draw, pool: list) -> str:
    values = own(pool) or STRINGS
    prefix = escaped(draw(st.sampled_from(values))[: draw(st.integers(0, 3))])
    return prefix + draw(st.sampled_from(["%", "%%", "", "_%", "%b", "_"]))


OPAQUE_TEXTS = ["length(s) > 2", "i64 % 3 = 0", "f64 + 1 > 2", "i32 = i64", "coalesce(b, false)", "s < 'b' || s"]


@st.composite
def leaf_on(draw, column, kind, value, pool, opaque: list[str], null_odds: int = 10, shape: str | None = None):
    """A leaf on `column` with literals from `value` (NULL once in `null_odds`), or one of the `opaque` filters."""
    shapes = ["compare"] * 4 + ["in", "between", "null"] + ["like"] * 3 * (kind == "string") + ["opaque"] * bool(opaque)
    shape = shape or draw(st.sampled_from(shapes))
    maybe_null = st.one_of(value, st.just(None)) if draw(st.integers(1, null_odds)) == 1 else value
    if shape == "compare":
        return Comparison(column, draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="])), draw(maybe_null))
    if shape == "in":
        first = draw(value)
        values = [first, *(v for v in draw(st.lists(value, max_size=2)) if classes(v) == classes(first))]
        return InList(column, tuple(values + draw(st.sampled_from([[], [None]]))), draw(st.booleans()))
    if shape == "between":
        low, high = draw(maybe_null), draw(maybe_null)
        if None not in (low, high) and classes(low) != classes(high):
            high = low
        return Between(column, low, high, draw(st.booleans()))
    if shape == "null":
        return IsNull(column, draw(st.booleans()))
    if shape == "like":
        return Like(column, draw(like_patterns(pool)), draw(st.booleans()))
    found = parse_sql(draw(st.sampled_from(opaque)))
    assert isinstance(found, Opaque)
    return found


def predicates(columns: list[str], pools: Pools, kinds: dict[str, str], opaque: list[str], leaves: int, dtypes=None):
    values = {c: literals(c, kinds[c], pools[c], (dtypes or {}).get(c)) for c in columns}
    leaf = st.sampled_from(columns).flatmap(lambda c: leaf_on(c, kinds[c], values[c], pools[c], opaque))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: And(*p)),
            st.tuples(inner, inner).map(lambda p: Or(*p)),
            inner.map(Not),
        ),
        max_leaves=leaves,
    )


def classes(value) -> str:
    """The class of a literal: IN lists and BETWEEN bounds are drawn from one class (mixed ones are undecided)."""
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    if isinstance(value, (int, Decimal)):
        return "exact"
    if isinstance(value, datetime):
        return "zoned" if isinstance(value, LocalTimestamp) or value.utcoffset() is not None else "wall"
    return type(value).__name__


# ---------------------------------------------------------------- examples


@dataclass
class Example:
    files: list[pa.Table]  # each in the file schema
    table_schema: pa.Schema  # the types the table reads the files as
    zone: str
    predicates: list


def pools() -> st.SearchStrategy[Pools]:
    return st.fixed_dictionaries(
        {c: st.lists(st.one_of(st.none(), VALUES[c]), min_size=1, max_size=5) for c in COLUMNS}
    )


@st.composite
def examples(draw) -> Example:
    pool = draw(pools())
    count = draw(st.integers(0, 16))
    rows = [{c: draw(st.sampled_from(values)) for c, values in pool.items()} for _ in range(count)]
    file_count = draw(st.integers(1, 4))
    owners = [draw(st.integers(0, file_count - 1)) for _ in rows]
    files = [
        pa.Table.from_pylist([r for r, o in zip(rows, owners, strict=True) if o == f], FILE_SCHEMA)
        for f in range(file_count)
    ]
    schema = pa.schema(
        [pa.field(c, draw(st.sampled_from(PROMOTIONS.get(c, [FILE_SCHEMA.field(c).type])))) for c in COLUMNS]
    )
    kinds = {f.name: kind_of(f.type) for f in schema}
    focus = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=3, unique=True))  # denser leaves
    return Example(
        files=files,
        table_schema=schema,
        zone=draw(st.sampled_from(ZONES)),
        predicates=draw(
            st.lists(
                predicates(focus, pool, kinds, OPAQUE_TEXTS, 4, dict(zip(schema.names, schema.types, strict=True))),
                min_size=PREDICATES,
                max_size=PREDICATES,
            )
        ),
    )


def same(a, b) -> bool:
    """Trees equal, NaN equal to NaN and a session-zone timestamp apart from a plain one."""
    if is_dataclass(a) and is_dataclass(b):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, datetime) or isinstance(b, datetime):
        return type(a) is type(b) and a == b and (a.utcoffset() is None) == (b.utcoffset() is None)
    return type(a) is type(b) and a == b if isinstance(a, (date, bool)) else a == b


@functools.cache
def connect(zone: str):
    """One DuckDB connection per session time zone, reused (a new one costs tens of milliseconds)."""
    connection = duckdb.connect()
    connection.execute(f"SET TimeZone = '{zone}'")
    return connection


def matching(connection, data: pa.Table, tag: str, wheres: list[str]) -> list[set | None]:
    """For each filter the `tag` values of the rows DuckDB finds; None where DuckDB refuses it (a literal's cast).

    All filters in one query; one by one only when that query fails.
    """
    connection.register("t", data)
    counts = ", ".join(f"count(*) FILTER (WHERE {w})" for w in wheres)
    try:
        rows = connection.execute(f"SELECT {tag}, {counts} FROM t GROUP BY {tag}").fetchall()
        return [{row[0] for row in rows if row[i + 1]} for i in range(len(wheres))]
    except duckdb.Error:
        if len(wheres) == 1:
            return [None]
    return [matching(connection, data, tag, [w])[0] for w in wheres]


TALLY: Counter = Counter()


def check_files(example: Example, ranges: list[dict[str, ColumnRange]] | None = None, tally: Counter = TALLY) -> None:
    schema = example.table_schema
    types = {f.name: f.type for f in schema}
    if ranges is None:
        ranges = [{r.column: r for r in ranges_of_table(f, COLUMNS)} for f in example.files]
    tagged = [
        f.cast(schema, safe=False).append_column("__file", pa.array([i] * f.num_rows, pa.int32()))
        for i, f in enumerate(example.files)
    ]
    data = pa.concat_tables(tagged)
    connection = connect(example.zone)
    wheres = [to_sql(tree) for tree in example.predicates]
    for tree in example.predicates:
        for dialect in ("duckdb", "spark"):
            text = to_sql(tree, dialect)
            assert same(parse_sql(text, dialect), tree), f"{text!r} reads back as {parse_sql(text, dialect)!r}"
    for where, found in zip(wheres, matching(connection, data, "__file", wheres), strict=True):
        if found is None:
            tally["refused"] += 1
            continue
        parsed = resolve(parse_sql(where), schema)
        for i, file in enumerate(example.files):
            verdict = may_match(parsed, ranges[i], types)
            tally["checked"] += 1
            if i in found:
                assert verdict, f"file {i} skipped but DuckDB ({example.zone}) finds {where!r} in {file.to_pylist()}"
            elif file.num_rows:
                tally["unmatched"] += 1
                tally["pruned"] += not verdict


@settings(
    max_examples=FILE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(examples())
def test_files_are_skipped_only_without_matching_rows(example: Example) -> None:
    check_files(example)


HUDI_TALLY: Counter = Counter()


@settings(
    max_examples=FILE_EXAMPLES // 2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(examples(), st.integers(1, 4))
def test_files_are_skipped_only_without_matching_rows_by_hudi_records(example: Example, row_group_size: int) -> None:
    """The same property through Hudi's `column_stats` records (what Java and Tandem write in Hudi's format):
    no type, no NaN count, bounds merged across row groups by Java's order."""
    schema = example.table_schema
    ranges = [hudi_ranges(f, schema, row_group_size=row_group_size) if f.num_rows else {} for f in example.files]
    check_files(example, ranges, HUDI_TALLY)


def test_skipping_prunes_a_fair_share():
    """Runs after the property above (same module, in order): the evaluator is not trivially true."""
    if TALLY["checked"] == 0:
        pytest.skip("the property test did not run")
    assert TALLY["refused"] < 0.1 * (TALLY["refused"] + TALLY["checked"] / 2)
    assert TALLY["unmatched"] >= 200
    share = TALLY["pruned"] / TALLY["unmatched"]
    pruned = f"{TALLY['pruned']}/{TALLY['unmatched']} ({share:.0%})"
    print(f"skipping: {TALLY['checked']} (file, filter) pairs ({TALLY['refused']} filters refused by DuckDB), ", end="")
    print(f"pruned {pruned} of the files without a match")
    assert share >= MIN_PRUNE_SHARE


def test_skipping_by_hudi_records_prunes_a_fair_share():
    """Runs after the Hudi-records property: fewer facts (no NaN count, no exactness), still a real share."""
    if HUDI_TALLY["checked"] == 0:
        pytest.skip("the property test did not run")
    share = HUDI_TALLY["pruned"] / HUDI_TALLY["unmatched"]
    print(f"skipping by Hudi's records: pruned {HUDI_TALLY['pruned']}/{HUDI_TALLY['unmatched']} ({share:.0%})")
    assert share >= MIN_PRUNE_SHARE / 2


LEAF_COLUMNS = ["ts", "tz", "f32", "f64", "dec", "i32", "i64", "s", "d", "b"]
LEAF_EXAMPLES = int(os.environ.get("SKIPPING_EXAMPLES", 600))
LEAF_TALLY: Counter = Counter()


LEAF_SHAPES = ["compare", "compare", "compare", "in", "between", "between", "null"]


@st.composite
def single_leaves(draw):
    """One column, one to three rows, a leaf of each shape: the casts of literals where they are subtle."""
    column = draw(st.sampled_from(LEAF_COLUMNS))
    dtype = draw(st.sampled_from(PROMOTIONS.get(column, [FILE_SCHEMA.field(column).type])))
    pool = draw(st.lists(st.one_of(st.none(), VALUES[column]), min_size=1, max_size=2))
    values = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    kind, value = kind_of(dtype), literals(column, kind_of(dtype), pool, dtype)
    shapes = LEAF_SHAPES + ["like"] * 3 * (kind == "string")
    leaves_ = [draw(leaf_on(column, kind, value, pool, [], null_odds=4, shape=shape)) for shape in shapes]
    file = pa.table({column: pa.array(values, FILE_SCHEMA.field(column).type)})
    return file, dtype, leaves_, draw(st.sampled_from(ZONES))


@settings(max_examples=LEAF_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(single_leaves())
def test_single_leaves_and_their_negations(case) -> None:
    file, dtype, leaves_, zone = case
    column = file.column_names[0]
    found, types = ranges(file), {column: dtype}
    data = file.cast(pa.schema([(column, dtype)]), safe=False)
    trees = [t for leaf in leaves_ for t in (leaf, Not(leaf))]
    wheres = [to_sql(t) for t in trees]
    for tree, where, hits in zip(trees, wheres, matching(connect(zone), data, "1", wheres), strict=True):
        assert same(parse_sql(where), tree)
        if hits is None:
            LEAF_TALLY["refused"] += 1
            continue
        verdict = may_match(parse_sql(where), found, types)
        if hits:
            assert verdict, f"skipped, but DuckDB ({zone}) finds {where!r} in {file.to_pylist()} read as {dtype}"
        else:
            LEAF_TALLY["unmatched"] += 1
            LEAF_TALLY["pruned"] += not verdict


def test_single_leaves_prune_a_fair_share():
    if not LEAF_TALLY["unmatched"]:
        pytest.skip("the property test did not run")
    share = LEAF_TALLY["pruned"] / LEAF_TALLY["unmatched"]
    print(f"leaves: pruned {LEAF_TALLY['pruned']}/{LEAF_TALLY['unmatched']} ({share:.0%}), ", end="")
    print(f"refused {LEAF_TALLY['refused']}")
    assert share >= MIN_PRUNE_SHARE


# ---------------------------------------------------------------- partitions

PARTITION_SCHEMA = pa.schema(
    [("pi", pa.int32()), ("ps", pa.string()), ("pd", pa.date32()), ("pb", pa.bool_()), ("pdec", pa.decimal128(9, 2))]
    + [("v", pa.int64())]
)
LAYOUTS = [(("pi",), True), (("ps",), False), (("pd", "ps"), True), (("pb",), False), (("pdec",), True)]
LAYOUTS += [(("pi", "pb"), False), (("ps", "pdec"), True)]
PARTITION_VALUES = {
    "pi": st.sampled_from([-1, 0, 1, 2, 5, 10, 11, -(2**31)]),
    "ps": st.one_of(
        st.sampled_from(["", "a", "ab", "b", "é", "日本", "5", " ", "a b", "x/y", DEFAULT_PARTITION]),
        st.text("abé日 -=", max_size=3),
    ),
    "pd": st.sampled_from(DATES[:4]),
    "pb": st.booleans(),
    "pdec": st.sampled_from(["0.00", "-1.50", "1.50", "2.00", "10.25"]).map(Decimal),
    "v": st.integers(-3, 3),
}
PARTITION_KINDS = {f.name: kind_of(f.type) for f in PARTITION_SCHEMA}


PARTITION_OPAQUE = ["length(ps) > 1", "pi + 1 > 2", "v % 2 = 0", "pi = v"]


@dataclass
class PartitionExample:
    data: pa.Table
    fields: tuple[str, ...]
    hive_style: bool
    predicates: list


@st.composite
def partition_examples(draw) -> PartitionExample:
    values = {c: st.lists(st.one_of(st.none(), PARTITION_VALUES[c]), min_size=1, max_size=4) for c in PARTITION_VALUES}
    pool = draw(st.fixed_dictionaries(values))
    fields_, hive_style = draw(st.sampled_from(LAYOUTS))
    if len(fields_) > 1:  # a value of a path of several columns holds no '/' (the writer refuses it)
        pool["ps"] = [v.replace("/", "|") if isinstance(v, str) else v for v in pool["ps"]]
    rows = [{c: draw(st.sampled_from(v)) for c, v in pool.items()} for _ in range(draw(st.integers(1, 20)))]
    trees = predicates([*fields_, *fields_, "v"], pool, PARTITION_KINDS, PARTITION_OPAQUE, 3)
    data = pa.Table.from_pylist(rows, PARTITION_SCHEMA)
    return PartitionExample(data, fields_, hive_style, draw(st.lists(trees, min_size=8, max_size=8)))


@settings(
    max_examples=PARTITION_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(partition_examples())
def test_partitions_are_pruned_only_without_matching_rows(example: PartitionExample) -> None:
    fields_, data = list(example.fields), example.data
    paths = partition_paths(data, fields_, example.hive_style)
    tagged = data.append_column("__path", paths)
    partitions = sorted(set(paths.to_pylist())) + ["not/a/partition/of/these/fields"]
    types = typed_fields(fields_, PARTITION_SCHEMA)
    connection = connect("UTC")
    wheres = [to_sql(tree) for tree in example.predicates]
    for where, found in zip(wheres, matching(connection, tagged, "__path", wheres), strict=True):
        if found is None:
            PARTITION_TALLY["refused"] += 1
            continue
        parsed = resolve(parse_sql(where), PARTITION_SCHEMA)
        kept = prune_partitions(parsed, partitions, fields_, types, example.hive_style)
        assert kept == [p for p in partitions if p in kept], "the order changed"
        assert found <= set(kept), f"{where!r} pruned {sorted(found - set(kept))} though DuckDB finds rows there"
        if may_match(parsed, {}, {}):
            assert partitions[-1] in kept, "an undecided path was pruned"
        for partition in partitions[:-1]:
            if partition not in found:
                PARTITION_TALLY["unmatched"] += 1
                PARTITION_TALLY["pruned"] += partition not in kept


PARTITION_TALLY: Counter = Counter()


def test_partition_pruning_prunes_a_fair_share():
    if not PARTITION_TALLY["unmatched"]:
        pytest.skip("the property test did not run")
    share = PARTITION_TALLY["pruned"] / PARTITION_TALLY["unmatched"]
    print(f"partitions: pruned {PARTITION_TALLY['pruned']}/{PARTITION_TALLY['unmatched']} ({share:.0%})")
    assert PARTITION_TALLY["unmatched"] >= 100
    assert share >= MIN_PRUNE_SHARE


# ---------------------------------------------------------------- parsing

T2024 = datetime(2024, 1, 1, 10, 0)
PARSED = [
    ("x = 1", "duckdb", Comparison("x", "=", 1)),
    ("x <> 1", "duckdb", Comparison("x", "!=", 1)),
    ("x != 1", "spark", Comparison("x", "!=", 1)),
    ("x == 1", "spark", Comparison("x", "=", 1)),
    ("5 < x", "duckdb", Comparison("x", ">", 5)),
    ("5 >= x", "spark", Comparison("x", "<=", 5)),
    ("x <= -2.50", "duckdb", Comparison("x", "<=", Decimal("-2.50"))),
    ("x > 1e3", "duckdb", Comparison("x", ">", 1000.0)),
    ("x = -9223372036854775808", "spark", Comparison("x", "=", -(2**63))),
    ("x = NULL", "duckdb", Comparison("x", "=", None)),
    ("b", "duckdb", Comparison("b", "=", True)),
    ("NOT b", "spark", Not(Comparison("b", "=", True))),
    ("x BETWEEN 1 AND 2.5", "duckdb", Between("x", 1, Decimal("2.5"))),
    ("x NOT BETWEEN 'a' AND 'b'", "spark", Between("x", "a", "b", negated=True)),
    ("x IN (1, 2, NULL)", "duckdb", InList("x", (1, 2, None))),
    ("x NOT IN ('a')", "spark", InList("x", ("a",), negated=True)),
    ("NOT (x IN (1))", "duckdb", Not(InList("x", (1,)))),
    ("x IS NULL", "duckdb", IsNull("x")),
    ("x IS NOT NULL", "spark", IsNull("x", negated=True)),
    ("x LIKE 'ab%'", "duckdb", Like("x", "ab%")),
    ("x NOT LIKE 'ab%'", "spark", Like("x", "ab%", negated=True)),
    (r"x LIKE 'a\_%'", "duckdb", Like("x", "a\\\\_%")),  # DuckDB: no default escape, `\` is a character
    (r"x LIKE 'a\_%'", "spark", Like("x", "a\\_%")),  # Spark: `\` escapes `_`
    ("x LIKE 'a!%b%' ESCAPE '!'", "duckdb", Like("x", "a\\%b%")),
    (
        "x = 1 AND (y = 2 OR NOT z = 3)",
        "duckdb",
        And(Comparison("x", "=", 1), Or(Comparison("y", "=", 2), Not(Comparison("z", "=", 3)))),
    ),
    ("x IS NOT DISTINCT FROM 3", "duckdb", And(Comparison("x", "=", 3), IsNull("x", negated=True))),
    ("x <=> NULL", "spark", IsNull("x")),
    ("x IS DISTINCT FROM 'a'", "duckdb", Or(Comparison("x", "!=", "a"), IsNull("x"))),
    ("x = CAST('2024-01-01' AS DATE)", "duckdb", Comparison("x", "=", date(2024, 1, 1))),
    ("DATE '2024-01-01' < x", "spark", Comparison("x", ">", date(2024, 1, 1))),
    ("x = TIMESTAMP '2024-01-01 10:00:00'", "duckdb", Comparison("x", "=", T2024)),
    ("x = TIMESTAMP '2024-01-01 10:00:00'", "spark", Comparison("x", "=", LocalTimestamp(2024, 1, 1, 10))),
    ("x = TIMESTAMP_NTZ '2024-01-01 10:00:00'", "spark", Comparison("x", "=", T2024)),
    ("x = TIMESTAMPTZ '2024-01-01 10:00:00'", "duckdb", Comparison("x", "=", LocalTimestamp(2024, 1, 1, 10))),
    (
        "x = TIMESTAMPTZ '2024-01-01 10:00:00+02:00'",
        "duckdb",
        Comparison("x", "=", datetime(2024, 1, 1, 8, tzinfo=UTC)),
    ),
    ("x = TIMESTAMP '2024-01-01 10:00:00Z'", "spark", Comparison("x", "=", datetime(2024, 1, 1, 10, tzinfo=UTC))),
    ("x = CAST('NaN' AS DOUBLE)", "duckdb", Comparison("x", "=", NAN)),
    ("x < CAST('-Infinity' AS DOUBLE)", "spark", Comparison("x", "<", -INF)),
    ("x = CAST('1.50' AS DECIMAL(9, 2))", "duckdb", Comparison("x", "=", Decimal("1.50"))),
    ("x = CAST('7' AS BIGINT)", "spark", Comparison("x", "=", 7)),
    ("x = 7L", "spark", Comparison("x", "=", 7)),
    ('"x" = 1', "duckdb", Comparison("x", "=", 1)),  # DuckDB: a quoted identifier
    ("`x` = 1", "spark", Comparison("x", "=", 1)),
    ("\"My Col\" = 'a'", "duckdb", Comparison("My Col", "=", "a")),
    (r"x = 'it\'s'", "spark", Comparison("x", "=", "it's")),
    ("x = 'it''s'", "duckdb", Comparison("x", "=", "it's")),
]
OPAQUE = [
    ('"x" = 1', "spark"),  # Spark: "x" is a string literal
    ("x = y", "duckdb"),
    ("length(s) > 3", "duckdb"),
    ("x + 1 > 2", "spark"),
    ("t.x = 1", "duckdb"),  # qualified: perhaps a struct field
    ("x ILIKE 'a%'", "duckdb"),
    ("x = CAST('2024-01-01 10:00:00+02:00' AS TIMESTAMP)", "duckdb"),  # DuckDB drops or applies the offset
    ("x = CAST(1.5 AS INT)", "duckdb"),  # rounds in DuckDB, truncates in Spark
    ("x = CAST(0.1 AS DOUBLE)", "spark"),  # a decimal's double: rounding not pinned down
    ("x = CAST('1.555' AS DECIMAL(9, 2))", "duckdb"),
    ("x = CAST('1' AS FLOAT)", "duckdb"),
    ("x = 'it''s'", "spark"),  # Spark joins adjacent literals
    (r"x = 'a\zb'", "spark"),
    (r"x LIKE 'a\zb'", "spark"),
    ("x LIKE 'a!b' ESCAPE '!'", "duckdb"),
    ("x = 1" + "0" * 40, "duckdb"),
    ("x IN (SELECT 1)", "duckdb"),
    ("TRUE", "duckdb"),
]


@pytest.mark.parametrize(("where", "dialect", "expected"), PARSED, ids=[f"{d}:{w}" for w, d, _ in PARSED])
def test_parse_sql_reads_each_operator(where, dialect, expected):
    parsed = parse_sql(where, dialect)
    assert same(parsed, expected), parsed
    assert same(parse_sql(to_sql(parsed, dialect), dialect), parsed)


@pytest.mark.parametrize(("where", "dialect"), OPAQUE, ids=[f"{d}:{w}" for w, d in OPAQUE])
def test_parse_sql_keeps_the_rest_opaque(where, dialect):
    parsed = parse_sql(where, dialect)
    assert isinstance(parsed, Opaque), parsed


def test_opaque_parts_keep_their_columns():
    parsed = parse_sql("length(s) > 3 AND x = 1 OR f(y, t.z) = 2")
    assert columns_of(parsed) == {"s", "x", "y"}


@pytest.mark.parametrize(
    ("where", "dialect"),
    [("x = ", "duckdb"), ("x = 1 AND (y = 2", "spark"), ("`x` = 1", "duckdb"), ("x = 'a", "duckdb"), ("", "duckdb")]
    + [("x = 1; y = 2", "duckdb"), ("SELECT 1", "spark"), ("x = 1 AS y", "duckdb"), ("x = 1", "postgres")],
)
def test_bad_filters_are_bad_input_on_one_line(where, dialect):
    with pytest.raises(BadInputError) as err:
        parse_sql(where, dialect)
    assert "\n" not in str(err.value)


def test_resolve_maps_case_and_names_an_unknown_column():
    schema = pa.schema([("Id", pa.int64()), ("name", pa.string()), ("a", pa.int32()), ("A", pa.int32())])
    assert resolve(parse_sql("ID = 1 AND NAME LIKE 'x%'"), schema) == And(Comparison("Id", "=", 1), Like("name", "x%"))
    assert resolve(parse_sql("A = 1"), schema) == Comparison("A", "=", 1)
    with pytest.raises(BadInputError, match="'missing'"):
        resolve(parse_sql("id = 1 OR missing IS NULL"), schema)
    with pytest.raises(BadInputError, match="ambiguous"):
        resolve(parse_sql("ab = 1"), pa.schema([("Ab", pa.int8()), ("aB", pa.int8())]))
    assert resolve(parse_sql("length(NAME) > 1"), schema) == Opaque("LENGTH(NAME) > 1", ("name",))


# ---------------------------------------------------------------- semantics, case by case


def ranges(table: pa.Table) -> dict[str, ColumnRange]:
    return {r.column: r for r in ranges_of_table(table, table.column_names)}


def verdicts(table: pa.Table, wheres: list[str], dialect: str = "duckdb", types=None) -> list[bool]:
    found = ranges(table)
    types = types or {f.name: f.type for f in table.schema}
    return [may_match(resolve(parse_sql(w, dialect), table.schema), found, types) for w in wheres]


def test_nan_negative_zero_and_nulls():
    floats = pa.table({"x": pa.array([1.0, NAN, -0.0], pa.float64())})
    assert verdicts(
        floats, ["x = CAST('NaN' AS DOUBLE)", "x > 1e300", "x = 0", "x < 0", "x > CAST('NaN' AS DOUBLE)"]
    ) == [
        True,
        True,
        True,
        False,
        False,
    ]
    no_nan = pa.table({"x": pa.array([1.0, 2.0], pa.float64())})
    assert verdicts(
        no_nan, ["x = CAST('NaN' AS DOUBLE)", "x < CAST('NaN' AS DOUBLE)", "NOT x < CAST('NaN' AS DOUBLE)"]
    ) == [
        False,
        True,
        False,
    ]
    nulls = pa.table({"x": pa.array([None, None], pa.int64())})
    assert verdicts(nulls, ["x = 1", "NOT x = 1", "x IS NULL", "x IS NOT NULL", "x = NULL", "NOT (x = NULL)"]) == [
        False,
        False,
        True,
        False,
        False,
        False,
    ]
    ints = pa.table({"x": pa.array([1, 2], pa.int64())})
    assert verdicts(
        ints, ["x IN (3, NULL)", "x NOT IN (3, NULL)", "x NOT IN (1, 2)", "x = 1.5", "x > 1.5", "x >= 2.5"]
    ) == [
        False,
        False,
        True,
        False,
        True,
        False,
    ]


def test_literals_cast_exactly_or_undecided():
    floats = pa.table({"f": pa.array([f32(0.1)], pa.float32()), "s": ["5"], "i": pa.array([5], pa.int32())})
    # DuckDB compares a float column with the decimal 0.1 as a float (equal), Spark as a double (not equal)
    assert verdicts(floats, ["f = 0.1", "f = 0.1e0", "f < 0.1", "s = 5", "i = '5'", "i = '6'", "i = '5.0'"]) == [
        True,
        False,
        True,
        True,
        True,
        False,
        True,
    ]


def test_session_time_zone_widens_timestamp_literals():
    wall = pa.table({"t": pa.array([datetime(2020, 3, 8, 2, 30)], pa.timestamp("us"))})
    # in America/Los_Angeles 02:30 does not exist on that day: read as an instant it is 03:30
    assert verdicts(wall, ["t = TIMESTAMPTZ '2020-03-08 03:30:00'", "t = TIMESTAMP '2020-03-08 03:30:00'"]) == [
        True,
        False,
    ]
    assert verdicts(wall, ["t > TIMESTAMP '2020-03-09 14:00:00'", "t > TIMESTAMP '2020-03-10 15:00:00'"], "spark") == [
        True,
        False,
    ]
    zoned = pa.table({"t": pa.array([datetime(2020, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))})
    wheres = [
        "t = TIMESTAMP '2020-01-01 17:00:00'",
        "t = TIMESTAMP '2020-01-01 19:00:00'",
        "t = '2019-12-31 23:00:00-01:00'",
    ]
    assert verdicts(zoned, wheres) == [True, False, True]


def test_long_strings_and_prefixes():
    long = "a" * 80
    table = pa.table({"s": [long, "ab"]})
    assert verdicts(
        table, [f"s = '{long}'", "s > 'b'", "s LIKE 'a%'", "NOT s LIKE 'a%'", "s LIKE 'b%'", "s LIKE '%b'"]
    ) == [
        True,
        False,
        True,
        False,
        False,
        True,
    ]


def test_promoted_columns_read_in_the_table_type():
    table = pa.table({"x": pa.array([2**31 - 1], pa.int32())})
    as_float = {"x": pa.float32()}  # 2147483647 reads as 2147483648.0
    assert verdicts(table, ["x = 2147483648.0e0", "x > 2147483647"], types=as_float) == [True, True]
    assert verdicts(table, ["x = 1"], types={"x": pa.string()}) == [True]  # not a promotion skipping knows


def test_columns_without_statistics_decide_nothing():
    table = pa.table({"x": [1]})
    assert may_match(parse_sql("y = 5 AND x = 1"), ranges(table), {"x": pa.int64(), "y": pa.int64()})
    assert not may_match(parse_sql("y = 5 AND x = 2"), ranges(table), {"x": pa.int64(), "y": pa.int64()})


def test_prune_partitions_keeps_order_and_default_partition():
    partitions = ["p=1", "p=2", f"p={DEFAULT_PARTITION}", "p=10", "p=x"]
    types = {"p": pa.int32()}
    keep = prune_partitions(parse_sql("p > 1 AND p < 10"), partitions, ["p"], types, True)
    assert keep == ["p=2", "p=x"]
    assert prune_partitions(parse_sql("p IS NULL"), partitions, ["p"], types, True) == [f"p={DEFAULT_PARTITION}", "p=x"]
    assert prune_partitions(parse_sql("q = 1"), partitions, ["p"], types, True) == partitions
    assert prune_partitions(parse_sql("p = NULL"), partitions, ["p"], types, True) == []  # no row can match
    assert prune_partitions(parse_sql("p = 2 OR q = NULL"), partitions, ["p"], types, True) == ["p=2", "p=x"]


def test_long_generated_filters_read_without_deep_recursion():
    where = " OR ".join(f"x = {i}" for i in range(3000))
    table = pa.table({"x": [5000, 6000]})
    assert not may_match(parse_sql(where), ranges(table), {"x": pa.int64()})
    assert may_match(parse_sql(f"{where} OR x = 6000"), ranges(table), {"x": pa.int64()})
    with pytest.raises(BadInputError):
        parse_sql("NOT " * 5000 + "x = 1")
