"""The coordinator: locks in the commit path, conflicts, heartbeats and LAZY rollback, archival, workers."""

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
from coordinator.config import CoordinatorConfig
from coordinator.protocol.heartbeat import is_expired
from coordinator.protocol.transaction import TOKEN_KEY, Transaction
from coordinator.services.steps import CompactionReport, clean
from coordinator.write.writer import LocalWriter
from tests.conftest import FAST_FILE_LOCK, tandem, wait_until
from timeline.crash_points import SimulatedCrash, simulate
from timeline.errors import BadInputError, ConflictError, TandemError
from timeline.format.active_timeline import read_bundle
from timeline.table import Table

REPO = Path(__file__).resolve().parents[2]
LAZY_FAST = {"failed_writes_policy": "LAZY", "heartbeat_interval_ms": 300, "lock_uri": FAST_FILE_LOCK}


def rows(ids: list[int], v: int, part: str = "a") -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "v": [v] * len(ids)})


def expected(model: dict[int, int], parts: dict[int, str]) -> dict[str, dict]:
    return {str(k): {"id": k, "part": parts[k], "v": v} for k, v in model.items()}


@pytest.fixture
def table(tmp_path) -> Table:
    return Table.create(str(tmp_path / "t"), "t", ["id"], ["part"])


def test_settings_take_hudi_keys_and_refuse_unknown_ones():
    config = CoordinatorConfig.from_hudi(
        {
            "hoodie.cleaner.policy.failed.writes": "lazy",
            "hoodie.client.heartbeat.interval_in_ms": "5000",
            "hoodie.metadata.compact.max.delta.commits": "4",
            "hoodie.cleaner.commits.retained": "3",
            "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
        }
    )
    assert (config.failed_writes_policy, config.heartbeat_interval_ms, config.max_delta_commits) == ("LAZY", 5000, 4)
    assert config.commits_retained == 3 and config.lock_uri.startswith("memory")
    assert config.heartbeat_expiry_s == 10.0
    with pytest.raises(BadInputError, match="unknown setting 'hoodie.nope'"):
        CoordinatorConfig.from_hudi({"hoodie.nope": "1"})
    with pytest.raises(BadInputError, match="EAGER, LAZY"):
        CoordinatorConfig.from_hudi({"hoodie.cleaner.policy.failed.writes": "SOMETIMES"})
    with pytest.raises(BadInputError, match="not a valid"):
        CoordinatorConfig.from_hudi({"hoodie.cleaner.commits.retained": "many"})


def test_commit_records_the_fencing_token_and_tokens_grow(table):
    writer = LocalWriter(table)
    first = writer.write(rows([1], 1), "insert")
    second = writer.write(rows([2], 1), "insert")
    timeline = table.timeline()
    tokens = [
        int(timeline.commit_metadata(timeline.find(r.instant)).extra_metadata[TOKEN_KEY]) for r in (first, second)
    ]
    assert tokens[0] < tokens[1]


def test_same_file_group_conflicts_and_the_loser_leaves_nothing(table):
    config = CoordinatorConfig(failed_writes_policy="LAZY")
    LocalWriter(table, coordinator=config).write(rows([1, 2], 1), "insert")
    loser = Transaction(table, config=config)
    loser.begin()
    winner = LocalWriter(table, coordinator=config).write(rows([1], 2), "upsert")
    view = table.view()
    base = view.latest_base_files("a")[0]
    marker_target = f"a/{base.file_id}_9-0-0_{loser.time}.parquet"
    loser.create_marker(marker_target, "MERGE")
    table.storage.write_bytes(marker_target, b"not really parquet")
    from timeline.format.commit_metadata import WriteStat

    loser.metadata.add(
        WriteStat(base.file_id, marker_target, "a", prev_commit=winner.metadata.write_stats()[0].prev_commit)
    )
    with pytest.raises(ConflictError, match=f"conflicts with {winner.instant}"):
        loser.commit()
    assert not table.storage.exists(marker_target)
    assert table.timeline().find(loser.time) is None
    assert check_table(table, expected=expected({1: 2, 2: 1}, {1: "a", 2: "a"})) == []


