"""`tandem plan`: the splits an engine would read, as one JSON document (docs/split-planning.md).

Oracle: Tandem's own reader (`read_plan(plan_scan(...))`). On random histories of both table types, partitioned
and not, with random filters on partition and data columns, reading exactly what the document names must give
the reader's rows: on copy-on-write each split's parquet file read with pyarrow, the meta columns dropped and
the residual filter applied by DuckDB; on merge-on-read the same with the logs the document lists merged over
each base file, and those logs must be exactly the slice's logs on storage. A row count the document calls exact
must be the parquet footer's. Time travel lists the files the table had at that instant; bad input exits 2 with
one stderr line and changes nothing; every field the document carries is documented, and every documented field
is carried.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.bootstrap.run import BootstrapRequest, bootstrap
from coordinator.config import CoordinatorConfig
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import compact_data
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.conftest import tandem
from tests.coordinator.test_bootstrap import write_source
from timeline.format.data_logs import parse_data_log
from timeline.format.meta_fields import META_COLUMNS
from timeline.mor.slice_merge import LogMerge
from timeline.query.reader import read_plan, sql_filter
from timeline.query.scan import plan_scan
from timeline.table import Table

CONFIG = CoordinatorConfig(lock_uri="memory")
DOC = Path(__file__).resolve().parents[2] / "docs" / "split-planning.md"
TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
PARTITIONS = ("p0", "p1", "p2", "p3")


def batch(ids: list[int], rng: random.Random, version: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": [PARTITIONS[i % len(PARTITIONS)] for i in ids],
            "n": pa.array([rng.randint(0, 50) for _ in ids], pa.int64()),
            "s": [f"s{rng.randint(0, 9)}" for _ in ids],
            "d": pa.array([None if rng.random() < 0.2 else rng.uniform(-5, 5) for _ in ids], pa.float64()),
            "ts": pa.array([version] * len(ids), pa.int64()),
        }
    )


def random_table(
    path: str, rng: random.Random, table_type: str, partitioned: bool, with_metadata: bool = True
) -> tuple[Table, list[str]]:
    """A table after a random history of inserts, upserts and deletes (and compactions, on merge-on-read);
    returns it with its commits' instants, oldest first. Without a metadata table it is listed from storage."""
    table = Table.create(
        path,
        "t",
        ["id"],
        ["p"] if partitioned else [],
        hive_style=partitioned and rng.random() < 0.5,
        precombine_field="ts",
        table_type=table_type,
        with_metadata=with_metadata,
    )
    config = dataclasses.replace(CONFIG, metadata_enabled=with_metadata)
    writer = LocalWriter(table, WriteOptions(small_file_limit=rng.choice([0, 100 * 1024 * 1024])), config)
    keys: set[int] = set()
    instants = []
    for version in range(1, rng.randint(3, 7)):
        op = "insert" if not keys else rng.choice(["insert", "upsert", "upsert", "delete"])
        if op == "insert":
            ids = list(range(100 * version, 100 * version + rng.randint(1, 12)))
        else:
            ids = rng.sample(sorted(keys), rng.randint(1, min(5, len(keys))))
        if op == "upsert":
            ids += [10_000 + 100 * version]  # and one new key
        instants.append(writer.write(batch(ids, rng, version), op).instant)
        keys = keys - set(ids) if op == "delete" else keys | set(ids)
        if table_type == "MERGE_ON_READ" and rng.random() < 0.2:
            instants += compact_data(table, config, table_lock(table, config), force=True)
    return table, instants


def random_filter(rng: random.Random) -> str:
    """One to three predicates on the partition column and the data columns, some the planner cannot use."""
    atoms = [
        lambda: f"p = '{rng.choice(PARTITIONS)}'",
        lambda: f"p IN ('{rng.choice(PARTITIONS)}', '{rng.choice(PARTITIONS)}')",
        lambda: f"p <> '{rng.choice(PARTITIONS)}'",
        lambda: f"n > {rng.randint(0, 50)}",
        lambda: f"n BETWEEN {rng.randint(0, 25)} AND {rng.randint(25, 50)}",
        lambda: f"s LIKE 's{rng.randint(0, 9)}%'",
        lambda: "d IS NULL",
        lambda: f"d < {rng.uniform(-5, 5):.3f}",
        lambda: f"upper(s) = 'S{rng.randint(0, 9)}'",
        lambda: f"NOT (id = {rng.randint(100, 300)})",
    ]
    picked = [rng.choice(atoms)() for _ in range(rng.randint(1, 3))]
    return f" {rng.choice(['AND', 'OR'])} ".join(f"({a})" for a in picked)


