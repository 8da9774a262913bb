"""The metadata table: MDT listing == storage listing filtered by the data timeline, whatever happens."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.config import CoordinatorConfig
from coordinator.mdt import compaction, deltacommit
from coordinator.mdt.bootstrap import initialize, validate
from coordinator.protocol.recovery import recover
from coordinator.services.steps import clean
from coordinator.write.writer import LocalWriter
from tests.conftest import FIXTURE_NAMES, hudi_read, rows_by_key, tandem, unzip_fixture
from timeline.crash_points import SimulatedCrash, simulate
from timeline.errors import BadInputError, TandemError
from timeline.mdt import layout
from timeline.mdt.reader import MetadataReader
from timeline.query.reader import read_view
from timeline.table import Table

CITIES = ["ams", "ber", "lis"]
WRITE_CRASHES = [
    "commit.begin.requested",
    "commit.begin.inflight",
    "commit.write.marker",
    "commit.write.file",
    "commit.finalize",
    "mdt.deltacommit.requested",
    "mdt.deltacommit.inflight",
    "mdt.deltacommit.log",
    "mdt.deltacommit.complete",
    "commit.complete",
    "commit.cleanup",
]
SERVICE_CRASHES = [
    "clean.planned",
    "clean.inflight",
    "clean.files",
    "clean.mdt",
    "rollback.planned",
    "rollback.files",
    "rollback.mdt",
    "rollback.mdt.mirror",
    "rollback.instant",
    "mdt.rollback.logs",
    "mdt.rollback.instant",
    "mdt.compaction.sealed",
    "mdt.compaction.planned",
    "mdt.compaction.inflight",
    "mdt.compaction.base",
]


SINGLE_WRITER = CoordinatorConfig(failed_writes_policy="EAGER")  # in-process crashes: the "dead" writer's pid lives


def rows(ids: list[int], version: int) -> pa.Table:
    return pa.table({"id": ids, "city": [CITIES[i % 3] for i in ids], "v": [version] * len(ids)})


def assert_consistent(table: Table) -> list[dict]:
    """Invariants 1-3: MDT == filtered storage, every reader agrees, nothing pending."""
    data_timeline = table.timeline()
    mdt = table.metadata()
    report = validate(mdt, data_timeline)
    assert report.errors == 0, report.to_json()
    assert report.corrupt_blocks == []
    assert data_timeline.pending() == []
    assert layout.pending_compactions(mdt.timeline()) == []
    assert_partition_lookups_agree(MetadataReader(mdt, data_timeline))
    from_mdt = rows_by_key(read_view(table, table.metadata_view()), ["id"])
    assert from_mdt == rows_by_key(read_view(table, table.storage_view()), ["id"])
    assert from_mdt == rows_by_key(hudi_read(table.uri), ["id"])
    return from_mdt


def assert_partition_lookups_agree(reader: MetadataReader) -> None:
    """Lookups of one, two and all partitions (each twice: the second reuses the kept rows of the first)
    list exactly the whole listing's files of those partitions."""
    whole = reader.listing().to_pylist()
    partitions = sorted({r["partition"] for r in whole}) + ["absent"]
    for asked in [[p] for p in partitions] + [partitions[:2], partitions[-3:], partitions]:
        expected = sorted((r for r in whole if r["partition"] in asked), key=str)
        for _ in range(2):
            assert sorted(reader.listing(asked).to_pylist(), key=str) == expected, asked


def model_check(seen: list[dict], model: dict[int, int]) -> None:
    assert {r["id"]: r["v"] for r in seen} == model


op = st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 6)),
    st.tuples(st.just("upsert"), st.integers(1, 6)),
    st.tuples(st.just("delete"), st.integers(1, 3)),
    st.tuples(st.just("overwrite"), st.sampled_from(CITIES)),
    st.tuples(st.just("clean"), st.sampled_from(["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"])),
    st.tuples(st.just("crash"), st.sampled_from(WRITE_CRASHES)),
    st.tuples(st.just("service-crash"), st.sampled_from(SERVICE_CRASHES)),
)