def test_different_partitions_both_commit(table):
    config = CoordinatorConfig(failed_writes_policy="LAZY")
    writer = LocalWriter(table, coordinator=config)
    writer.write(pa.concat_tables([rows([1], 1, "a"), rows([2], 1, "b")]), "insert")
    with Transaction(table, config=config) as first:
        second = Transaction(table, config=config)
        second.begin()
        LocalWriter(table, coordinator=config).write(rows([2], 2, "b"), "upsert")
    assert first.instant.is_completed
    second.commit()
    assert second.instant.is_completed
    assert check_table(table, expected=expected({1: 1, 2: 2}, {1: "a", 2: "b"})) == []


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_cli_write_exits_3_on_conflict(tmp_path):
    base = str(tmp_path / "t")
    assert tandem("init", base, "--name", "t", "--record-key", "id", "--partition-by", "part").returncode == 0
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": 1, "part": "a", "v": 1}\n')
    assert tandem("write", base, "--input", str(source), "--operation", "insert").returncode == 0
    lazy = ("--set", "hoodie.cleaner.policy.failed.writes=LAZY")
    frozen = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "write", base, "--input", str(source), "--operation", "upsert", *lazy],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "TANDEM_PAUSE_AT": "commit.write.file", "TANDEM_LOCK": FAST_FILE_LOCK},
    )
    try:
        wait_until(lambda: _stopped(frozen.pid), 30, "the CLI writer to freeze after writing its file")
        winner = tandem("write", base, "--input", str(source), "--operation", "upsert", *lazy)
        assert winner.returncode == 0, winner.stderr
    finally:
        frozen.send_signal(signal.SIGCONT)
    _, err = frozen.communicate(timeout=60)
    assert frozen.returncode == 3, err
    assert "conflicts with" in err and len(err.strip().splitlines()) == 1
    assert check_table(Table.open(base), expected={"1": {"id": 1, "part": "a", "v": 1}}) == []
    bad = tandem("write", base, "--input", str(source), "--operation", "upsert", "--lock", "zk://nohost")
    assert bad.returncode == 2 and "lock URI" in bad.stderr


def test_lazy_keeps_live_writers_and_rolls_back_expired_ones(table):
    config = CoordinatorConfig(**LAZY_FAST)
    live = Transaction(table, config=config)
    live.begin()
    dead = Transaction(table, config=config)
    dead.begin()
    dead.heartbeat.stop(delete=False)  # its process "died": the heartbeat file stops moving
    wait_until(lambda: is_expired(table.storage, dead.time, config.heartbeat_expiry_s), 10, "the heartbeat to expire")
    LocalWriter(table, coordinator=config).write(rows([7], 1), "insert")
    timeline = table.timeline()
    assert timeline.find(live.time) is not None, "a live writer must not be rolled back under LAZY"
    assert timeline.find(dead.time) is None, "an expired writer is rolled back under LAZY"
    live.commit()
    eager = LocalWriter(table, coordinator=CoordinatorConfig(failed_writes_policy="EAGER"))
    stuck = Transaction(table, config=eager.coordinator)
    stuck.begin()
    stuck.heartbeat.stop(delete=False)
    eager.write(rows([8], 1), "insert")
    assert table.timeline().find(stuck.time) is None


def test_writer_whose_heartbeat_expired_aborts_at_commit(table):
    config = CoordinatorConfig(**LAZY_FAST)
    txn = Transaction(table, config=config)
    txn.begin()
    txn.heartbeat.stop(delete=False)
    wait_until(lambda: is_expired(table.storage, txn.time, config.heartbeat_expiry_s), 10, "heartbeat expiry")
    with pytest.raises(TandemError, match="heartbeat expired"):
        txn.commit()
    assert table.timeline().pending() == []


