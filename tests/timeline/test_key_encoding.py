"""Record identity cannot collide silently: keys and paths are Hudi's, and a tuple whose encoding is ambiguous is
refused.

The oracle below is a plain-Python transliteration of Hudi 0.15.0's `KeyGenUtils` (table version 6):
`getRecordKey(record, field)` for one key field (what 0.15.0's simple, non-partitioned and complex key generators
call for one field), `getRecordKey(record, fields)` for several, `getRecordPartitionPath`, and `extractRecordKeys` /
the Spark file index's split of a partition path, Hudi's own ways of reading them back. (It was checked against the
0.15.0 bundle's own `KeyGenUtils`, run on 4,000 generated tuples and 2,941 keys: no difference.) A tuple is
accepted exactly when Hudi accepts it, no key value is null (Tandem's rule), and Hudi's own parse of the encoding
gives the tuple back; then the encoding is one-to-one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from coordinator.write.writer import LocalWriter
from tests.conftest import tandem
from tests.coordinator.test_bad_input import tree
from timeline.errors import BadInputError
from timeline.format import keys, partition_path
from timeline.query.reader import read_view
from timeline.table import Table

# ------------------------------------------------------------------ the oracle: Hudi 0.15.0's KeyGenUtils
NULL_RECORDKEY_PLACEHOLDER = "__null__"
EMPTY_RECORDKEY_PLACEHOLDER = "__empty__"
HUDI_DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"
DEFAULT = HUDI_DEFAULT_PARTITION_PATH


class HoodieKeyException(Exception):
    """What Hudi throws for a key it refuses."""


def hudi_record_key(fields: list[str], values: list[str | None]) -> str:
    """`KeyGenUtils.getRecordKey`: values as `getNestedFieldValAsString` gives them (None for null)."""
    if len(fields) == 1:
        value = values[0]
        if value is None or value == "":
            raise HoodieKeyException(f'recordKey value: "{value}" for field: "{fields[0]}" cannot be null or empty.')
        return value
    key_is_null_empty = True
    parts = []
    for field, value in zip(fields, values, strict=True):
        if value is None:
            parts.append(field + ":" + NULL_RECORDKEY_PLACEHOLDER)
        elif value == "":
            parts.append(field + ":" + EMPTY_RECORDKEY_PLACEHOLDER)
        else:
            parts.append(field + ":" + value)
            key_is_null_empty = False
    if key_is_null_empty:
        raise HoodieKeyException(f"recordKey values for fields: {fields} cannot be entirely null or empty.")
    return ",".join(parts)


def java_split(text: str, separator: str) -> list[str]:
    """Java's `String.split(separator)` (limit 0): trailing empty strings are dropped; no match gives `[text]`."""
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def hudi_extract_record_keys(key: str) -> list[str | None]:
    """`KeyGenUtils.extractRecordKeys` (0.15.0): split on every ',', then each part on its first ':'."""
    values: list[str | None] = []
    for part in java_split(key, ","):
        pair = part.split(":", 1)
        if len(pair) == 1:
            values.append(pair[0])
        elif pair[1] == NULL_RECORDKEY_PLACEHOLDER:
            values.append(None)
        elif pair[1] == EMPTY_RECORDKEY_PLACEHOLDER:
            values.append("")
        else:
            values.append(pair[1])
    return values


def hudi_partition_path(fields: list[str], values: list[str | None], hive_style: bool) -> str:
    """`KeyGenUtils.getRecordPartitionPath` (no URL encoding), which `getPartitionPath` equals for one field."""
    pieces = []
    for field, value in zip(fields, values, strict=True):
        text = HUDI_DEFAULT_PARTITION_PATH if value is None or value == "" else value
        pieces.append(f"{field}={text}" if hive_style else text)
    return "/".join(pieces)


def key_hudi_accepts(fields: list[str], values: list[str | None]) -> bool:
    try:
        hudi_record_key(fields, values)
    except HoodieKeyException:
        return False
    return True


def key_accepted(fields: list[str], values: list[str | None]) -> bool:
    """Hudi accepts the key, no value is null, and Hudi's own parse of the key gives the values back."""
    if any(value is None for value in values):
        return False
    try:
        key = hudi_record_key(fields, values)
    except HoodieKeyException:
        return False
    return len(fields) == 1 or hudi_extract_record_keys(key) == values


