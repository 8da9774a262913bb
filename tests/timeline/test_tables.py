"""Tables written by `tandem write` and by Spark: both readers see exactly the same rows."""

from __future__ import annotations

import shutil
import signal
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.protocol.transaction import Transaction
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.conftest import FIXTURE_NAMES, hudi_read, rows_by_key, tandem, unzip_fixture
from timeline.format.meta_fields import META_COLUMNS
from timeline.query.reader import read_view
from timeline.table import Table


def our_read(path: str, as_of: str | None = None) -> pa.Table:
    table = Table.open(path)
    return read_view(table, table.storage_view(as_of))


def assert_same_rows(path: str, keys: list[str]) -> list[dict]:
    ours = rows_by_key(our_read(path), keys)
    theirs = rows_by_key(hudi_read(path), keys)
    assert ours == theirs
    return ours


def write_input(tmp_path: Path, name: str, rows: dict) -> str:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table(rows), path)
    return str(path)


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "nonpartitioned"])
def test_cli_operations_match_hudi_reader(tmp_path, partitioned):
    base = str(tmp_path / "trips")
    init = ["init", base, "--name", "trips", "--record-key", "id", "--precombine", "ts"]
    if partitioned:
        init += ["--partition-by", "city", "--hive-style"]
    assert tandem(*init).returncode == 0
    steps = [
        ("insert", {"id": [1, 2, 3, 4, 5], "city": ["sf", "sf", "la", "ny", "ny"], "ts": [1] * 5, "fare": [1.0] * 5}),
        ("upsert", {"id": [2, 6], "city": ["sf", "la"], "ts": [2, 2], "fare": [20.0, 60.0]}),
        ("delete", {"id": [3], "city": ["la"]}),
        ("insert_overwrite", {"id": [7], "city": ["ny"], "ts": [3], "fare": [70.0]}),
    ]
    expected: dict[int, float] = {}
    for i, (operation, rows) in enumerate(steps):
        result = tandem("write", base, "--input", write_input(tmp_path, str(i), rows), "--operation", operation)
        assert result.returncode == 0, result.stderr
        if operation == "delete":
            for key in rows["id"]:
                expected.pop(key)
        elif operation == "insert_overwrite":
            if partitioned:
                expected = {k: v for k, v in expected.items() if k not in (4, 5)}
            else:
                expected = {}
            expected.update(zip(rows["id"], rows["fare"], strict=True))
        else:
            expected.update(zip(rows["id"], rows["fare"], strict=True))
        seen = assert_same_rows(base, ["_hoodie_record_key"])
        assert {r["id"]: r["fare"] for r in seen} == expected
        assert all(r["_hoodie_record_key"] == str(r["id"]) for r in seen)
    final = assert_same_rows(base, ["_hoodie_record_key"])
    by_id = {r["id"]: r for r in final}
    # id 1 was carried over through the upsert rewrite: its meta columns are the insert's.
    if partitioned:
        assert by_id[1]["_hoodie_commit_time"] < by_id[2]["_hoodie_commit_time"]
        assert by_id[1]["_hoodie_partition_path"] == "city=sf"


def test_upsert_keeps_meta_of_carried_rows(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table)
    first = writer.write(pa.table({"id": [1, 2], "p": ["a", "a"], "v": [1, 2]}), "insert")
    before = {r["id"]: r for r in our_read(table.uri).to_pylist()}
    second = writer.write(pa.table({"id": [2], "p": ["a"], "v": [20]}), "upsert")
    after = {r["id"]: r for r in our_read(table.uri).to_pylist()}
    assert after[1]["_hoodie_commit_time"] == first.instant
    assert after[1]["_hoodie_commit_seqno"] == before[1]["_hoodie_commit_seqno"]
    assert after[2]["_hoodie_commit_time"] == second.instant
    assert after[2]["_hoodie_commit_seqno"].startswith(second.instant + "_")
    stats = second.metadata.write_stats()
    assert [(s.prev_commit, s.num_update_writes, s.num_writes) for s in stats] == [(first.instant, 1, 2)]


