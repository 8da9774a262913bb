"""Canonical partition paths and instant times: bad values are refused before anything is written or deleted."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from coordinator.cli import main
from timeline.errors import BadInputError, CorruptInstantError
from timeline.format import avro_metadata, keys, partition_path
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.instant import validate_instant_time
from timeline.io.storage import Storage
from timeline.mdt import records
from timeline.metrics import LOOKUP_FILES, METRICS

PENDING = "20000101000000000"  # a pending write instant (old: the process's instant clock must not jump ahead)
PLANNER = "20000101000000001"  # the rollback or clean instant whose plan is crafted


def run(*args: str) -> tuple[int, str, str]:
    """`tandem ARGS` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), mock.patch.object(sys, "argv", ["tandem", *args]):
        try:
            main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def tree(base: Path) -> dict[str, bytes]:
    """Every table file and its bytes; the lock's own state (fencing counter) may move on.

    A refused partition value is caught before begin, so not even a rollback decision is written."""
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file() and not p.is_symlink() and ".tandem-lock" not in p.parts
    }


def rows_file(folder: Path, values: list[str | None]) -> Path:
    path = folder / "rows.parquet"
    data = {"id": list(range(len(values))), "p": values, "v": [10 * i for i in range(len(values))]}
    pq.write_table(pa.table(data, pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])), path)
    return path


def read_rows(base: Path, folder: Path) -> set[tuple]:
    out = folder / "read.parquet"
    code, _, err = run("read", str(base), "--output", str(out))
    assert code == 0, err
    rows = pq.read_table(out).select(["id", "p", "v"]).to_pylist()
    return {(r["id"], r["p"], r["v"]) for r in rows}


def new_table(folder: Path, hive_style: bool = False) -> Path:
    base = folder / "t"
    args = ["init", str(base), "--name", "t", "--record-key", "id", "--partition-by", "p"]
    code, _, err = run(*args, *(["--hive-style"] if hive_style else []))
    assert code == 0, err
    return base


# the rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["", "a", "a/b", "p=1/q=x y", "日本/語", "__HIVE_DEFAULT_PARTITION__", "a:b", "x" * 255]
)
def test_canonical_paths_pass(path):
    assert partition_path.problem(path) is None
    assert partition_path.canonical(path, "test") == path


@pytest.mark.parametrize(
    "path, reason",
    [
        ("a//b", "empty folder name"),
        ("a/", "empty folder name"),
        ("/a", "empty folder name"),
        (".", "'.'"),
        ("a/../b", "'..'"),
        (".hoodie", "reserved for the timeline"),
        ("x/.hoodie_partition_metadata", "reserved for the timeline"),
        (".hidden", "hidden"),
        ("a\\b", "backslash"),
        ("a\x00", "control character"),
        ("a\nb", "control character"),
        ("x" * 256, "256 UTF-8 bytes"),
        ("é" * 128, "256 UTF-8 bytes"),
        ("/".join(["d"] * 513), "1025 characters"),
    ],
)
def test_non_canonical_paths_are_refused_with_the_reason(path, reason):
    with pytest.raises(BadInputError, match=re.escape(reason)):
        partition_path.canonical(path, "test")
    with pytest.raises(CorruptInstantError):
        partition_path.canonical(path, "test", CorruptInstantError)


def test_key_generator_names_the_column_and_value_and_keeps_nested_folders():
    data = pa.table({"p": ["a/b", None, "", "c"], "q": [1, 2, 3, 4]})
    assert keys.partition_paths(data, ["p"], False).to_pylist() == ["a/b", *["__HIVE_DEFAULT_PARTITION__"] * 2, "c"]
    with pytest.raises(BadInputError, match=r"partition column 'p' value 'a/b' contains '/'"):
        keys.partition_paths(data, ["p", "q"], True)  # with several columns a '/' makes paths ambiguous
    with pytest.raises(BadInputError, match=r"partition column 'p' value 'a/\.\./b'.*'\.\.'"):
        keys.partition_paths(pa.table({"p": ["ok", "a/../b"]}), ["p"], True)
    with pytest.raises(BadInputError, match="partition column 'p' value .* 1025 characters"):
        keys.partition_paths(pa.table({"p": ["/".join(["d"] * 513)]}), ["p"], False)


