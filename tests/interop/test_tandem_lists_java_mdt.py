"""Tandem's readers list from a metadata table Java Hudi 0.15 wrote (tests/hudi_reference/java_mdt.py: HFile
base files, log blocks, compactions, a clean, a rollback), not from storage: a file in storage that the
metadata table does not list is invisible to a Tandem read through it, exactly as to Java's. The health
check vouches for the files it reads by the commits that wrote them, so damage, loss or truncation of any
of them makes readers list storage instead (and say why), and writers refuse. Whole, it is continued by
Tandem's writers.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tandem
from coordinator.config import CoordinatorConfig
from coordinator.mdt import index_build
from coordinator.mdt.bootstrap import validate
from coordinator.write.writer import LocalWriter
from tests.hudi_reference.java_mdt import rows as java_rows
from tests.hudi_reference.java_mdt import snapshot, storage_files
from tests.hudi_reference.shared_table import ok
from timeline.errors import MetadataFallbackWarning
from timeline.mdt import hudi_health
from timeline.mdt.file_slices import TimelineFacts, slices_to_read
from timeline.mdt.health import MetadataUnhealthyError
from timeline.mdt.slice_records import forget_files
from timeline.table import Table


@pytest.fixture
def java_table(java_mdt_table, tmp_path) -> Path:
    """A private copy of the Java-written table (tests change it)."""
    copy = tmp_path / "java_mdt"
    shutil.copytree(java_mdt_table.path, copy)
    forget_files()
    hudi_health._VERIFIED.clear()
    return copy


def _files(view) -> set[tuple[str, str, int]]:
    return {(f.partition, f.name, f.size) for f in view.all_base_files()}


def _rows(base: Path, view) -> int:
    return sum(pq.ParquetFile(base / f.partition / f.name).metadata.num_rows for f in view.latest_base_files())


def _latest(view) -> set[tuple[str, str]]:
    return {(f.partition, f.name) for f in view.latest_base_files()}


def test_tandem_lists_from_javas_metadata_table(java_table):
    table = Table.open(str(java_table))
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataFallbackWarning)
        source = table.listing_source("auto")
        assert source.mdt is not None and source.fallback_reason is None
        metadata = table.view(source="metadata")
    assert metadata.source == "metadata"
    storage = table.view(source="storage")
    assert _files(metadata) and _latest(metadata) == _latest(storage)
    java = snapshot(str(java_table))
    partitions = java.partitions()
    assert sorted(metadata.partitions()) == partitions
    listed = java.files(partitions)
    on_disk = storage_files(str(java_table), partitions)
    for partition, name, size in _files(metadata):
        assert listed[partition][name] == size == on_disk[partition][name]
    assert tandem.read(str(java_table)).num_rows == _rows(java_table, storage) > 0


def test_a_file_the_metadata_table_does_not_list_is_invisible_through_it(java_table):
    table = Table.open(str(java_table))
    newest = max(table.view(source="storage").latest_base_files(), key=lambda f: f.instant)
    file_id, rest = newest.name.split("_", 1)
    stray = f"{'f' * 8}{file_id[8:]}_{rest}"  # a new file group, at a completed instant
    shutil.copy(java_table / newest.partition / newest.name, java_table / newest.partition / stray)
    assert (newest.partition, stray) in _latest(table.view(source="storage"))
    assert (newest.partition, stray) not in _latest(table.view(source="metadata"))
    stray_rows = pq.ParquetFile(java_table / newest.partition / stray).metadata.num_rows
    assert tandem.read(str(java_table)).num_rows == _rows(java_table, table.view(source="storage")) - stray_rows


def test_tandem_writers_continue_javas_metadata_table(java_table, java_hudi):
    """Tandem upserts and deletes on Java's table with a metadata-table compaction due every 3 delta commits:
    its delta commits, compactions and cleans continue Java's metadata table (its first instant stays), whose
    `files` partition then lists exactly what storage holds, whose index partitions equal the records recomputed
    from the files' footers, and from which Java reads what it reads without it."""
    base = str(java_table)
    table = Table.open(base)
    table.check_writable()
    mdt_first = min(i.time for i in table.metadata().timeline().instants)
    java_index = {r.partition: r for r in index_build.validate(table.metadata(), table.timeline())}
    writer = LocalWriter(table, coordinator=CoordinatorConfig(max_delta_commits=3, lock_uri="memory"))
    for version in range(20, 27):
        writer.write(java_rows(version * 5, 9, version), "upsert")
    writer.write(java_rows(101, 3, 27), "delete")
    mdt_timeline = table.metadata().timeline()
    assert mdt_first in {i.time for i in mdt_timeline.instants}, "the metadata table was rebuilt"
    done = [i.time for i in mdt_timeline.completed() if i.action == "compaction"]
    assert any(t > min(table.timeline().completed_times()) for t in done), "Tandem never compacted it"
    view = snapshot(base)
    partitions = view.partitions()
    assert view.files(partitions) == storage_files(base, partitions) and view.corrupt == []
    assert validate(table.metadata(), table.timeline()).errors == 0
    # Java's own index partitions already differ from the footers in a few records (three files of one commit
    # without records, three filters of files no longer listed): Tandem adds no difference
    for report in index_build.validate(table.metadata(), table.timeline()):
        before = java_index[report.partition]
        assert report.files > before.files and report.wrong == [], report.to_json()
        assert set(report.missing) <= set(before.missing) and set(report.stale) <= set(before.stale), report.to_json()
    with_mdt = java_hudi.read(base, metadata=True).sort_by("id")
    assert with_mdt.num_rows and with_mdt == java_hudi.read(base, metadata=False).sort_by("id")