def test_upserted_new_keys_top_up_the_smallest_small_file_group(tmp_path):
    """Upserts of new keys do not add file groups while a small one exists: the index's cost stays bounded."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table)
    writer.write(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "v": [1, 2, 3]}), "insert")
    writer.write(pa.table({"id": [4], "p": ["a"], "v": [4]}), "insert")  # a second, smaller group in "a"
    groups = {(f.partition, f.file_id): f.size for f in table.view().latest_base_files()}
    smallest_a = min((size, fid) for (p, fid), size in groups.items() if p == "a")[1]
    first = writer.write(pa.table({"id": [10, 11], "p": ["a", "b"], "v": [10, 11]}), "upsert")
    stats = {s.partition_path: s for s in first.metadata.write_stats()}
    assert (stats["a"].file_id, stats["a"].num_inserts) == (smallest_a, 1)
    for batch in range(1, 5):
        ids = [10 + 2 * batch, 11 + 2 * batch]
        writer.write(pa.table({"id": ids, "p": ["a", "b"], "v": ids}), "upsert")
    assert {(f.partition, f.file_id) for f in table.view().latest_base_files()} == set(groups)
    assert {r["id"] for r in assert_same_rows(table.uri, ["_hoodie_record_key"])} == {1, 2, 3, 4, *range(10, 20)}


def test_small_file_limit_zero_starts_new_groups(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table, WriteOptions(small_file_limit=0))
    writer.write(pa.table({"id": [1], "p": ["a"], "v": [1]}), "insert")
    writer.write(pa.table({"id": [2], "p": ["a"], "v": [2]}), "upsert")
    assert len(table.view().latest_base_files()) == 2
    assert {r["id"] for r in assert_same_rows(table.uri, ["_hoodie_record_key"])} == {1, 2}


def test_complex_keys_and_multi_level_partitions(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["a", "b"], ["y", "m"], hive_style=False)
    writer = LocalWriter(table)
    writer.write(pa.table({"a": [1, 1], "b": ["x", "y"], "y": [2024, 2024], "m": [1, 2], "v": [1, 2]}), "insert")
    writer.write(pa.table({"a": [1], "b": ["y"], "y": [2024], "m": [2], "v": [9]}), "upsert")
    rows = assert_same_rows(table.uri, ["_hoodie_record_key"])
    assert [(r["_hoodie_record_key"], r["_hoodie_partition_path"], r["v"]) for r in rows] == [
        ("a:1,b:x", "2024/1", 1),
        ("a:1,b:y", "2024/2", 9),
    ]
    assert table.config.keygen_class.endswith("ComplexKeyGenerator")


def test_time_travel_reads_the_older_snapshot(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    writer = LocalWriter(table)
    first = writer.write(pa.table({"id": [1], "v": [1]}), "insert")
    writer.write(pa.table({"id": [1], "v": [2]}), "upsert")
    assert our_read(table.uri, first.instant).column("v").to_pylist() == [1]
    assert our_read(table.uri).column("v").to_pylist() == [2]


def test_bulk_insert_splits_by_target_file_size(tmp_path):
    from coordinator.write.writer import WriteOptions

    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    rows = pa.table({"id": list(range(10_000)), "pad": ["x" * 50] * 10_000})
    result = LocalWriter(table, WriteOptions(max_file_size=rows.nbytes // 4 + 2000)).write(rows, "bulk_insert")
    assert len(result.files_written) == 4
    assert our_read(table.uri).num_rows == 10_000


def test_uncommitted_file_is_invisible_to_both_readers(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], hive_style=True)
    LocalWriter(table).write(pa.table({"id": [1], "p": ["a"], "v": [1]}), "insert")
    committed = our_read(table.uri)
    # Leave, by hand, an inflight instant with a data file of its own.
    inflight_time = "29990101000000000"
    hoodie = Path(table.uri) / ".hoodie"
    (hoodie / f"{inflight_time}.commit.requested").write_bytes(b"")
    (hoodie / f"{inflight_time}.inflight").write_bytes(b"{}")
    stray = committed.slice(0, 1).to_pydict()
    stray["id"] = [99]
    stray["_hoodie_commit_time"] = [inflight_time]
    stray["_hoodie_record_key"] = ["99"]
    pq.write_table(pa.table(stray), Path(table.uri) / "p=a" / f"abc-0_0-1-0_{inflight_time}.parquet")
    assert rows_by_key(our_read(table.uri), ["id"]) == rows_by_key(committed, ["id"])
    assert [r["id"] for r in rows_by_key(hudi_read(table.uri), ["id"])] == [1]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_spark_fixture_reads_accepts_upsert_and_stays_readable(tmp_path, name):
    base = unzip_fixture(name, tmp_path)
    table = Table.open(str(base))
    keys = table.config.record_key_fields
    before = assert_same_rows(str(base), keys)
    if not before:
        upsert = pa.table({"id": pa.array([1], pa.int32()), "name": ["first"], "isActive": [True]})
    else:
        rows = our_read(str(base))
        rows = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names]).slice(0, 1)
        upsert = rows.set_column(rows.column_names.index("name"), "name", pa.array(["changed"]))
    path = tmp_path / "upsert.parquet"
    pq.write_table(upsert, path)
    result = tandem("write", str(base), "--input", str(path), "--operation", "upsert")
    assert result.returncode == 0, result.stderr
    after = assert_same_rows(str(base), keys)
    assert len(after) == max(len(before), 1)
    changed = [r for r in after if r["name"] in ("changed", "first")]
    assert len(changed) == 1


def test_fixture_copy_is_left_alone_by_reads(tmp_path):
    base = unzip_fixture("v6_nonpartitioned", tmp_path)
    snapshot = sorted(p.relative_to(base) for p in base.rglob("*"))
    our_read(str(base))
    assert sorted(p.relative_to(base) for p in base.rglob("*")) == snapshot
    shutil.rmtree(base)


def test_s3_table_round_trip(s3_base, moto):
    table = Table.create(s3_base, "s3t", ["id"], ["p"], hive_style=True)
    lock = f"dynamodb://s3t-locks?region=us-east-1&endpoint={moto.url}"
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri=lock))
    writer.write(pa.table({"id": [1, 2], "p": ["a", "b"], "v": [1, 2]}), "insert")
    writer.write(pa.table({"id": [2], "p": ["b"], "v": [20]}), "upsert")
    reopened = Table.open(s3_base)
    rows = read_view(reopened, reopened.storage_view()).sort_by("id")
    assert rows.column("v").to_pylist() == [1, 20]
    assert [i.action for i in reopened.timeline().completed()] == ["commit", "commit"]


def test_an_upsert_failing_in_one_of_its_parallel_files_leaves_no_file_and_no_change(tmp_path, monkeypatch):
    """Files are merged and written on threads: one that fails undoes the instant only after every other
    file's marker and file exist, so nothing a sibling thread wrote is left behind."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], with_metadata=True)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0))
    for part in range(6):  # six file groups in six partitions
        writer.write(pa.table({"id": [part], "p": [f"p{part}"], "v": [part]}), "insert")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "t").rglob("*.parquet"))
    written = []
    original, undo = LocalWriter.write_file, Transaction._undo
    undoing = threading.Event()

    def failing(self, txn, write, task, token=None):
        if task == 0:  # the first result collected: a writer that did not wait would undo at once
            raise OSError("disk full")
        # A sibling is held until the undo starts: an undo that did not wait for it would run first.
        # (The deadline is what a correct writer pays: it waits for its siblings before any undo.)
        undoing.wait(timeout=1)
        stat = original(self, txn, write, task, token)
        written.append(stat.path)
        return stat

    def marked_undo(self):
        undoing.set()
        undo(self)

    monkeypatch.setattr(LocalWriter, "write_file", failing)
    monkeypatch.setattr(Transaction, "_undo", marked_undo)
    with pytest.raises(OSError, match="disk full"):
        writer.write(pa.table({"id": list(range(6)), "p": [f"p{i}" for i in range(6)], "v": [9] * 6}), "upsert")
    assert len(written) == 5  # the sibling files were all written before the undo ran
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "t").rglob("*.parquet")) == before
    assert {r["id"]: r["v"] for r in assert_same_rows(table.uri, ["_hoodie_record_key"])} == {i: i for i in range(6)}