def plan_doc(path: str, *options: str) -> dict:
    """`tandem plan PATH --json OPTIONS`, run in this process (the command's own code; its exit codes and
    stderr lines are tested through real processes below)."""
    from click.testing import CliRunner

    from coordinator.cli import cli

    done = CliRunner().invoke(cli, ["plan", path, "--json", *options], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def reader_rows(table: Table, where: str | None = None) -> list[dict]:
    rows = read_plan(plan_scan(table, where))
    return sorted_rows(rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names]))


def sorted_rows(rows: pa.Table) -> list[dict]:
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


def split_rows(table: Table, doc: dict) -> list[dict]:
    """The rows of exactly the document's splits: each base file read with pyarrow, its listed logs merged over
    it (merge-on-read), the meta columns dropped, then the residual filter applied by DuckDB."""
    merge = LogMerge.of(
        {(s["partition_path"], s["file_id"]): listed_logs(s) for s in doc["splits"]},
        table.timeline(),
        doc["as_of"],
        table.config.precombine_field,
    )
    parts = []
    for split in doc["splits"]:
        rows = pq.ParquetFile(split["location"]).read()
        if split["logs"]:
            rows = merge.merged(table.storage, rows, split["partition_path"], split["file_id"])
        parts.append(rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names]))
    if not parts:
        return []
    rows = pa.concat_tables(parts, promote_options="permissive")
    return sorted_rows(sql_filter(rows, doc["residual"]) if doc["residual"] else rows)


def listed_logs(split: dict) -> list:
    logs = []
    for log in split["logs"]:
        assert log["location"].endswith("/" + log["path"])
        logs.append(parse_data_log(split["partition_path"], log["path"].rpartition("/")[2], log["size_bytes"]))
    return logs


def logs_on_storage(table: Table, split: dict) -> list[str]:
    """The logs of the split's slice as a listing of its partition's folder finds them, in Hudi's order."""
    folder = table.storage.full(split["partition_path"])
    found = [parse_data_log(split["partition_path"], name, 0) for name in os.listdir(folder)]
    mine = [g for g in found if g and g.file_id == split["file_id"] and g.base_instant >= split["instant"]]
    return [g.path for g in sorted(mine, key=lambda g: g.log.order_key)]


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


READ_CASES = [(t, p, listing) for t in TABLE_TYPES for p in (True, False) for listing in ("metadata", "storage")]


@pytest.mark.parametrize("table_type, partitioned, listing", READ_CASES)
def test_the_named_splits_read_as_the_reader_reads(tmp_path, table_type, partitioned, listing):
    rng = random.Random(f"{table_type}-{partitioned}-{listing}")
    table, _ = random_table(str(tmp_path / "t"), rng, table_type, partitioned, with_metadata=listing == "metadata")
    for where in [None, *(random_filter(rng) for _ in range(3))]:
        doc = plan_doc(table.uri, *(["--where", where] if where else []))
        assert (doc["filter"], doc["residual"]) == (where, where)
        assert doc["source"] == listing
        assert split_rows(table, doc) == reader_rows(table, where), where
        planned = plan_scan(table, where)
        assert [s["path"] for s in doc["splits"]] == planned.paths
        assert doc["counts"]["splits"] == len(doc["splits"]) == planned.num_splits
        assert doc["counts"]["files_considered"] == sum(
            doc["counts"][k] for k in ("splits", "pruned_by_partition", "pruned_by_column_stats")
        )
        for split in doc["splits"]:
            assert [log["path"] for log in split["logs"]] == logs_on_storage(table, split)
            assert split["location"] == table.storage.full(split["path"])
            assert split["size_bytes"] == os.path.getsize(split["location"])
            assert split["total_bytes"] == split["size_bytes"] + sum(log["size_bytes"] for log in split["logs"])
            folder = split["partition_path"].rpartition("=")[2]
            assert split["partition_values"] == ({"p": folder} if partitioned else {})
            footer = pq.ParquetFile(split["location"]).metadata.num_rows
            if split["row_count_exact"]:
                assert split["row_count"] == footer and not split["logs"]
            if split["row_count_source"] in ("column_stats", "commit_metadata"):
                assert split["row_count"] == footer
            else:
                assert split["row_count_source"] == "estimated_from_size" and not split["row_count_exact"]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_read_optimized_plan_names_base_files_alone(tmp_path, table_type):
    rng = random.Random(table_type)
    table, _ = random_table(str(tmp_path / "t"), rng, table_type, partitioned=True)
    doc = plan_doc(table.uri, "--read-optimized")
    read_optimized = table_type == "MERGE_ON_READ"
    assert doc["query_type"] == ("read_optimized" if read_optimized else "snapshot")
    assert all(not s["logs"] for s in doc["splits"])
    base_rows = read_plan(plan_scan(table, read_optimized=True))
    assert split_rows(table, doc) == sorted_rows(base_rows.drop_columns(META_COLUMNS))


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("seed", [3, 4])
def test_as_of_an_older_instant_lists_that_instants_files(tmp_path, table_type, seed):
    rng = random.Random(seed)
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type=table_type)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    then: dict[str, tuple[set[str], list[dict]]] = {}  # instant -> its base files and rows, taken at the time
    for version in range(1, 6):
        ids = rng.sample(range(20), rng.randint(1, 6))
        instant = writer.write(batch(ids, rng, version), "upsert").instant
        then[instant] = ({f.path for f in table.view().latest_base_files()}, reader_rows(table))
    for instant, (files, rows) in then.items():
        doc = plan_doc(table.uri, "--as-of", instant)
        assert (doc["as_of"], doc["as_of_instant"]) == (instant, instant)
        assert {s["path"] for s in doc["splits"]} == files
        assert split_rows(table, doc) == rows
    first = min(then)
    shown = f"{first[:4]}-{first[4:6]}-{first[6:8]} {first[8:10]}:{first[10:12]}:{first[12:14]}.{first[14:]}"
    assert plan_doc(table.uri, "--as-of", shown)["as_of_instant"] == first  # Hudi's other time format
    assert plan_doc(table.uri)["as_of_instant"] == max(then)


