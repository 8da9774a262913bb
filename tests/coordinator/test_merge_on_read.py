"""Merge-on-read tables end to end on Tandem's side: random writes, deletes and compactions against a plain
model, through every Tandem reader (local snapshot and as-of, the scan planner with a filter, DuckDB); failed
writes and their rollback; compaction while writers keep writing; clean of superseded slices. Java Hudi judges
the same tables in tests/interop/test_java_mor_reads.py.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from chaos.checker import check_table
from coordinator.config import CoordinatorConfig
from coordinator.protocol import compaction_plan
from coordinator.protocol.locking import held, table_lock
from coordinator.services import data_compaction
from coordinator.services.steps import clean, compact_data, recover_table
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.conftest import tandem
from timeline.crash_points import SimulatedCrash, simulate
from timeline.format import avro_metadata
from timeline.format.data_logs import parse_data_log
from timeline.format.fs_view import list_table_files
from timeline.format.instant import Instant, State
from timeline.mdt.reader import MetadataReader
from timeline.query.reader import read_plan, read_view
from timeline.query.scan import plan_scan
from timeline.table import Table

MOR = "MERGE_ON_READ"
CONFIG = CoordinatorConfig(lock_uri="memory", auto_archive=False)


def new_table(tmp_path, precombine: str | None = "ts") -> Table:
    return Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field=precombine, table_type=MOR)


def batch(ids: list[int], values: list[int], ts: list[int]) -> pa.Table:
    return pa.table({"id": ids, "p": [f"p{i % 3}" for i in ids], "v": values, "ts": ts})


def snapshot(table: Table, as_of: str | None = None) -> dict[int, tuple[int, int]]:
    table = Table.open(table.uri)
    return {r["id"]: (r["v"], r["ts"]) for r in read_view(table, table.view(as_of=as_of)).to_pylist()}


def hudi_rs_snapshot(table: Table) -> dict[int, tuple[int, int]]:
    """The table as hudi-rs (the `hudi` package, an independent reader) reads it."""
    import hudi

    batches = hudi.HudiTable(table.uri).read()
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return {r["id"]: (r["v"], r["ts"]) for r in rows}


def logs_of(table: Table) -> list[str]:
    return sorted(e.path for e in list_table_files(table.storage) if parse_data_log(*e.path.rpartition("/")[::2]))


class Model:
    """What a merge-on-read table holds, written plainly: a later write of a key replaces it (OverwriteWithLatest
    against what is stored), a delete removes it."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, int]] = {}
        self.history: list[tuple[str, dict[int, tuple[int, int]]]] = []

    def upsert(self, ids, values, ts) -> None:
        for i, v, t in zip(ids, values, ts, strict=True):
            self.rows[i] = (v, t)

    def delete(self, ids) -> None:
        for i in ids:
            self.rows.pop(i, None)

    def mark(self, instant: str) -> None:
        self.history.append((instant, dict(self.rows)))


@pytest.mark.parametrize("seed", range(4))
def test_random_writes_and_compactions_read_as_the_model(tmp_path, seed):
    rng = random.Random(seed)
    table = new_table(tmp_path)
    small = 0 if seed % 2 else WriteOptions().small_file_limit  # logs only, or small groups rewritten too
    writer = LocalWriter(table, WriteOptions(small_file_limit=small), CONFIG)
    model = Model()
    ids = list(range(30))
    result = writer.write(batch(ids, ids, [1] * 30), "insert")
    model.upsert(ids, ids, [1] * 30)
    model.mark(result.instant)
    lock = table_lock(table, CONFIG)
    for step in range(14):
        keys = rng.sample(range(40), rng.randint(1, 8))
        kind = rng.random()
        if kind < 0.25:
            result = writer.write(batch(keys, [0] * len(keys), [0] * len(keys)), "delete")
            model.delete(keys)
        else:
            values = [rng.randrange(1000) for _ in keys]
            ts = [step + 2] * len(keys)
            result = writer.write(batch(keys, values, ts), "upsert")
            model.upsert(keys, values, ts)
        model.mark(result.instant)
        if rng.random() < 0.2:
            compact_data(table, CONFIG, lock, force=True)
        assert snapshot(table) == model.rows, f"step {step}"
        # hudi-rs merges by the largest precombine value, Java and Tandem by log order: they agree here because
        # every write's ts is larger than the last (deletes carry the natural ordering)
        assert hudi_rs_snapshot(table) == model.rows, f"hudi-rs, step {step}"
    assert logs_of(table), "the history wrote log files"
    for instant, rows in model.history:
        assert snapshot(table, instant) == rows, f"as of {instant}"
    plan = plan_scan(Table.open(table.uri), "v >= 500")
    assert {r["id"] for r in read_plan(plan).to_pylist()} == {i for i, (v, _) in model.rows.items() if v >= 500}
    duckdb = pytest.importorskip("duckdb")
    from coordinator.duckdb.view import select_sql

    connection = duckdb.connect()
    plan = plan_scan(Table.open(table.uri))
    got = connection.sql(select_sql(connection, plan)).to_arrow_table().to_pylist()
    assert {r["id"]: (r["v"], r["ts"]) for r in got} == model.rows


