"""Steps of the local writer checked against their rule written plainly.

Meta columns of a rewritten file: carried rows keep theirs, new rows (null commit time) get fresh
ones, for carried rows first (what a merge makes) and in any order, so the fast path for a carried
prefix and the row-by-row path agree. Splitting rows by a column: per value in sorted order, each
value's rows in their order, as a filter per value gives them.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coordinator.write.rows as rows_module
from coordinator.write.meta_columns import with_meta
from coordinator.write.rows import split_by
from timeline.format.meta_fields import META_COLUMNS

INSTANT, TASK, NAME = "20260101000000000", 3, "f-1_0-1-3_20260101000000000.parquet"


def file_rows(carried: list[bool], stored: pa.DataType = pa.string()) -> pa.Table:
    n = len(carried)
    old = {c: [f"old-{c}-{i}" if kept else None for i, kept in enumerate(carried)] for c in META_COLUMNS}
    old["_hoodie_record_key"] = [f"k{i}" for i in range(n)]
    old["_hoodie_partition_path"] = [f"p{i % 3}" for i in range(n)]
    columns = {c: pa.array(v, stored) for c, v in old.items()}  # as a file of another Arrow writer may hold them
    columns["v"] = pa.array(range(n), pa.int64())
    return pa.table(columns)


def expected(rows: pa.Table) -> list[dict]:
    out = []
    for i, row in enumerate(rows.to_pylist()):
        if row["_hoodie_commit_time"] is None:
            row |= {
                "_hoodie_commit_time": INSTANT,
                "_hoodie_commit_seqno": f"{INSTANT}_{TASK}_{i}",
                "_hoodie_file_name": NAME,
            }
        out.append(row)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 12),
    st.integers(0, 12),
    st.lists(st.booleans(), max_size=25),
    st.sampled_from([pa.string(), pa.large_string()]),
)
def test_carried_rows_keep_their_meta_and_new_rows_get_fresh_meta(kept, new, shuffled, stored):
    for carried in ([True] * kept + [False] * new, shuffled):
        rows = file_rows(carried, stored)
        written = with_meta(rows, NAME, INSTANT, TASK, populate_meta_fields=True)
        assert written.column_names == [*META_COLUMNS, "v"]
        assert written.to_pylist() == expected(rows)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "", "é", "z\u00ff", "\U0001f600", "p=1/q"]), max_size=40))
def test_rows_split_by_a_column_as_one_filter_per_value_splits_them(values):
    rows = pa.table({"k": pa.array(values, pa.string()), "i": list(range(len(values)))})
    plain = [(v, rows.filter(pc.equal(rows.column("k"), v)).to_pylist()) for v in sorted(set(values))]
    assert [(value, part.to_pylist()) for value, part in split_by(rows, "k")] == plain
    with pytest.MonkeyPatch.context() as patch:  # past the size a take may join: the per-value filter
        patch.setattr(rows_module, "TAKE_BYTES", -1)
        assert [(value, part.to_pylist()) for value, part in split_by(rows, "k")] == plain
