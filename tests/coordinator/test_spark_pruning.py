"""Partition pruning on typed partition values: the default partition, typed comparisons, literal casts."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from coordinator.write.writer import LocalWriter
from timeline.errors import BadInputError
from timeline.format.keys import DEFAULT_PARTITION
from timeline.query.partition_filter import partition_candidates, typed_fields, value_candidates
from timeline.query.scan import plan_scan
from timeline.table import Table

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    from coordinator.spark.session import local_session

    session = local_session("tandem-pruning-tests")
    yield session
    session.stop()


def _table(tmp_path: Path, rows: dict, partition_by: list[str], hive_style: bool) -> Table:
    """Without column stats: what the planner keeps is then what partition pruning kept."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], partition_by, hive_style=hive_style, indexes=())
    LocalWriter(table).write(pa.table(rows), "insert")
    return table


def _ids(spark, table: Table, where: str) -> set[int]:
    from coordinator.spark.reader import read_table

    return {row["id"] for row in read_table(spark, table.uri, where=where).select("id").collect()}


def _pruned(spark, table: Table, where: str) -> list[str]:
    """The partitions the planner keeps for a Spark SQL filter."""
    from coordinator.spark.reader import spark_filter

    return sorted({s.partition for s in plan_scan(table, spark_filter(where)).splits})


def test_a_partition_path_gives_back_the_typed_values_its_rows_may_hold():
    fields, types = ["b", "s", "d"], {"b": pa.int64(), "s": pa.string(), "d": pa.date32()}
    default = f"b={DEFAULT_PARTITION}/s={DEFAULT_PARTITION}/d={DEFAULT_PARTITION}"
    odd = ["b=007/s=x/d=2020-01-02", "s=x/b=5/d=2020-01-02", "b=5/s=x/y/d=2020-01-02", "b=5/s=x/d=2020-1-2"]
    candidates, undecided = partition_candidates(["b=5/s=x/d=2020-01-02", default, *odd], fields, types, True)
    day = datetime.date(2020, 1, 2)
    assert candidates.to_pylist() == [
        {"__partition": "b=5/s=x/d=2020-01-02", "b": 5, "s": "x", "d": day},
        *({"__partition": default, "b": None, "s": s, "d": None} for s in (None, "", DEFAULT_PARTITION)),
    ]
    assert sorted(undecided) == sorted(odd)  # printed differently, fields out of order, a '/' in a value


def test_only_types_whose_path_text_is_exact_are_typed():
    schema = pa.schema([("i", pa.int32()), ("x", pa.float64()), ("t", pa.timestamp("ns")), ("c", pa.decimal128(6, 2))])
    assert typed_fields(["i", "x", "t", "c", "missing"], schema) == {"i": pa.int32(), "c": pa.decimal128(6, 2)}
    assert value_candidates("1.50", pa.decimal128(6, 2)) == [Decimal("1.50")]
    assert value_candidates("5", pa.decimal128(6, 2)) is None  # an int promoted to decimal: 5 prints 5.00
    assert value_candidates("true", pa.bool_()) == [True]
    assert value_candidates(DEFAULT_PARTITION, pa.int32()) == [None]


STRINGS = {"id": [1, 2, 3, 4, 5], "p": ["a", None, "", DEFAULT_PARTITION, "b"], "v": [1, 2, 3, 4, 5]}


@pytest.mark.parametrize("hive_style", [True, False], ids=["hive", "plain"])
@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("p IS NULL", {2}),
        ("p = ''", {3}),
        ("NOT (p IS NOT NULL)", {2}),
        ("NOT (p <> '')", {3}),
        ("NOT (p = 'a')", {3, 4, 5}),
        (f"p = '{DEFAULT_PARTITION}'", {4}),
        ("coalesce(p, 'z') = 'z'", {2}),
        ("length(p) = 0", {3}),
    ],
)
def test_the_default_partition_holds_nulls_and_empty_strings(spark, tmp_path, hive_style, where, expected):
    table = _table(tmp_path, STRINGS, ["p"], hive_style)
    assert _ids(spark, table, where) == expected


def test_pruning_keeps_the_default_partition_only_where_null_or_empty_can_pass(spark, tmp_path):
    table = _table(tmp_path, STRINGS, ["p"], True)
    default = f"p={DEFAULT_PARTITION}"
    assert _pruned(spark, table, "p IS NULL") == [default]
    assert _pruned(spark, table, "p = ''") == [default]
    assert _pruned(spark, table, "p = 'b'") == ["p=b"]
    assert _pruned(spark, table, "p > 'Z' AND p < 'a'") == [default]  # only the string '__HIVE_DEFAULT_PARTITION__'
    assert _pruned(spark, table, "p > 'a'") == ["p=b"]


