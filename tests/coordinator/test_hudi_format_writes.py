"""Tandem's writers on a metadata table in Hudi's format: the defences the protocol's other layers mask, each
exercised on its own (a seal with no plan, a claimed log version, damage to a file a completed instant wrote),
the initialization and repair that rebuild it, and the migration of an MDT in Tandem's previous format."""

from __future__ import annotations

import os
import random
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.mdt import compaction, hudi_deltacommit
from coordinator.mdt.bootstrap import repair, validate
from coordinator.write.writer import LocalWriter
from tests.conftest import hudi_read, tandem
from timeline.crash_points import SimulatedCrash, simulate
from timeline.errors import ConflictError, MetadataFallbackWarning, TandemError
from timeline.format import properties
from timeline.format.instant import CLOCK
from timeline.format.table_config import METADATA_FORMAT
from timeline.hudi_log import log_file_name
from timeline.mdt import file_group_writes as writes
from timeline.mdt.file_slices import list_file_groups
from timeline.mdt.health import MetadataUnhealthyError
from timeline.mdt.hudi_layout import FILES, compaction_instant
from timeline.mdt.slice_records import forget_files
from timeline.query.reader import read_view
from timeline.table import Table


def rows(ids: list[int], version: int) -> pa.Table:
    return pa.table({"id": ids, "part": [f"p{i % 3}" for i in ids], "v": [version] * len(ids)})


@pytest.fixture
def table(tmp_path) -> Table:
    created = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"], hudi_format=True)
    writer = LocalWriter(created, coordinator=CoordinatorConfig(lock_uri="memory"))
    writer.write(rows(list(range(9)), 0), "insert")
    writer.write(rows([1, 2, 10], 1), "upsert")
    return Table.open(created.uri)


def _records(table: Table) -> list[dict]:
    return [{"key": "p0", "type": 2, "filesystemMetadata": {}}]


def test_a_seal_without_its_plan_refuses_the_next_delta_commit(table):
    """A scheduler that sealed the `files` group and died before its plan: a delta commit must not land above
    the seal (the slice would be compacted without it, or never again); the plan written from the seals frees
    the writers, whose logs then go to the planned slice."""
    mdt = table.metadata()
    timeline = mdt.timeline()
    (group,) = list_file_groups(mdt.storage, FILES)
    current = max(group.slices)
    latest = max(i.time for i in timeline.completed() if i.action == "deltacommit")
    writes.write_seals(mdt.storage, compaction_instant(latest), latest, [group], {group.file_id: current})
    with pytest.raises(TandemError, match="sealed for compaction .* not planned"):
        hudi_deltacommit.apply(mdt, CLOCK.next_after(timeline.last_time()), _records(table))
    assert compaction.plan_orphan_seal(mdt) == compaction_instant(latest)
    LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory")).write(rows([3], 2), "upsert")
    (group,) = list_file_groups(mdt.storage, FILES)
    assert any(log for log in group.slices[compaction_instant(latest)].logs)
    assert validate(mdt, table.timeline()).errors == 0


def test_a_claimed_log_version_aborts_the_commit(table, monkeypatch):
    """The storage fence: another writer claims the next log version of `files` after this commit listed the
    file groups (a lock that failed); this commit aborts and its rows never show."""
    mdt = table.metadata()
    listed = hudi_deltacommit.list_file_groups
    claims = []

    def listing_then_a_claim(storage, partition):
        groups = listed(storage, partition)
        if partition == FILES and not claims:
            claims.append(partition)
            (group,) = groups
            current = group.slices[max(group.slices)]
            version = current.max_version + 1
            taken = f"{FILES}/{log_file_name(group.file_id, current.base_instant, version, writes.TOKEN)}"
            storage.create_if_absent(taken, b"another writer's log")
        return groups

    monkeypatch.setattr(hudi_deltacommit, "list_file_groups", listing_then_a_claim)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory", failed_writes_policy="EAGER"))
    with pytest.raises(ConflictError, match="claimed by another writer"):
        writer.write(rows([4, 40], 3), "upsert")
    monkeypatch.undo()
    assert table.timeline().pending() == [] and len(table.timeline().completed()) == 2
    assert 40 not in set(read_view(table, table.storage_view()).column("id").to_pylist())
    assert not [i for i in mdt.timeline().pending() if i.action == "deltacommit"]


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_damage_to_a_completed_log_refuses_writers_and_repair_restores(table, damage):
    mdt = table.metadata()
    (group,) = list_file_groups(mdt.storage, FILES)
    newest = group.slices[max(group.slices)].logs[-1]
    path = os.path.join(mdt.storage.base_uri, newest.path)
    if damage == "truncate":
        with open(path, "r+b") as handle:
            handle.truncate(newest.size // 2)
    else:
        os.remove(path)
    forget_files()
    table = Table.open(table.uri)
    with pytest.raises(MetadataUnhealthyError, match="metadata table unhealthy"):
        table.check_writable()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        view = table.view()
    assert view.source == "storage" and any(issubclass(w.category, MetadataFallbackWarning) for w in caught)
    repair(mdt, table.config.name, table.timeline())
    table = Table.open(table.uri)
    assert table.metadata().is_hudi_format() and validate(table.metadata(), table.timeline()).errors == 0
    LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory")).write(rows([5], 4), "upsert")
    assert validate(table.metadata(), table.timeline()).errors == 0


def _legacy_table(tmp_path, keep: bool = False) -> Table:
    """A table with an MDT in Tandem's previous format, made as before Hudi's became the default (no record of
    the format), or one that asked to keep it (`keep`)."""
    created = Table.create(str(tmp_path / "old"), "t", ["id"], ["part"], hudi_format=False)
    writer = LocalWriter(created, coordinator=CoordinatorConfig(lock_uri="memory"))
    writer.write(rows(list(range(12)), 0), "insert")
    writer.write(rows([1, 2, 20], 1), "upsert")
    if not keep:
        path = tmp_path / "old" / ".hoodie" / "hoodie.properties"
        props = properties.loads(path.read_text())
        del props[METADATA_FORMAT]
        path.write_bytes(properties.dumps(props).encode())
    return Table.open(created.uri)


def _state(table: Table) -> dict:
    return {r["id"]: r["v"] for r in hudi_read(table.uri).to_pylist()}


def test_the_next_write_migrates_a_previous_format_mdt_and_says_so(tmp_path):
    table = _legacy_table(tmp_path)
    before = _state(table)
    assert not table.metadata().is_hudi_format()
    done = tandem("write", table.uri, "--input", _batch_file(tmp_path, rows([3, 30], 2)), "--operation", "upsert")
    assert done.returncode == 0, done.stderr
    (line,) = [m for m in done.stderr.splitlines() if "rebuilding the metadata table in Hudi's format" in m]
    assert "bloom_filters, column_stats" in line
    table = Table.open(table.uri)
    assert table.metadata().is_hudi_format() and sorted(table.config.java_metadata_partitions) == [
        "bloom_filters",
        "column_stats",
        "files",
    ]
    assert _state(table) == {**before, 3: 2, 30: 2}
    assert validate(table.metadata(), table.timeline()).errors == 0
    assert table.view().source == "metadata"
    again = tandem("write", table.uri, "--input", _batch_file(tmp_path, rows([4], 3)), "--operation", "upsert")
    assert again.returncode == 0 and "rebuilding" not in again.stderr


def test_a_crash_part_way_through_migration_loses_nothing_and_the_next_write_finishes_it(tmp_path):
    table = _legacy_table(tmp_path)
    before = _state(table)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory"))
    with pytest.raises(SimulatedCrash), simulate("mdt.initialize.partition"):
        writer.write(rows([5], 2), "upsert")
    table = Table.open(table.uri)
    assert _state(table) == before
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MetadataFallbackWarning)
        assert table.view().source == "storage"  # a half-built MDT is never read
    LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory")).write(rows([5], 2), "upsert")
    table = Table.open(table.uri)
    assert table.metadata().is_hudi_format() and table.view().source == "metadata"
    assert _state(table) == {**before, 5: 2}
    assert validate(table.metadata(), table.timeline()).errors == 0


