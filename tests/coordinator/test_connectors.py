"""Engine connectors: `spark.read.format("tandem")` and DuckDB views/queries, both planned by `timeline.query.scan`.

The oracle for rows is the `hudi` package's read of the same snapshot (latest,
as of an instant, or incremental), filtered by DuckDB with the same SQL.
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.duckdb import view as duckdb_view
from coordinator.mdt import index_build
from coordinator.write.writer import LocalWriter
from tests.conftest import FIXTURE_NAMES, tandem, unzip_fixture
from timeline.errors import BadInputError
from timeline.format.meta_fields import META_COLUMNS
from timeline.mdt.log import COLUMN_STATS
from timeline.table import Table

pytest.importorskip("pyspark")

CITIES = ["ams", "ber", "cph", "lis"]


def batch(start: int, n: int, day: int) -> pa.Table:
    """Rows `start`.. with one `ts` range per batch (so column stats can skip files), a city per id % 4."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": [CITIES[i % 4] for i in ids],
            "ts": pa.array([day * 1000 + i % 1000 for i in ids], pa.int64()),
            "name": [f"n{i:04d}" if i % 7 else None for i in ids],
            "x": [float("nan") if i % 11 == 0 else i / 4 for i in ids],
            "day": [date(2024, 1, 1) + timedelta(days=day) for _ in ids],
            "seen": pa.array(
                [datetime(2024, 3, 1, tzinfo=timezone.utc) + timedelta(days=day, seconds=i) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "amount": pa.array([Decimal(i) / 100 for i in ids], pa.decimal128(10, 2)),
        }
    )


def write_history(table: Table) -> list[str]:
    """Bulk inserts (a file group per day and partition, for the statistics to tell apart), an upsert, a delete
    across every partition; the instants, oldest first."""
    writer = LocalWriter(table)
    instants = [writer.write(batch(day * 100, 100, day), "bulk_insert").instant for day in range(3)]
    instants.append(writer.write(batch(250, 100, 9), "upsert").instant)
    instants.append(writer.write(batch(0, 40, 0).select(["id", "city", "ts"]), "delete").instant)
    return instants


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict:
    """Two Tandem tables with the same history: column stats kept from the start (hive-style partitions),
    and turned on afterwards by an index build (plain partitions)."""
    base = tmp_path_factory.mktemp("connectors")
    born = Table.create(str(base / "born"), "trips", ["id"], ["city"], hive_style=True, precombine_field="ts")
    built = Table.create(str(base / "built"), "trips", ["id"], ["city"], precombine_field="ts", indexes=())
    history = {"born": write_history(born), "built": write_history(built)}
    assert index_build.build(built.metadata(), built.timeline(), [COLUMN_STATS]) is not None
    assert COLUMN_STATS in Table.open(built.uri).config.metadata_indexes
    return {"born": (born.uri, history["born"]), "built": (built.uri, history["built"])}


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("fixtures")
    return {name: str(unzip_fixture(name, base)) for name in FIXTURE_NAMES}


@pytest.fixture(scope="module")
def spark():
    from coordinator.spark.datasource import register
    from coordinator.spark.session import local_session

    session = local_session("tandem-connectors")
    register(session)
    yield session
    session.stop()


# ---------------------------------------------------------------- oracle helpers


def hudi_rows(path: str, as_of: str | None = None, since: str | None = None, until: str | None = None) -> pa.Table:
    import hudi

    options = hudi.HudiReadOptions()
    if as_of is not None:
        options = options.with_as_of_timestamp(as_of)
    if since is not None:
        options = options.with_query_type(hudi.HudiQueryType.Incremental).with_start_timestamp(since)
        if until is not None:
            options = options.with_end_timestamp(until)
    batches = hudi.HudiTable(path).read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def filtered(rows: pa.Table, where: str | None) -> pa.Table:
    if not where or rows.num_columns == 0:
        return rows
    connection = duckdb.connect()
    connection.register("rows", rows)
    return connection.sql(f"SELECT * FROM rows WHERE {where}").to_arrow_table()


def normal(rows: pa.Table, columns: list[str] | None = None) -> list[tuple]:
    """Rows as sorted tuples of comparable values (NaN equal to NaN, meta columns left out)."""
    names = columns or [c for c in rows.column_names if c not in META_COLUMNS]

    def value(v):
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, datetime) and v.tzinfo is not None:
            return v.astimezone(timezone.utc)
        if isinstance(v, list):
            return repr(v)
        if isinstance(v, dict):
            return repr(sorted(v.items()))
        return v

    out = [tuple(value(r[n]) for n in names) for r in rows.select(names).to_pylist()] if rows.num_rows else []
    return sorted(out, key=repr)


