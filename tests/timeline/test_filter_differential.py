"""Filtered reads against an independent engine (DESIGN.md §8 invariant 6): Tandem returns exactly DuckDB's rows.

Random rows of every common type (nulls everywhere, NaN, -0.0, infinities, empty
and unicode strings) are written by the local writer in several layouts; random
filters are drawn only from SQL on which Spark SQL and DuckDB agree. DuckDB,
holding the same rows in memory, is the reference. Each filter is also
evaluated by Spark on an in-memory DataFrame of those rows: when that disagrees
with DuckDB the filter left the common ground, a fault of the generator, not of
Tandem. Then Tandem's local read (the planner: partition and column-stats pruning,
DuckDB applying the filter), Tandem's Spark read (`read_table` with `where`: the same planning,
Spark's parquet reader with pushdown) and Spark's own read of the same data
files (`spark.read.parquet`, pushdown on) must all return DuckDB's rows.

`python -m tests.filter_differential_long --examples N` runs the same check at length.
"""

from __future__ import annotations

import datetime
import math
import tempfile
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from coordinator.write.writer import LocalWriter
from tests.conftest import tandem
from timeline.format.keys import DEFAULT_PARTITION
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

pytest.importorskip("pyspark")
duckdb = pytest.importorskip("duckdb")

SUITE_EXAMPLES = 8
FILTERS_PER_TABLE = 10
LAYOUTS_PER_EXAMPLE = 2
MIN_PAIRS = 150

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("dec", pa.decimal128(9, 2)),
        ("pi", pa.int32()),
        ("pd", pa.date32()),
        ("ps", pa.string()),
    ]
)
COLUMNS = SCHEMA.names
# (partition fields, hive style): non-partitioned, and typed partition columns of every kind, alone and nested
LAYOUTS = [
    ((), False),
    (("pi",), True),
    (("ps",), False),
    (("pd",), True),
    (("pd", "ps"), False),
    (("ps", "pi"), True),
    (("b",), False),
    (("x",), True),
    (("dec",), False),
]

INT32_EDGES = [-(2**31), 2**31 - 1]
INT64_EDGES = [-(2**63), 2**63 - 1]
FLOATS = [math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, -2.25, 3.0, 1e300, 5e-324]  # the special ones first
DATES = [datetime.date(1970, 1, 1), datetime.date(2020, 1, 1), datetime.date(2020, 1, 2), datetime.date(2020, 2, 29)]
DATES += [datetime.date(9999, 12, 31), datetime.date(1500, 3, 1)]
TIMESTAMPS = [datetime.datetime(1970, 1, 1), datetime.datetime(2020, 1, 1, 12, 30)]
TIMESTAMPS += [datetime.datetime(2020, 1, 1, 12, 30, 0, 1), datetime.datetime(2038, 1, 19, 3, 14, 8)]
DECIMALS = [Decimal(v) for v in ("0.00", "-1.50", "1.50", "0.10", "2.00", "9999999.99")]
PARTITION_INTS = [-1, 0, 1, 2, 5, 10, 11]
# no quotes or backslashes: Spark and DuckDB escape string literals differently
STRINGS = ["", "a", "ab", "b", "B", "Z", "é", "日本", "5", "10", " ", "a b", "x/y", DEFAULT_PARTITION]
LIKE_PREFIXES = ["", "a", "é", "日", " ", "x/", "__HIVE"]

