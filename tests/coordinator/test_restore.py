"""Restore to a savepoint (Hudi's `restore`): the table reads as the savepointed instant did, in both tables, and
writes go on from there; a restore crashed at any step reads as its savepoint until recovery finishes it.

Oracle: a model of the table after every write of random histories (upserts, deletes, inserts of new keys,
insert_overwrite, cleans, archival), kept at each savepoint; after the restore the table must read as the
model at the savepoint, later savepoints gone, and the chaos checker's invariants hold.
"""

from __future__ import annotations

import random

import pytest

from chaos.checker import check_table
from coordinator.protocol import compaction_plan, restore, savepoint
from coordinator.protocol.locking import held, table_lock
from coordinator.services import data_compaction
from coordinator.services.steps import archive_table, clean, compact_data, recover_table
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.conftest import tandem
from tests.coordinator.test_savepoints import AGGRESSIVE as CONFIG
from tests.coordinator.test_savepoints import batch, rows_at
from timeline.crash_points import SimulatedCrash, simulate
from timeline.errors import BadInputError, ConflictError
from timeline.format import outcome
from timeline.format.data_logs import parse_data_log
from timeline.format.instant import State
from timeline.hudi_log import BlockType, log_file_name, read_blocks
from timeline.table import Table


def _expected(model: dict[int, int]) -> dict[str, dict]:
    return {str(k): {"id": k, "p": f"p{k % 3}", "v": v, "ts": v} for k, v in model.items()}


def random_history(table: Table, rng: random.Random, steps: int, model: dict, kept: dict) -> None:
    """Random writes applied to `model`; a write killed after its metadata-table commit and rolled back (its
    logs stay, given command blocks); on merge-on-read tables compactions too, some left pending (planned
    only); a savepoint of a random write is kept with the model at it."""
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    lock = table_lock(table, CONFIG)
    for _ in range(steps):
        version = max(model.values(), default=0) + 1
        ops = ["upsert", "upsert", "delete", "insert", "insert_overwrite", "killed"]
        op = rng.choice(ops + ["compact", "plan"] if table.config.merge_on_read else ops)
        if op == "killed":
            with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
                writer.write(batch(rng.sample(range(12), 2), version), "upsert")
            recover_table(table, CONFIG, lock)
            writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
            continue
        if op == "compact":
            compact_data(table, CONFIG, lock, force=True)
            continue
        if op == "plan":  # a compaction planned and left pending: the writes after it begin its slices
            with held(lock):
                compaction_plan.schedule(table, force=True)
            continue
        ids = rng.sample(range(12), rng.randint(1, 4)) if op != "insert" else [100 + version]
        try:
            result = writer.write(batch(ids, version), op)
        except ConflictError:  # an insert_overwrite of groups a pending compaction folds: refused, as it must be
            assert op == "insert_overwrite" and data_compaction.pending(table)
            continue
        if op == "insert_overwrite":  # replaces the partitions written to (an unpartitioned table: all of it)
            partitioned = bool(table.config.partition_fields)
            for key in [k for k in model if not partitioned or k % 3 in {i % 3 for i in ids}]:
                del model[key]
        for i in ids:
            if op == "delete":
                model.pop(i, None)
            else:
                model[i] = version
        if rng.random() < 0.3:
            try:
                savepoint.create(table, result.instant)
                kept[result.instant] = dict(model)
            except ConflictError:  # an instant at or before it still pending (a planned compaction)
                pass
        clean(table, CONFIG)
        archive_table(table, CONFIG, lock)


@pytest.mark.parametrize(  # merge-on-read seeds whose restores delete slices and write command blocks
    ("table_type", "seed", "partitioned"),
    [("COPY_ON_WRITE", 1, True), ("COPY_ON_WRITE", 2, True), ("COPY_ON_WRITE", 3, False), ("MERGE_ON_READ", 5, True),
     ("MERGE_ON_READ", 8, True), ("MERGE_ON_READ", 10, True), ("MERGE_ON_READ", 8, False)])  # fmt: skip
def test_a_restored_table_reads_as_its_savepoint_and_writes_go_on(tmp_path, seed, table_type, partitioned):
    rng = random.Random(seed)
    fields = ["p"] if partitioned else []
    table = Table.create(str(tmp_path / "t"), "t", ["id"], fields, precombine_field="ts", table_type=table_type)
    model: dict[int, int] = {}
    kept: dict[str, dict[int, int]] = {}
    LocalWriter(table, coordinator=CONFIG).write(batch([0, 1, 2], 1), "insert")
    model.update({0: 1, 1: 1, 2: 1})
    random_history(table, rng, 14, model, kept)
    assert kept, "the seed savepoints something"
    target = rng.choice(sorted(kept))
    for later in [t for t in kept if t > target]:
        savepoint.delete(table, later)
    restore.restore(table, target)
    model = dict(kept[target])
    assert rows_at(table.uri) == model
    assert [i.time for i in table.timeline().completed_writes()][-1] == target
    assert check_table(table, "id", _expected(model), use_hudi=False) == []
    later: dict[str, dict[int, int]] = {}
    random_history(table, rng, 6, model, later)
    assert rows_at(table.uri) == model
    assert check_table(table, "id", _expected(model), use_hudi=False) == []
    older = [t for t in kept if t < target]
    if older:  # a second restore, past the first one's savepoint: its victims' blocks are long undone
        for newer in sorted({target, *later}):
            savepoint.delete(table, newer)
        restore.restore(table, older[-1])
        assert rows_at(table.uri) == kept[older[-1]]
        assert check_table(table, "id", _expected(kept[older[-1]]), use_hudi=False) == []


