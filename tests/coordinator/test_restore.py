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
from coordinator.protocol import restore, savepoint
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import archive_table, clean, recover_table
from coordinator.write.writer import LocalWriter
from tests.conftest import tandem
from tests.coordinator.test_savepoints import AGGRESSIVE as CONFIG
from tests.coordinator.test_savepoints import batch, rows_at
from timeline.crash_points import SimulatedCrash, simulate
from timeline.errors import BadInputError, ConflictError
from timeline.table import Table


def _expected(model: dict[int, int]) -> dict[str, dict]:
    return {str(k): {"id": k, "p": f"p{k % 3}", "v": v, "ts": v} for k, v in model.items()}


def _history(table: Table, rng: random.Random, steps: int, model: dict, kept: dict) -> None:
    writer = LocalWriter(table, coordinator=CONFIG)
    for _ in range(steps):
        version = max(model.values(), default=0) + 1
        op = rng.choice(["upsert", "upsert", "delete", "insert", "insert_overwrite"])
        ids = rng.sample(range(12), rng.randint(1, 4)) if op != "insert" else [100 + version]
        result = writer.write(batch(ids, version), op)
        if op == "insert_overwrite":
            for key in [k for k in model if f"p{k % 3}" in {f"p{i % 3}" for i in ids}]:
                del model[key]
        for i in ids:
            if op == "delete":
                model.pop(i, None)
            else:
                model[i] = version
        if rng.random() < 0.3:
            savepoint.create(table, result.instant)
            kept[result.instant] = dict(model)
        clean(table, CONFIG)
        archive_table(table, CONFIG, table_lock(table, CONFIG))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_restored_table_reads_as_its_savepoint_and_writes_go_on(tmp_path, seed):
    rng = random.Random(seed)
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts")
    model: dict[int, int] = {}
    kept: dict[str, dict[int, int]] = {}
    LocalWriter(table, coordinator=CONFIG).write(batch([0, 1, 2], 1), "insert")
    model.update({0: 1, 1: 1, 2: 1})
    _history(table, rng, 10, model, kept)
    if not kept:
        return
    target = rng.choice(sorted(kept))
    for later in [t for t in kept if t > target]:
        savepoint.delete(table, later)
    restore.restore(table, target)
    model = dict(kept[target])
    assert rows_at(table.uri) == model
    assert [i.time for i in table.timeline().completed_writes()][-1] == target
    _history(table, rng, 4, model, {})
    assert rows_at(table.uri) == model
    assert check_table(table, "id", _expected(model), use_hudi=False) == []


POINTS = ["restore.planned", "restore.inflight", "mdt.deltacommit.log", "restore.mdt", "restore.instant",
          "restore.complete"]  # fmt: skip


@pytest.mark.parametrize("point", POINTS)
def test_a_restore_crashed_anywhere_reads_as_its_savepoint_and_recovery_finishes_it(tmp_path, point):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts")
    writer = LocalWriter(table, coordinator=CONFIG)
    first = writer.write(batch([1, 2, 3], 1), "insert").instant
    kept = writer.write(batch([1], 2), "upsert").instant
    savepoint.create(table, kept)
    writer.write(batch([2, 4], 3), "upsert")
    writer.write(batch([3], 4), "delete")
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
    mor = Table.create(str(tmp_path / "m"), "m", ["id"], ["p"], table_type="MERGE_ON_READ")
    kept = LocalWriter(mor, coordinator=CONFIG).write(batch([1], 1), "insert").instant
    savepoint.create(mor, kept)
    with pytest.raises(BadInputError, match="merge-on-read"):
        restore.restore(mor, kept)
    refused = tandem("restore", table.uri, "--to", "20200101000000000")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert tandem("restore", table.uri, "--to", second).returncode == 0
