"""The planner's bulk paths against the one-by-one code they replace: each must give exactly its answers.

- `latest_files` (Arrow kernels), and `FileSystemView` built on it, against a model that takes one `BaseFile`
  at a time;
- block pruning of sorted partitions against evaluating every partition's candidates alone;
- vectorized `partition_candidates` against the one-by-one candidates;
- `canonical_all` against `canonical`.
Inputs are random (hypothesis), including the odd ones: superseded versions, replaced
groups, as-of cuts, default partitions, texts that do not print back, crafted names.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timeline.errors import BadInputError
from timeline.format import partition_path
from timeline.format.file_names import BaseFile, parse_base_file
from timeline.format.fs_view import FileSystemView, files_table, latest_files
from timeline.format.keys import DEFAULT_PARTITION
from timeline.query import partition_filter
from timeline.query.column_facts import facts_of_value
from timeline.query.partition_pruning import prune_partitions
from timeline.query.predicate import And, Between, Comparison, InList, IsNull, Not, Or
from timeline.query.skipping import evaluate

INSTANTS = [f"2026010100000{i}" for i in range(10)]


@dataclass
class _Timeline:
    """What `FileSystemView` and `latest_files` ask of a timeline: completed instants and replaced groups."""

    completed: set[str]
    replaced: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # instant -> groups it replaced

    def is_completed_or_archived(self, time: str) -> bool:
        return time in self.completed

    def replaced_file_ids(self, as_of: str | None = None) -> set[tuple[str, str]]:
        return {g for t, groups in self.replaced.items() if as_of is None or t <= as_of for g in groups}


files_strategy = st.lists(
    st.tuples(st.sampled_from(["", "a", "b=1", "c/d"]), st.sampled_from(["f1", "f2", "f3"]), st.sampled_from(INSTANTS)),
    max_size=30,
    unique=True,
)


@settings(max_examples=300, deadline=None)
@given(
    files=files_strategy,
    as_of=st.none() | st.sampled_from(INSTANTS),
    replaced=st.lists(st.tuples(st.sampled_from(["", "a", "c/d"]), st.sampled_from(["f1", "f2"])), max_size=3),
)
def test_latest_files_are_the_file_system_views(files, as_of, replaced):
    timeline = _Timeline(set(INSTANTS), {INSTANTS[5]: set(replaced)})
    bases = [BaseFile(p, f, "0-1-0", t, 10) for p, f, t in files]
    listing = files_table(bases)
    planned = latest_files(listing, timeline, as_of)
    got = sorted(zip(planned.column("partition").to_pylist(), planned.column("file").to_pylist(), strict=True))
    newest: dict[tuple[str, str], BaseFile] = {}  # the model: one file at a time
    for base in bases:
        group = (base.partition, base.file_id)
        if (as_of is None or base.instant <= as_of) and group not in timeline.replaced_file_ids(as_of):
            if group not in newest or base.instant > newest[group].instant:
                newest[group] = base
    assert got == sorted((b.partition, b.name) for b in newest.values())
    view = FileSystemView(bases, timeline, as_of)
    assert sorted((b.partition, b.name) for b in view.latest_base_files()) == got


def test_a_crafted_partition_in_the_listing_is_a_corrupt_record():
    listing = pa.table(
        {"partition": ["a/.."], "file": ["f1_0-1-0_20260101000000.parquet"], "size": [1], "file_id": ["f1"]}
    ).append_column("instant", pa.array(["20260101000000"]))
    with pytest.raises(BadInputError, match="escapes"):
        latest_files(listing, _Timeline({"20260101000000"}), None)


path_text = st.sampled_from(["1", "2", "05", "-3", "0", "x", DEFAULT_PARTITION, "2026-01-02", "10", "7", "1e3"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.tuples(path_text, path_text), min_size=1, max_size=40), hive=st.booleans())
def test_bulk_partition_candidates_equal_one_by_one(texts, hive):
    fields = ["k", "s"]
    types = {"k": pa.int32(), "s": pa.string()}
    paths = sorted({(f"k={a}/s={b}" if hive else f"{a}/{b}") for a, b in texts})
    schema = pa.schema(
        [pa.field(partition_filter.PARTITION_COLUMN, pa.string()), *(pa.field(f, types[f]) for f in fields)]
    )
    bulk, bulk_undecided = partition_filter.partition_candidates(paths, fields, types, hive)
    alone, alone_undecided = partition_filter._candidates_one_by_one(paths, fields, types, hive, schema)
    assert sorted(bulk_undecided) == sorted(alone_undecided)
    assert sorted(map(repr, bulk.to_pylist())) == sorted(map(repr, alone.to_pylist()))


def _candidates_schema(fields: list[str], types: dict) -> pa.Schema:
    return pa.schema(
        [pa.field(partition_filter.PARTITION_COLUMN, pa.string())] + [pa.field(f, types[f]) for f in fields]
    )


def _leaf(column: str, values: list):
    value = st.sampled_from(values)
    return st.one_of(
        st.builds(Comparison, st.just(column), st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), value),
        st.builds(InList, st.just(column), st.lists(value, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(Between, st.just(column), value, value, st.booleans()),
        st.builds(IsNull, st.just(column), st.booleans()),
    )


INT_VALUES = [None, -3, 0, 1, 2, 5, 7, 10, 1000, "5", "x"]
DATE_VALUES = [None, datetime.date(2026, 1, 1), datetime.date(2026, 1, 5), "2026-01-03", 3]
leaves = st.one_of(_leaf("k", INT_VALUES), _leaf("d", DATE_VALUES), _leaf("other", [1, "a"]))
predicates = st.recursive(
    leaves,
    lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
    max_leaves=5,
)
partition_values = st.tuples(
    st.one_of(st.integers(-5, 1200).map(str), st.sampled_from([DEFAULT_PARTITION, "05"])),
    st.one_of(st.dates(datetime.date(2025, 12, 25), datetime.date(2026, 1, 10)).map(str), st.just(DEFAULT_PARTITION)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(partition_values, min_size=1, max_size=300, unique=True), expr=predicates, hive=st.booleans())
def test_block_pruning_keeps_exactly_what_partition_by_partition_evaluation_keeps(values, expr, hive):
    fields = ["k", "d"]
    types = {"k": pa.int64(), "d": pa.date32()}
    paths = [f"k={k}/d={d}" if hive else f"{k}/{d}" for k, d in values]
    kept = prune_partitions(expr, paths, fields, types, hive)
    assert kept == [p for p in paths if _may_hold(expr, p, fields, types, hive)]


def _may_hold(expr, path: str, fields: list[str], types: dict, hive: bool) -> bool:
    """The one-by-one answer: any candidate row of the partition may match (undecided paths: unless never)."""
    table, undecided = partition_filter._candidates_one_by_one(
        [path],
        fields,
        types,
        hive,
        pa.schema([pa.field(partition_filter.PARTITION_COLUMN, pa.string())] + [pa.field(f, types[f]) for f in fields]),
    )
    if undecided:
        return evaluate(expr, lambda column: None)[0]
    return any(
        evaluate(expr, {f: facts_of_value(row[f], types[f]) for f in fields}.get)[0] for row in table.to_pylist()
    )


@settings(max_examples=500, deadline=None)
@given(
    paths=st.lists(
        st.lists(st.sampled_from(list("ab=_-+./\\\x01é") + ["..", ".hoodie"]), max_size=8).map("".join)
        | st.text(alphabet="xyz", min_size=250, max_size=300),
        min_size=1,
        max_size=10,
    )
)
def test_canonical_all_refuses_exactly_what_canonical_refuses(paths):
    def refused(path: str) -> bool:
        try:
            partition_path.canonical(path, "p")
        except BadInputError:
            return True
        return False

    bad = [p for p in paths if refused(p)]
    if bad:
        with pytest.raises(BadInputError):
            partition_path.canonical_all(pa.array(paths, pa.string()), "p")
    else:
        partition_path.canonical_all(pa.array(paths, pa.string()), "p")
    for path in paths:
        assert (path in partition_path.not_plain(pa.array([path], pa.string()))) or not refused(path)


def test_a_base_file_name_parses_the_same_in_bulk_and_alone():
    names = ["f1_0-1-0_20260101000000.parquet", "f_1_0-1-0_20260101000000.parquet", "f1_0-1_20260101000000.parquet"]
    names += [
        "f1_0-1-0_2026010100000.parquet",
        "f1_0-1-0_20260101000000123.parquet",
        "x.parquet",
        "f1_0-1-0_20260101000000.orc",
    ]
    from timeline.format.file_names import BASE_FILE_PATTERN
    from timeline.mdt.reader import _extract_in_parallel

    parts = _extract_in_parallel(pa.chunked_array([pa.array(names * 5000)]), BASE_FILE_PATTERN).to_pylist()
    for name, part in zip(names * 5000, parts, strict=True):
        alone = parse_base_file("", name)
        assert (part is None) == (alone is None), name
        if alone is not None:
            assert (part["file_id"], part["instant"]) == (alone.file_id, alone.instant)


@pytest.mark.parametrize("hudi_format", [True, False], ids=["hudi-format", "tandem-format"])
def test_plans_in_one_process_follow_new_commits_and_metadata_compactions(tmp_path, hudi_format: bool):
    """What the planner keeps per process (parsed base listings, the partition list, typed candidates)
    never answers for a table that moved on: every plan equals a plan from a storage listing."""
    from coordinator.config import CoordinatorConfig
    from coordinator.write.writer import LocalWriter
    from timeline.query.scan import plan_scan
    from timeline.table import Table

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], hive_style=True, hudi_format=hudi_format)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(max_delta_commits=2))

    def check(where: str | None) -> None:
        ours = plan_scan(Table.open(table.uri), where)
        truth = plan_scan(Table.open(table.uri), where, source="storage")
        assert ours.source == "metadata"
        key = ["partition", "file"]
        order = [(c, "ascending") for c in key]
        assert ours.files.select(key).sort_by(order).to_pylist() == truth.files.select(key).sort_by(order).to_pylist()

    batches = [[0, 1, 2], [3], [1, 4], [5, 0], [6], [2, 7]]
    for step, partitions in enumerate(batches):
        ids = [step * 10 + p for p in partitions]
        writer.write(pa.table({"id": ids, "p": [str(p) for p in partitions], "v": ids}), "upsert")
        for where in (None, "p = '1'", f"p = '{partitions[-1]}'", "p >= '4'", "p IN ('0', '7')"):
            check(where)
    assert "compaction" in {i.action for i in table.metadata().timeline().completed()}  # the cycle was crossed