def spark_rows(spark, path: str, where: str | None = None, **options: str) -> pa.Table:
    reader = spark.read.format("tandem")
    for key, value in options.items():
        reader = reader.option(key, value)
    frame = reader.load(path)
    return (frame.where(where) if where else frame).toArrow()


def in_process_reader(path: str, filters: list, **options: str):
    """The reader as Spark's planner worker drives it: schema, pushFilters, partitions."""
    from coordinator.spark.datasource import TandemDataSource

    source = TandemDataSource({"path": path, **options})
    reader = source.reader(source.schema())
    returned = list(reader.pushFilters(filters))
    partitions = reader.partitions()
    return reader, returned, partitions


# ---------------------------------------------------------------- Spark

WHERES = [
    None,
    "city = 'ams'",
    "ts >= 9000 AND x > 70",
    "name IS NULL OR id % 5 = 0",  # an OR and arithmetic: nothing pushed, still filtered
    "city IN ('ber', 'lis') AND name LIKE 'n02%'",
    "day = DATE '2024-01-02' AND amount < 1.5",
    # the same instant in each engine's spelling (Spark's session time zone is UTC)
    ("seen >= TIMESTAMP '2024-03-10 00:00:30'", "seen >= TIMESTAMPTZ '2024-03-10 00:00:30+00:00'"),
]


@pytest.mark.parametrize("which", ["born", "built"])
def test_spark_snapshot_matches_hudi_with_and_without_filters(spark, tables, which) -> None:
    path, _ = tables[which]
    everything = hudi_rows(path)
    for where in WHERES:
        spark_where, duck_where = where if isinstance(where, tuple) else (where, where)
        got = spark_rows(spark, path, spark_where)
        want = filtered(everything, duck_where)
        assert want.num_rows > 0, where
        assert normal(got) == normal(want), where
        assert set(got.column_names) == set(everything.column_names)
    assert normal(spark_rows(spark, path), META_COLUMNS) == normal(everything, META_COLUMNS)


def test_spark_as_of_and_incremental_reads_match_hudi(spark, tables) -> None:
    path, instants = tables["born"]
    for instant in (instants[0], instants[3]):
        for where in (None, "ts < 1050"):
            got = spark_rows(spark, path, where, **{"as.of.instant": instant})
            assert normal(got) == normal(filtered(hudi_rows(path, as_of=instant), where)), (instant, where)
    since, until = instants[1], instants[3]
    got = spark_rows(spark, path, **{"begin.instant": since, "end.instant": until})
    assert normal(got) == normal(hudi_rows(path, since=since, until=until))
    assert set(got.column("_hoodie_commit_time").to_pylist()) == {instants[2], instants[3]}
    hudi_keys = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": instants[2],
    }
    got = spark_rows(spark, path, "city = 'cph'", **hudi_keys)
    assert normal(got) == normal(filtered(hudi_rows(path, since=instants[2]), "city = 'cph'"))


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n != "v6_empty"])
def test_spark_reads_spark_written_fixtures_like_hudi(spark, fixtures, name) -> None:
    path = fixtures[name]
    want = hudi_rows(path)
    got = spark_rows(spark, path)
    columns = [c for c in want.column_names if c not in META_COLUMNS and c in got.column_names]
    assert len(columns) == len([c for c in want.column_names if c not in META_COLUMNS])
    assert normal(got, columns) == normal(want, columns)
    meta = Table.open(path).config.populate_meta_fields
    assert all((c in got.column_names) == meta for c in META_COLUMNS)
    where = "id > 1 AND isActive = true"
    assert normal(spark_rows(spark, path, where), columns) == normal(filtered(want, where), columns)


def test_spark_reads_an_empty_table_with_its_declared_schema(spark, fixtures) -> None:
    frame = spark.read.format("tandem").load(fixtures["v6_empty"])
    assert frame.count() == 0
    assert ["id", "name", "isActive"] == [c for c in frame.columns if c not in META_COLUMNS]


