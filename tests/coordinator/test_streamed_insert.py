"""A streamed insert, whatever its input's parts, row groups, file size target, budget of waiting rows and
limit of open files: the table holds exactly the input, every file's sequence numbers run on from part to
part, and every file's index records (its bloom filter kept in memory or spilled to disk until the commit)
are those of its rows read back whole (on Tandem's previous format, whose records the write stats carry)."""

from __future__ import annotations

import math
import os
import tempfile
from unittest.mock import patch

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.mdt import index_build
from coordinator.write import new_files
from coordinator.write.input_files import read_input
from coordinator.write.rows import row_keys
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.conftest import rows_by_key
from timeline.errors import BadInputError
from timeline.format.meta_fields import COMMIT_SEQNO, META_COLUMNS
from timeline.mdt import indexes as mdt_indexes
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

VALUES = st.one_of(st.none(), st.integers(-(2**40), 2**40))
FLOATS = st.one_of(st.none(), st.floats(allow_nan=True), st.sampled_from([-0.0, 0.0]))
TEXT = st.one_of(st.none(), st.text(max_size=30))


@st.composite
def inputs(draw) -> pa.Table:
    rows = draw(st.integers(0, 1500))
    ids = draw(st.permutations(range(rows)))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array(
                draw(st.lists(st.sampled_from("abcdefg"[: draw(st.integers(1, 7))]), min_size=rows, max_size=rows)),
                pa.string(),
            ),
            "v": pa.array(draw(st.lists(VALUES, min_size=rows, max_size=rows)), pa.int64()),
            "f": pa.array(draw(st.lists(FLOATS, min_size=rows, max_size=rows)), pa.float64()),
            "s": pa.array(draw(st.lists(TEXT, min_size=rows, max_size=rows)), pa.string()),
        }
    )


def comparable(rows: pa.Table) -> list[dict]:
    """Rows by id, NaN spelled out (it equals nothing, itself included)."""
    return [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in rows_by_key(rows, ["id"])
    ]


class Watched(new_files.InsertFiles):
    """InsertFiles that checks its bounds after every part it takes."""

    def add(self, parts):
        super().add(parts)
        assert self._waiting_bytes <= new_files.BUFFER_BYTES
        assert sum(w.nbytes for w in self._waiting.values()) == self._waiting_bytes
        assert len(self._open) <= new_files.MAX_OPEN_FILES


@given(rows=inputs(), data=st.data())
@settings(max_examples=15, deadline=None)
def test_a_streamed_insert_is_its_input_in_files_described_as_if_written_whole(rows, data):
    options = WriteOptions(
        max_file_size=data.draw(st.integers(200, 40_000), label="max_file_size"),
        row_group_size=data.draw(st.integers(1, 400), label="row_group_size"),
    )
    batch = data.draw(st.integers(1, 600), label="input batch")
    budget = data.draw(st.integers(1, 30_000), label="waiting bytes")
    open_files = data.draw(st.integers(1, 4), label="open files")
    operation = data.draw(st.sampled_from(["insert", "bulk_insert"]))
    spill_from = data.draw(st.sampled_from([0, new_files.SPILL_BYTES]), label="bloom filters spilled from")
    with tempfile.TemporaryDirectory() as folder:
        table = Table.create(f"{folder}/t", "t", ["id"], ["p"], hudi_format=False)
        with (
            patch.object(new_files, "BUFFER_BYTES", budget),
            patch.object(new_files, "MAX_OPEN_FILES", open_files),
            patch.object(new_files, "SPILL_BYTES", spill_from),
            patch("coordinator.write.writer.InsertFiles", Watched),
        ):
            result = LocalWriter(table, options).write(rows.to_reader(batch), operation)
        assert result.rows_in == rows.num_rows
        read = read_plan(plan_scan(Table.open(table.uri)))
        data_columns = [c for c in read.column_names if c not in META_COLUMNS]
        assert comparable(read.select(data_columns)) == comparable(rows.select(data_columns))
        stats = result.metadata.write_stats()
        assert sum(s.num_writes for s in stats) == sum(s.num_inserts for s in stats) == rows.num_rows
        for stat in stats:
            check_file(table, result.instant, stat)
        reports = index_build.validate(Table.open(table.uri).metadata(), Table.open(table.uri).timeline())
        assert [r.errors for r in reports] == [0, 0]  # the MDT's records: those of each file read whole


def check_file(table: Table, instant: str, stat) -> None:
    """The file holds what its stat says, its rows numbered 0..n-1, and index records of its rows read whole."""
    written = pq.ParquetFile(f"{table.uri}/{stat.path}")
    rows = written.read()
    assert rows.num_rows == stat.num_writes
    assert stat.file_size_in_bytes == os.path.getsize(f"{table.uri}/{stat.path}")
    name = stat.path.rsplit("/", 1)[-1]
    task = name.split("_")[1].split("-")[0]
    assert rows.column(COMMIT_SEQNO).to_pylist() == [f"{instant}_{task}_{i}" for i in range(rows.num_rows)]
    column_stats, _ = mdt_indexes.records_for_file(
        table.config, stat.partition_path, name, rows, row_keys(rows, table.config), written.metadata
    )
    assert stat.column_stats == column_stats


def test_files_roll_at_the_target_size_on_the_bytes_of_their_data_columns(tmp_path):
    """Fixed-width rows: every file but one of each partition is filled to the target (within the few
    bytes of offsets each written part adds), none passes it."""
    rows = pa.table({"id": pa.array(range(10_000), pa.int64()), "p": ["a", "b"] * 5_000, "v": [1.5] * 10_000})
    target = 500 * (8 + 8 + 4 + 1)  # Arrow bytes of id, v and p (offset and one character): 500 rows a file
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], hudi_format=False)
    options = WriteOptions(max_file_size=target, row_group_size=64)
    result = LocalWriter(table, options).write(rows.to_reader(333), "insert")
    per_partition: dict[str, list[int]] = {}
    for stat in result.metadata.write_stats():
        per_partition.setdefault(stat.partition_path, []).append(stat.num_writes)
    assert sorted(per_partition) == ["a", "b"]
    for counts in per_partition.values():
        assert sum(counts) == 5_000 and max(counts) <= 500
        assert sorted(counts)[1:] == [c for c in sorted(counts)[1:] if c >= 490]


def test_an_input_that_breaks_part_way_is_bad_input_and_its_write_is_undone(tmp_path):
    """A parquet input whose second row group is damaged: the rows before it were being written when the
    damage is found; the write is undone (no completed instant, no data file) and the error is bad input."""
    source = tmp_path / "in.parquet"
    rows = pa.table({"id": list(range(400_000)), "p": ["a"] * 400_000})
    pq.write_table(rows, source, row_group_size=200_000, compression="none")
    damaged = bytearray(source.read_bytes())
    middle = pq.ParquetFile(source).metadata.row_group(1).column(0).data_page_offset
    damaged[middle + 64 : middle + 4096] = b"\xff" * (4096 - 64)
    source.write_bytes(bytes(damaged))
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], hudi_format=False)
    with pytest.raises(BadInputError, match="cannot be read as parquet"):
        LocalWriter(table, WriteOptions(row_group_size=50_000)).write(read_input(str(source)), "insert")
    assert not [i for i in Table.open(table.uri).timeline().instants if i.is_completed and i.action == "commit"]
    assert not list((tmp_path / "t").rglob("*.parquet"))