def _read_slice_files(java_table: Path) -> tuple[list[str], list[str]]:
    """(logs, base files) of the `files` partition a reader merges, paths below the MDT."""
    view = snapshot(str(java_table))
    facts = TimelineFacts.of(view.mdt_timeline)
    logs, bases = [], []
    for group in view.file_groups("files"):
        for found in slices_to_read(group, facts):
            logs += [log.path for log in found.logs if log.size > 200]
            bases += [found.base_file] if found.base_file else []
    return logs, bases


@pytest.mark.parametrize("damage", ["truncate", "delete"])
@pytest.mark.parametrize("kind", ["log", "base"])
def test_damage_to_a_file_it_reads_makes_readers_list_storage(java_table, kind, damage):
    logs, bases = _read_slice_files(java_table)
    targets = logs if kind == "log" else bases
    assert targets, f"the fixture's read slice has no {kind} file"
    path = java_table / ".hoodie" / "metadata" / targets[-1]
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(bytes(data[: len(data) - 7]))
    else:
        path.unlink()
    table = Table.open(str(java_table))
    with pytest.warns(MetadataFallbackWarning, match="metadata table unhealthy"):
        source = table.listing_source("auto")
    assert source.mdt is None
    with pytest.raises(MetadataUnhealthyError):
        table.view(source="metadata")


@pytest.mark.parametrize("kind", ["log", "base"])
def test_a_flipped_byte_is_caught_or_changes_no_answer(java_table, kind):
    """Flips spread over the newest file of each kind: the check reports the damage, or the listing read
    through the damaged file is the undamaged one (a byte no answer depends on)."""
    logs, bases = _read_slice_files(java_table)
    path = java_table / ".hoodie" / "metadata" / (logs if kind == "log" else bases)[-1]
    table = Table.open(str(java_table))
    truth = _files(table.view(source="metadata"))
    original = path.read_bytes()
    caught = 0
    for position in sorted({*range(0, len(original), max(1, len(original) // 40)), len(original) - 1}):
        damaged = bytearray(original)
        damaged[position] ^= 0x5A
        path.write_bytes(bytes(damaged))
        forget_files()
        hudi_health._VERIFIED.clear()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            source = Table.open(str(java_table)).listing_source("auto")
        if source.mdt is None:
            assert any(issubclass(w.category, MetadataFallbackWarning) for w in seen)
            caught += 1
        else:
            assert _files(Table.open(str(java_table)).view(source="metadata")) == truth, position
    assert caught > 30


def test_the_metadata_commands_report_javas_metadata_table(java_table):
    stats = json.loads(ok("metadata", "stats", str(java_table), "--json").stdout)
    partitions = Table.open(str(java_table)).config.java_metadata_partitions
    assert sorted(stats["partitions"]) == sorted(partitions) and "files" in partitions
    assert stats["partitions"]["files"]["file_groups"] == 1 and stats["in_sync"]
    assert stats["log_file_count"] > 0 and stats["base_file_size"] > 0 and stats["log_file_size"] > 0
    mdt = java_table / ".hoodie" / "metadata"
    on_disk = [p for p in mdt.glob("*/*") if p.suffix == ".hfile" or ".log." in p.name and p.suffix != ".crc"]
    assert stats["base_file_size"] + stats["log_file_size"] == sum(p.stat().st_size for p in on_disk)
    listed = {tuple(line.split("\t")[:2]) for line in ok("metadata", "list-files", str(java_table)).stdout.split("\n")
              if line}  # fmt: skip
    assert listed == {
        (f.partition, f.name) for f in Table.open(str(java_table)).view(source="storage").all_base_files()
    }
