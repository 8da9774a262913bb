"""A damaged metadata table never serves stale rows: readers list storage and say so, writers refuse, repair rebuilds.
These tables keep Tandem's previous format (Hudi's has its own damage tests: `test_tandem_lists_java_mdt.py`,
`test_hudi_format_writes.py`).

Each corruption is applied to a copy of a table built by an insert and three
upserts (each upsert in its own file group, so losing any MDT log loses a row
version). The `hudi` package lists storage itself, so it is the reference for
the committed rows.
"""

from __future__ import annotations

import hashlib
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.mdt import compaction
from coordinator.mdt.bootstrap import initialize, validate
from coordinator.protocol.recovery import recover
from coordinator.services.steps import clean
from coordinator.write.writer import LocalWriter
from tests.conftest import hudi_read, rows_by_key, tandem, unzip_fixture
from timeline.crash_points import SimulatedCrash, simulate
from timeline.format import properties
from timeline.mdt import layout
from timeline.mdt.log import DATA, MAGIC, LogBlock, encode_log
from timeline.query.reader import read_view
from timeline.table import Table

INSERT = {"id": [1, 2, 3, 4], "city": ["a", "a", "b", "c"], "v": [1, 1, 1, 1]}
UPSERTS = [  # one file group each: losing any one MDT log loses exactly one row version
    {"id": [3], "city": ["b"], "v": [2]},
    {"id": [4], "city": ["c"], "v": [3]},
    {"id": [1], "city": ["a"], "v": [4]},
]
COMMITTED = {1: 4, 2: 1, 3: 2, 4: 3}
NEXT_UPSERT = {"id": [2, 5], "city": ["a", "b"], "v": [5, 5]}
AFTER_NEXT = {**COMMITTED, 2: 5, 5: 5}
WARNING = "warning: metadata table unhealthy ("


def _build(base: Path, max_delta_commits: int) -> None:
    table = Table.create(str(base), "t", ["id"], ["city"], hudi_format=False)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(max_delta_commits=max_delta_commits))
    writer.write(pa.table(INSERT), "insert")
    for rows in UPSERTS:
        writer.write(pa.table(rows), "upsert")


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    """`logs`: four deltacommits in the initial slice; `compacted`: the last upsert on top of a compaction."""
    root = tmp_path_factory.mktemp("templates")
    _build(root / "logs", max_delta_commits=10)
    _build(root / "compacted", max_delta_commits=3)
    compacted = Table.open(str(root / "compacted")).metadata()
    assert layout.latest_completed_compaction(compacted.timeline()) != layout.INITIAL_SLICE
    return {"logs": root / "logs", "compacted": root / "compacted"}


def _newest_log(base: Path) -> Path:
    mdt = Table.open(str(base)).metadata()
    current = layout.writer_slice(mdt.timeline())
    return Path(mdt.storage.full(layout.log_path(current, mdt.slices()[current].max_version)))


def _files_block_end(data: bytes) -> int:
    """Where the log's first block (the `files` records; index blocks follow it) ends."""
    end = data.find(MAGIC, len(MAGIC))
    return len(data) if end < 0 else end