def test_archival_keeps_readers_exact_and_timelines_short(table):
    config = CoordinatorConfig(archive_min_commits=12, archive_max_commits=16, max_delta_commits=3, commits_retained=4)
    writer = LocalWriter(table, coordinator=config)
    model: dict[int, int] = {}
    for i in range(40):
        ids = [i % 7, 100 + i]
        writer.write(rows(ids, i), "upsert")
        model.update(dict.fromkeys(ids, i))
        if i % 9 == 8:
            clean(table, config)
    timeline = table.timeline()
    assert len(timeline.completed()) <= 16
    bundles = [i.base_name for i in table.storage.list_dir(".hoodie/archived")]
    assert bundles and all(b.startswith("tandem.archive.") for b in bundles)
    archived = [e for b in bundles for e in read_bundle(table.storage.read_bytes(f".hoodie/archived/{b}"))]
    assert {e["state"] for e in archived} >= {"COMPLETED", "REQUESTED"}
    assert max(e["time"] for e in archived) < timeline.earliest_time()
    assert len(table.metadata().timeline().instants) < 60
    assert check_table(table, expected=expected(model, dict.fromkeys(model, "a"))) == []


def test_archival_never_passes_a_pending_instant(table):
    config = CoordinatorConfig(
        archive_min_commits=2, archive_max_commits=3, commits_retained=1, failed_writes_policy="LAZY"
    )
    writer = LocalWriter(table, coordinator=config)
    writer.write(rows([0], 0), "insert")
    blocker = Transaction(table, config=config)
    blocker.begin()
    for i in range(1, 8):
        writer.write(rows([i], i), "insert")
    assert table.timeline().earliest_time() <= blocker.time
    blocker.abort()


