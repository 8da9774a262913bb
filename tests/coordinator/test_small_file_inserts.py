"""Inserts top up small file groups, as Hudi's `insert` does (`bulk_insert` never does).

Oracle: a model of the table as a multiset of records per (key, partition) under Hudi's rules (an insert adds a
copy, an upsert replaces every copy or adds one, a delete removes every copy), checked against Tandem's reader
after every write of random histories; and the layout the rule promises, read from storage: on copy-on-write
with the default limit a partition keeps one file group, with the limit at 0 every insert starts new ones, and
on merge-on-read no base file holds a key twice (a re-inserted key starts a new group there).
"""

from __future__ import annotations

import collections
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.write.writer import DEFAULT_SMALL_FILE_LIMIT, LocalWriter, WriteOptions
from timeline.errors import ConflictError
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

KEYS = st.integers(0, 12)
PARTS = st.sampled_from(["a", "b"])
RECORD = st.tuples(KEYS, PARTS, st.integers(0, 1000))
STEP = st.tuples(st.sampled_from(["insert", "insert", "upsert", "delete", "bulk_insert"]), st.lists(RECORD, max_size=6))


def _batch(records: list[tuple[int, str, int]]) -> pa.Table:
    ids, parts, values = zip(*records, strict=True) if records else ((), (), ())
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "part": pa.array(parts, pa.string()), "v": pa.array(values, pa.int64())}
    )


def _apply(model: dict, op: str, records: list[tuple[int, str, int]]) -> None:
    if op in ("insert", "bulk_insert"):
        for key, part, value in records:
            model[key, part].append(value)
    elif op == "upsert":
        last = {(key, part): value for key, part, value in records}
        for ident, value in last.items():
            model[ident] = [value] * (len(model[ident]) or 1)
    else:
        for key, part, _ in records:
            model.pop((key, part), None)


def _read(path: str) -> collections.Counter:
    rows = read_plan(plan_scan(Table.open(path)))
    if rows.num_rows == 0:  # a table only ever deleted from has no schema yet
        return collections.Counter()
    rows = rows.select(["id", "part", "v"]).to_pylist()
    return collections.Counter((r["id"], r["part"], r["v"]) for r in rows)


def _expected(model: dict) -> collections.Counter:
    return collections.Counter((key, part, v) for (key, part), values in model.items() for v in values)


def _base_files(path: str) -> list:
    return Table.open(path).view().latest_base_files()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@settings(max_examples=10, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=7), limit=st.sampled_from([0, DEFAULT_SMALL_FILE_LIMIT]))
def test_random_histories_read_as_the_model_with_hudis_insert_layout(tmp_path_factory, table_type, steps, limit):
    path = str(tmp_path_factory.mktemp("t"))
    writer = LocalWriter(
        Table.create(path, "t", ["id"], ["part"], table_type=table_type), WriteOptions(small_file_limit=limit)
    )
    model: dict = collections.defaultdict(list)
    mor = table_type == "MERGE_ON_READ"
    for op, records in steps:
        if mor and op in ("insert", "bulk_insert"):
            # a key twice in one insert would share a new base file, which Hudi's readers merge apart (see
            # tests/hudi_reference/differential.py `_batch`): each key once
            records = list({(key, part): (key, part, v) for key, part, v in records}.values())
        if not records:
            continue
        groups_before = collections.Counter(f.partition for f in _base_files(path))
        writer.write(_batch(records), op)
        _apply(model, op, records)
        assert _read(path) == _expected(model), (op, records)
        groups = collections.Counter(f.partition for f in _base_files(path))
        touched = {part for _, part, _ in records}
        if op == "insert" and not mor:
            for part in touched:
                grew = 0 if limit and groups_before[part] else 1
                assert groups[part] == groups_before[part] + grew, (part, groups_before, groups)
        if mor:
            for base in _base_files(path):
                keys = pq.read_table(os.path.join(path, base.partition, base.name), columns=["id"]).column(0)
                assert len(set(keys.to_pylist())) == len(keys), f"{base.name} holds a key twice"


def test_a_top_up_past_the_target_size_spills_its_last_rows_into_new_groups(tmp_path):
    path = str(tmp_path / "t")
    rows = _batch([(i, "a", i) for i in range(200)])
    table = Table.create(path, "t", ["id"], ["part"])
    LocalWriter(table).write(rows.slice(0, 80), "insert")
    (first,) = _base_files(path)
    stored = pq.read_table(os.path.join(path, first.partition, first.name))  # the size `fit` counts: Arrow's
    writer = LocalWriter(table, WriteOptions(max_file_size=int(stored.nbytes * 1.1)))  # room for some rows
    result = writer.write(rows.slice(80, 80), "insert")
    stats = {s.file_id: s for s in result.metadata.write_stats()}
    assert 0 < stats[first.file_id].num_inserts < 80 and len(stats) >= 2, "topped up, then spilled"
    assert _read(path) == collections.Counter((i, "a", i) for i in range(160))
    full = LocalWriter(table, WriteOptions(max_file_size=1)).write(rows.slice(160, 5), "insert")
    assert first.file_id not in {s.file_id for s in full.metadata.write_stats()}, "no room: not rewritten"
    assert _read(path) == collections.Counter((i, "a", i) for i in range(165))


def test_bulk_insert_and_a_zero_limit_start_new_groups_and_concurrent_inserts_into_one_small_group_conflict(tmp_path):
    path = str(tmp_path / "t")
    table = Table.create(path, "t", ["id"], ["part"])
    LocalWriter(table).write(_batch([(1, "a", 1)]), "insert")
    LocalWriter(table).write(_batch([(2, "a", 2)]), "bulk_insert")
    assert len(_base_files(path)) == 2
    LocalWriter(table, WriteOptions(small_file_limit=0)).write(_batch([(3, "a", 3)]), "insert")
    assert len(_base_files(path)) == 3
    LocalWriter(table).write(_batch([(4, "a", 4)]), "insert")
    assert len(_base_files(path)) == 3
    assert _read(path) == collections.Counter((i, "a", i) for i in range(1, 5))

    class Overtaken(LocalWriter):
        """An insert that another insert overtakes once it has chosen the group to top up."""

        def insert_targets(self, view):
            chosen = super().insert_targets(view)
            LocalWriter(Table.open(path)).write(_batch([(5, "a", 5)]), "insert")
            return chosen

    with pytest.raises(ConflictError):
        Overtaken(Table.open(path)).write(_batch([(6, "a", 6)]), "insert")
    assert _read(path) == collections.Counter((i, "a", i) for i in range(1, 6))