def test_rows_of_files_whose_commits_were_archived_are_estimated_unless_column_stats_know_them(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts")
    archiving = CoordinatorConfig(lock_uri="memory", archive_min_commits=2, archive_max_commits=3, commits_retained=1)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), archiving)
    rng = random.Random(9)
    for version in range(1, 9):  # new keys only: every commit's files stay the latest of their groups
        writer.write(batch(list(range(100 * version, 100 * version + rng.randint(1, 9))), rng, version), "insert")
    active = {i.time for i in table.timeline().completed_writes()}
    splits = plan_doc(table.uri)["splits"]
    known = [s for s in splits if s["instant"] in active]
    assert known and len(known) < len(splits)
    assert all(s["row_count_source"] == "commit_metadata" and s["row_count_exact"] for s in known)
    per_byte = sum(s["row_count"] for s in known) / sum(s["size_bytes"] for s in known)
    for split in splits:
        if split["instant"] not in active:
            assert (split["row_count_source"], split["row_count_exact"]) == ("estimated_from_size", False)
            assert split["row_count"] == round(split["size_bytes"] * per_byte)
    for split in plan_doc(table.uri, "--where", "n >= 0 OR n IS NULL")["splits"]:  # column stats of `n`: exact
        assert (split["row_count_source"], split["row_count_exact"]) == ("column_stats", True)
        assert split["row_count"] == pq.ParquetFile(split["location"]).metadata.num_rows


def test_a_partition_pruned_from_a_storage_listing_keeps_its_logs_out(tmp_path):
    """Without a metadata table the logs come from one listing of the whole table: a pruned partition's logs
    have no base file in the plan and must not be taken for log-only file groups."""
    table = Table.create(
        str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type="MERGE_ON_READ", with_metadata=False
    )
    writer = LocalWriter(table, WriteOptions(), dataclasses.replace(CONFIG, metadata_enabled=False))
    rng = random.Random(10)
    writer.write(batch([0, 1], rng, 1), "insert")
    writer.write(batch([0, 1], rng, 2), "upsert")
    doc = plan_doc(table.uri, "--where", "p = 'p0'")
    assert doc["source"] == "storage" and doc["counts"]["pruned_by_partition"] == 1
    assert [(s["partition_path"], len(s["logs"])) for s in doc["splits"]] == [("p0", 1)]
    assert split_rows(table, doc) == reader_rows(table, "p = 'p0'")


def test_an_unpartitioned_merge_on_read_table_listed_from_storage_has_its_logs_planned(tmp_path):
    table = Table.create(
        str(tmp_path / "t"), "t", ["id"], [], precombine_field="ts", table_type="MERGE_ON_READ", with_metadata=False
    )
    writer = LocalWriter(table, WriteOptions(), dataclasses.replace(CONFIG, metadata_enabled=False))
    writer.write(pa.table({"id": [1, 2], "n": [1, 1], "ts": [1, 1]}), "insert")
    writer.write(pa.table({"id": [1], "n": [2], "ts": [2]}), "upsert")  # a log at the table's root
    doc = plan_doc(table.uri)
    assert [len(s["logs"]) for s in doc["splits"]] == [1]
    assert [(r["id"], r["n"]) for r in split_rows(table, doc)] == [(1, 2), (2, 1)]