@pytest.mark.parametrize("hudi_format", [False, True], ids=["tandem-format", "hudi-format"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(op, min_size=1, max_size=7), st.randoms(use_true_random=False))
def test_any_sequence_keeps_mdt_equal_to_storage(tmp_path_factory, hudi_format, ops, rnd):
    base = str(tmp_path_factory.mktemp("seq") / "t")
    table = Table.create(base, "t", ["id"], ["city"], hive_style=True, hudi_format=hudi_format)
    assert table.metadata().is_hudi_format() == hudi_format
    config = CoordinatorConfig(max_delta_commits=3, failed_writes_policy="EAGER")
    writer = LocalWriter(table, coordinator=config)
    model: dict[int, int] = {}
    next_id = 0
    for version, (kind, arg) in enumerate(ops, start=1):
        if kind == "insert":
            ids = list(range(next_id, next_id + arg))
            next_id += arg
            writer.write(rows(ids, version), "insert")
            model.update(dict.fromkeys(ids, version))
        elif kind == "upsert":
            ids = rnd.sample(range(next_id + arg), arg)
            next_id = max(next_id, max(ids) + 1)
            writer.write(rows(ids, version), "upsert")
            model.update(dict.fromkeys(ids, version))
        elif kind == "delete" and model:
            ids = rnd.sample(sorted(model), min(arg, len(model)))
            writer.write(rows(ids, version), "delete")
            for i in ids:
                model.pop(i)
        elif kind == "overwrite":
            ids = [i for i in range(next_id, next_id + 6) if CITIES[i % 3] == arg]
            next_id += 6
            writer.write(rows(ids, version), "insert_overwrite")
            model = {k: v for k, v in model.items() if CITIES[k % 3] != arg}
            model.update(dict.fromkeys(ids, version))
        elif kind == "clean":
            clean(
                table,
                CoordinatorConfig(
                    clean_policy=arg, commits_retained=1, max_delta_commits=3, failed_writes_policy="EAGER"
                ),
            )
        elif kind == "crash":
            ids = list(range(next_id, next_id + 2))
            next_id += 2
            with pytest.raises(SimulatedCrash), simulate(arg):
                writer.write(rows(ids, version), "insert")
            if table.timeline().find(table.timeline().last_time()).is_completed:
                model.update(dict.fromkeys(ids, version))
            recover(table, writer.coordinator)
        elif kind == "service-crash":
            _crash_a_service(table, writer, arg, version)
            model[10_000 + version] = version
            recover(table, writer.coordinator)
        model_check(assert_consistent(table), model)


def _crash_a_service(table: Table, writer: LocalWriter, point: str, version: int) -> None:
    """Drive the service that owns `point` into a simulated crash there (if it reaches it)."""
    writer.write(rows([10_000 + version], version), "upsert")
    writer.write(rows([10_000 + version], version), "upsert")
    try:
        with simulate(point):
            if point.startswith("clean."):
                clean(table, CoordinatorConfig(clean_policy="KEEP_LATEST_FILE_VERSIONS", failed_writes_policy="EAGER"))
            elif point.startswith("mdt.compaction."):
                mdt = table.metadata()
                scheduled = compaction.schedule(mdt, table.timeline())
                if scheduled:
                    compaction.execute(mdt, table.timeline(), scheduled)
            else:
                with pytest.raises(SimulatedCrash), simulate("mdt.deltacommit.log"):
                    writer.write(rows([20_000 + version], version), "insert")
                recover(table, writer.coordinator)
    except SimulatedCrash:
        pass


def _input(tmp_path: Path, name: str, ids: list[int], version: int) -> str:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(rows(ids, version), path)
    return str(path)


@pytest.mark.parametrize(
    "point",
    ["mdt.deltacommit.complete", "mdt.deltacommit.log", "mdt.deltacommit.inflight", "commit.finalize"],
    ids=["mdt-done-data-not", "mdt-log-written", "mdt-inflight", "before-mdt"],
)
def test_killed_write_is_invisible_and_the_next_write_repairs(tmp_path, point):
    base = str(tmp_path / "t")
    assert tandem("init", base, "--name", "t", "--record-key", "id", "--partition-by", "city").returncode == 0
    assert (
        tandem("write", base, "--input", _input(tmp_path, "a", [1, 2, 3], 1), "--operation", "insert").returncode == 0
    )
    crashed = tandem(
        "write", base, "--input", _input(tmp_path, "b", [3, 4], 2), "--operation", "upsert", crash_at=point
    )
    assert crashed.returncode == 137, crashed.stderr
    table = Table.open(base)
    assert table.timeline().pending(), "the killed write left its instant pending"
    visible = {r["id"]: r["v"] for r in read_view(table, table.metadata_view()).to_pylist()}
    assert visible == {1: 1, 2: 1, 3: 1}
    assert {r["id"]: r["v"] for r in hudi_read(base).to_pylist()} == visible
    again = tandem("write", base, "--input", _input(tmp_path, "c", [5], 3), "--operation", "insert")
    assert again.returncode == 0, again.stderr
    model_check(assert_consistent(Table.open(base)), {1: 1, 2: 1, 3: 1, 5: 3})


@pytest.mark.parametrize("point", ["mdt.compaction.sealed", "mdt.compaction.planned", "mdt.compaction.base"])
def test_killed_compaction_is_retried_by_the_next_write(tmp_path, point):
    base = str(tmp_path / "t")
    assert tandem("init", base, "--name", "t", "--record-key", "id").returncode == 0
    for i in range(3):
        assert (
            tandem("write", base, "--input", _input(tmp_path, str(i), [i], i), "--operation", "insert").returncode == 0
        )
    crashed = tandem("compact", base, crash_at=point)
    assert crashed.returncode == 137, crashed.stderr
    table = Table.open(base)
    assert {r["id"] for r in read_view(table, table.metadata_view()).to_pylist()} == {0, 1, 2}
    if point == "mdt.compaction.base":  # the new base file is written, the compaction not completed
        (pending,) = [
            i.time for i in table.metadata().timeline().instants if i.action == "compaction" and not i.is_completed
        ]
        assert any(f"_{pending}." in name for name in os.listdir(f"{base}/.hoodie/metadata/files"))
    again = tandem("write", base, "--input", _input(tmp_path, "x", [9], 9), "--operation", "insert")
    assert again.returncode == 0, again.stderr
    table = Table.open(base)
    completed = [i for i in layout.compactions(table.metadata().timeline()) if i.is_completed]
    assert len(completed) == 1
    model_check(assert_consistent(table), {0: 0, 1: 1, 2: 2, 9: 9})


def test_compaction_and_mdt_clean_keep_reads_correct(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], hudi_format=False)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(max_delta_commits=2, failed_writes_policy="EAGER"))
    for i in range(14):
        writer.write(rows([i, i + 100], i), "upsert")
    mdt = table.metadata()
    done = [i for i in layout.compactions(mdt.timeline()) if i.is_completed]
    assert len(done) >= 4
    assert len(mdt.slices()) <= compaction.DEFAULT_SLICES_RETAINED + 1
    model_check(assert_consistent(table), {**{i: i for i in range(14)}, **{i + 100: i for i in range(14)}})