BUCKETS = {"id": [1, 2, 3, 4, 5, 6], "bucket": [1, 2, 5, 10, 11, None], "v": [1.0] * 6}
DAYS = [datetime.date(2020, 1, d) for d in (1, 2, 3)] + [None]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("bucket > 1", {2, 3, 4, 5}),
        ("bucket <= 5 OR bucket IS NULL", {1, 2, 3, 6}),
        ("NOT (bucket < 10)", {4, 5}),
        ("bucket + 1 = 3", {2}),
    ],
)
def test_a_typed_comparison_on_an_int_partition_with_a_null_partition(spark, tmp_path, where, expected):
    table = _table(tmp_path, BUCKETS, ["bucket"], True)
    assert _ids(spark, table, where) == expected


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("day > DATE '2020-01-01'", {2, 3}),
        ("day < '2020-01-03'", {1, 2}),
        ("day IS NULL OR day = DATE '2020-01-03'", {3, 4}),
    ],
)
def test_a_typed_comparison_on_a_date_partition_with_a_null_partition(spark, tmp_path, where, expected):
    table = _table(tmp_path, {"id": [1, 2, 3, 4], "day": DAYS}, ["day"], False)
    assert _ids(spark, table, where) == expected


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("bucket BETWEEN '1' AND '10'", {1, 2, 3, 4}),
        ("bucket IN ('2', '5')", {2, 3}),
        ("bucket > '9'", {4, 5}),
    ],
)
def test_a_string_literal_on_an_int_partition_compares_as_a_number(spark, tmp_path, where, expected):
    table = _table(tmp_path, BUCKETS, ["bucket"], True)
    assert _ids(spark, table, where) == expected


def test_a_filter_naming_data_columns_prunes_by_its_partition_part(spark, tmp_path):
    table = _table(tmp_path, BUCKETS, ["bucket"], True)
    every = sorted(table.view().partitions())
    assert _pruned(spark, table, "bucket = 2 AND v > 0") == ["bucket=2"]
    assert _pruned(spark, table, "(bucket = 2 AND v > 0) OR (bucket = 5 AND v < 0)") == ["bucket=2", "bucket=5"]
    assert _pruned(spark, table, "bucket = 2 OR v > 0") == every
    assert _pruned(spark, table, "NOT (bucket = 2 AND v > 0)") == every
    assert _pruned(spark, table, "bucket > rand(7) * 20") == every  # not deterministic: decides nothing
    assert _ids(spark, table, "(bucket = 2 AND v > 0) OR (bucket = 5 AND v < 0)") == {2}


def test_a_float_partition_is_never_pruned_and_reads_right(spark, tmp_path):
    table = _table(tmp_path, {"id": [1, 2, 3], "x": [0.1, float("nan"), -0.0]}, ["x"], True)
    assert _pruned(spark, table, "x = 0.1") == sorted(table.view().partitions())
    assert _ids(spark, table, "x = 0.1") == {1}
    assert _ids(spark, table, "x > 1") == {2}  # NaN is larger than any number
    assert _ids(spark, table, "x = 0") == {3}


def test_a_partition_path_that_does_not_split_into_its_values_is_kept(spark, tmp_path):
    table = _table(tmp_path, {"id": [1, 2], "p": ["x/y", "z"]}, ["p"], True)
    assert _ids(spark, table, "p = 'x/y'") == {1}
    assert _ids(spark, table, "p = 'z'") == {2}


def test_a_column_added_later_is_read_when_only_older_files_survive_pruning(spark, tmp_path):
    from coordinator.spark.reader import read_table

    table = _table(tmp_path, {"id": [1], "p": ["a"]}, ["p"], True)
    LocalWriter(table).write(pa.table({"id": [2], "p": ["b"], "extra": [7]}), "insert")
    rows = read_table(spark, table.uri, where="p = 'a'").select("id", "extra").collect()
    assert [(r["id"], r["extra"]) for r in rows] == [(1, None)]
    assert _ids(spark, table, "p = 'a' AND extra IS NULL") == {1}


def test_a_filter_spark_cannot_analyze_is_bad_input(spark, tmp_path):
    table = _table(tmp_path, BUCKETS, ["bucket"], True)
    with pytest.raises(BadInputError, match="nosuch"):
        _ids(spark, table, "nosuch > 1")