def path_accepted(fields: list[str], values: list[str | None], hive_style: bool) -> bool:
    """A canonical path (the existing rule) that Hudi's Spark file index splits back into one piece per column."""
    path = hudi_partition_path(fields, values, hive_style)
    return partition_path.problem(path) is None and (len(fields) == 1 or len(path.split("/")) == len(fields))


def path_tuple(values: list[str | None]) -> tuple[str, ...]:
    """The partition tuple a path stands for: null, empty and Hudi's default name are one value, as in Hudi."""
    return tuple(HUDI_DEFAULT_PARTITION_PATH if v in (None, "") else v for v in values)


# ------------------------------------------------------------------ generated tuples
NAMES = ["id", "city", "ts"]
TOKENS = [",", ":", "/", "=", "a", "b", ",city:", ",ts:", "/city=", "é", "日本", "\U0001f600", " ", "."]
SPECIAL = ["", ",", ":", "/", "=", "a,b", "a:b", "x/y", "k=v", "__null__", "__empty__", HUDI_DEFAULT_PARTITION_PATH]
TEXT = st.one_of(
    st.sampled_from(SPECIAL),
    st.lists(st.sampled_from(TOKENS), min_size=1, max_size=4).map("".join),
    st.text(max_size=5),
)


@st.composite
def batches(draw) -> tuple[list[str], pa.Table, list[list[str | None]]]:
    """1-3 key fields, each a string or an int64 column, and 1-6 rows: (fields, table, values as Hudi reads them)."""
    fields = NAMES[: draw(st.integers(1, 3))]
    ints = {name: draw(st.booleans()) for name in fields}
    cell = {name: st.integers(-(2**63), 2**63 - 1) if ints[name] else TEXT for name in fields}
    rows = draw(
        st.lists(st.tuples(*(st.one_of(cell[n], cell[n], cell[n], st.none()) for n in fields)), min_size=1, max_size=6)
    )
    columns = {
        name: pa.array([row[i] for row in rows], pa.int64() if ints[name] else pa.string())
        for i, name in enumerate(fields)
    }
    texts = [[None if v is None else str(v) for v in row] for row in rows]
    return fields, pa.table(columns), texts


@st.composite
def colliding_pairs(draw) -> tuple[list[str], list[str | None], list[str | None]]:
    """Two different key tuples Hudi writes as one key: a ',next:' moved across a field boundary, or a value
    equal to the placeholder Hudi writes for another value."""
    fields = NAMES[: draw(st.integers(2, 3))]
    i = draw(st.integers(0, len(fields) - 2))
    x, y, z = draw(TEXT.filter(bool)), draw(TEXT), draw(TEXT.filter(bool))  # x and z stand alone: not empty
    rest = [draw(TEXT) for _ in fields]
    nxt = fields[i + 1]
    kind = draw(st.sampled_from(["comma", "empty", "null"]))
    first, second = list(rest), list(rest)
    if kind == "comma":  # (x ',next:' y, z) and (x, y ',next:' z)
        first[i], first[i + 1] = f"{x},{nxt}:{y}", z
        second[i], second[i + 1] = x, f"{y},{nxt}:{z}"
    else:
        first[i] = "" if kind == "empty" else None
        second[i] = EMPTY_RECORDKEY_PLACEHOLDER if kind == "empty" else NULL_RECORDKEY_PLACEHOLDER
    return fields, first, second


def tandem_keys(fields: list[str], rows: list[list[str | None]]) -> list[str]:
    columns = {name: pa.array([row[i] for row in rows], pa.string()) for i, name in enumerate(fields)}
    return keys.record_keys(pa.table(columns), fields).to_pylist()


