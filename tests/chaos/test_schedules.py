"""Deterministic schedules (chaos.lost_lock, chaos.mdt_corruption) on real `tandem` processes.

Lost lock: process A is frozen at a crash point inside a locked section until
its lease or session expires (or an operator force-releases its lock); writer B
commits the same file groups; A resumes; `tandem recover`; then DESIGN §8 and
the history check (acknowledged writes survive in instant order, unacknowledged
ones stay invisible). The file lock runs every point of the commit path and one
of each table service and restore (every locked point in `make chaos`); ZooKeeper and
DynamoDB a representative subset; force-release runs on every provider. The
schedules run a few at a time in one module fixture (most of a schedule is
waiting for a lease to pass) and each is its own test item.

MDT corruption: the MDT's newest or an older log, or its `hoodie.properties`, is
damaged; `tandem read` must return the committed rows or fail, and an upsert
must commit correctly or fail and change nothing. It runs through
`tandem chaos run`, which covers the command and its report too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from chaos.checker import Write, check_history
from chaos.lost_lock import (
    CLEAN_POINTS,
    COMPACTION_POINTS,
    DATA_COMPACTION_POINTS,
    MERGE_ON_READ,
    REPRESENTATIVE_POINTS,
    ROLLBACK_POINTS,
    WRITER_POINTS,
    Endpoints,
    Schedule,
    ScheduleResult,
    plan,
    run_schedules,
)
from chaos.mdt_corruption import CORRUPTIONS
from coordinator.config import CoordinatorConfig
from coordinator.write.writer import LocalWriter
from timeline.table import Table

pytestmark = pytest.mark.slow

JOBS = 4
ROLLED_BACK_WHILE_FROZEN = ("commit.begin.requested", "commit.begin.inflight")
# the file lock at every point of the commit path and one point of each table service; every locked point of
# every provider in `make chaos` (`tandem chaos run --scenario lost-lock`)
SUITE_POINTS = [*WRITER_POINTS, ROLLBACK_POINTS[0], CLEAN_POINTS[0], COMPACTION_POINTS[0]]
SCHEDULES = (
    plan(["file"], SUITE_POINTS, ["expiry"])
    + plan(["file"], list(REPRESENTATIVE_POINTS), ["force-release"])
    + plan(["file"], list(ROLLED_BACK_WHILE_FROZEN), ["disjoint"])
    + plan(["zookeeper", "dynamodb"], list(REPRESENTATIVE_POINTS), ["expiry", "force-release"])
    # merge-on-read: a writer's logs and a data compaction (planned, written outside the lock, completed)
    + plan(["file"], ["commit.locked", "commit.mdt", *DATA_COMPACTION_POINTS], ["expiry"], (MERGE_ON_READ,))
    # a restore frozen once its plan is written and once its command blocks are (B finishes it, then writes)
    + plan(["file"], ["restore.mdt"], ["expiry"])
    + plan(["file"], ["restore.commands"], ["expiry"], (MERGE_ON_READ,))
)


def _tandem(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def lost_lock(zookeeper, moto, tmp_path_factory) -> dict[str, ScheduleResult]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        endpoints = Endpoints(zookeeper=zookeeper.hosts, dynamodb=moto.url)
        results = run_schedules(SCHEDULES, endpoints, tmp_path_factory.mktemp("lost-lock"), jobs=JOBS)
    return {r.label: r for r in results}


def _explain(result: ScheduleResult) -> str:
    lines = [
        f"{result.label}: A exit {result.a_exit} ({result.a_said}), B exit {result.b_exit} ({result.b_said}), "
        f"kept in {result.kept_dir}"
    ]
    return "\n".join(lines + [f"  {v['invariant']}: {v['detail']}" for v in result.violations])


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.label)
def test_a_holder_that_lost_its_lock_loses_no_acknowledged_write(lost_lock, schedule: Schedule) -> None:
    result = lost_lock[schedule.label]
    assert result.error is None, result.error
    assert result.violations == [], _explain(result)
    assert result.b_exit in (0, 3), (
        f"B ran against a lapsed lock, so it commits or loses a conflict: {_explain(result)}"
    )


def test_every_schedule_froze_a_resumed_it_and_recovered(lost_lock) -> None:
    """The harness did what a schedule promises: A reached its point and finished, recovery ran."""
    assert len(lost_lock) == len(SCHEDULES)
    for result in lost_lock.values():
        assert None not in (result.a_exit, result.b_exit, result.recover_exit), _explain(result)


def test_chaos_run_lost_lock_reports_each_schedule(tmp_path: Path) -> None:
    report = tmp_path / "lost-lock.json"
    done = _tandem(
        "chaos", "run", "--scenario", "lost-lock", "--providers", "file", "--points", "commit.complete",
        "--variants", "expiry", "--report", str(report),
    )  # fmt: skip
    doc = json.loads(report.read_text())
    assert done.returncode == (1 if doc["violations"] else 0), done.stderr[-2000:]
    [result] = doc["lost_lock"]
    assert (result["provider"], result["point"], result["variant"]) == ("file", "commit.complete", "expiry")
    assert result["a_exit"] is not None and result["b_exit"] is not None
    assert doc["scenarios"] == [] and doc["mdt_corruption"] == []


@pytest.fixture(scope="module")
def mdt_corruption(tmp_path_factory) -> tuple[int, dict]:
    report = tmp_path_factory.mktemp("mdt-corruption") / "report.json"
    done = _tandem("chaos", "run", "--scenario", "mdt-corruption", "--report", str(report))
    return done.returncode, json.loads(report.read_text())


def test_chaos_run_exits_1_exactly_when_a_corruption_schedule_found_something(mdt_corruption) -> None:
    code, doc = mdt_corruption
    assert sorted(r["corruption"] for r in doc["mdt_corruption"]) == sorted(CORRUPTIONS)
    assert code == (1 if doc["violations"] or any(r["error"] for r in doc["mdt_corruption"]) else 0)


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupt_mdt_gives_the_committed_rows_or_a_loud_failure(mdt_corruption, corruption: str) -> None:
    _, doc = mdt_corruption
    result = next(r for r in doc["mdt_corruption"] if r["corruption"] == corruption)
    assert result["error"] is None, result["error"]
    detail = [f"{v['invariant']}: {v['detail']}" for v in result["violations"]]
    assert result["violations"] == [], f"read exit {result['read_exit']}, upsert exit {result['write_exit']}: {detail}"


def test_the_history_check_catches_lost_and_unacknowledged_writes(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"])
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory"))

    def rows(value: str) -> dict[str, dict]:
        return {k: {"id": k, "part": "p0", "v": value} for k in ("a", "b")}

    seed = writer.write(pa.Table.from_pylist(list(rows("seed").values())), "insert").instant
    upsert = writer.write(pa.Table.from_pylist(list(rows("A").values())), "upsert").instant
    ok = [Write("seed", 0, seed, rows("seed")), Write("A", 0, upsert, rows("A"))]
    assert check_history(table, ok) == []
    unacknowledged = check_history(table, [ok[0], Write("A", 3, None, rows("A"))])
    assert [v.invariant for v in unacknowledged] == ["unacknowledged-visible"]
    later = Write("B", 0, "29990101000000000", rows("B"))
    lost = {v.invariant for v in check_history(table, [*ok, later])}
    assert lost == {"acknowledged-commit-lost", "lost-update"}