def flip_byte_in_newest_log(base: Path) -> None:
    path = _newest_log(base)
    data = bytearray(path.read_bytes())
    data[_files_block_end(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def truncate_newest_log(base: Path) -> None:
    path = _newest_log(base)
    data = path.read_bytes()
    path.write_bytes(data[: _files_block_end(data) - 7])


def delete_newest_log(base: Path) -> None:
    _newest_log(base).unlink()


def delete_older_log(base: Path) -> None:
    mdt = Table.open(str(base)).metadata()
    Path(mdt.storage.full(layout.log_path(layout.INITIAL_SLICE, 2))).unlink()


def compact_after_losing_the_newest_log(base: Path) -> None:
    """The loss merged into a new base: the slice being read no longer shows it."""
    delete_newest_log(base)
    table = Table.open(str(base))
    scheduled = compaction.schedule(table.metadata(), table.timeline())
    compaction.execute(table.metadata(), table.timeline(), scheduled)


def delete_mdt_properties(base: Path) -> None:
    (base / layout.MDT_PROPERTIES).unlink()


def delete_base_file(base: Path) -> None:
    mdt = Table.open(str(base)).metadata()
    Path(mdt.storage.full(layout.base_path(layout.latest_completed_compaction(mdt.timeline())))).unlink()


def truncate_base_file(base: Path) -> None:
    """Present, but shorter than its compaction wrote it (the table keeps its column stats and bloom indexes,
    whose bases the same compaction wrote)."""
    mdt = Table.open(str(base)).metadata()
    path = Path(mdt.storage.full(layout.base_path(layout.latest_completed_compaction(mdt.timeline()))))
    path.write_bytes(path.read_bytes()[:-100])


CORRUPTIONS: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "flipped-byte": ("logs", flip_byte_in_newest_log, "CRC32 mismatch"),
    "torn-tail": ("logs", truncate_newest_log, "is corrupt"),
    "newest-log-deleted": ("logs", delete_newest_log, "is missing"),
    "older-log-deleted": ("logs", delete_older_log, "log.2_0-0-0 of completed deltacommit"),
    "log-lost-then-compacted": ("logs", compact_after_losing_the_newest_log, "was missing when compaction"),
    "mdt-properties-deleted": ("logs", delete_mdt_properties, "hoodie.properties is missing"),
    "base-file-deleted": ("compacted", delete_base_file, "of completed compaction"),
    "base-file-truncated": ("compacted", truncate_base_file, "wrote"),
}


@pytest.fixture(params=sorted(CORRUPTIONS))
def damaged(request, templates, tmp_path) -> tuple[str, str]:
    """(base, expected words of the reason): a copy of the template with one corruption applied."""
    template, corrupt, reason = CORRUPTIONS[request.param]
    base = tmp_path / "t"
    shutil.copytree(templates[template], base)
    corrupt(base)
    return str(base), reason


def _input(tmp_path: Path, rows: dict) -> str:
    path = tmp_path / "input.parquet"
    pq.write_table(pa.table(rows), path)
    return str(path)


def _cli_read(base: str, tmp_path: Path) -> tuple[dict[int, int], list[dict], str]:
    """`tandem read` of the table: {id: v}, the full rows, and its stderr."""
    out = tmp_path / "read.parquet"
    result = tandem("read", base, "--output", str(out))
    assert result.returncode == 0, result.stderr
    rows = pq.read_table(out)
    return {r["id"]: r["v"] for r in rows.to_pylist()}, rows_by_key(rows, ["id"]), result.stderr


def _files(base: str) -> dict[str, str]:
    """Every file of the table and a hash of its bytes (the lock's own bookkeeping aside)."""
    root = Path(base)
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and ".tandem-lock" not in p.parts
    }


def test_read_lists_storage_and_repair_restores_the_metadata_table(damaged, tmp_path):
    base, reason = damaged
    seen, rows, stderr = _cli_read(base, tmp_path)
    assert seen == COMMITTED
    assert rows == rows_by_key(hudi_read(base), ["id"])
    warned = [line for line in stderr.splitlines() if line.startswith(WARNING)]
    assert len(warned) == 1, stderr
    assert reason in warned[0]
    assert warned[0].endswith(f"; listing storage instead — run `tandem metadata repair {base}`")

    repaired = tandem("metadata", "repair", base)
    assert repaired.returncode == 0, repaired.stderr
    validated = tandem("metadata", "validate", base)
    assert validated.returncode == 0, validated.stdout
    upsert = tandem("write", base, "--input", _input(tmp_path, NEXT_UPSERT), "--operation", "upsert")
    assert upsert.returncode == 0, upsert.stderr
    seen, rows, stderr = _cli_read(base, tmp_path)
    assert seen == AFTER_NEXT
    assert rows == rows_by_key(hudi_read(base), ["id"])
    assert "warning" not in stderr
    assert Table.open(base).view().source == "metadata"


def test_library_view_reports_the_fallback(damaged):
    from timeline.mdt.health import MetadataFallbackWarning

    base, reason = damaged
    table = Table.open(base)
    with pytest.warns(MetadataFallbackWarning, match="listing storage instead"):
        view = table.view()
    assert view.source == "storage" and reason in view.fallback_reason
    assert {(f.partition, f.name) for f in view.latest_base_files()} == {
        (f.partition, f.name) for f in table.storage_view().latest_base_files()
    }


def test_check_writable_refuses_naming_the_problem_and_repair(damaged):
    from timeline.mdt.health import MetadataUnhealthyError

    base, reason = damaged
    with pytest.raises(MetadataUnhealthyError, match="tandem metadata repair") as refused:
        Table.open(base).check_writable()
    assert reason in str(refused.value) and refused.value.exit_code == 2