def test_instant_times_read_from_files_are_validated():
    assert validate_instant_time("20240101000000000", "f") == "20240101000000000"
    assert validate_instant_time("20240101000000", "f") == "20240101000000"
    for bad in ["../..", "2024010100000000", "٠" * 17, None, "20240101000000000/x"]:
        with pytest.raises(CorruptInstantError, match="R.rollback.requested: commitTime"):
            validate_instant_time(bad, "R.rollback.requested: commitTime")


@pytest.mark.parametrize(
    "stat, field",
    [
        ({"partitionPath": ".hoodie", "path": ".hoodie/hoodie.properties"}, "partitionPath"),
        ({"partitionPath": "a", "path": "a/../../x.parquet"}, "path"),
        ({"partitionPath": "a", "path": "a/f.parquet", "prevCommit": "../x"}, "prevCommit"),
    ],
)
def test_commit_metadata_with_a_bad_path_is_corrupt(stat, field):
    doc = {"partitionToWriteStats": {"a": [{"fileId": "f-0", **stat}]}}
    with pytest.raises(CorruptInstantError, match=f"1.commit: .*{field}"):
        CommitMetadata.from_json_bytes(json.dumps(doc).encode(), "1.commit")


def test_metadata_records_check_their_partition_keys():
    assert records.data_partition(".") == "" and records.data_partition("p=a/q") == "p=a/q"
    assert records.partition_key("") == "." and records.partition_key("a/b") == "a/b"
    with pytest.raises(CorruptInstantError, match="metadata table record key"):
        records.data_partition("../../x")
    with pytest.raises(BadInputError, match="metadata table record"):
        records.partition_key(".hoodie")


def test_plans_name_their_bad_field_and_keep_hudi_absolute_paths():
    def plan(files: list[str]) -> bytes:
        request = {"partitionPath": "a", "filesToBeDeleted": files}
        info = {"commitTime": "20240101000000000", "action": "commit"}
        return avro_metadata.encode("HoodieRollbackPlan", {"instantToRollback": info, "RollbackRequests": [request]})

    with pytest.raises(CorruptInstantError, match="filesToBeDeleted: 'b/x.parquet' is not in partition 'a'"):
        avro_metadata.decode(plan(["b/x.parquet"]), "R.rollback.requested")
    with pytest.raises(CorruptInstantError, match="filesToBeDeleted: 'file:/t/a/../../x'"):
        avro_metadata.decode(plan(["file:/t/a/../../x"]), "R.rollback.requested")
    decoded = avro_metadata.decode(plan(["file:/t/a/x.parquet"]), "R.rollback.requested")
    assert decoded["RollbackRequests"][0]["filesToBeDeleted"] == ["file:/t/a/x.parquet"]


# the command line: writes ------------------------------------------------------------


def test_long_partition_value_is_bad_input_and_writes_nothing(tmp_path):
    base = new_table(tmp_path)
    before = tree(base)
    code, _, err = run(
        "write", str(base), "--input", str(rows_file(tmp_path, ["ok", "x" * 300])), "--operation", "insert"
    )
    assert code == 2
    assert err.count("\n") == 1 and "partition column 'p'" in err and "at most 255" in err
    assert tree(base) == before
    assert not (base / "ok").exists()


def test_input_directory_is_named_as_a_directory(tmp_path):
    base = new_table(tmp_path)
    code, _, err = run("write", str(base), "--input", str(tmp_path), "--operation", "insert")
    assert code == 2 and "is a directory, not a .parquet/.csv/.jsonl file" in err