# ------------------------------------------------------------------ properties
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(batches())
def test_record_keys_are_hudis_for_accepted_tuples_and_refuse_the_rest(batch) -> None:
    fields, table, rows = batch
    accepted = [key_accepted(fields, row) for row in rows]
    kept = [row for row, ok in zip(rows, accepted, strict=True) if ok]
    event(f"{len(fields)} key field(s): {'all' if len(kept) == len(rows) else 'some' if kept else 'no'} rows accepted")
    written = keys.record_keys(table.filter(pa.array(accepted)), fields).to_pylist()
    assert written == [hudi_record_key(fields, row) for row in kept]
    assert len(set(written)) == len(set(map(tuple, kept)))  # distinct tuples, distinct keys
    if len(fields) > 1:
        assert [hudi_extract_record_keys(key) for key in written] == kept  # and Hudi reads each one back
    if not all(accepted):
        with pytest.raises(BadInputError, match=r"^record key field '(id|city|ts)'"):
            keys.record_keys(table, fields)
    for i, ok in enumerate(accepted):  # each tuple on its own
        if not ok:
            with pytest.raises(BadInputError):
                keys.record_keys(table.slice(i, 1), fields)


@SETTINGS
@given(colliding_pairs())
def test_two_tuples_hudi_writes_as_one_key_are_never_both_accepted(pair) -> None:
    fields, first, second = pair
    assume(all(key_hudi_accepts(fields, row) for row in (first, second)))
    assert first != second and hudi_record_key(fields, first) == hudi_record_key(fields, second)
    outcomes = []
    for row in (first, second):
        try:
            outcomes.append(tandem_keys(fields, [row]))
        except BadInputError as err:
            assert str(err).startswith("record key field ") and "\n" not in str(err)
    assert len(outcomes) <= 1
    event(f"{len(outcomes)} of the pair accepted")
    with pytest.raises(BadInputError):
        tandem_keys(fields, [first, second])


@SETTINGS
@given(batches(), st.booleans())
def test_partition_paths_are_hudis_for_accepted_tuples_and_refuse_the_rest(batch, hive_style) -> None:
    fields, table, rows = batch
    accepted = [path_accepted(fields, row, hive_style) for row in rows]
    kept = [row for row, ok in zip(rows, accepted, strict=True) if ok]
    event(f"{len(fields)} column(s): {'all' if len(kept) == len(rows) else 'some' if kept else 'no'} rows accepted")
    written = keys.partition_paths(table.filter(pa.array(accepted)), fields, hive_style).to_pylist()
    assert written == [hudi_partition_path(fields, row, hive_style) for row in kept]
    assert len(set(written)) == len(set(map(path_tuple, kept)))  # distinct tuples, distinct paths
    if not all(accepted):
        with pytest.raises(BadInputError, match=r"^partition column"):
            keys.partition_paths(table, fields, hive_style)
    for i, ok in enumerate(accepted):
        if not ok:
            with pytest.raises(BadInputError, match=r"^partition column"):
                keys.partition_paths(table.slice(i, 1), fields, hive_style)


def test_hudis_placeholders_and_refusals_by_example() -> None:
    two = ["id", "city"]
    assert tandem_keys(two, [["", "ams"], ["7", "a:b"]]) == ["id:__empty__,city:ams", "id:7,city:a:b"]
    assert tandem_keys(["id"], [["__null__"], ["a,b"]]) == ["__null__", "a,b"]  # one field: the value as it is
    for row, message in [
        (["x,city:y", "z"], "record key field 'id' value 'x,city:y' contains ','"),
        (["__empty__", "z"], "record key field 'id' value '__empty__' is what Hudi writes for an empty value"),
        (["x", "__null__"], "record key field 'city' value '__null__' is what Hudi writes for a null value"),
        (["", ""], "record key field 'id' is empty, and so is every other key field ('city'), in 1 row"),
        ([None, "z"], "record key field 'id' is null in 1 row"),
    ]:
        with pytest.raises(BadInputError, match=f"^{re.escape(message)}"):
            tandem_keys(two, [row])
    with pytest.raises(BadInputError, match="^record key field 'id' is empty in 1 row"):
        tandem_keys(["id"], [[""]])
    long = "x" * 90 + ","
    with pytest.raises(BadInputError, match=r"value 'x{80}'\.\.\. \(91 characters\) contains ','"):
        tandem_keys(two, [[long, "z"]])
    paths = pa.table({"p": ["x/y", "x"], "q": ["z", "y/z"]})
    assert keys.partition_paths(paths.slice(0, 1).select(["p"]), ["p"], False).to_pylist() == ["x/y"]  # nested folder
    with pytest.raises(BadInputError, match="^partition column 'p' value 'x/y' contains '/'"):
        keys.partition_paths(paths, ["p", "q"], True)