def test_updates_go_to_logs_named_for_their_slice_and_a_compaction_folds_them(tmp_path):
    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 2, 3], [1, 2, 3], [1, 1, 1]), "insert")
    first = writer.write(batch([1], [10], [2]), "upsert")
    second = writer.write(batch([1], [11], [3]), "upsert")
    (log1,), (log2,) = first.files_written, second.files_written
    name1, name2 = parse_data_log(*log1.split("/")), parse_data_log(*log2.split("/"))
    assert (name1.file_id, name1.base_instant, name1.log.version) == (name2.file_id, name2.base_instant, 1)
    assert name2.log.version == 2
    stat = second.metadata.write_stats()[0]
    assert stat.delta.log_files == (name1.name, name2.name) and stat.prev_commit == name1.base_instant
    assert table.timeline().find(second.instant).action == "deltacommit"
    with held(table_lock(table, CONFIG)):
        time = compaction_plan.schedule(table, force=True)
    assert time is not None
    staged = data_compaction.execute(table, time)
    again = data_compaction.execute(table, time)  # a retry (or a second worker) adds nothing
    assert [s.path for s in again.stats] == [s.path for s in staged.stats]
    with held(table_lock(table, CONFIG)):
        assert data_compaction.complete(table, staged, CONFIG.max_delta_commits)
        assert not data_compaction.complete(table, again, CONFIG.max_delta_commits)
    assert snapshot(table) == {1: (11, 3), 2: (2, 1), 3: (3, 1)}
    metadata = table.timeline().commit_metadata(table.timeline().find(time))
    assert metadata.compacted and metadata.operation_type == "COMPACT"


def test_a_write_during_a_pending_compaction_extends_the_slice_it_starts(tmp_path):
    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 4, 2], [1, 4, 2], [1, 1, 1]), "insert")  # 1 and 4 share a group, 2 has its own
    writer.write(batch([1], [10], [2]), "upsert")
    with held(table_lock(table, CONFIG)):
        time = compaction_plan.schedule(table, force=True)
    during = writer.write(batch([1, 4, 2], [20, 40, 21], [3, 3, 3]), "upsert")
    slices = sorted(parse_data_log(*p.split("/")).base_instant for p in during.files_written)
    assert slices[1] == time and slices[0] < time, "only the planned group's log starts the new slice"
    assert snapshot(table) == {1: (20, 3), 4: (40, 3), 2: (21, 3)}, "the planned slice and the new one read together"
    staged = data_compaction.execute(table, time)
    assert snapshot(table) == {1: (20, 3), 4: (40, 3), 2: (21, 3)}, "a pending compaction's base file is not read"
    later = writer.write(batch([4], [44], [4]), "upsert")  # began before C completes, commits before: no conflict
    with held(table_lock(table, CONFIG)):
        assert data_compaction.complete(table, staged, CONFIG.max_delta_commits)
    assert parse_data_log(*later.files_written[0].split("/")).base_instant == time
    assert snapshot(table) == {1: (20, 3), 4: (44, 4), 2: (21, 3)}


def test_hudi_rs_limit_hides_logs_written_after_a_compaction_was_scheduled(tmp_path):
    """hudi-rs 0.5 attaches a log only to a slice whose base instant equals the log's: the logs of the slice a
    pending compaction starts have no base file yet, and it leaves them out (a stale answer, no error) until
    the compaction completes. Tandem and Java merge them over the compacted slice."""
    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 4], [1, 4], [1, 1]), "insert")
    writer.write(batch([1], [10], [2]), "upsert")
    assert hudi_rs_snapshot(table) == snapshot(table)
    with held(table_lock(table, CONFIG)):
        time = compaction_plan.schedule(table, force=True)
    writer.write(batch([4], [40], [3]), "upsert")
    assert snapshot(table) == {1: (10, 2), 4: (40, 3)}
    assert hudi_rs_snapshot(table) == {1: (10, 2), 4: (4, 1)}, "hudi-rs's known limit"
    assert check_table(Table.open(table.uri), "id", use_hudi=True) == [], "the checker knows the limit"
    staged = data_compaction.execute(table, time)
    with held(table_lock(table, CONFIG)):
        data_compaction.complete(table, staged, CONFIG.max_delta_commits)
    assert hudi_rs_snapshot(table) == snapshot(table) == {1: (10, 2), 4: (40, 3)}