def test_a_writer_never_appends_to_a_sealed_slice(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], hudi_format=False)
    writer = LocalWriter(table, coordinator=SINGLE_WRITER)
    writer.write(rows([1], 1), "insert")
    mdt = table.metadata()
    # A stale writer claimed version 2 of the slice just before the seal.
    stale = layout.log_path(layout.INITIAL_SLICE, 2)
    from timeline.mdt.log import DATA, LogBlock, encode_log

    mdt.storage.create_if_absent(stale, encode_log([LogBlock("20990101000000000", DATA, [])]))
    with simulate("mdt.compaction.sealed"), pytest.raises(SimulatedCrash):
        compaction.schedule(mdt, table.timeline())
    assert mdt.is_seal(layout.INITIAL_SLICE, 3)
    with pytest.raises(TandemError, match="sealed but its compaction is not planned"):
        deltacommit.apply(mdt, "20990101000000001", [])
    planned = compaction.schedule(mdt, table.timeline())
    plan = compaction.read_plan(mdt, planned)
    assert stale in plan["log_files"] and plan["sealed_version"] == 3


def test_a_second_scheduler_with_a_stale_view_never_plans_a_sealed_slice_again(tmp_path, monkeypatch):
    """Seen in the S3 nemesis: a scheduler read the MDT timeline before another compaction of the same slice was
    planned, sealed the slice one version above that compaction's seal and planned from the old base; once that
    base was the newest, the commits the other compaction's new slice gathered vanished from the MDT."""
    from coordinator.protocol.locking import table_lock
    from coordinator.services.steps import compact

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], hudi_format=False)
    config = dataclasses.replace(SINGLE_WRITER, max_delta_commits=100)  # compaction only when asked
    writer = LocalWriter(table, coordinator=config)
    model = {}
    for i in range(3):
        writer.write(rows([i], i), "upsert")
        model[i] = i
    mdt = table.metadata()
    stale = mdt.timeline()  # the second scheduler's view, read before the first one planned
    compact(table, config, table_lock(table, config), force=True)  # the first: sealed, planned, done
    for i in range(3, 6):  # in the first compaction's new slice
        writer.write(rows([i], i), "upsert")
        model[i] = i

    monkeypatch.setattr(mdt, "timeline", lambda: stale)
    monkeypatch.setattr(compaction, "plan_orphan_seal", lambda mdt, timeline=None: None)  # checked before the seal
    assert compaction.schedule(mdt, table.timeline()) is None  # its seal lies above the first's: it stands down
    monkeypatch.undo()

    assert len(layout.compactions(table.metadata().timeline())) == 1
    compact(table, config, table_lock(table, config), force=True)  # and the next compaction loses nothing
    model_check(assert_consistent(Table.open(table.uri)), model)