VALUES = {
    "i32": st.one_of(st.integers(-3, 12), st.sampled_from(INT32_EDGES)),
    "i64": st.one_of(st.integers(-10, 10), st.sampled_from(INT64_EDGES)),
    "x": st.one_of(st.sampled_from(FLOATS[:5]), st.sampled_from(FLOATS), st.integers(-3, 3).map(float)),
    "s": st.one_of(st.sampled_from(STRINGS), st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=4)),
    "b": st.booleans(),
    "d": st.sampled_from(DATES),
    "ts": st.sampled_from(TIMESTAMPS),
    "dec": st.sampled_from(DECIMALS),
    "pi": st.sampled_from(PARTITION_INTS),
    "pd": st.sampled_from(DATES),
    # folder names: no '.' (a value of '.' or '..' is no folder of its own), no control characters, and '/' only
    # inside a value (an empty folder name is bad input to the writer)
    "ps": st.one_of(st.sampled_from(STRINGS), st.text("abé日 -=", max_size=3)),
}
KIND = {"i32": "int", "i64": "int", "pi": "int", "x": "float", "dec": "decimal", "s": "string", "ps": "string"}
KIND |= {"b": "bool", "d": "date", "pd": "date", "ts": "timestamp"}
# pairs of columns both engines compare in the same common type
COLUMN_PAIRS = [("i32", "i64"), ("i32", "pi"), ("i64", "pi"), ("x", "i32"), ("x", "dec"), ("dec", "pi")]
COLUMN_PAIRS += [("d", "pd"), ("s", "ps")]
OPERATORS = ["=", "<>", "!=", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"]


Pools = dict[str, list]  # per column, the few values (None: null) its rows are drawn from


def pools() -> st.SearchStrategy[Pools]:
    """Few values per column, so rows repeat them: partitions hold several rows, a NaN meets its neighbours."""
    return st.fixed_dictionaries(
        {c: st.lists(st.one_of(st.none(), VALUES[c]), min_size=1, max_size=5) for c in COLUMNS[1:]}
    )


@st.composite
def table_rows(draw, pool: Pools) -> pa.Table:
    count = draw(st.integers(0, 25))
    rows = [{"id": i, **{c: draw(st.sampled_from(values)) for c, values in pool.items()}} for i in range(count)]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def value_literal(column: str, value) -> str | None:
    """A stored value as a literal of the column's type; None for values left out of literals."""
    kind = KIND[column]
    if value is None or (kind == "string" and ("'" in value or "\\" in value)):
        return None
    if kind == "float":
        return f"CAST('{_float_text(value)}' AS DOUBLE)"
    if kind == "string":
        return f"'{value}'"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "date":
        return f"DATE '{value}'"
    if kind == "timestamp":
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    return str(value)


def fixed_literals(column: str) -> st.SearchStrategy[str]:
    """Literals both engines cast to the column's type alike: native ones and, where exact, quoted ones."""
    kind = KIND[column]
    if kind == "int":
        return st.one_of(
            st.sampled_from([*PARTITION_INTS, 3, 12, 2**31, -(2**31) - 1]).map(str),
            st.sampled_from(PARTITION_INTS).map(lambda v: f"'{v}'"),
            st.sampled_from(["2.5", "-0.5", "1.0"]),
        )
    if kind == "float":
        special = ["CAST('NaN' AS DOUBLE)", "CAST('Infinity' AS DOUBLE)", "CAST('-Infinity' AS DOUBLE)"]
        return st.sampled_from(["0", "-0.0", "1.5", "-2.25", "3", "1e300", "'1.5'", *special])
    if kind == "decimal":
        return st.sampled_from(["0", "1.5", "-1.5", "0.1", "2", "9999999.99", "10000000"])
    if kind == "string":
        return st.sampled_from(STRINGS).map(lambda v: f"'{v}'")
    if kind == "bool":
        return st.sampled_from(["true", "false"])
    if kind == "date":
        return st.sampled_from(DATES).flatmap(lambda v: st.sampled_from([f"DATE '{v}'", f"'{v}'"]))
    return st.sampled_from(TIMESTAMPS).flatmap(
        lambda v: st.sampled_from([f"TIMESTAMP '{v.isoformat(sep=' ')}'", f"'{v.isoformat(sep=' ')}'"])
    )


def literals(column: str, pool: Pools) -> st.SearchStrategy[str]:
    """Fixed literals, or the column's own values (so comparisons land on the values the rows hold)."""
    own = sorted({text for v in pool[column] if (text := value_literal(column, v)) is not None})
    return st.one_of(fixed_literals(column), st.sampled_from(own)) if own else fixed_literals(column)


def native_literals(column: str, pool: Pools) -> st.SearchStrategy[str]:
    """Literals of the column's own kind only: an IN list mixing quoted and unquoted values is typed differently."""
    return literals(column, pool).filter(lambda text: not text.startswith("'") or KIND[column] == "string")


def like_prefixes(column: str, pool: Pools) -> st.SearchStrategy[str]:
    """Fixed prefixes, or a stored value's first characters (without LIKE's `%` and `_` or quotes)."""
    own = {v[:n] for v in pool[column] if v for n in (1, 2)}
    own = sorted(p for p in own if not set(p) & set("%_'\\"))
    return st.sampled_from(LIKE_PREFIXES + own)


@st.composite
def atoms(draw, pool: Pools) -> str:
    column = draw(st.sampled_from(COLUMNS[1:]))
    kind = KIND[column]
    shape = draw(st.sampled_from(["compare", "flipped", "between", "in", "null", "pair", "function", "own"]))
    if shape == "compare":
        return f"{column} {draw(st.sampled_from(OPERATORS))} {draw(literals(column, pool))}"
    if shape == "flipped":
        return f"{draw(literals(column, pool))} {draw(st.sampled_from(OPERATORS[:7]))} {column}"
    if shape == "between":
        low, high = draw(literals(column, pool)), draw(literals(column, pool))
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN {low} AND {high}"
    if shape == "in":
        values = draw(st.lists(native_literals(column, pool), min_size=1, max_size=3))
        values += draw(st.sampled_from([[], ["NULL"]]))
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(values)})"
    if shape == "null":
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if shape == "pair":
        left, right = draw(st.sampled_from(COLUMN_PAIRS))
        return f"{left} {draw(st.sampled_from(OPERATORS))} {right}"
    if shape == "function":
        return draw(functions(column, pool))
    if kind == "string":
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}LIKE '{draw(like_prefixes(column, pool))}%'"
    if kind == "bool":
        return draw(st.sampled_from([column, f"NOT {column}", f"{column} = true"]))
    return f"{column} IS NULL"


