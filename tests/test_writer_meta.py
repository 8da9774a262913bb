"""Meta columns of a rewritten file: carried rows keep theirs, new rows (null commit time) get fresh ones.

Checked row by row against the rule itself, for carried rows first (what a merge makes) and in any
order (the general case), so the fast path for a carried prefix and the row-by-row path agree.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.writer import LocalWriter, _FileWrite
from timeline.table import META_COLUMNS, Table

INSTANT, TASK, NAME = "20260101000000000", 3, "f-1_0-1-3_20260101000000000.parquet"


def file_rows(carried: list[bool]) -> pa.Table:
    n = len(carried)
    old = {c: [f"old-{c}-{i}" if kept else None for i, kept in enumerate(carried)] for c in META_COLUMNS}
    old["_hoodie_record_key"] = [f"k{i}" for i in range(n)]
    old["_hoodie_partition_path"] = [f"p{i % 3}" for i in range(n)]
    columns = {c: pa.array(v, pa.string()) for c, v in old.items()}
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
@given(st.integers(0, 12), st.integers(0, 12), st.lists(st.booleans(), max_size=25))
def test_carried_rows_keep_their_meta_and_new_rows_get_fresh_meta(tmp_path_factory, kept, new, shuffled):
    writer = LocalWriter(Table.create(str(tmp_path_factory.mktemp("t")), "t", ["id"], ["p"]))
    for carried in ([True] * kept + [False] * new, shuffled):
        rows = file_rows(carried)
        written = writer._with_meta(_FileWrite("p0", "f-1", rows), NAME, INSTANT, TASK)
        assert written.column_names == [*META_COLUMNS, "v"]
        assert written.to_pylist() == expected(rows)