@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE"])
def test_an_upsert_reads_each_file_it_rewrites_once_under_the_bloom_index(tmp_path, monkeypatch, index):
    """The bloom index's candidates are read whole once and merged from those rows; the simple index reads
    only the key column of every file, then the files it rewrites."""
    import coordinator.write.base_reads as base_reads_module

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], with_metadata=True)
    config = CoordinatorConfig(index_type=index)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), coordinator=config)
    for part in range(4):
        writer.write(pa.table({"id": [part, part + 10], "p": [f"p{part}"] * 2, "v": [0, 0]}), "insert")
    reads = []
    original = base_reads_module.read_base_file

    def counted(storage, path, columns=None, *args):
        reads.append((path, columns))
        return original(storage, path, columns, *args)

    monkeypatch.setattr(base_reads_module, "read_base_file", counted)
    writer.write(pa.table({"id": [0, 1, 2, 3], "p": [f"p{i}" for i in range(4)], "v": [7] * 4}), "upsert")
    whole = [path for path, columns in reads if columns is None]
    assert sorted(whole) == sorted(set(whole)) and len(whole) == 4
    assert len(reads) == (4 if index == "BLOOM" else 8)
    assert {r["id"]: r["v"] for r in assert_same_rows(table.uri, ["_hoodie_record_key"])} == {
        **{i: 7 for i in range(4)},
        **{i + 10: 0 for i in range(4)},
    }