def test_a_pending_write_holds_a_compaction_back_until_the_table_is_overdue(tmp_path):
    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1], [1], [1]), "insert")
    writer.write(batch([1], [2], [2]), "upsert")
    with pytest.raises(SimulatedCrash), simulate("commit.write.file"):
        writer.write(batch([1], [3], [3]), "upsert")  # pending: three delta commits so far
    with held(table_lock(table, CONFIG)):
        assert compaction_plan.schedule(table, 3) is None, "due, but a write is in flight"
        assert compaction_plan.schedule(table, 1) is not None, "twice past due: planned all the same"
    assert snapshot(table) == {1: (2, 2)}, "the failed write's log is never read"


def test_a_failed_delta_commit_is_rolled_back_by_a_command_block_after_its_log(tmp_path):
    """Hudi's rollback of a log: the failed log stays (its name must not be freed for the next writer while
    another undoer may still act on it) and a new log in its slice holds a command block naming the instant."""
    from timeline.hudi_log import read_blocks, rollback_target

    table = new_table(tmp_path)
    config = CoordinatorConfig(lock_uri="memory", auto_archive=False, failed_writes_policy="EAGER")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), config)
    writer.write(batch([1, 2], [1, 2], [1, 1]), "insert")
    kept = writer.write(batch([1], [5], [2]), "upsert").files_written
    with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
        writer.write(batch([2], [6], [3]), "upsert")
    (failed,) = sorted(set(logs_of(table)) - set(kept))
    failed_instant = read_blocks(table.storage.read_bytes(failed))[0].header["INSTANT_TIME"]
    recover_table(table, config, table_lock(table, config))
    (command,) = sorted(set(logs_of(table)) - set(kept) - {failed})
    assert parse_data_log(*command.split("/")).log.version == parse_data_log(*failed.split("/")).log.version + 1
    (block,) = read_blocks(table.storage.read_bytes(command))
    assert rollback_target(block) == failed_instant
    assert snapshot(table) == {1: (5, 2), 2: (2, 1)}
    table = Table.open(table.uri)
    listed = {f"{p}/{n}" for p, n, _ in MetadataReader(table.metadata(), table.timeline()).listed_logs()}
    assert command in listed and failed not in listed, "the MDT lists the command log, not the failed one"


def test_a_log_name_taken_again_after_an_undo_is_never_deleted_by_a_second_undoer(tmp_path):
    """Found by the merge-on-read nemesis: two undoers of one failed instant (its paused writer and recovery)
    both proved its log; one deleted it, the next writer of the slice took the freed name, and the other
    deleted that writer's committed log. Now no undo deletes a log, and a rollback planned on the failed log
    finds the name holding another instant's blocks and leaves it."""
    from coordinator.protocol import rollback as rollback_protocol
    from timeline.format import action_metadata, avro_metadata
    from timeline.format.instant import ROLLBACK, Instant, State
    from timeline.hudi_log import read_blocks

    table = new_table(tmp_path)
    config = CoordinatorConfig(lock_uri="memory", auto_archive=False, failed_writes_policy="EAGER")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), config)
    writer.write(batch([1, 2], [1, 2], [1, 1]), "insert")
    with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
        writer.write(batch([1], [6], [3]), "upsert")
    (failed,) = logs_of(table)
    victim = read_blocks(table.storage.read_bytes(failed))[0].header["INSTANT_TIME"]
    plan = action_metadata.rollback_plan(victim, "deltacommit", {}, {failed.split("/")[0]: [failed]})
    table.storage.delete(failed)  # the other undoer took the failed log away (as undoers once did)
    taken = writer.write(batch([1], [7], [4]), "upsert").files_written  # its begin rolls the victim back
    assert taken == [failed], "the next writer took the freed name"
    stale = Instant(table.new_instant_time(table.timeline()), ROLLBACK, State.REQUESTED)
    table.timeline().create_requested(stale, avro_metadata.encode("HoodieRollbackPlan", plan))
    with pytest.warns(Warning, match=f"no log of instant {victim}"):
        rollback_protocol.resume(table, stale)  # the second undoer acts on its plan now
    assert table.storage.exists(failed)
    assert snapshot(table) == {1: (7, 4), 2: (2, 1)}