def test_many_partitions_in_one_read(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], hive_style=True, hudi_format=False)
    LocalWriter(table, coordinator=SINGLE_WRITER).write(rows(list(range(9)), 1), "insert")
    reader = MetadataReader(table.metadata(), table.timeline())
    before = reader.mdt.read_log
    calls = []
    reader.mdt.read_log = lambda path: calls.append(path) or before(path)
    listing = reader.listing(["city=ams", "city=lis"])
    assert sorted(set(listing.column("partition").to_pylist())) == ["city=ams", "city=lis"]
    assert len(calls) == 1, "one pass over the logs, whatever the number of partitions"
    assert reader.all_partitions() == ["city=ams", "city=ber", "city=lis"]


def test_corrupt_log_block_is_skipped_and_reported(tmp_path):
    # one block per log: the middle is its
    table = Table.create(str(tmp_path / "t"), "t", ["id"], indexes=(), hudi_format=False)
    writer = LocalWriter(table, coordinator=SINGLE_WRITER)
    writer.write(rows([1], 1), "insert")
    writer.write(rows([2], 2), "insert")
    mdt = table.metadata()
    victim = mdt.storage.full(layout.log_path(layout.INITIAL_SLICE, 2))
    data = bytearray(Path(victim).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(victim).write_bytes(bytes(data))
    report = validate(mdt, table.timeline())
    assert report.corrupt_blocks and "CRC32" in report.corrupt_blocks[0]
    assert len(report.missing_in_metadata) == 1
    result = tandem("metadata", "validate", table.uri)
    assert result.returncode == 1 and "missing_in_metadata" in result.stdout


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_gets_a_metadata_table_and_stays_consistent(tmp_path, name):
    base = unzip_fixture(name, tmp_path)
    created = tandem("metadata", "create", str(base))
    assert created.returncode == 0, created.stderr
    table = Table.open(str(base))
    report = validate(table.metadata(), table.timeline())
    assert report.errors == 0, report.to_json()
    before = rows_by_key(read_view(table, table.metadata_view()), table.config.record_key_fields)
    assert before == rows_by_key(hudi_read(base), table.config.record_key_fields)
    assert MetadataReader(table.metadata(), table.timeline()).all_partitions() == table.storage_view().partitions() or (
        not before
    )


def test_initialize_refuses_pending_instants(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], with_metadata=False)
    (Path(table.uri) / ".hoodie" / "20990101000000000.commit.requested").write_bytes(b"")
    with pytest.raises(BadInputError, match="instants are pending: 20990101000000000.commit"):
        initialize(table.metadata(), "t", table.timeline())
    assert not table.metadata().exists()