SPECIAL = [
    "a",
    "a/b",
    "..",
    ".",
    "a/../b",
    "a//b",
    "a/",
    "/a",
    ".hoodie",
    ".hoodie_x/y",
    "x/.hoodie",
    ".hidden",
    "x\\y",
    "tab\there",
    "nul\x00",
    "日本/語",
    "é" * 127,
    "é" * 128,
    "x" * 255,
    "x" * 256,
    "/".join(["d"] * 600),
    "__HIVE_DEFAULT_PARTITION__",
    "",
    None,
    "a b",
    "p=1",
    "%2F",
    "a:b",
]
FOLDER = st.text(alphabet=st.sampled_from("ab_é日 =-:.%"), min_size=1, max_size=6)
VALUES = st.one_of(
    st.sampled_from(SPECIAL),
    st.lists(FOLDER, min_size=1, max_size=3).map("/".join),
    st.text(alphabet=st.sampled_from("ab/.\\é日 _-=:\x00\n"), max_size=10),
    st.text(alphabet="xé/", min_size=240, max_size=300),
    st.text(max_size=8),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(VALUES, min_size=1, max_size=4), hive_style=st.booleans())
def test_any_partition_value_is_written_and_read_back_or_refused_without_a_trace(values, hive_style):
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        base = new_table(folder, hive_style)
        before = tree(base)
        code, _, err = run("write", str(base), "--input", str(rows_file(folder, values)), "--operation", "insert")
        assert code in (0, 2), err
        event(f"write exit {code}")
        if all(v is None or re.fullmatch("[A-Za-z0-9]{0,200}", v) for v in values):  # a folder name fits 255 bytes
            assert code == 0, err
        if code == 2:
            assert err.count("\n") == 1 and "partition column 'p'" in err
            assert tree(base) == before
            return
        written = {(i, v, 10 * i) for i, v in enumerate(values)}
        assert read_rows(base, folder) == written
        code, out, _ = run("metadata", "validate", str(base))
        assert code == 0, out


# the command line: plans, markers and listings read from the table ------------------


@pytest.fixture
def table_base(tmp_path) -> Path:
    base = new_table(tmp_path)
    code, _, err = run(
        "write", str(base), "--input", str(rows_file(tmp_path, ["a", "b", "a/n"])), "--operation", "insert"
    )
    assert code == 0, err
    return base


def _rollback_plan(commit_time: str, action: str, partition: str, files: list[str]) -> bytes:
    plan = {
        "instantToRollback": {"commitTime": commit_time, "action": action},
        "RollbackRequests": [{"partitionPath": partition, "fileId": None, "filesToBeDeleted": files}],
    }
    return avro_metadata.encode("HoodieRollbackPlan", plan)


def _clean_plan(earliest: str, files: list[str]) -> bytes:
    plan = {
        "earliestInstantToRetain": {"timestamp": earliest, "action": "commit", "state": "COMPLETED"},
        "policy": "KEEP_LATEST_COMMITS",
        "version": 2,
        "filePathsToBeDeletedPerPartition": {"": [{"filePath": f, "isBootstrapBaseFile": False} for f in files]},
    }
    return avro_metadata.encode("HoodieCleanerPlan", plan)