def _run_worker(base: str, kind: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "coordinator", "worker", kind, base, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_workers_run_and_stop_on_sigterm(table):
    writer = LocalWriter(table, coordinator=CoordinatorConfig(max_delta_commits=100))  # leave compaction to the worker
    for i in range(12):
        writer.write(rows([i % 3], i), "upsert")
    every_5 = ("--set", "hoodie.metadata.compact.max.delta.commits=5")
    done = tandem("worker", "compact", table.uri, "--interval", "0", "--max-runs", "2", *every_5)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "run 1: compacted" in lines[0] and "run 2: nothing to compact" in lines[1]
    assert lines[-1] == "worker compact stopped after 2 run(s)"
    cleaner = _run_worker(table.uri, "clean", "--interval", "30", "--retained", "2")
    first = cleaner.stdout.readline()
    assert "worker clean run 1: cleaned at" in first
    cleaner.send_signal(signal.SIGTERM)
    out, _ = cleaner.communicate(timeout=20)
    assert cleaner.returncode == 0 and "stopped after 1 run(s)" in out
    assert check_table(table) == []


def test_paused_writer_is_never_both_rolled_back_and_completed(table):
    settings = json.dumps(LAZY_FAST)
    paused = subprocess.Popen(
        [sys.executable, "-m", "tests.coord_writer", "paused", table.uri, settings],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    begun = paused.stdout.readline().split()
    assert begun[0] == "begun", begun
    instant = begun[1]
    config = CoordinatorConfig(**LAZY_FAST)
    paused.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: is_expired(table.storage, instant, config.heartbeat_expiry_s), 10, "the paused heartbeat to expire"
        )
        LocalWriter(table, coordinator=config).write(rows([1], 1), "insert")
        assert table.timeline().find(instant) is None, "the expired instant was rolled back"
    finally:
        paused.send_signal(signal.SIGCONT)
    out, _ = paused.communicate("go\n", timeout=60)
    assert "aborted" in out and "no longer inflight" in out, out
    LocalWriter(table, coordinator=config).write(rows([2], 2), "insert")
    assert check_table(table, expected=expected({1: 1, 2: 2}, {1: "a", 2: "a"})) == []


def test_archival_deletes_a_file_that_landed_after_its_rollback(table):
    """Once a rollback is archived its target counts as archived-completed; a late file must not survive it."""
    from coordinator.protocol.archival import archive

    config = CoordinatorConfig(auto_archive=False, max_delta_commits=2, failed_writes_policy="EAGER")
    writer = LocalWriter(table, coordinator=config)
    with pytest.raises(SimulatedCrash), simulate("commit.write.marker"):
        writer.write(rows([9], 9), "insert")
    model = {1: 1}
    writer.write(rows([1], 1), "insert")  # EAGER: its begin rolls the crashed instant back
    (rollback,) = [i for i in table.timeline().completed() if i.action == "rollback"]
    late = table.timeline().avro(rollback)["partitionMetadata"]["a"]["successDeleteFiles"][0]
    table.storage.write_bytes(late, b"a zombie's late parquet")
    for v in range(2, 9):
        writer.write(rows([v], v), "insert")
        model[v] = v
    assert rollback.time in archive(table, min_commits=2, max_commits=3).data
    assert not table.storage.exists(late)
    assert check_table(table, expected=expected(model, dict.fromkeys(model, "a"))) == []


def test_a_worker_run_that_loses_a_file_it_reads_is_skipped_not_fatal(table, monkeypatch):
    import coordinator.services.worker as worker

    calls = []

    def flaky_compact(*_args):
        calls.append(1)
        if len(calls) == 1:
            raise FileNotFoundError(2, "No such file", ".hoodie/metadata/files/gone.log.1")
        return CompactionReport()

    monkeypatch.setattr(worker, "compact", flaky_compact)
    lines: list[str] = []
    runs = worker.run_worker(table, "compact", CoordinatorConfig(), 0, 2, lines.append)
    assert runs == 2 and len(calls) == 2
    assert "skipped: .hoodie/metadata/files/gone.log.1 was removed" in lines[0]
    assert "nothing to compact" in lines[1]


def test_a_write_whose_newest_file_was_cleaned_meanwhile_is_a_conflict(table):
    """Found by the DynamoDB nemesis: the schema read hit a file a clean had just removed."""
    writer = LocalWriter(table)
    writer.write(rows([1], 1), "insert")
    view = table.view()
    (newest,) = view.latest_base_files()
    table.storage.delete(newest.path)  # what a concurrent upsert and clean leave behind
    with pytest.raises(ConflictError, match="was cleaned while this write read it"):
        writer.existing_schema(view)


def test_a_marker_folder_removed_mid_write_stops_the_write(table, monkeypatch):
    """Found by the DynamoDB nemesis: a rollback removed the folder while the zombie created a marker in it."""
    real = table.storage.create_if_absent

    def folder_gone(rel: str, data: bytes, durable: bool = True) -> bool:
        if rel.startswith(".hoodie/.temp/"):
            raise FileNotFoundError(2, "No such file or directory", rel)
        return real(rel, data, durable)

    monkeypatch.setattr(table.storage, "create_if_absent", folder_gone)
    with pytest.raises(TandemError, match="marker folder was removed: another process rolled it back"):
        LocalWriter(table).write(rows([1], 1), "insert")
    monkeypatch.undo()
    assert table.timeline().pending() == [] and list(Path(table.uri).rglob("*.parquet")) == []


def test_archival_that_meets_a_moved_file_never_fails_a_committed_write(table, monkeypatch):
    """Found by the DynamoDB nemesis: archival after T completed met an instant another archiver had moved."""
    import coordinator.protocol.transaction as transaction

    def raced(*_args):
        raise FileNotFoundError(2, "No such file or directory", ".hoodie/20261122160754117.rollback")

    monkeypatch.setattr(transaction, "archive", raced)
    writer = LocalWriter(
        table, coordinator=CoordinatorConfig(archive_min_commits=2, archive_max_commits=3, commits_retained=1)
    )
    results = [writer.write(rows([v], v), "insert") for v in range(4)]
    assert [table.timeline().find(r.instant).is_completed for r in results] == [True] * 4


def test_a_worker_run_that_finds_its_step_done_by_another_process_is_skipped(table, monkeypatch):
    """Found by the DynamoDB nemesis: a clean another process had finished ('already completed')."""
    import coordinator.services.worker as worker

    outcomes = iter([TandemError("instant 20261122161417951.clean is already completed"), None])

    def racing_clean(*_args):
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome
        return None

    monkeypatch.setattr(worker, "clean", racing_clean)
    lines: list[str] = []
    assert worker.run_worker(table, "clean", CoordinatorConfig(), 0, 2, lines.append) == 2
    assert "skipped: instant 20261122161417951.clean is already completed" in lines[0]
    assert "nothing to clean" in lines[1]
    monkeypatch.setattr(worker, "clean", lambda *_: (_ for _ in ()).throw(BadInputError("not a table")))
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(BadInputError):
        worker.run_worker(table, "clean", CoordinatorConfig(), 0, 1, lines.append)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # the caller's, back