def functions(column: str, pool: Pools) -> st.SearchStrategy[str]:
    """Functions both engines define alike (and that cannot overflow on the drawn values)."""
    kind = KIND[column]
    operator = st.sampled_from(OPERATORS[:7])
    if kind == "string":
        return st.one_of(
            st.tuples(operator, st.integers(0, 3)).map(lambda p: f"length({column}) {p[0]} {p[1]}"),
            st.tuples(operator, literals(column, pool)).map(lambda p: f"coalesce({column}, '') {p[0]} {p[1]}"),
        )
    # not `pi + 1`: Spark (ANSI mode) raised an overflow on it in `NOT ((i32 != pi) OR (pi + 1 >= 8))` over rows
    # whose i32 is at an int32 limit; a modulo cannot overflow
    if column == "pi":
        return st.tuples(operator, st.integers(-3, 3)).map(lambda p: f"pi % 4 {p[0]} {p[1]}")
    if kind == "int":
        return st.integers(-2, 2).map(lambda r: f"{column} % 3 = {r}")
    if kind == "bool":
        return st.just(f"coalesce({column}, false)")
    return st.tuples(native_literals(column, pool), operator, literals(column, pool)).map(
        lambda p: f"coalesce({column}, {p[0]}) {p[1]} {p[2]}"
    )


def filters(pool: Pools) -> st.SearchStrategy[str]:
    return st.recursive(
        atoms(pool),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: f"({p[0]}) AND ({p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"({p[0]}) OR ({p[1]})"),
            inner.map(lambda p: f"NOT ({p})"),
        ),
        max_leaves=5,
    )