CRAFTED = {
    "rollback of '../..'": (f"{PLANNER}.rollback.requested", _rollback_plan("../..", "commit", "", []), "commitTime"),
    "rollback action '../x'": (
        f"{PLANNER}.rollback.requested",
        _rollback_plan(PENDING, "../../x", "", []),
        "action",
    ),
    "rollback deleting the properties": (
        f"{PLANNER}.rollback.requested",
        _rollback_plan(PENDING, "commit", "", [".hoodie/hoodie.properties"]),
        "filesToBeDeleted",
    ),
    "rollback in partition .hoodie": (
        f"{PLANNER}.rollback.requested",
        _rollback_plan(PENDING, "commit", ".hoodie", [".hoodie/hoodie.properties"]),
        "partitionPath",
    ),
    "clean deleting the properties": (
        f"{PLANNER}.clean.requested",
        _clean_plan("20240101000000000", [".hoodie/hoodie.properties"]),
        "filePath",
    ),
    "clean retaining '../..'": (f"{PLANNER}.clean.requested", _clean_plan("../..", []), "earliestInstantToRetain"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_plans_make_recover_exit_2_and_delete_nothing(table_base, case):
    name, body, field = CRAFTED[case]
    (table_base / ".hoodie" / name).write_bytes(body)
    before = tree(table_base)
    code, _, err = run("recover", str(table_base))
    assert code == 2, err
    assert err.count("\n") == 1 and name in err and field in err
    after = tree(table_base)
    assert {path: after.get(path) for path in before} == before


def test_crafted_marker_is_reported_and_deletes_nothing(table_base):
    hoodie = table_base / ".hoodie"
    (hoodie / f"{PENDING}.commit.requested").write_bytes(b"")
    (hoodie / f"{PENDING}.inflight").write_bytes(b"{}")
    marker = hoodie / ".temp" / PENDING / ".hoodie" / "hoodie.properties.marker.CREATE"
    marker.parent.mkdir(parents=True)
    marker.write_bytes(b"")
    before = tree(table_base)
    code, _, err = run("recover", str(table_base), "--set", "hoodie.cleaner.policy.failed.writes=EAGER")
    assert code == 0, err  # the orphan is rolled back; the junk marker is reported, never a path to delete
    assert "ignored marker" in err and "reserved for the timeline" in err
    after = tree(table_base)
    kept = {path: data for path, data in before.items() if not path.startswith((".hoodie/.temp", f".hoodie/{PENDING}"))}
    assert {path: after.get(path) for path in kept} == kept


def test_symlinks_in_a_table_add_no_partitions_or_rows(tmp_path):
    base = new_table(tmp_path)
    values = ["a"] * 5 + ["b"] * 4 + ["c/d"] * 4
    code, _, err = run("write", str(base), "--input", str(rows_file(tmp_path, values)), "--operation", "insert")
    assert code == 0, err
    os.symlink("..", base / "a" / "loop")
    os.symlink("b", base / "mirror")
    written = {(i, v, 10 * i) for i, v in enumerate(values)}
    assert len(read_rows(base, tmp_path)) == 13 and read_rows(base, tmp_path) == written
    code, out, _ = run("metadata", "validate", str(base))
    assert code == 0 and "in sync: True" in out, out
    code, out, err = run("ls", str(base), "--source", "storage", "--json")
    assert code == 0, err
    assert {f["partition"] for f in json.loads(out)["files"]} == {"a", "b", "c/d"}
    code, _, err = run("metadata", "delete", str(base))
    assert code == 0, err
    assert read_rows(base, tmp_path) == written


def test_local_listing_does_not_follow_symlinks(tmp_path):
    storage = Storage(str(tmp_path / "base"))
    storage.write_bytes("p/f.parquet", b"abc")
    os.symlink("..", tmp_path / "base" / "p" / "loop")
    os.symlink(str(tmp_path / "base" / "p"), tmp_path / "base" / "q")
    assert [(e.path, e.size) for e in storage.list_files("")] == [("p/f.parquet", 3)]
    assert [i.base_name for i in storage.list_dir("")] == ["p"]


@pytest.mark.parametrize("source", ["metadata", "storage"])
def test_ls_of_one_partition_lists_only_it_and_refuses_a_path_outside_the_table(tmp_path, source):
    base = new_table(tmp_path)
    values = ["a"] * 3 + ["a/b"] * 2 + ["c"] * 2
    code, _, err = run("write", str(base), "--input", str(rows_file(tmp_path, values)), "--operation", "insert")
    assert code == 0, err
    code, out, err = run("ls", str(base), "--source", source, "--json")
    assert code == 0, err
    every = json.loads(out)["files"]
    for partition in ("a", "a/b", "c", "absent"):
        METRICS.reset()
        with mock.patch.object(Storage, "list_files", autospec=True, side_effect=Storage.list_files) as listed:
            code, out, err = run("ls", str(base), "--source", source, "--partition", partition, "--json")
        assert code == 0, err
        assert json.loads(out)["files"] == [f for f in every if f["partition"] == partition]
        if source == "metadata":  # one MDT lookup of the partition's files, not the whole table's
            assert METRICS.snapshot().get(LOOKUP_FILES, 0) == len(json.loads(out)["files"])
        else:  # one folder listed, not below it
            assert [(c.args[1], c.kwargs.get("recursive")) for c in listed.call_args_list] == [(partition, False)]
    for outside in ("../t", ".hoodie", "a/../../x"):
        code, out, err = run("ls", str(base), "--source", source, "--partition", outside)
        assert code == 2 and out == "", (code, out, err)
        assert "partition path" in err and len(err.strip().splitlines()) == 1, err