def test_a_rollback_leaves_a_log_whose_blocks_another_instant_wrote(tmp_path):
    """A marker is no proof: a crafted marker naming a committed log of another instant deletes nothing."""
    from coordinator.protocol import provenance

    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1], [1], [1]), "insert")
    (log,) = writer.write(batch([1], [2], [2]), "upsert").files_written
    assert provenance.undoable(table.timeline(), "29990101000000000", [log]) == [], "no undo deletes a log"
    assert provenance.logs_written_by(table.storage, "29990101000000000", [log]) == [], "its blocks say whose"
    assert table.storage.exists(log)


def test_a_log_landing_after_its_instant_was_rolled_back_gets_a_command_block_from_its_writer(tmp_path):
    """A writer paused past its rollback: another process rolled T back before T's log landed, so T is gone from
    the timeline when its writer aborts, and only that writer knows the log; it plans a rollback of its own for
    it (without one, Java counts the log's blocks once the instants around T are archived)."""
    from coordinator.protocol import rollback as rollback_protocol
    from timeline.errors import FencedError
    from timeline.format.instant import ROLLBACK
    from timeline.hudi_log import read_blocks, rollback_target

    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 2], [1, 2], [1, 1]), "insert")

    def rolled_back_meanwhile(time: str) -> None:
        assert rollback_protocol.rollback(Table.open(table.uri), table.timeline().find(time)) is not None

    with pytest.raises(FencedError, match="another process rolled it back"):  # key 3 starts a group: a base file
        writer.write(batch([1, 3], [9, 9], [5, 5]), "upsert", on_begin=rolled_back_meanwhile)
    late, command = logs_of(table)  # one group: the late log, then the command log after it
    victim = read_blocks(table.storage.read_bytes(late))[0].header["INSTANT_TIME"]
    (block,) = read_blocks(table.storage.read_bytes(command))
    assert rollback_target(block) == victim
    table = Table.open(table.uri)
    rollbacks = [i for i in table.timeline().completed() if i.action == ROLLBACK]
    assert [table.timeline().rollback_target(r)["commitTime"] for r in rollbacks] == [victim, victim]
    assert not table.timeline().pending() and table.timeline().find(victim) is None
    listed = {f"{p}/{n}" for p, n, _ in MetadataReader(table.metadata(), table.timeline()).listed_logs()}
    assert command in listed and late not in listed
    stray = [e.path for e in list_table_files(table.storage) if e.path.endswith(f"_{victim}.parquet")]
    assert stray == [], "the late base file is deleted (named with the rolled-back instant)"
    assert snapshot(table) == {1: (1, 1), 2: (2, 1)}
    writer.write(batch([1], [7], [6]), "upsert")
    assert snapshot(table) == {1: (7, 6), 2: (2, 1)}


def test_clean_takes_superseded_slices_with_their_logs_and_nothing_a_read_needs(tmp_path):
    table = new_table(tmp_path)
    config = CoordinatorConfig(lock_uri="memory", auto_archive=False, clean_policy="KEEP_LATEST_FILE_VERSIONS")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), config)
    writer.write(batch([1, 2, 3], [1, 2, 3], [1, 1, 1]), "insert")
    writer.write(batch([1, 2], [10, 20], [2, 2]), "upsert")
    old_logs = logs_of(table)
    compact_data(table, config, table_lock(table, config), force=True)
    writer.write(batch([3], [30], [3]), "upsert")
    before = snapshot(table)
    assert clean(table, config, table_lock(table, config)) is not None
    assert not any(table.storage.exists(p) for p in old_logs), "the compacted slices' logs are gone"
    assert len(logs_of(table)) == 1, "the latest slice's log stays"
    assert snapshot(table) == before == {1: (10, 2), 2: (20, 2), 3: (30, 3)}


def test_init_makes_a_merge_on_read_table_that_java_can_merge(tmp_path):
    path = str(tmp_path / "cli")
    done = tandem("init", path, "--name", "c", "--record-key", "id", "--table-type", "merge_on_read")
    assert done.returncode == 0, done.stderr
    table = Table.open(path)
    assert table.config.merge_on_read
    # Java's log scanner loads the payload class named here (without it, a NullPointerException)
    assert table.storage.read_bytes(".hoodie/hoodie.properties").count(b"OverwriteWithLatestAvroPayload") == 1