def test_pushed_filters_prune_files_and_are_all_given_back(spark, tables) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, IsNotNull, StringStartsWith

    path, _ = tables["built"]
    filters = [IsNotNull(("ts",)), GreaterThanOrEqual(("ts",), 9000), StringStartsWith(("name",), "n")]
    reader, returned, partitions = in_process_reader(path, filters)
    assert returned == filters and all(a is b for a, b in zip(returned, filters, strict=True))
    unpruned, _, _ = in_process_reader(path, [])
    assert reader.explained["pruned_by_column_stats"] > 0
    assert reader.explained["files_to_read"] < unpruned.explained["files_to_read"]
    assert sum(len(p.value[0]) for p in partitions) == reader.explained["files_to_read"]  # (files, log merge)
    since = datetime(2024, 3, 10, tzinfo=ZoneInfo("UTC"))  # zoned as Spark hands timestamps over
    by_time, _, _ = in_process_reader(path, [GreaterThanOrEqual(("seen",), since)])
    assert by_time.explained["files_to_read"] == reader.explained["files_to_read"]
    by_city, _, _ = in_process_reader(path, [EqualTo(("city",), "ams")])
    assert by_city.explained["pruned_by_partition"] == 3 * by_city.explained["files_to_read"]
    # through Spark: one partition per file at this parallelism, so the partitions count the files read
    frame = spark.read.format("tandem").option("tandem.read.parallelism", "1000").load(path)
    assert frame.rdd.getNumPartitions() == unpruned.explained["files_to_read"]
    assert frame.where("ts >= 9000").rdd.getNumPartitions() == reader.explained["files_to_read"]
    assert frame.where("city = 'ams'").rdd.getNumPartitions() == by_city.explained["files_to_read"]


def test_partitions_spread_the_files_over_the_parallelism(tables) -> None:
    path, _ = tables["born"]
    reader, _, partitions = in_process_reader(path, [], **{"tandem.read.parallelism": "1"})
    files = reader.explained["files_to_read"]
    assert len(partitions) == min(2, files)
    paths = [file[0] for part in partitions for file in part.value[0]]  # (path, partition, file id) each
    assert len(paths) == len(set(paths)) == files
    reader, _, partitions = in_process_reader(path, [], **{"tandem.read.parallelism": "64"})
    assert len(partitions) == files and all(len(p.value[0]) == 1 for p in partitions)


def test_spark_filters_translate_exactly() -> None:
    from pyspark.sql import datasource as S

    from coordinator.spark.datasource import translate
    from timeline.query import predicate as P

    stamp = datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert translate(S.EqualTo(("a",), 1)) == P.Comparison("a", "=", 1)
    assert translate(S.Not(S.EqualTo(("a",), 1))) == P.Not(P.Comparison("a", "=", 1))
    assert translate(S.LessThan(("a",), stamp)) == P.Comparison("a", "<", stamp)
    assert translate(S.EqualNullSafe(("a",), None)) == P.IsNull("a")
    assert translate(S.EqualNullSafe(("a",), 2)) == P.And(P.Comparison("a", "=", 2), P.IsNull("a", negated=True))
    assert translate(S.In(("a",), [1, None])) == P.InList("a", (1, None))
    assert translate(S.IsNotNull(("a",))) == P.IsNull("a", negated=True)
    assert translate(S.StringStartsWith(("s",), "5%_x\\")) == P.Like("s", "5\\%\\_x\\\\%")
    assert translate(S.StringContains(("s",), "b")) == P.Like("s", "%b%")
    assert translate(S.EqualTo(("s", "field"), 1)) is None  # a nested field
    assert translate(S.EqualTo(("a",), [1, 2])) is None  # an array literal
    assert translate(S.Not(S.EqualTo(("a",), [1]))) is None


def test_a_loaded_frame_keeps_its_snapshot(spark, tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"])
    LocalWriter(table).write(batch(0, 20, 0), "insert")
    frame = spark.read.format("tandem").load(table.uri)
    LocalWriter(table).write(batch(100, 20, 1).append_column("extra", pa.array(["e"] * 20)), "insert")
    assert frame.count() == 20 and "extra" not in frame.columns
    assert spark.read.format("tandem").load(table.uri).count() == 40


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"as.of.instant": "2020-02-30"}, "'2020-02-30' is not a time"),
        ({"as.of.instant": "yesterday"}, "'yesterday' is not a time"),
        ({"hoodie.datasource.query.type": "incremental"}, "an incremental read needs begin.instant"),
        ({"begin.instant": "20200101000000000", "as.of.instant": "20200101000000000"}, "cannot also be"),
    ],
)
def test_spark_errors_are_one_clear_line(spark, tables, options, message) -> None:
    from pyspark.errors import AnalysisException

    path, _ = tables["born"]
    with pytest.raises(AnalysisException) as caught:
        spark_rows(spark, path, **options)
    text = str(caught.value)
    assert "BadInputError: " in text and message in text
    assert "During handling" not in text and "direct cause" not in text


def test_spark_refuses_a_path_that_is_not_a_table(spark, tmp_path: Path) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match=r"NotATableError: .*hoodie.properties"):
        spark.read.format("tandem").load(str(tmp_path))


