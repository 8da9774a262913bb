"""Savepoints (Hudi's `savepoint` action): clean never deletes a file a savepoint names, archival never passes the
first savepoint, and a savepointed instant reads as it did when it was written.

Oracle: a model of the table after every write of random histories (inserts, upserts, deletes) on both table
types, with the most aggressive clean (one file version kept) and archival after every few commits; each
savepoint's instant must read, by time travel, as the model's snapshot of that instant, however much was cleaned
and archived since, until the savepoint is deleted (then clean takes its files).
"""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

from chaos.checker import check_table
from coordinator.config import CoordinatorConfig
from coordinator.protocol import savepoint
from coordinator.protocol.heartbeat import heartbeat_path
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import archive_table, clean, recover_table
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.conftest import tandem
from timeline.crash_points import SimulatedCrash, simulate
from timeline.errors import BadInputError, ConflictError
from timeline.format.savepoint_metadata import savepointed_names
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

AGGRESSIVE = CoordinatorConfig(  # one file version kept, archival after a few commits
    lock_uri="memory",
    clean_policy="KEEP_LATEST_FILE_VERSIONS",
    file_versions_retained=1,
    commits_retained=1,
    archive_min_commits=2,
    archive_max_commits=4,
    failed_writes_policy="EAGER",
)


def batch(ids: list[int], version: int) -> pa.Table:
    return pa.table({"id": ids, "p": [f"p{i % 3}" for i in ids], "v": [version] * len(ids), "ts": [version] * len(ids)})


def rows_at(path: str, as_of: str | None = None) -> dict[int, int]:
    rows = read_plan(plan_scan(Table.open(path), as_of=as_of))
    found = [(r["id"], r["v"]) for r in rows.select(["id", "v"]).to_pylist()] if rows.num_rows else []
    assert len({i for i, _ in found}) == len(found), "a key read twice"
    return dict(found)


def _files_exist(table: Table, names: frozenset[str]) -> bool:
    present = {name for _, _, files in os.walk(table.storage.root) for name in files}
    return names <= present


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_savepointed_instant_reads_as_written_through_clean_and_archival(tmp_path, table_type, seed):
    rng = random.Random(seed)
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type=table_type)
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), AGGRESSIVE)
    model: dict[int, int] = {}
    kept: dict[str, dict[int, int]] = {}  # savepoint -> the model at its instant
    for version in range(1, 19):
        op = rng.choice(["insert", "upsert", "upsert", "delete"])
        ids = rng.sample(range(12), rng.randint(1, 5))
        if op == "insert":  # keys never written before: an insert of a stored key keeps both copies (Hudi's)
            ids = [100 + version]
        result = writer.write(batch(ids, version), op)
        for i in ids:
            if op == "delete":
                model.pop(i, None)
            else:
                model[i] = version
        if rng.random() < 0.25:
            savepoint.create(table, result.instant, "tester", f"after {version}")
            kept[result.instant] = dict(model)
        if kept and rng.random() < 0.15:
            gone = rng.choice(sorted(kept))
            savepoint.delete(table, gone)
            del kept[gone]
        clean(table, AGGRESSIVE)
        archive_table(table, AGGRESSIVE, table_lock(table, AGGRESSIVE))
        timeline = table.timeline()
        assert _files_exist(table, savepointed_names(timeline))
        for time, rows in kept.items():
            assert rows_at(table.uri, as_of=time) == rows, (version, time)
        if kept:
            assert timeline.earliest_time() <= min(kept), "archival passed a savepoint"
        assert rows_at(table.uri) == model
    assert [s.time for s in savepoint.listed(table)] == sorted(kept)
    assert check_table(table, "id", {str(k): {"id": k, "p": f"p{k % 3}", "v": v, "ts": v} for k, v in model.items()},
                       use_hudi=False) == []  # fmt: skip


def test_deleting_a_savepoint_lets_clean_take_its_files(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table, coordinator=AGGRESSIVE)
    first = writer.write(batch([1, 2], 1), "insert").instant
    made = savepoint.create(table, first)
    writer.write(batch([1, 2], 2), "upsert")
    clean(table, AGGRESSIVE)
    assert _files_exist(table, made.names) and rows_at(table.uri, as_of=first) == {1: 1, 2: 1}
    savepoint.delete(table, first)
    clean(table, AGGRESSIVE)
    assert not _files_exist(table, made.names)
    assert rows_at(table.uri) == {1: 2, 2: 2}