def test_a_compaction_completing_mid_write_conflicts_only_with_logs_of_the_slice_it_supersedes(tmp_path):
    """A write that extends the slice a compaction starts commits after it; one still on the compacted slice
    (a view from before the plan) would lose its log and is refused."""
    from timeline.errors import ConflictError

    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 4], [1, 4], [1, 1]), "insert")
    writer.write(batch([1], [10], [2]), "upsert")
    with held(table_lock(table, CONFIG)):
        time = compaction_plan.schedule(table, force=True)
    staged = data_compaction.execute(table, time)

    def complete_compaction(_instant: str) -> None:
        with held(table_lock(table, CONFIG)):
            assert data_compaction.complete(table, staged, CONFIG.max_delta_commits)

    writer.write(batch([4], [40], [3]), "upsert", on_begin=complete_compaction)
    assert snapshot(table) == {1: (10, 2), 4: (40, 3)}

    writer.write(batch([1], [11], [4]), "upsert")
    stale_view = table.view()  # a writer's view from before compaction D was planned
    with held(table_lock(table, CONFIG)):
        second = compaction_plan.schedule(table, force=True)
    staged = data_compaction.execute(table, second)
    stale = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    planned = stale.view_and_schema
    stale.view_and_schema = lambda operation, begun: (stale_view, planned(operation, begun)[1])  # type: ignore
    with pytest.raises(ConflictError, match=second):
        stale.write(batch([1], [12], [5]), "upsert", on_begin=complete_compaction)
    assert snapshot(table) == {1: (11, 4), 4: (40, 3)}
    assert not data_compaction.pending(table)


def _stale_writer(table: Table, view) -> LocalWriter:
    """A writer whose view was read before the latest compaction plan (it planned on the old slices)."""
    stale = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    planned = stale.view_and_schema
    stale.view_and_schema = lambda operation, begun: (view, planned(operation, begun)[1])  # type: ignore
    return stale


def _write_without_a_valid_lock(monkeypatch, table: Table, view, rows: pa.Table) -> None:
    """An upsert by a stale writer that lost its lock: it planned on `view` and checks no conflict."""
    import coordinator.protocol.conflicts as conflicts

    with monkeypatch.context() as patched:
        patched.setattr(conflicts, "check", lambda *args, **kwargs: None)
        _stale_writer(table, view).write(rows, "upsert")


def _planned_after_a_view(tmp_path):
    """A table whose group of keys 1 and 4 has a log, a view read before compaction C was planned, and C."""
    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 4], [1, 4], [1, 1]), "insert")
    writer.write(batch([1], [10], [2]), "upsert")
    before_plan = table.view()
    with held(table_lock(table, CONFIG)):
        time = compaction_plan.schedule(table, force=True)
    return table, before_plan, time


def test_a_write_to_a_slice_a_pending_compaction_folds_conflicts_with_the_plan(tmp_path):
    from timeline.errors import ConflictError

    table, before_plan, time = _planned_after_a_view(tmp_path)
    with pytest.raises(ConflictError, match=f"pending compaction {time}"):
        _stale_writer(table, before_plan).write(batch([4], [40], [3]), "upsert")
    staged = data_compaction.execute(table, time)
    with held(table_lock(table, CONFIG)):
        assert data_compaction.complete(table, staged, CONFIG.max_delta_commits)
    assert snapshot(table) == {1: (10, 2), 4: (4, 1)}


def test_a_compaction_that_would_bury_a_committed_log_is_abandoned(tmp_path, monkeypatch):
    """The storage-side check: a writer that committed past the conflict check (no valid lock) into a planned
    slice makes the compaction give up, never lose the write; the next compaction folds it."""
    from timeline.errors import ConflictError

    table, before_plan, time = _planned_after_a_view(tmp_path)
    staged = data_compaction.execute(table, time)
    _write_without_a_valid_lock(monkeypatch, table, before_plan, batch([4], [40], [3]))
    with held(table_lock(table, CONFIG)), pytest.raises(ConflictError, match=f"compaction {time} abandoned"):
        data_compaction.complete(table, staged, CONFIG.max_delta_commits)
    assert table.timeline().find(time) is None and not any(table.storage.exists(s.path) for s in staged.stats)
    assert snapshot(table) == {1: (10, 2), 4: (40, 3)}
    compact_data(table, CONFIG, table_lock(table, CONFIG), force=True)
    assert snapshot(table) == {1: (10, 2), 4: (40, 3)} and not table.timeline().pending()