def test_upsert_on_a_damaged_metadata_table_is_refused_and_changes_nothing(damaged, tmp_path):
    base, reason = damaged
    before = _files(base)
    result = tandem("write", base, "--input", _input(tmp_path, NEXT_UPSERT), "--operation", "upsert")
    assert result.returncode == 2, result.stderr
    assert reason in result.stderr and "tandem metadata repair" in result.stderr
    assert _files(base) == before


def test_ls_warns_and_says_where_the_listing_came_from(templates, tmp_path):
    base = tmp_path / "t"
    shutil.copytree(templates["logs"], base)
    healthy = tandem("ls", str(base), "--json")
    assert healthy.returncode == 0 and '"source": "metadata"' in healthy.stdout and healthy.stderr == ""
    delete_newest_log(base)
    listed = tandem("ls", str(base), "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"source": "storage"' in listed.stdout
    assert [line for line in listed.stderr.splitlines() if line.startswith(WARNING)], listed.stderr
    explicit = tandem("ls", str(base), "--source", "metadata")
    assert explicit.returncode == 2 and "tandem metadata repair" in explicit.stderr


# Healthy states that must not be mistaken for damage -------------------------------------------


def _problems(table: Table) -> list[str]:
    from timeline.mdt.health import problems

    return problems(table.metadata(), table.timeline(), table.has_metadata_table())


def test_crashed_and_rolled_back_writes_leave_a_healthy_metadata_table(templates, tmp_path):
    base = tmp_path / "t"
    shutil.copytree(templates["logs"], base)
    table = Table.open(str(base))
    writer = LocalWriter(table)
    with pytest.raises(SimulatedCrash), simulate("commit.mdt"):  # MDT deltacommit completed, data instant not
        writer.write(pa.table({"id": [2], "city": ["a"], "v": [9]}), "upsert")
    assert table.metadata().timeline().completed()[-1].time == table.timeline().pending()[0].time
    assert _problems(table) == []
    table.check_writable()
    torn = encode_log([LogBlock("20990101000000000", DATA, [{"key": "x", "type": 2, "filesystemMetadata": {}}])])
    current = layout.writer_slice(table.metadata().timeline())
    top = table.metadata().slices()[current].max_version
    # A torn log of an instant that never completed: readers ignore it, so it is no damage.
    table.metadata().storage.create_if_absent(layout.log_path(current, top + 1), torn[:-3])
    assert _problems(table) == []
    recover(table, CoordinatorConfig(failed_writes_policy="EAGER"))
    assert _problems(table) == []
    writer.write(pa.table(NEXT_UPSERT), "upsert")
    assert _problems(table) == []
    assert {r["id"]: r["v"] for r in hudi_read(base).to_pylist()} == AFTER_NEXT


# Every crash state of writes and services, with compaction, MDT clean and archival inline. Left out:
# mdt.compaction.sealed, which recovery cannot get past today (its rollback mirror meets the orphan seal).
CRASHES = [
    *(f"commit.{s}" for s in ("begin.locked", "begin.requested", "begin.inflight", "write.marker", "write.file")),
    *(f"commit.{s}" for s in ("locked", "finalize", "mdt", "complete", "released", "cleanup")),
    *(f"mdt.deltacommit.{s}" for s in ("requested", "inflight", "log", "complete")),
    *(f"mdt.compaction.{s}" for s in ("planned", "inflight", "base", "complete")),
    *(f"mdt.clean.{s}" for s in ("planned", "deleted")),
    *(f"mdt.rollback.{s}" for s in ("logs", "instant")),
    *(f"rollback.{s}" for s in ("planned", "inflight", "files", "mdt", "mdt.mirror", "instant", "complete")),
    *(f"clean.{s}" for s in ("planned", "inflight", "files", "mdt", "complete")),
    *(f"archive.{s}" for s in ("bundle", "instant", "mdt.bundle")),
]
SERVICES = CoordinatorConfig(
    max_delta_commits=2, failed_writes_policy="EAGER", archive_min_commits=11, archive_max_commits=12
)


def _all_problems(table: Table) -> list[str]:
    """What a writer's check and a reader's check would each find."""
    from timeline.mdt.health import problems

    args = (table.metadata(), table.timeline(), table.has_metadata_table())
    return problems(*args, writing=True) + problems(*args)


@pytest.mark.parametrize("point", CRASHES)
def test_no_crash_state_looks_damaged(templates, tmp_path, point):
    base = tmp_path / "t"
    shutil.copytree(templates["logs"], base)
    table = Table.open(str(base))
    writer = LocalWriter(table, coordinator=SERVICES)
    if point.startswith(("rollback.", "mdt.rollback.")):  # an orphan with an MDT deltacommit to roll back
        with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
            writer.write(pa.table({"id": [7], "city": ["c"], "v": [7]}), "insert")
    with pytest.raises(SimulatedCrash), simulate(point):
        for i in range(9):
            writer.write(pa.table({"id": [i % 4 + 1], "city": ["aabc"[i % 4]], "v": [10 + i]}), "upsert")
        clean(table, CoordinatorConfig(clean_policy="KEEP_LATEST_FILE_VERSIONS", failed_writes_policy="EAGER"))
    assert _all_problems(table) == []
    recover(table, SERVICES)
    assert _all_problems(table) == []
    writer.write(pa.table({"id": [2], "city": ["a"], "v": [99]}), "upsert")
    assert _all_problems(table) == []
    assert validate(table.metadata(), table.timeline()).errors == 0


def test_compactions_and_mdt_clean_leave_a_healthy_metadata_table(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], hudi_format=False)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(max_delta_commits=2))
    for i in range(14):
        writer.write(pa.table({"id": [i % 4], "city": ["abc"[i % 3]], "v": [i]}), "upsert")
    mdt = table.metadata()
    assert len([i for i in layout.compactions(mdt.timeline()) if i.is_completed]) >= 4
    assert layout.INITIAL_SLICE not in mdt.slices(), "MDT clean removed the oldest slices"
    assert _problems(table) == []
    assert table.view().source == "metadata"


