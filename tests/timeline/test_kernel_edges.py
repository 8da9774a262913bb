"""Kernel edges: empty, one-row, zero-chunk and many-chunk inputs through every write and its helpers.

Arrow releases differ at the edges of their kernels: a kernel or filter over no rows returns a chunked
array of no chunks, and from pyarrow 14 to 25 `indices_nonzero` over one segfaults, so a write of one
row died in `split_by`. Here random tables of 0, 1 or a few rows, each column cut into random chunks
(empty chunks, and none at all for no rows, included), go through the helpers and through insert,
bulk_insert, upsert, delete and insert_overwrite on partitioned and non-partitioned tables under each
index, and every result is checked against the rule written plainly in Python.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import coordinator.write.rows as rows_module
from coordinator.config import CoordinatorConfig
from coordinator.write.rows import KEY, PARTITION, changes, split_by
from coordinator.write.writer import LocalWriter
from timeline.query.reader import read_view
from timeline.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("s", pa.string())])
IDS = range(8)  # few keys: upserts and deletes find stored ones
PARTITIONS = ["a", "b"]
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@st.composite
def chunked(draw: st.DrawFn, values: list, dtype: pa.DataType) -> pa.ChunkedArray:
    """`values` cut at random points: one chunk, many, empty ones between; no chunks at all for no values."""
    whole = pa.array(values, dtype)
    if not values and draw(st.booleans()):
        return pa.chunked_array([], dtype)
    cuts = sorted(draw(st.lists(st.integers(0, len(values)), max_size=4)))
    bounds = [0, *cuts, len(values)]
    return pa.chunked_array([whole.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:], strict=True)], dtype)


@st.composite
def table_of(draw: st.DrawFn, rows: list[dict], schema: pa.Schema = SCHEMA) -> pa.Table:
    """`rows` as a table whose columns are each chunked their own way."""
    columns = [draw(chunked([r[f.name] for r in rows], f.type)) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def row_of(i: int, p: str, v: int, s: str | None) -> dict:
    return {"id": i, "p": p, "v": v, "s": s}


ROWS = st.builds(
    row_of, st.sampled_from(IDS), st.sampled_from(PARTITIONS), st.integers(-3, 3), st.sampled_from([None, "", "x", "é"])
)


# helpers ---------------------------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(st.data(), st.lists(st.sampled_from(["", "a", "b", "é"]), max_size=6), st.booleans())
def test_split_by_any_chunking_groups_rows_by_value_in_order(data, values, filtered):
    rows = data.draw(
        table_of([{"k": v, "i": i} for i, v in enumerate(values)], pa.schema([("k", pa.string()), ("i", pa.int64())]))
    )
    plain = [
        (value, [{"k": value, "i": i} for i, v in enumerate(values) if v == value]) for value in sorted(set(values))
    ]
    with pytest.MonkeyPatch.context() as patch:
        if filtered:  # past the size a take may join: one filter per value
            patch.setattr(rows_module, "TAKE_BYTES", -1)
        assert [(value, part.to_pylist()) for value, part in split_by(rows, "k")] == plain


@settings(max_examples=150, deadline=None)
@given(st.data(), st.lists(st.sampled_from(["a", "b"]), max_size=6))
def test_changes_marks_each_row_unlike_the_one_before_and_always_has_a_chunk(data, values):
    column = data.draw(chunked(values, pa.string()))
    changed = changes(column)
    assert changed.num_chunks >= 1
    assert changed.to_pylist() == [values[i] != values[i - 1] for i in range(1, len(values))]


@settings(max_examples=100, deadline=None, suppress_health_check=SLOW)
@given(st.data(), st.lists(ROWS, max_size=6), st.booleans())
def test_dedupe_any_chunking_keeps_the_last_row_of_each_record(tmp_path_factory, data, rows, by_key_only):
    writer = LocalWriter(Table.create(str(tmp_path_factory.mktemp("t")), "t", ["id"], ["p"]))
    keyed = [r | {KEY: str(r["id"]), PARTITION: r["p"]} for r in rows]
    schema = SCHEMA.append(pa.field(KEY, pa.string())).append(pa.field(PARTITION, pa.string()))
    by = [KEY] if by_key_only else [KEY, PARTITION]
    last = {tuple(r[c] for c in by): i for i, r in enumerate(keyed)}
    assert writer.dedupe(data.draw(table_of(keyed, schema)), by).to_pylist() == [
        keyed[i] for i in sorted(last.values())
    ]


# writes ----------------------------------------------------------------------------------------------------
class Oracle:
    """The table's records as plain dicts, keyed as the index keys them: (id, partition path), or id alone."""

    def __init__(self, partitioned: bool, global_index: bool) -> None:
        self.partitioned, self.global_index = partitioned, global_index
        self.records: dict[tuple, dict] = {}

    def path(self, row: dict) -> str:
        return row["p"] if self.partitioned else ""

    def identity(self, row: dict) -> tuple:
        return (row["id"],) if self.global_index else (row["id"], self.path(row))

    def apply(self, operation: str, rows: list[dict]) -> None:
        if operation == "insert_overwrite":
            touched = {self.path(r) for r in rows}
            self.records = {k: r for k, r in self.records.items() if self.path(r) not in touched}
        for row in rows:  # in order: the last row of a record wins (an insert's keys are all new)
            if operation == "delete":
                self.records.pop(self.identity(row), None)
            else:
                self.records[self.identity(row)] = row

    def fresh_ids(self) -> list[int]:
        """Keys no record has: an insert of a stored key makes a second copy, which this oracle leaves out."""
        taken = {r["id"] for r in self.records.values()}
        return [i for i in IDS if i not in taken]

    def rows(self) -> list[tuple]:
        return sorted((self.path(r), r["id"], r["p"], r["v"], r["s"]) for r in self.records.values())


def stored(table: Table) -> list[tuple]:
    return sorted((r[PARTITION], r["id"], r["p"], r["v"], r["s"]) for r in read_view(table, table.view()).to_pylist())


OPERATIONS = ["insert", "bulk_insert", "upsert", "delete", "insert_overwrite"]


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(
    st.data(),
    st.booleans(),
    st.sampled_from(["BLOOM", "SIMPLE", "GLOBAL_SIMPLE"]),
    st.lists(st.sampled_from(OPERATIONS), min_size=1, max_size=4),
)
def test_every_write_of_any_chunking_leaves_the_records_the_plain_rule_gives(
    tmp_path_factory, data, partitioned, index, operations
):
    table = Table.create(str(tmp_path_factory.mktemp("t")), "t", ["id"], ["p"] if partitioned else [])
    writer = LocalWriter(table, coordinator=CoordinatorConfig(index_type=index))
    oracle = Oracle(partitioned, index == "GLOBAL_SIMPLE")
    for operation in operations:
        rows = data.draw(st.lists(ROWS, max_size=4), label=operation)
        if operation not in ("upsert", "delete"):  # inserts: new keys, once each
            fresh = oracle.fresh_ids()
            rows = [r | {"id": i} for r, i in zip(rows, fresh, strict=False)]
        writer.write(data.draw(table_of(rows), label="chunked"), operation)
        oracle.apply(operation, rows)
        assert stored(table) == oracle.rows(), operation