def test_repair_migrates_and_a_table_that_asked_for_the_previous_format_keeps_it(tmp_path):
    legacy = _legacy_table(tmp_path / "a")
    repair(legacy.metadata(), legacy.config.name, legacy.timeline())
    assert Table.open(legacy.uri).metadata().is_hudi_format()
    kept = _legacy_table(tmp_path / "b", keep=True)
    LocalWriter(kept, coordinator=CoordinatorConfig(lock_uri="memory")).write(rows([6], 2), "upsert")
    repair(kept.metadata(), kept.config.name, kept.timeline())
    kept = Table.open(kept.uri)
    assert not kept.metadata().is_hudi_format() and kept.config.keeps_tandem_format
    assert validate(kept.metadata(), kept.timeline()).errors == 0


def _batch_file(tmp_path, batch: pa.Table) -> str:
    path = tmp_path / f"batch-{len(list(tmp_path.glob('batch-*')))}.parquet"
    pq.write_table(batch, path)
    return str(path)


def _damaged(data: bytes, damage: str, rng) -> bytes:
    if damage == "truncated":
        return data[: rng.randrange(len(data))]
    if damage == "junk":
        return rng.randbytes(len(data))
    flipped = bytearray(data)  # the footer: its length, then the thrift bytes before it
    for _ in range(4):
        flipped[rng.randrange(max(len(data) - 200, 0), len(data) - 4)] ^= 0xFF
    return bytes(flipped)


@pytest.mark.parametrize("damage", ["truncated", "junk", "footer flipped"])
def test_an_unreadable_data_file_refuses_an_index_build_and_a_write_and_changes_nothing(tmp_path, damage):
    """A data file that cannot be read: building an index over it, or an upsert that must rewrite it, stops with
    an error naming the file (exit 2); the table's properties and its MDT are as they were, still read from."""
    created = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"], hudi_format=True, indexes=())
    LocalWriter(created, coordinator=CoordinatorConfig(lock_uri="memory")).write(rows(list(range(9)), 0), "insert")
    table = Table.open(created.uri)
    victim = next(f for f in table.view().latest_base_files() if f.partition == "p1")
    data = table.storage.read_bytes(victim.path)
    table.storage.write_bytes(victim.path, _damaged(data, damage, random.Random(damage)))
    properties_before = table.storage.read_bytes(".hoodie/hoodie.properties")
    built = tandem("metadata", "create", table.uri, "--index", "files,column_stats,bloom_filters")
    assert built.returncode == 2, built.stderr
    assert victim.name in built.stderr and "nothing was changed" in built.stderr
    assert table.storage.read_bytes(".hoodie/hoodie.properties") == properties_before
    upsert = tandem("write", table.uri, "--input", _batch_file(tmp_path, rows([1, 4], 1)), "--operation", "upsert")
    assert upsert.returncode == 2 and victim.name in upsert.stderr, upsert.stderr
    table = Table.open(table.uri)
    assert table.view().source == "metadata"
    report = validate(table.metadata(), table.timeline())
    assert not report.missing_in_metadata and not report.extra_in_metadata  # a truncated file differs in size only
