"""The storage fence alone: with a lock that grants everyone and never notices a loss.

A second writer (or a recovery) runs to completion while the first is stopped at
a named point of its protocol, as if its lease had lapsed while it was paused;
then the first resumes. Nothing the lock could do is left to help: whatever
stays safe here is safe because of storage (the MDT log chain, the post-claim
conflict check, the decision record). Each defence that another layer could
mask is also tested on its own below.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
import pytest

from chaos.checker import check_table
from coordinator.config import CoordinatorConfig
from coordinator.mdt import compaction, deltacommit, steps
from coordinator.mdt.bootstrap import validate
from coordinator.mdt.maintenance import failed_writes
from coordinator.protocol import archival
from coordinator.protocol import rollback as rollback_service
from coordinator.protocol.recovery import roll_back_orphans
from coordinator.protocol.transaction import Transaction
from coordinator.write.writer import LocalWriter
from locks.base import LockProvider, OwnerInfo
from timeline.crash_points import SimulatedCrash, observe, simulate
from timeline.errors import ConflictError, TandemError
from timeline.format import outcome
from timeline.format.instant import ROLLBACK
from timeline.mdt.reader import MetadataReader
from timeline.table import TEMP_DIR, Table

_tokens = itertools.count(1)


class BlindLock(LockProvider):
    """Granted to every caller at once and never lost: a lease that lapsed unnoticed, for everyone."""

    name = "blind"

    def try_acquire(self) -> int | None:
        return next(_tokens)

    def release(self) -> None:
        self.token = None

    def owner(self) -> OwnerInfo | None:
        return None

    def force_release(self) -> None:
        return None


LAZY = CoordinatorConfig(failed_writes_policy="LAZY", auto_archive=False)
EAGER = CoordinatorConfig(failed_writes_policy="EAGER", auto_archive=False)


def rows(ids: list[int], v: int, part: str = "a") -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "v": [v] * len(ids)})


def expected(values: dict[int, int], part: str = "a") -> dict[str, dict]:
    return {str(k): {"id": k, "part": part, "v": v} for k, v in values.items()}


def writer(table: Table, config: CoordinatorConfig = LAZY) -> LocalWriter:
    return LocalWriter(table, coordinator=config, lock=BlindLock())


@contextmanager
def at_point(point: str, action: Callable[[], None]) -> Iterator[list[str]]:
    """Run `action` once, synchronously, the first time any code reaches `point`."""
    fired: list[str] = []

    def hook(name: str) -> None:
        if name == point and not fired:
            fired.append(name)
            action()

    observe(hook)
    try:
        yield fired
    finally:
        observe(None)


@pytest.fixture(params=[False, True], ids=["tandem-format", "hudi-format"])
def table(tmp_path, request) -> Table:
    """A table with one commit, its metadata table in Tandem's format or in Hudi's."""
    created = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"], hudi_format=request.param)
    writer(created).write(rows([1, 2], 0), "insert")  # one file group holding both keys
    return created


def outcome_of(attempt: Callable[[], object]) -> str:
    try:
        attempt()
    except ConflictError:
        return "conflict"
    except TandemError:
        return "aborted"
    return "committed"


COMMIT_POINTS = [
    "commit.locked",
    "commit.finalize",
    "mdt.deltacommit.requested",
    "mdt.deltacommit.inflight",
    "mdt.deltacommit.log",
    "mdt.deltacommit.complete",
    "commit.mdt",
    "commit.decided",
]


@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_two_writers_in_one_critical_section_never_both_commit_one_file_group(table, point):
    results: dict[str, str] = {}

    def second_writer() -> None:
        results["B"] = outcome_of(lambda: writer(table).write(rows([2], 2), "upsert"))

    with at_point(point, second_writer) as fired:
        results["A"] = outcome_of(lambda: writer(table).write(rows([1], 1), "upsert"))
    assert fired, f"A never reached {point}"
    assert "committed" in results.values() and set(results.values()) <= {"committed", "conflict"}, results
    acknowledged = {1: 1 if results["A"] == "committed" else 0, 2: 2 if results["B"] == "committed" else 0}
    roll_back_orphans(table, EAGER)
    assert check_table(table, expected=expected(acknowledged)) == []  # every acknowledged update visible


ROLLED_BACK_POINTS = [
    "commit.begin.requested",
    "commit.begin.inflight",
    "commit.write.file",
    "commit.locked",
    "commit.finalize",
    "commit.mdt",
]


@pytest.mark.parametrize("point", ROLLED_BACK_POINTS)
def test_a_writer_rolled_back_while_paused_never_completes(table, point):
    with at_point(point, lambda: roll_back_orphans(table, EAGER)):
        result = outcome_of(lambda: writer(table).write(rows([1], 1), "upsert"))
    assert result in {"conflict", "aborted"}
    timeline = table.timeline()
    rolled_back = [timeline.avro(i)["commitsRollback"][0] for i in timeline.completed() if i.action == ROLLBACK]
    assert rolled_back and not any(timeline.find(t) for t in rolled_back), "an instant both rolled back and present"
    roll_back_orphans(table, EAGER)
    assert check_table(table, expected=expected({1: 0, 2: 0})) == []


def test_a_commit_decided_before_a_rollback_is_rolled_forward(table):
    with at_point("commit.decided", lambda: roll_back_orphans(table, EAGER)):
        assert outcome_of(lambda: writer(table).write(rows([1], 1), "upsert")) == "committed"
    assert [i.action for i in table.timeline().completed()] == ["commit", "commit"]
    assert check_table(table, expected=expected({1: 1, 2: 0})) == []


def test_a_crash_after_the_commit_decision_is_finished_by_recovery(table):
    with pytest.raises(SimulatedCrash), simulate("commit.decided"):
        writer(table).write(rows([1], 1), "upsert")
    report = roll_back_orphans(table, EAGER)
    assert len(report.rolled_forward) == 1 and not report.rolled_back
    assert check_table(table, expected=expected({1: 1, 2: 0})) == []


def test_stale_housekeeping_never_rolls_back_a_committed_mdt_deltacommit(table):
    """A's commit-time view predates B entirely; its housekeeping must leave B's MDT deltacommit alone."""
    results: dict[str, str] = {}

    def second_writer() -> None:
        results["B"] = outcome_of(lambda: writer(table).write(rows([5], 5, part="b"), "insert"))

    with at_point("commit.locked", second_writer):
        results["A"] = outcome_of(lambda: writer(table).write(rows([6], 6, part="c"), "insert"))
    assert results == {"A": "committed", "B": "committed"}
    assert validate(table.metadata(), table.timeline()).errors == 0
    want = expected({1: 0, 2: 0}) | {"5": {"id": 5, "part": "b", "v": 5}, "6": {"id": 6, "part": "c", "v": 6}}
    assert check_table(table, expected=want) == []


def crash_after_mdt(table: Table) -> str:
    """Insert into a new partition `z` and die once its MDT deltacommit completed; returns its instant."""
    with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
        writer(table).write(rows([9], 9, part="z"), "insert")
    (pending,) = table.timeline().pending()
    assert table.metadata().timeline().find(pending.time).is_completed
    return pending.time


def test_reader_ignores_blocks_of_an_instant_that_is_not_completed(table):
    """The block-level filter alone: `__all_partitions__` has no file-level filter behind it."""
    crash_after_mdt(table)
    assert MetadataReader(table.metadata(), table.timeline()).all_partitions() == ["a"]


def test_data_rollback_rolls_back_the_mdt_deltacommit_on_its_own(table, monkeypatch):
    """Without housekeeping and even if a reader took the instant for valid, its MDT blocks stay out."""
    time = crash_after_mdt(table)
    rollback_service.rollback(table, table.timeline().find(time))
    mdt = table.metadata()
    assert mdt.timeline().find(time) is None
    assert outcome.read(table.storage, time).is_rollback
    monkeypatch.setattr(MetadataReader, "is_valid", lambda self, t: True)
    assert MetadataReader(mdt, table.timeline()).all_partitions() == ["a"]


def test_compaction_merges_only_decided_instants(table, monkeypatch):
    """A scheduler whose view missed a prepared instant: the merge itself must not guess."""
    time = crash_after_mdt(table)
    mdt = table.metadata()
    monkeypatch.setattr(steps, "schedule_blockers", lambda mdt_timeline, data_timeline: [])
    planned = compaction.schedule(mdt, table.timeline())
    assert planned is not None
    with pytest.raises(compaction.CompactionDeferred, match=time):
        compaction.execute(mdt, table.timeline(), planned)
    roll_back_orphans(table, EAGER)
    compaction.execute(mdt, table.timeline(), planned)
    assert mdt.timeline().find(planned).is_completed
    assert MetadataReader(mdt, table.timeline()).all_partitions() == ["a"]
    assert validate(mdt, table.timeline()).errors == 0


def test_the_decision_is_claimed_once(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"])
    first = outcome.claim(table.storage, "20261123000000000", outcome.ROLLBACK)
    second = outcome.claim(table.storage, "20261123000000000", outcome.COMMIT, b"{}")
    assert first.mine and first.is_rollback
    assert not second.mine and second.is_rollback


def decided_but_not_completed(table: Table) -> str:
    with pytest.raises(SimulatedCrash), simulate("commit.decided"):
        writer(table).write(rows([1], 1), "upsert")
    (pending,) = table.timeline().pending()
    return pending.time


def test_mdt_rollback_refuses_an_instant_whose_commit_decision_stands(table):
    time = decided_but_not_completed(table)
    assert deltacommit.rollback(table.metadata(), time, table.timeline()) is False
    assert table.metadata().timeline().find(time).is_completed


def test_rollback_of_a_decided_commit_rolls_it_forward(table):
    time = decided_but_not_completed(table)
    assert rollback_service.rollback(table, table.timeline().find(time)) is None
    assert table.timeline().find(time).is_completed
    assert check_table(table, expected=expected({1: 1, 2: 0})) == []


def test_housekeeping_says_nothing_of_instants_newer_than_its_view(table):
    stale = table.timeline()
    writer(table).write(rows([5], 5, part="b"), "insert")
    newer = table.timeline().completed()[-1].time
    assert newer not in failed_writes(table.metadata(), stale)


class Gate:
    """Stops the thread that reaches `point` until released (an event, never a sleep)."""

    def __init__(self, thread_name: str, point: str) -> None:
        self.thread_name, self.point = thread_name, point
        self.reached, self.go = threading.Event(), threading.Event()

    def __call__(self, name: str) -> None:
        if name == self.point and threading.current_thread().name == self.thread_name and not self.reached.is_set():
            self.reached.set()
            assert self.go.wait(60), f"{self.thread_name} was never released"


def run_in_thread(name: str, job: Callable[[], object], results: dict[str, str]) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.__setitem__(name, outcome_of(job)), name=name)
    thread.start()
    return thread


@pytest.mark.parametrize("stale_archiver", [False, True])
def test_archival_keeps_what_a_pending_writer_must_check(table, monkeypatch, stale_archiver):
    """W0 and W1 update one file group; W0 commits after W1 began; archival runs; W1 must not commit blind.

    Archival keeps W0 (W1 watched it at begin); an archiver that ignores that rule
    (a stale view) archives W0, and W1's commit must then abort on its own.
    """
    if stale_archiver:
        monkeypatch.setattr(archival, "_watched_by_pending", lambda timeline: [])
    config = CoordinatorConfig(archive_min_commits=2, archive_max_commits=3, commits_retained=1, max_delta_commits=2)
    gates = [Gate("W0", "commit.begin.inflight"), Gate("W1", "commit.write.file")]
    observe(lambda name: [gate(name) for gate in gates])
    results: dict[str, str] = {}
    began: list[str] = []
    try:
        w0 = run_in_thread(
            "W0", lambda: writer(table, config).write(rows([1], 10), "upsert", on_begin=began.append), results
        )
        assert gates[0].reached.wait(60)
        w1 = run_in_thread("W1", lambda: writer(table, config).write(rows([2], 20), "upsert"), results)
        assert gates[1].reached.wait(60)
        gates[0].go.set()
        w0.join(60)
        for i in range(6):  # enough completed instants that archival is due after each
            writer(table, config).write(rows([100 + i], i, part=f"p{i}"), "insert")
        assert (table.timeline().find(began[0]) is None) == stale_archiver
        gates[1].go.set()
        w1.join(60)
    finally:
        for gate in gates:
            gate.go.set()
        observe(None)
    assert results == {"W0": "committed", "W1": "conflict"}
    want = expected({1: 10, 2: 0}) | {str(100 + i): {"id": 100 + i, "part": f"p{i}", "v": i} for i in range(6)}
    assert check_table(table, expected=want) == []


def test_default_settings_never_roll_back_a_live_writer(table):
    assert CoordinatorConfig().failed_writes_policy == "LAZY"
    gate = Gate("slow", "commit.write.file")
    observe(gate)
    results: dict[str, str] = {}
    try:
        slow = run_in_thread("slow", lambda: LocalWriter(table).write(rows([1], 1), "upsert"), results)
        assert gate.reached.wait(60)
        LocalWriter(table).write(rows([7], 7, part="b"), "insert")  # its begin must leave `slow` alone
        gate.go.set()
        slow.join(60)
    finally:
        gate.go.set()
        observe(None)
    assert results == {"slow": "committed"}
    assert check_table(table, expected=expected({1: 1, 2: 0}) | {"7": {"id": 7, "part": "b", "v": 7}}) == []


def test_a_write_builds_the_missing_metadata_table_first_unless_disabled(table):
    """Every write then has the MDT log chain as its fence (Hudi's `hoodie.metadata.enable`, default on)."""
    table.delete_metadata_table()
    off = CoordinatorConfig(metadata_enabled=False, auto_archive=False)
    LocalWriter(table, coordinator=off, lock=BlindLock()).write(rows([3], 3), "insert")
    assert not table.metadata().exists()
    writer(table).write(rows([4], 4), "insert")
    assert table.metadata().exists() and table.has_metadata_table()
    assert validate(table.metadata(), table.timeline()).errors == 0
    assert check_table(table, expected=expected({1: 0, 2: 0, 3: 3, 4: 4})) == []


def test_a_concurrent_schema_change_is_a_conflict(table):
    """A commit that added a column after T began: T would record a schema without it."""
    results: dict[str, str] = {}

    def widening_writer() -> None:
        added = rows([5], 5, part="b").append_column("note", pa.array(["new column"]))
        results["B"] = outcome_of(lambda: writer(table).write(added, "insert"))

    with at_point("commit.write.file", widening_writer):
        results["A"] = outcome_of(lambda: writer(table).write(rows([6], 6, part="c"), "insert"))
    assert results == {"B": "committed", "A": "conflict"}
    assert "note" in table.timeline().latest_schema()


def test_a_recovery_paused_since_its_timeline_read_leaves_a_write_begun_meanwhile_alone(table, monkeypatch):
    """Recovery R read the timeline, then paused past its lease; writer B began and wrote its file under
    the lock R lost; R resumes. B's marker folder is not stray: R judges it by a timeline read after the
    listing, not by the one it held (which does not know B), so B's committed file stays."""
    recovery = Table.open(table.storage.base_uri)
    held = iter([recovery.timeline()])  # R's first read happens before B begins
    monkeypatch.setattr(recovery, "timeline", lambda: next(held, None) or Table.timeline(recovery))
    with at_point("commit.write.file", lambda: roll_back_orphans(recovery, EAGER)) as fired:
        result = writer(table).write(rows([1], 1), "upsert")
    assert fired
    assert all(table.storage.exists(stat.path) for stat in result.metadata.write_stats())
    assert check_table(table, expected=expected({1: 1, 2: 0})) == []


def test_a_begin_paused_before_its_marker_sweep_leaves_a_write_begun_meanwhile_alone(table, monkeypatch):
    """The same through a real begin, which keeps its reads (`read_once`): R's begin reads the timeline,
    then pauses before listing `.hoodie/.temp`; B begins and writes its file; R resumes. The sweep's
    timeline must come from storage, not from R's memo of its first read."""
    recovery = Table.open(table.storage.base_uri)
    resumed, paused = threading.Event(), threading.Event()
    listing = recovery.storage.list_dir

    def list_dir(rel: str, *args, **kwargs):
        if rel == TEMP_DIR and not resumed.is_set():
            paused.set()
            resumed.wait(30)
        return listing(rel, *args, **kwargs)

    monkeypatch.setattr(recovery.storage, "list_dir", list_dir)
    failed: list[BaseException] = []

    def begin_recovery() -> None:
        try:
            Transaction(recovery, config=EAGER, lock=BlindLock()).begin()
        except BaseException as err:  # reported by the assertion below
            failed.append(err)

    begin = threading.Thread(target=begin_recovery)
    begin.start()
    assert paused.wait(30), "R never reached its marker sweep"

    def resume() -> None:
        resumed.set()
        begin.join(30)

    with at_point("commit.write.file", resume) as fired:
        result = writer(table).write(rows([1], 1), "upsert")
    assert fired and not begin.is_alive() and not failed
    assert [s.path for s in result.metadata.write_stats() if not table.storage.exists(s.path)] == []