@dataclass
class Example:
    data: pa.Table
    layouts: list[tuple[tuple[str, ...], bool]]
    split: int  # rows before it are inserted first; then rows from `rewrite` on are upserted (updates and inserts)
    rewrite: int
    filters: list[str]


def without_slashes(pool: Pools, column: str) -> Pools:
    """A partition value of a path of several columns holds no '/' (the writer refuses it: paths would collide)."""
    return {**pool, column: [v.replace("/", "|") if isinstance(v, str) else v for v in pool[column]]}


@st.composite
def examples(draw) -> Example:
    pool = draw(pools())
    layouts = draw(
        st.lists(st.sampled_from(LAYOUTS), min_size=LAYOUTS_PER_EXAMPLE, max_size=LAYOUTS_PER_EXAMPLE, unique=True)
    )
    if any(len(fields) > 1 for fields, _ in layouts):
        pool = without_slashes(pool, "ps")
    data = draw(table_rows(pool))
    split = draw(st.integers(0, data.num_rows))
    return Example(
        data=data,
        layouts=layouts,
        split=split,
        rewrite=draw(st.integers(0, split)),
        filters=draw(st.lists(filters(pool), min_size=FILTERS_PER_TABLE, max_size=FILTERS_PER_TABLE)),
    )


def write_table(base: str, example: Example, layout: tuple[tuple[str, ...], bool]) -> Table:
    """The rows written in two instants: an insert, then an upsert rewriting some of its file groups."""
    fields, hive_style = layout
    table = Table.create(base, "t", ["id"], list(fields), hive_style=hive_style)
    writer = LocalWriter(table)
    if example.split:
        writer.write(example.data.slice(0, example.split), "insert")
    if example.rewrite < example.data.num_rows:
        writer.write(example.data.slice(example.rewrite), "upsert")
    return table


def _value(value):
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else repr(value)  # NaN equals itself; -0.0 stays apart from 0.0
    return value


def multiset(rows: list[tuple]) -> Counter:
    return Counter(tuple(_value(v) for v in row) for row in rows)


def duckdb_rows(data: pa.Table, where: str) -> list[tuple]:
    connection = duckdb.connect()
    connection.register("t", data)
    return connection.execute(f"SELECT {', '.join(COLUMNS)} FROM t WHERE {where}").fetchall()


def _tagged_rows(frames: list) -> dict[int, list[tuple]]:
    """Many filtered reads in one Spark job: each frame tagged with its index, the union collected once."""
    from pyspark.sql import functions as F

    tagged = [frame.select(F.lit(i).alias("__filter"), *COLUMNS) for i, frame in enumerate(frames)]
    found: dict[int, list[tuple]] = {i: [] for i in range(len(frames))}
    for row in reduce(lambda a, b: a.unionByName(b), tagged).coalesce(1).toArrow().to_pylist():
        found[row["__filter"]].append(tuple(row[c] for c in COLUMNS))
    return found