# ---------------------------------------------------------------- DuckDB

QUERIES = [
    "SELECT * FROM t",
    "SELECT city, count(*) AS n, sum(amount) AS total FROM t GROUP BY city",
    "SELECT id, name FROM t WHERE ts >= 9000 AND x > 70",
    "SELECT id FROM t AS r WHERE r.city = 'lis' AND r.name IS NOT NULL",
    "SELECT id, seen FROM t WHERE seen < TIMESTAMPTZ '2024-03-02 00:00:00+00' OR name LIKE 'n02%'",
    "SELECT count(*) AS n FROM t WHERE x = 'NaN'::DOUBLE OR isnan(x)",
    "SELECT id FROM t WHERE id IN (SELECT max(id) FROM t)",
]


def test_duckdb_queries_match_duckdb_over_hudi_rows(tables) -> None:
    path, _ = tables["born"]
    oracle = duckdb.connect()
    oracle.register("t", hudi_rows(path))
    for sql in QUERIES:
        got, plan = duckdb_view.query(path, sql)
        want = oracle.sql(sql).to_arrow_table()
        assert normal(got, got.column_names) == normal(want, want.column_names), sql
    got, _ = duckdb_view.query(path, "SELECT count(*) AS n FROM trips WHERE city = 'ams'")
    assert got.to_pylist() == oracle.sql("SELECT count(*) AS n FROM t WHERE city = 'ams'").to_arrow_table().to_pylist()


def test_duckdb_query_prunes_by_its_where_only_when_that_is_safe(tables) -> None:
    path, _ = tables["built"]
    _, everything = duckdb_view.query(path, "SELECT 1")
    _, plan = duckdb_view.query(path, "SELECT id FROM t WHERE t.ts >= 9000")
    assert plan.pruned_by_stats > 0 and len(plan.splits) < len(everything.splits)
    _, plan = duckdb_view.query(path, "SELECT id FROM trips WHERE city = 'ber'")
    assert plan.pruned_by_partition > 0
    for sql in (
        "SELECT id FROM t WHERE ts >= 9000 AND id IN (SELECT id FROM t WHERE city = 'ams')",
        "SELECT a.id FROM t AS a JOIN t AS b ON a.id = b.id WHERE a.ts >= 9000",
        "WITH r AS (SELECT * FROM t) SELECT id FROM r WHERE ts >= 9000",
        "SELECT id FROM t WHERE ts >= 9000 UNION ALL SELECT id FROM t",
        "SELECT ts * 2 AS ts2 FROM t WHERE ts2 > 18000",  # a SELECT alias in WHERE: DuckDB's reading
    ):
        got, plan = duckdb_view.query(path, sql)
        assert len(plan.splits) == len(everything.splits), sql
        assert plan.notes, sql
        assert got.num_rows > 0, sql
    assert duckdb_view.query_filter("SELECT * FROM t x WHERE x.a = 1 AND b > 2", ["t"]) == "a = 1 AND b > 2"
    assert duckdb_view.query_filter("SELECT * FROM t WHERE s.f = 1", ["t"]) is None  # a struct field
    assert duckdb_view.query_filter("SELECT * FROM other WHERE a = 1", ["t"]) is None


def test_duckdb_register_as_of_with_a_filter_and_snapshot_isolation(tables, tmp_path: Path) -> None:
    path, instants = tables["built"]
    connection = duckdb.connect()
    plan = duckdb_view.register(connection, path, "trips_then", as_of=instants[2], where="city <> 'ams'")
    got = connection.sql("SELECT * FROM trips_then").to_arrow_table()
    assert normal(got) == normal(filtered(hudi_rows(path, as_of=instants[2]), "city <> 'ams'"))
    assert plan.pruned_by_partition > 0
    plan = duckdb_view.register(connection, path, since=instants[2])
    got = connection.sql("SELECT * FROM t").to_arrow_table()
    assert normal(got) == normal(hudi_rows(path, since=instants[2]))

    table = Table.create(str(tmp_path / "iso"), "iso", ["id"], ["city"])
    LocalWriter(table).write(batch(0, 10, 0), "insert")
    duckdb_view.register(connection, table.uri, "iso")
    LocalWriter(table).write(batch(100, 10, 1), "insert")
    assert connection.sql("SELECT count(*) FROM iso").fetchall() == [(10,)]


