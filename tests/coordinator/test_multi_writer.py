"""Real processes on one table: the seed's error cases, and writers racing table-service workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from chaos.checker import check_table
from coordinator.protocol.heartbeat import is_expired
from coordinator.write.writer import LocalWriter
from tests.conftest import FAST_FILE_LOCK, tandem, wait_until
from tests.coord_writer import HOT_KEYS, partition_of
from timeline.mdt import layout
from timeline.table import Table

REPO = Path(__file__).resolve().parents[2]
LAZY = ("--set", "hoodie.cleaner.policy.failed.writes=LAZY")


def _table(tmp_path: Path) -> str:
    base = str(tmp_path / "t")
    assert tandem("init", base, "--name", "t", "--record-key", "id", "--partition-by", "part").returncode == 0
    return base


def _jsonl(tmp_path: Path, name: str, rows: list[dict]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _expected(rows: list[dict]) -> dict[str, dict]:
    return {str(r["id"]): r for r in rows}


@pytest.mark.parametrize(
    "point",
    ["commit.mdt", "mdt.deltacommit.log", "mdt.deltacommit.inflight", "commit.locked"],
    ids=["mdt-updated-data-not", "mdt-log-midway", "mdt-inflight", "before-mdt"],
)
def test_killed_commit_is_repaired_by_recover(tmp_path, point):
    base = _table(tmp_path)
    first = [{"id": i, "part": "a", "v": 1} for i in range(3)]
    assert tandem("write", base, "--input", _jsonl(tmp_path, "a", first), "--operation", "insert").returncode == 0
    update = [{"id": 2, "part": "a", "v": 2}, {"id": 9, "part": "b", "v": 2}]
    killed = tandem("write", base, "--input", _jsonl(tmp_path, "b", update), "--operation", "upsert", crash_at=point)
    assert killed.returncode == 137, killed.stderr
    assert check_table(Table.open(base), expected=_expected(first))[0].invariant == "3-no-orphans"
    recovered = tandem("recover", base)
    assert recovered.returncode == 0, recovered.stderr
    assert "rolled back" in recovered.stdout
    assert check_table(Table.open(base), expected=_expected(first)) == []


def test_killed_async_compaction_is_finished_by_recover(tmp_path):
    base = _table(tmp_path)
    rows = []
    for i in range(4):
        rows.append({"id": i, "part": "a", "v": i})
        assert (
            tandem("write", base, "--input", _jsonl(tmp_path, str(i), rows[-1:]), "--operation", "insert").returncode
            == 0
        )
    killed = tandem(
        "worker",
        "compact",
        base,
        "--max-runs",
        "1",
        "--set",
        "hoodie.metadata.compact.max.delta.commits=2",
        crash_at="mdt.compaction.base",
    )
    assert killed.returncode == 137
    assert layout.pending_compactions(Table.open(base).metadata().timeline())
    assert check_table(Table.open(base), expected=_expected(rows))[0].invariant == "3-no-orphans"
    assert tandem("recover", base).returncode == 0
    assert check_table(Table.open(base), expected=_expected(rows)) == []


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_async_clean_concurrent_with_a_writer(tmp_path):
    base = _table(tmp_path)
    rows = {i: {"id": i, "part": "a", "v": 0} for i in range(4)}
    for v in range(1, 4):
        rows[v % 4] = {"id": v % 4, "part": "a", "v": v}
        source = _jsonl(tmp_path, f"u{v}", [rows[v % 4]] if v > 1 else list(rows.values()))
        assert tandem("write", base, "--input", source, "--operation", "upsert" if v > 1 else "insert").returncode == 0
    env = {**os.environ, "TANDEM_LOCK": FAST_FILE_LOCK, "TANDEM_PAUSE_AT": "clean.files"}
    cleaner = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "worker", "clean", base, "--max-runs", "1", "--retained", "1", *LAZY],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    try:
        wait_until(lambda: _stopped(cleaner.pid), 30, "the clean worker to freeze after deleting files")
        rows[0] = {"id": 0, "part": "a", "v": 9}
        writer = tandem("write", base, "--input", _jsonl(tmp_path, "w", [rows[0]]), "--operation", "upsert", *LAZY)
        assert writer.returncode == 0, writer.stderr
    finally:
        cleaner.send_signal(signal.SIGCONT)
    out, err = cleaner.communicate(timeout=60)
    assert cleaner.returncode == 0 and "cleaned at" in out, err
    assert check_table(Table.open(base), expected=_expected(list(rows.values()))) == []


# how long the writers of the side-by-side run keep writing: bounded in the suite, longer by hand
SIDE_BY_SIDE_S = os.environ.get("TANDEM_SIDE_BY_SIDE_S", "25")


def test_three_writers_and_two_workers_side_by_side(tmp_path):
    base = _table(tmp_path)
    table = Table.open(base)
    hot = [{"id": k, "part": "p0", "writer": "seed", "seq": -1} for k in HOT_KEYS]
    LocalWriter(table).write(pa.Table.from_pylist(hot), "insert")
    lock = "file?lease_ms=10000"  # nobody is killed here: a roomy lease keeps a busy CI box from losing it
    settings = json.dumps({"failed_writes_policy": "LAZY", "heartbeat_interval_ms": 5000, "lock_uri": lock})
    env = {**os.environ, "TANDEM_LOCK": lock}
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.coord_writer", "loop", base, f"w{n}", SIDE_BY_SIDE_S, settings],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        for n in range(3)
    ]
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "coordinator", "worker", kind, base, "--interval", "2", *LAZY, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        for kind, extra in (("clean", ("--retained", "2")), ("compact", ()))
    ]
    records = []
    for proc in writers:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        records += [json.loads(line) for line in out.splitlines()]
    worker_logs = []
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        worker_logs += out.splitlines()
    outcomes = {r["outcome"] for r in records}
    assert outcomes <= {"committed", "conflict"}, [r for r in records if r["outcome"] == "error"][:3]
    committed = sorted((r for r in records if r["outcome"] == "committed"), key=lambda r: r["instant"])
    assert {r["writer"] for r in committed} == {"w0", "w1", "w2"}
    assert any("cleaned at" in line for line in worker_logs), worker_logs[-5:]
    expected = {k["id"]: k for k in hot}
    for record in committed:
        for key in record["keys"]:
            expected[key] = {"id": key, "part": partition_of(key), "writer": record["writer"], "seq": record["seq"]}
    assert check_table(Table.open(base), expected=expected) == []
    print(f"{len(committed)} committed, {len(records) - len(committed)} conflicts, workers: {len(worker_logs)} runs")


def test_a_zombie_writer_leaves_no_file_after_its_rollback(tmp_path):
    """Frozen after its marker, rolled back by another writer, it resumes and writes its file:
    the file must go (found by nemesis: otherwise it turns visible once the rollback is archived)."""
    base = _table(tmp_path)
    fast = (*LAZY, "--set", "hoodie.client.heartbeat.interval_in_ms=300")
    first = [{"id": 1, "part": "a", "v": 1}]
    assert tandem("write", base, "--input", _jsonl(tmp_path, "a", first), "--operation", "insert").returncode == 0
    env = {**os.environ, "TANDEM_LOCK": FAST_FILE_LOCK, "TANDEM_PAUSE_AT": "commit.write.marker"}
    zombie_rows = _jsonl(tmp_path, "z", [{"id": 7, "part": "b", "v": 7}])
    zombie = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "write", base, "--input", zombie_rows, "--operation", "insert", *fast],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    table = Table.open(base)
    try:
        wait_until(lambda: _stopped(zombie.pid), 30, "the writer to freeze after its marker")
        (instant,) = [i.time for i in table.timeline().pending()]
        wait_until(lambda: is_expired(table.storage, instant, 0.6), 10, "the frozen writer's heartbeat to expire")
        second = [{"id": 2, "part": "a", "v": 2}]
        done = tandem("write", base, "--input", _jsonl(tmp_path, "c", second), "--operation", "insert", *fast)
        assert done.returncode == 0, done.stderr
        assert table.timeline().find(instant) is None, "the second writer rolled the frozen instant back"
    finally:
        zombie.send_signal(signal.SIGCONT)
    _, err = zombie.communicate(timeout=60)
    assert zombie.returncode != 0 and "no longer inflight" in err, err
    assert [p.name for p in Path(base).rglob(f"*_{instant}.parquet")] == []
    assert check_table(table, expected=_expected(first + second)) == []