def test_a_long_running_write_that_lands_in_a_newer_slice_is_checked(tmp_path):
    """A write that began before compaction C and committed after it has its log in C's slice though T < C."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], hudi_format=False)
    config = CoordinatorConfig(max_delta_commits=2)
    others = LocalWriter(table, coordinator=config)
    others.write(pa.table(INSERT), "insert")

    def meanwhile(_: str) -> None:
        for rows in UPSERTS[:2]:
            others.write(pa.table(rows), "upsert")

    slow = LocalWriter(table, coordinator=config).write(
        pa.table({"id": [9], "city": ["c"], "v": [9]}), "bulk_insert", on_begin=meanwhile
    )
    mdt = table.metadata()
    compacted = layout.latest_completed_compaction(mdt.timeline())
    assert slow.instant < compacted
    (log,) = mdt.timeline().commit_metadata(mdt.timeline().find(slow.instant)).write_stats()
    assert f"_{compacted}.log." in log.path
    assert _problems(table) == []
    mdt.storage.delete(log.path)
    assert _problems(table) == [f"log {layout.MDT_DIR}/{log.path} of completed deltacommit {slow.instant} is missing"]


def test_an_interrupted_initialization_is_not_read_but_the_next_write_finishes_it(tmp_path):
    from timeline.mdt.health import MetadataFallbackWarning

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], with_metadata=False, hudi_format=False)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(metadata_enabled=False))  # no MDT built by the write
    writer.write(pa.table(INSERT), "insert")
    with pytest.raises(SimulatedCrash), simulate("mdt.compaction.inflight"):
        initialize(table.metadata(), "t", table.timeline(), hudi_format=False)
    table = Table.open(table.uri)
    (problem,) = _problems(table)
    assert "initialization" in problem and "did not complete" in problem
    table.check_writable()  # the writer's housekeeping completes the initialization first
    with pytest.warns(MetadataFallbackWarning):  # the upsert plans from storage
        LocalWriter(table).write(pa.table(UPSERTS[0]), "upsert")
    assert _problems(table) == [] and validate(table.metadata(), table.timeline()).errors == 0
    assert {r["id"]: r["v"] for r in hudi_read(table.uri).to_pylist()} == {1: 1, 2: 1, 3: 2, 4: 1}


def test_writes_made_while_the_mdt_was_hidden_are_caught_when_it_returns(templates, tmp_path):
    """A table that does not record its MDT (made before the record existed): writes skip a missing MDT."""
    from timeline.format.table_config import record_metadata_table

    base = tmp_path / "t"
    shutil.copytree(templates["logs"], base)
    record_metadata_table(Table.open(str(base)).storage, False)
    hidden = tmp_path / "hidden.properties"
    (base / layout.MDT_PROPERTIES).rename(hidden)
    no_build = CoordinatorConfig(metadata_enabled=False)  # a writer that does not build a missing MDT
    written = LocalWriter(Table.open(str(base)), coordinator=no_build).write(pa.table(NEXT_UPSERT), "upsert")
    hidden.rename(base / layout.MDT_PROPERTIES)
    table = Table.open(str(base))
    assert not table.has_metadata_table() and table.metadata().exists()
    assert _problems(table) == [f"data instant(s) {written.instant} completed without a metadata deltacommit"]
    seen, _, stderr = _cli_read(str(base), tmp_path)
    assert seen == AFTER_NEXT and WARNING in stderr
    assert tandem("metadata", "repair", str(base)).returncode == 0
    assert Table.open(str(base)).has_metadata_table() and _problems(Table.open(str(base))) == []


# The record in hoodie.properties -------------------------------------------------------------


def _props(base: Path) -> dict[str, str]:
    return properties.loads((base / ".hoodie" / "hoodie.properties").read_text())


def test_init_records_the_metadata_table_and_hudi_still_reads_it(templates):
    base = templates["logs"]
    assert _props(base)["tandem.metadata.enabled"] == "true"
    assert "hoodie.table.metadata.partitions" not in _props(base)
    assert Table.open(str(base)).has_metadata_table()
    assert {r["id"]: r["v"] for r in hudi_read(base).to_pylist()} == COMMITTED


def _silent_view(table: Table):
    """The table's view, asserting that it warned about nothing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        view = table.view()
    assert [str(w.message) for w in caught if "metadata table" in str(w.message)] == []
    return view