def spark_memory_ids(spark, data: pa.Table, wheres: list[str]) -> list[set[int]]:
    """Spark SQL's own answer on the rows held in memory: no files, no pruning, no pushdown."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    frame = spark.createDataFrame(data, schema=from_arrow_schema(data.schema))
    passes = [F.expr(f"coalesce(({where}), false)").alias(f"f{i}") for i, where in enumerate(wheres)]
    found = frame.select("id", *passes).collect()
    return [{row["id"] for row in found if row[f"f{i}"]} for i in range(len(wheres))]


def check_example(spark, example: Example) -> int:
    """Every filter on every layout of the example: the number of (table, filter) pairs checked."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from coordinator.spark.reader import read_table

    expected = [multiset(duckdb_rows(example.data, where)) for where in example.filters]
    in_memory = spark_memory_ids(spark, example.data, example.filters)
    for where, duck_rows, ids in zip(example.filters, expected, in_memory, strict=True):
        assert ids == {row[0] for row in duck_rows}, f"Spark and DuckDB disagree on {where!r}: the generator drew it"
    with tempfile.TemporaryDirectory() as scratch:
        for n, layout in enumerate(example.layouts):
            table = write_table(str(Path(scratch) / f"t{n}"), example, layout)
            if not example.data.num_rows:
                for where in example.filters:
                    assert read_table(spark, table.uri, where=where).collect() == []
                continue
            tandem_rows = _tagged_rows([read_table(spark, table.uri, where=w) for w in example.filters])
            files = [table.storage.full(f.path) for f in table.view().latest_base_files()]
            files_schema = from_arrow_schema(pq.read_schema(files[0]))  # given, not inferred: 4x faster to plan
            read = spark.read.schema(files_schema)
            own = _tagged_rows([read.parquet(*(f"file://{f}" for f in files)).filter(w) for w in example.filters])
            for i, where in enumerate(example.filters):
                context = f"{where!r} on layout {layout}"
                local = read_plan(plan_scan(table, where)).select(COLUMNS)
                local_rows = [tuple(r[c] for c in COLUMNS) for r in local.to_pylist()]
                assert multiset(local_rows) == expected[i], f"the local read (planner + DuckDB) differs for {context}"
                assert multiset(tandem_rows[i]) == expected[i], f"read_table differs from DuckDB for {context}"
                assert multiset(own[i]) == expected[i], f"spark.read.parquet (pushdown) differs for {context}"
    return len(example.layouts) * len(example.filters)


def configure(spark) -> None:
    spark.conf.set("spark.sql.parquet.filterPushdown", "true")


@pytest.fixture(scope="module")
def spark():
    from coordinator.spark.session import local_session

    session = local_session("tandem-filter-differential")
    configure(session)
    yield session
    session.stop()


def test_filtered_reads_return_duckdbs_rows(spark):
    checked: list[int] = []

    @settings(
        max_examples=SUITE_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking re-runs Spark for minutes: the long run does
    )
    @given(examples())
    def run(example: Example) -> None:
        checked.append(check_example(spark, example))

    run()
    assert sum(checked) >= MIN_PAIRS


CLI_ROWS = pa.Table.from_pylist(
    [
        {"id": 0, "pi": 1, "pd": DATES[1], "ps": "a", "x": 1.5},
        {"id": 1, "pi": 2, "pd": None, "ps": "", "x": math.nan},
        {"id": 2, "pi": 10, "pd": DATES[2], "ps": None, "x": -0.0},
        {"id": 3, "pi": None, "pd": DATES[1], "ps": DEFAULT_PARTITION, "x": 3.0},
        {"id": 4, "pi": 5, "pd": None, "ps": "b", "x": None},
    ],
    schema=pa.schema([SCHEMA.field(c) for c in ("id", "pi", "pd", "ps", "x")]),
)


@pytest.mark.parametrize(
    ("where", "engine"),
    [
        # each `--engine spark` read starts its own Spark: one in the suite
        ("pi BETWEEN '1' AND '10' AND (ps = '' OR ps IS NULL OR pd > DATE '2020-01-01')", "spark"),
        ("NOT (pi > 1) OR pd IS NULL", "local"),
    ],
)
def test_the_cli_read_returns_duckdbs_rows(tmp_path, where, engine):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["pi", "pd", "ps"], hive_style=True)
    LocalWriter(table).write(CLI_ROWS, "insert")
    out = tmp_path / "out.parquet"
    done = tandem("read", table.uri, "--engine", engine, "--where", where, "--output", str(out))
    assert done.returncode == 0, done.stderr
    names = CLI_ROWS.column_names
    connection = duckdb.connect()
    connection.register("t", CLI_ROWS)
    expected = connection.execute(f"SELECT {', '.join(names)} FROM t WHERE {where}").fetchall()
    assert expected  # the filter selects something, so an empty read would fail
    got = pq.read_table(out).select(names).to_pylist()
    assert multiset([tuple(r[c] for c in names) for r in got]) == multiset(expected)