def test_what_cannot_be_savepointed_is_refused(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table, coordinator=AGGRESSIVE)
    first = writer.write(batch([1], 1), "insert").instant
    with pytest.raises(BadInputError, match="not a completed commit"):
        savepoint.create(table, "20200101000000000")
    savepoint.create(table, first)
    with pytest.raises(BadInputError, match="already savepointed"):
        savepoint.create(table, first)
    second = writer.write(batch([1], 2), "upsert").instant
    writer.write(batch([1], 3), "upsert")
    clean(table, AGGRESSIVE)  # keeps one version: the second's file may be gone
    with pytest.raises(BadInputError, match="kept only the latest file versions"):
        savepoint.create(table, second)
    with pytest.raises(BadInputError, match="no savepoint"):
        savepoint.delete(table, second)
    refused = tandem("savepoint", "create", table.uri, "--instant", "not-a-time")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1


def test_a_savepoint_waits_for_a_pending_clean(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table, coordinator=AGGRESSIVE)
    first = writer.write(batch([1], 1), "insert").instant
    writer.write(batch([1], 2), "upsert")
    with pytest.raises(SimulatedCrash), simulate("clean.planned"):
        clean(table, AGGRESSIVE)
    with pytest.raises(ConflictError, match="clean"):
        savepoint.create(table, first)


def test_a_savepoint_left_unfinished_is_dropped_by_recovery(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    first = LocalWriter(table, coordinator=AGGRESSIVE).write(batch([1], 1), "insert").instant
    with pytest.raises(SimulatedCrash), simulate("savepoint.inflight"):
        savepoint.create(table, first)
    assert [i.action for i in table.timeline().pending()] == ["savepoint"]
    alive = recover_table(table, AGGRESSIVE, table_lock(table, AGGRESSIVE))
    assert not alive.dropped_savepoints, "its creator's heartbeat is fresh: it may still complete it"
    beat = table.storage.full(heartbeat_path(first))
    os.utime(beat, (os.path.getmtime(beat) - 3600,) * 2)
    report = recover_table(table, AGGRESSIVE, table_lock(table, AGGRESSIVE))
    assert report.dropped_savepoints == [first] and not table.timeline().pending()
    assert savepoint.create(table, first).time == first


def test_the_command_line(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    first = LocalWriter(table, coordinator=AGGRESSIVE).write(batch([1, 2], 1), "insert").instant
    made = tandem("savepoint", "create", table.uri, "--user", "me", "--comments", "known good")
    assert made.returncode == 0 and first in made.stdout, made.stderr
    listed = tandem("savepoint", "list", table.uri, "--json")
    assert '"by": "me"' in listed.stdout and first in listed.stdout
    assert tandem("savepoint", "delete", table.uri, "--instant", first).returncode == 0
    assert "no savepoints" in tandem("savepoint", "list", table.uri).stdout


def test_a_clean_planned_before_a_savepoint_keeps_its_files(tmp_path):
    """Java makes savepoints without waiting for a pending clean: the clean checks the savepoints again when it
    deletes, so a plan made before one never takes its files."""
    from timeline.format.instant import SAVEPOINT, Instant, State
    from timeline.format.savepoint_metadata import encode

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    writer = LocalWriter(table, coordinator=AGGRESSIVE)
    first = writer.write(batch([1, 2], 1), "insert").instant
    writer.write(batch([1, 2], 2), "upsert")
    with pytest.raises(SimulatedCrash), simulate("clean.planned"):
        clean(table, AGGRESSIVE)
    names = [f.name for f in table.view(as_of=first).latest_base_files()]
    timeline = table.timeline()  # Java's savepoint, written as its SavepointActionExecutor does
    table.storage.write_bytes(timeline.path(Instant(first, SAVEPOINT, State.INFLIGHT)), b"")
    table.storage.write_bytes(
        timeline.path(Instant(first, SAVEPOINT, State.COMPLETED)), encode("java", 0, "", {"p1": names, "p2": []})
    )
    with pytest.warns(Warning, match="a savepoint keeps them"):
        recover_table(table, AGGRESSIVE, table_lock(table, AGGRESSIVE))
    assert _files_exist(table, frozenset(names)) and rows_at(table.uri, as_of=first) == {1: 1, 2: 1}