def test_duckdb_gives_empty_relations_their_schema(tables, fixtures) -> None:
    connection = duckdb.connect()
    duckdb_view.register(connection, fixtures["v6_empty"], "empty")
    assert connection.sql("SELECT count(*) FROM empty").fetchall() == [(0,)]
    assert [c for c in connection.sql("SELECT * FROM empty").columns if c not in META_COLUMNS] == [
        "id",
        "name",
        "isActive",
    ]
    path, _ = tables["built"]
    plan = duckdb_view.register(connection, path, "none", where="ts > 100000")
    assert plan.splits == []
    relation = connection.sql("SELECT * FROM none")
    assert relation.fetchall() == [] and "amount" in relation.columns
    assert str(relation.types[relation.columns.index("amount")]) == "DECIMAL(10,2)"


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n != "v6_empty"])
def test_duckdb_reads_spark_written_fixtures_like_hudi(fixtures, name) -> None:
    path = fixtures[name]
    want = hudi_rows(path)
    got, plan = duckdb_view.query(path, "SELECT * FROM t WHERE id >= 2")
    columns = [c for c in want.column_names if c not in META_COLUMNS]
    assert normal(got, columns) == normal(filtered(want, "id >= 2"), columns)
    meta = Table.open(path).config.populate_meta_fields
    assert all((c in got.column_names) == meta for c in META_COLUMNS)


def test_duckdb_query_errors_are_bad_input(tables, tmp_path: Path) -> None:
    path, _ = tables["born"]
    with pytest.raises(BadInputError, match="nope"):
        duckdb_view.query(path, "SELECT * FROM t WHERE nope = 1")
    with pytest.raises(BadInputError, match="query: Parser Error"):
        duckdb_view.query(path, "SELEC * FROM t")
    with pytest.raises(BadInputError, match="is not a time"):
        duckdb_view.query(path, "SELECT 1", as_of="20201301000000000")
    with pytest.raises(BadInputError):
        duckdb_view.query(str(tmp_path), "SELECT 1")


# ---------------------------------------------------------------- the CLI


def test_cli_query_prints_rows_json_explain_and_parquet(tables, tmp_path: Path) -> None:
    path, instants = tables["born"]
    done = tandem("query", path, "SELECT city, count(*) AS n FROM t GROUP BY city ORDER BY city")
    assert done.returncode == 0, done.stderr
    assert "ams" in done.stdout and "lis" in done.stdout
    done = tandem("query", path, "SELECT id, name FROM trips WHERE city = 'ams' ORDER BY id", "--json", "--limit", "3")
    doc = json.loads(done.stdout)
    ams = filtered(hudi_rows(path), "city = 'ams'")
    assert doc["rows"] == ams.num_rows and len(doc["data"]) == 3
    assert doc["plan"]["pruned_by_partition"] > 0
    done = tandem("query", path, "SELECT * FROM t WHERE ts >= 9000", "--explain", "--json")
    assert json.loads(done.stdout)["pruned_by_column_stats"] > 0
    output = tmp_path / "out.parquet"
    done = tandem("query", path, "SELECT * FROM t", "--as-of", instants[0], "--output", str(output))
    assert done.returncode == 0, done.stderr
    assert normal(pq.read_table(output)) == normal(hudi_rows(path, as_of=instants[0]))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["SELECT nope FROM t"], "nope"),
        (["SELECT * FROM t WHERE"], "query: Parser Error"),
        (["SELECT 1", "--as-of", "2020-02-30 10:00:00"], "is not a time"),
        (["SELECT 1", "--as-of", "soon"], "is not a time"),
        (["SELECT 1", "--output", "x.csv"], "must end in .parquet"),
    ],
)
def test_cli_query_errors_are_one_line_exit_2(tables, args, message) -> None:
    path, _ = tables["born"]
    done = tandem("query", path, *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_cli_query_of_a_path_that_is_not_a_table(tmp_path: Path) -> None:
    done = tandem("query", str(tmp_path), "SELECT 1")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_duckdb_reads_a_table_on_s3(s3_base) -> None:
    from coordinator.config import CoordinatorConfig

    table = Table.create(s3_base, "trips", ["id"], ["city"])
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory"))
    first, second = batch(0, 40, 0), batch(20, 40, 1).append_column("extra", pa.array([1] * 40))
    writer.write(first, "insert")
    writer.write(second, "upsert")
    got, plan = duckdb_view.query(s3_base, "SELECT * FROM t WHERE city = 'ber' AND id >= 10")
    assert plan.pruned_by_partition > 0
    expected = {r["id"]: {**r, "extra": None} for r in first.to_pylist()} | {r["id"]: r for r in second.to_pylist()}
    want = pa.Table.from_pylist([r for r in expected.values() if r["city"] == "ber" and r["id"] >= 10])
    assert want.num_rows > 0 and normal(got, want.column_names) == normal(want)