POINTS = ["restore.planned", "restore.inflight", "restore.commands", "mdt.deltacommit.log", "restore.mdt",
          "restore.instant", "restore.complete"]  # fmt: skip


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("point", POINTS)
def test_a_restore_crashed_anywhere_reads_as_its_savepoint_and_recovery_finishes_it(tmp_path, point, table_type):
    if point == "restore.commands" and table_type == "COPY_ON_WRITE":
        pytest.skip("a copy-on-write restore writes no command block")
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type=table_type)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    first = writer.write(batch([1, 2, 3], 1), "insert").instant
    kept = writer.write(batch([1], 2), "upsert").instant
    savepoint.create(table, kept)
    writer.write(batch([2, 4], 3), "upsert")
    writer.write(batch([3], 4), "delete")
    if table.config.merge_on_read:  # a compaction's slice, and logs in it, to remove too
        assert compact_data(table, CONFIG, table_lock(table, CONFIG), force=True)
        writer.write(batch([1, 5], 5), "upsert")
    with pytest.raises(SimulatedCrash), simulate(point):
        restore.restore(table, kept)
    at_savepoint = {1: 2, 2: 1, 3: 1}
    assert rows_at(table.uri) == at_savepoint  # before recovery too
    if point != "restore.complete":  # no savepoint while a restore is pending
        with pytest.raises(ConflictError, match="restore"):
            savepoint.create(table, first)
    report = recover_table(table, CONFIG, table_lock(table, CONFIG))
    assert report.resumed_restores or point == "restore.complete"
    assert rows_at(table.uri) == at_savepoint and not table.timeline().pending()
    assert check_table(table, "id", _expected(at_savepoint), use_hudi=False) == []
    commands = [p for p in _files(table) if ".log." in p and _is_command_log(table, p)]
    assert len(commands) == (2 if table.config.merge_on_read else 0)  # one per kept slice and instant: never twice


def _files(table: Table) -> list[str]:
    return [e.path for e in table.storage.list_files("", recursive=True) if not e.path.startswith(".hoodie")]


def _is_command_log(table: Table, path: str) -> bool:
    return any(b.kind is BlockType.COMMAND_BLOCK for b in read_blocks(table.storage.read_bytes(path)))


def test_a_restore_that_would_lose_a_kept_instants_blocks_is_refused(tmp_path):
    """A log in a slice begun after the savepoint holding a block of an instant it keeps (a Java writer whose
    logs went to a compaction's slice planned after it began) is never deleted: the restore is refused."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type="MERGE_ON_READ")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 2], 1), "insert")
    kept = writer.write(batch([1], 2), "upsert").instant
    savepoint.create(table, kept)
    compacted = compact_data(table, CONFIG, table_lock(table, CONFIG), force=True)[0]
    log = next(p for p in _files(table) if ".log." in p and not _is_command_log(table, p))
    partition, _, name = log.rpartition("/")
    moved = parse_data_log(partition, name)
    stray = f"{partition}/{log_file_name(moved.file_id, compacted, 1, '1-0-1')}"
    table.storage.write_bytes(stray, table.storage.read_bytes(log))  # the kept upsert's block, in slice C
    before = sorted(_files(table))
    with pytest.raises(BadInputError, match="would lose them"):
        restore.restore(table, kept)
    assert sorted(_files(table)) == before and not table.timeline().pending()


def test_what_cannot_be_restored_is_refused(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table, coordinator=CONFIG)
    first = writer.write(batch([1], 1), "insert").instant
    second = writer.write(batch([1], 2), "upsert").instant
    with pytest.raises(BadInputError, match="not a savepoint"):
        restore.restore(table, first)
    savepoint.create(table, first)
    savepoint.create(table, second)
    with pytest.raises(BadInputError, match="delete them first"):
        restore.restore(table, first)
    refused = tandem("restore", table.uri, "--to", "20200101000000000")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert tandem("restore", table.uri, "--to", second).returncode == 0


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_writer_that_completes_after_a_restore_removed_its_instant_counts_for_nothing(tmp_path, table_type):
    """A writer claims its commit decision, loses its lock, and a restore removes its instant; when it wakes it
    writes its completed file as it would (it holds the decision's payload). The timeline drops the instant
    (a completed restore's plan names it) and recovery deletes what it left."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type=table_type)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(batch([1, 2, 3], 1), "insert")
    kept = writer.write(batch([1], 2), "upsert").instant
    savepoint.create(table, kept)
    with pytest.raises(SimulatedCrash), simulate("commit.decided"):
        writer.write(batch([2, 4], 3), "upsert")
    (zombie,) = [i for i in table.timeline().pending() if i.time > kept]
    payload = outcome.read(table.storage, zombie.time).payload
    restore.restore(table, kept)
    table.timeline().complete_decided(zombie, payload)  # the writer wakes
    assert table.storage.exists(f".hoodie/{zombie.with_state(State.COMPLETED).file_name}")
    assert table.timeline().find(zombie.time) is None
    at_savepoint = {1: 2, 2: 1, 3: 1}
    assert rows_at(table.uri) == at_savepoint
    report = recover_table(table, CONFIG, table_lock(table, CONFIG))
    assert f".hoodie/{zombie.with_state(State.COMPLETED).file_name}" in report.stray_files
    assert not [e for e in table.storage.list_dir(".hoodie") if e.base_name.startswith(zombie.time)]
    assert rows_at(table.uri) == at_savepoint
    assert check_table(table, "id", _expected(at_savepoint), use_hudi=False) == []