def test_spark_table_without_mdt_lists_storage_silently_until_one_is_created(tmp_path):
    base = unzip_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    original = _props(base)
    table = Table.open(str(base))
    assert not table.has_metadata_table()
    assert _silent_view(table).source == "storage"
    expected = rows_by_key(hudi_read(base), table.config.record_key_fields)

    assert tandem("metadata", "create", str(base), "--format", "tandem").returncode == 0
    assert _props(base) == {**original, "tandem.metadata.enabled": "true", "tandem.metadata.format": "tandem"}
    table = Table.open(str(base))
    assert table.has_metadata_table() and table.view().source == "metadata"
    assert rows_by_key(hudi_read(base), table.config.record_key_fields) == expected

    assert tandem("metadata", "delete", str(base)).returncode == 0
    assert _props(base) == original
    assert _silent_view(Table.open(str(base))).source == "storage"


def test_repair_refuses_while_data_instants_are_pending(templates, tmp_path):
    base = tmp_path / "t"
    shutil.copytree(templates["logs"], base)
    delete_newest_log(base)
    (base / ".hoodie" / "20990101000000000.commit.requested").write_bytes(b"")
    before = _files(str(base))
    result = tandem("metadata", "repair", str(base))
    assert result.returncode == 2
    assert "20990101000000000.commit" in result.stderr and "tandem recover" in result.stderr
    assert _files(str(base)) == before


def test_s3_table_with_lost_logs_falls_back_and_is_repaired(s3_base):
    from coordinator.mdt.bootstrap import repair
    from timeline.mdt.health import MetadataFallbackWarning, MetadataUnhealthyError

    table = Table.create(s3_base, "t", ["id"], ["city"], hudi_format=False)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory"))
    writer.write(pa.table(INSERT), "insert")
    for rows in UPSERTS:
        writer.write(pa.table(rows), "upsert")
    mdt = table.metadata()
    for version in (2, 4):  # two unheld deltacommits: their commit metadata is read in parallel
        assert mdt.storage.delete(layout.log_path(layout.INITIAL_SLICE, version))
    with pytest.warns(MetadataFallbackWarning):
        view = table.view()
    assert view.source == "storage" and "more problem" in view.fallback_reason
    assert {r["id"]: r["v"] for r in read_view(table, view).to_pylist()} == COMMITTED
    with pytest.raises(MetadataUnhealthyError):
        table.check_writable()
    repair(mdt, "t", table.timeline())
    assert _problems(table) == [] and table.view().source == "metadata"