def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path):
    table, _ = random_table(str(tmp_path / "t"), random.Random(5), "MERGE_ON_READ", partitioned=True)
    (tmp_path / "empty").mkdir()
    before = tree(tmp_path)
    cases = [
        [str(tmp_path / "empty")],  # not a table
        [str(tmp_path / "missing")],
        [table.uri, "--where", "n >"],  # not SQL
        [table.uri, "--where", "nosuch = 1"],  # no such column
        [table.uri, "--where", "nosuch_function(n) = 1"],  # passed on by the planner, refused by DuckDB
        [table.uri, "--where", ""],
        [table.uri, "--as-of", "yesterday"],
        [table.uri, "--as-of", "2024-13-01"],
        [table.uri, "--no-such-option"],
        [],  # no PATH
    ]
    for args in cases:
        done = tandem("plan", *args, "--json")
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == "", args
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, done.stderr)
    assert tree(tmp_path) == before


def test_the_human_form_has_a_line_per_split_and_a_summary(tmp_path):
    table, _ = random_table(str(tmp_path / "t"), random.Random(6), "MERGE_ON_READ", partitioned=True)
    doc = plan_doc(table.uri, "--where", "p = 'p1'")
    done = tandem("plan", table.uri, "--where", "p = 'p1'")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(doc["splits"]) + 1
    assert [line.split("\t")[0] for line in lines[:-1]] == [s["path"] for s in doc["splits"]]
    assert lines[-1].startswith(f"{len(doc['splits'])} split(s), {doc['counts']['bytes']} bytes")


def test_a_bootstrapped_skeleton_names_its_source_file(tmp_path):
    write_source(str(tmp_path / "src"), {"city=a": [3, 2], "city=b": [4]})
    bootstrap(BootstrapRequest(str(tmp_path / "src"), str(tmp_path / "t"), ["id"]), CONFIG)
    doc = plan_doc(str(tmp_path / "t"))
    sources = [s["bootstrap_source"] for s in doc["splits"]]
    assert sorted(s["path"] for s in sources) == [
        "city=a/part-00000.parquet",
        "city=a/part-00001.parquet",
        "city=b/part-00000.parquet",
    ]
    for split, source in zip(doc["splits"], sources, strict=True):
        assert source["location"] == str(tmp_path / "src" / source["path"])
        assert source["size_bytes"] == os.path.getsize(source["location"])
        assert source["modified_ms"] == os.stat(source["location"]).st_mtime_ns // 1_000_000
        assert source["partition_values"] == split["partition_values"] == {"city": split["partition_path"][5:]}
        assert split["row_count"] == pq.ParquetFile(source["location"]).metadata.num_rows
        assert split["total_bytes"] == split["size_bytes"] + source["size_bytes"]


def documented_fields() -> set[str]:
    """The field names in the first column of the tables of docs/split-planning.md."""
    return set(re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(), re.MULTILINE))


def carried_fields(doc: dict) -> set[str]:
    """Every field name of a document: its own, its table's, counts', schema columns', splits' and theirs."""
    splits = doc["splits"]
    logs = [log for split in splits for log in split["logs"]]
    sources = [split["bootstrap_source"] for split in splits if split["bootstrap_source"]]
    return set(doc).union(doc["table"], doc["counts"], *doc["schema"], *splits, *logs, *sources)


def test_every_field_is_documented_and_every_documented_field_is_there(tmp_path):
    table, _ = random_table(str(tmp_path / "t"), random.Random(8), "MERGE_ON_READ", partitioned=True)
    key = reader_rows(table)[0]["id"]
    LocalWriter(table, WriteOptions(), CONFIG).write(batch([key], random.Random(0), 99), "upsert")  # a log
    write_source(str(tmp_path / "src"), {"city=a": [3]})
    bootstrap(BootstrapRequest(str(tmp_path / "src"), str(tmp_path / "b"), ["id"]), CONFIG)
    docs = [plan_doc(table.uri, "--where", "n > 3"), plan_doc(str(tmp_path / "b"))]
    assert any(s["logs"] for s in docs[0]["splits"]) and docs[1]["splits"][0]["bootstrap_source"]
    carried = set().union(*(carried_fields(d) for d in docs))
    assert carried == documented_fields()
    for doc in docs:
        assert doc["version"] == 1 and doc["source"] in ("metadata", "storage")
        assert {c["name"] for c in doc["schema"]} >= set(META_COLUMNS) | {"id"}