# ------------------------------------------------------------------ end to end
def _write_input(folder: Path, rows: dict) -> Path:
    path = folder / "in.parquet"
    pq.write_table(pa.table(rows), path)
    return path


@pytest.mark.parametrize(
    "partitions, rows, message",
    [
        (["p"], {"id": ["x,city:y", "x"], "city": ["z", "y,city:z"], "p": ["a", "a"]}, "record key field 'id' value"),
        (["p", "q"], {"id": ["k", "k"], "city": ["c", "c"], "p": ["x/y", "x"], "q": ["z", "y/z"]}, "partition column"),
    ],
)
@pytest.mark.parametrize("operation", ["insert", "upsert"])
def test_cli_refuses_a_colliding_pair_with_one_line_and_changes_nothing(tmp_path, partitions, rows, message, operation):
    table = Table.create(str(tmp_path / "t"), "t", ["id", "city"], partitions)
    first = {"id": ["", "k"], "city": ["ams", "ber"], "p": ["a", "b"], "q": ["q", "q"]}
    LocalWriter(table).write(pa.table({c: first[c] for c in ["id", "city", *partitions]}), "insert")
    before = tree(Path(table.uri))
    result = tandem("write", table.uri, "--input", str(_write_input(tmp_path, rows)), "--operation", operation)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"error: {message}"), result.stderr
    assert tree(Path(table.uri)) == before
    written = sorted(read_view(table, table.view()).column("_hoodie_record_key").to_pylist())
    assert written == ["id:__empty__,city:ams", "id:k,city:ber"]


def test_spark_writer_writes_and_refuses_as_the_local_writer(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from coordinator.spark.session import local_session
    from coordinator.spark.writer import SparkWriter

    table = Table.create(str(tmp_path / "t"), "t", ["id", "n"], ["p", "q"], hive_style=True)
    good = pa.table({"id": ["", "a:b"], "n": [1, 2], "p": ["x", ""], "q": ["y", None]})
    spark = local_session("tandem-key-encoding")
    try:
        schema = "id string, n long, p string, q string"
        SparkWriter(spark, table).write(spark.createDataFrame(good.to_pylist(), schema), "upsert")  # keys in SQL
        stored = read_view(table, table.view()).sort_by("n")
        assert stored.column("_hoodie_record_key").to_pylist() == keys.record_keys(good, ["id", "n"]).to_pylist()
        assert stored.column("_hoodie_record_key").to_pylist() == ["id:__empty__,n:1", "id:a:b,n:2"]
        paths = keys.partition_paths(good, ["p", "q"], True).to_pylist()
        assert stored.column("_hoodie_partition_path").to_pylist() == paths == ["p=x/q=y", f"p={DEFAULT}/q={DEFAULT}"]
        before = tree(Path(table.uri))
        refused = [
            (
                {"id": ["x,n:1", "x"], "n": [2, 2], "p": ["x", "x"], "q": ["y", "y"]},
                "upsert",
                "record key field 'id' value 'x,n:1' contains ','",
            ),
            (
                {"id": ["__empty__"], "n": [1], "p": ["x"], "q": ["y"]},
                "upsert",
                "record key field 'id' value '__empty__' is what Hudi writes for an empty value",
            ),
            ({"id": ["k"], "n": [1], "p": ["x/y"], "q": ["z"]}, "upsert", "partition column 'p' value 'x/y' contains"),
            ({"id": ["x,n:1"], "n": [2], "p": ["x"], "q": ["y"]}, "insert", "record key field 'id' value 'x,n:1'"),
        ]
        for rows, operation, message in refused:
            frame = spark.createDataFrame(pa.table(rows).to_pylist(), schema)
            with pytest.raises(BadInputError) as caught:
                SparkWriter(spark, table).write(frame, operation)
            assert str(caught.value).startswith(message) and "\n" not in str(caught.value), str(caught.value)
            assert table.timeline().pending() == []
            assert tree(Path(table.uri)) == before
    finally:
        spark.stop()