def test_a_writer_plans_a_due_compaction_and_a_worker_executes_it_while_writes_go_on(tmp_path):
    from dataclasses import replace

    from coordinator.services.worker import run_worker

    table = new_table(tmp_path)
    config = replace(CONFIG, schedule_compaction=True, compaction_delta_commits=2)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), config)
    writer.write(batch([1, 4], [1, 4], [1, 1]), "insert")
    assert not data_compaction.pending(table), "one delta commit since the start: not due"
    writer.write(batch([4], [40], [3]), "upsert")
    (planned,) = data_compaction.pending(table)
    during = writer.write(batch([1], [11], [4]), "upsert")  # the plan stands; this log starts its slice
    assert parse_data_log(*during.files_written[0].split("/")).base_instant == planned
    lines: list[str] = []
    run_worker(Table.open(table.uri), "compact", config, 0, 1, lines.append)
    assert f"compacted data {planned}" in lines[0]
    assert snapshot(table) == {1: (11, 4), 4: (40, 3)}
    assert not data_compaction.pending(table)


def test_a_temp_file_a_killed_log_write_left_in_the_metadata_table_is_no_log(tmp_path):
    """Found by the nemesis: a process killed inside create-if-absent leaves `<log name>.<uuid>.tmp`; Hudi's
    log-name pattern matches its start, so it was listed as a log and a compaction planned it."""
    import uuid

    from coordinator.services.steps import compact
    from timeline.mdt.file_slices import list_file_groups

    table = new_table(tmp_path)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 4], [1, 4], [1, 1]), "insert")
    writer.write(batch([1], [10], [2]), "upsert")
    mdt = table.metadata().storage
    log = next(e.path for e in mdt.list_files("files") if ".log." in e.path)
    mdt.write_bytes(f"{log}.{uuid.uuid4().hex}.tmp", mdt.read_bytes(log)[:40])
    listed = [g.path for group in list_file_groups(mdt, "files") for s in group.slices.values() for g in s.logs]
    assert listed and not any(path.endswith(".tmp") for path in listed)
    report = compact(table, CONFIG, table_lock(table, CONFIG), force=True)
    assert report.compacted and report.data_compacted
    assert snapshot(table) == {1: (10, 2), 4: (4, 1)}


def test_a_slice_with_a_write_in_flight_is_not_planned(tmp_path):
    """A compaction merges completed blocks only: a slice holding a log of a write not decided yet (here one that
    died before its commit) is left out of the plan, or that write could commit into a folded slice. (A storage
    listing shows such a log; the metadata table lists no file of an instant that has not completed.)"""
    table = Table.create(
        str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type=MOR, with_metadata=False
    )
    config = CoordinatorConfig(
        lock_uri="memory", auto_archive=False, failed_writes_policy="LAZY", metadata_enabled=False
    )
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), config)
    writer.write(batch([1, 2], [1, 2], [1, 1]), "insert")  # keys 1 and 2 in groups of their own partitions
    writer.write(batch([2], [20], [2]), "upsert")
    with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
        writer.write(batch([1], [10], [3]), "upsert")
    with held(table_lock(table, config)):
        time = compaction_plan.schedule(table, force=True)
    operations = avro_metadata.compaction_operations(
        table.timeline().avro(Instant(time, "compaction", State.REQUESTED))
    )
    assert [op.partition for op in operations] == ["p2"], "only the slice whose writers are all decided"


def test_a_compaction_whose_new_slice_was_extended_stays_pending_rather_than_lose_a_write(tmp_path, monkeypatch):
    """Neither completing (it would hide a log committed to the folded slice by a writer without a valid lock)
    nor abandoning (it would orphan the logs named for it) loses a write: the compaction stays pending."""
    from timeline.errors import ConflictError

    table, before_plan, time = _planned_after_a_view(tmp_path)
    staged = data_compaction.execute(table, time)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1], [11], [3]), "upsert")  # extends the slice C starts
    _write_without_a_valid_lock(monkeypatch, table, before_plan, batch([4], [40], [4]))
    with held(table_lock(table, CONFIG)), pytest.raises(ConflictError, match=f"compaction {time} cannot complete"):
        data_compaction.complete(table, staged, CONFIG.max_delta_commits)
    assert data_compaction.pending(table) == [time]
    assert snapshot(table) == {1: (11, 3), 4: (40, 4)}