def test_an_interrupted_write_returns_only_once_no_file_of_it_is_still_being_written(tmp_path, monkeypatch):
    """Ctrl-C while a write's files are written on threads: the files not started are dropped, the ones
    running finish, and only then does the interrupt reach the caller; nothing lands after it."""
    from coordinator.write import pool
    from coordinator.write.new_files import BaseFileWriter

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], with_metadata=True)
    writer = LocalWriter(table)
    original = BaseFileWriter.close
    interrupted, raised, finished = threading.Event(), threading.Event(), []

    def on_interrupt(signum, frame):  # Python's own handler, which also says when the main thread took it
        interrupted.set()
        raise KeyboardInterrupt

    def interrupting(self):
        if self.task == 0:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        # the files already being written wait until the main thread has taken the interrupt, then a little
        # longer: a writer that did not wait for them has returned by then, and a file would land after it
        assert interrupted.wait(timeout=60), "the main thread never took the interrupt"
        raised.wait(timeout=1)
        stat = original(self)
        finished.append(stat.path)
        return stat

    monkeypatch.setattr(BaseFileWriter, "close", interrupting)
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            rows = pa.table({"id": list(range(12)), "p": [f"p{i}" for i in range(12)], "v": [1] * 12})
            writer.write(rows, "insert")
    finally:
        signal.signal(signal.SIGINT, previous)
    landed = sorted(p.name for p in (tmp_path / "t").rglob("*.parquet") if ".hoodie" not in p.parts)
    raised.set()
    threads = writer.io_threads
    idle = threading.Barrier(threads, timeout=10)  # every pool thread free at once:
    for done in [pool.io_pool(threads).submit(idle.wait) for _ in range(threads)]:
        done.result(timeout=20)  # nothing of the write is left running or queued
    assert sorted(p.name for p in (tmp_path / "t").rglob("*.parquet") if ".hoodie" not in p.parts) == landed
    assert len(landed) == len(finished) < 12