def test_a_lookup_before_the_base_is_kept_reads_only_its_row_groups_and_answers_as_the_whole(tmp_path, monkeypatch):
    """The first lookup after a compaction reads the row groups whose key range can hold the partition asked
    for, not the whole new base file; the answer is the whole listing's rows of that partition."""
    from timeline.mdt import table as mdt_table

    monkeypatch.setattr(deltacommit, "BASE_ROW_GROUP", 4)
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], hudi_format=False)
    parts = [f"p{i:02d}" for i in range(30)]
    LocalWriter(table).write(pa.table({"id": list(range(60)), "p": parts * 2, "v": list(range(60))}), "insert")
    mdt = table.metadata()
    compaction.execute(mdt, table.timeline(), compaction.schedule(mdt, table.timeline()))
    whole = MetadataReader(mdt, table.timeline()).listing().to_pylist()
    base = mdt.slices()[layout.latest_completed_compaction(mdt.timeline())].base_file
    with mdt.storage.open_input(base) as handle:
        groups = pq.ParquetFile(handle).num_row_groups
    assert groups >= 8
    read = []
    original = pq.ParquetFile.read_row_group

    def counted(self, i, *args, **kwargs):
        read.append(i)
        return original(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    for asked in (["p07"], ["p00", "p29"], ["absent"], parts):
        for cache in (mdt_table._BASE_CACHE, mdt_table._ROW_GROUPS, mdt_table._FOOTERS, mdt_table._KEYED_ROWS):
            cache.clear()
        read.clear()
        found = MetadataReader(mdt, table.timeline()).listing(asked).to_pylist()
        assert sorted(found, key=str) == sorted((r for r in whole if r["partition"] in asked), key=str)
        assert len(read) <= max(2 * len(asked), 1) < groups or asked == parts


def test_a_lookup_hides_files_whose_instant_the_data_timeline_does_not_hold_completed(tmp_path):
    """Compacted base rows carry no instant of their own: only the instant in each file's name keeps
    the files of an instant that is not completed (rolled back, or torn from the timeline) out."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], hudi_format=False)
    writer = LocalWriter(table)
    writer.write(pa.table({"id": [1, 2], "p": ["a", "b"], "v": [1, 1]}), "insert")
    writer.write(pa.table({"id": [3], "p": ["a"], "v": [2]}), "insert")
    mdt = table.metadata()
    compaction.execute(mdt, table.timeline(), compaction.schedule(mdt, table.timeline()))
    timeline = table.timeline()
    second = timeline.completed_writes()[-1].time
    without = dataclasses.replace(timeline, instants=[i for i in timeline.instants if i.time != second])
    for asked in (None, ["a"]):
        kept = MetadataReader(mdt, timeline).listing(asked).column("file").to_pylist()
        assert any(second in name for name in kept)
        shown = MetadataReader(mdt, without).listing(asked).column("file").to_pylist()
        assert shown == [name for name in kept if second not in name] and shown
