"""Java Hudi 0.15 uses a metadata table Tandem wrote in Hudi's format, and continues it.

On a table Java wrote without a metadata table, Tandem initializes `files` (coordinator/mdt/file_group_writes.py)
and records it in `hoodie.table.metadata.partitions`. Then:
- Java lists from it: a data file that storage holds but the metadata table does not list (a copy of a file
  group under another file id, at a completed instant) is invisible to a Java read with the metadata table on
  and visible with it off;
- a Tandem delta commit's log (one HFile data block) is read by Java like its own;
- a Java writer continues the metadata table (its delta commits land in Tandem's slice; nothing is rebuilt),
  and Tandem's reader of the format then lists what storage holds.
"""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.config import CoordinatorConfig
from coordinator.mdt import index_build
from coordinator.mdt.bootstrap import validate
from coordinator.write.writer import LocalWriter
from tests.hudi_reference.java_mdt import snapshot, storage_files
from timeline.format import avro_metadata
from timeline.format.action_metadata import rollback_metadata, rollback_plan
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import CLOCK, COMMIT, COMPACTION, DELTA_COMMIT, ROLLBACK, Instant, State
from timeline.format.table_config import read_config, record_metadata_partitions
from timeline.hudi_log import read_blocks
from timeline.io.storage import Storage
from timeline.mdt import hudi_records
from timeline.mdt.file_group_writes import (
    compact_group,
    compaction_operation,
    complete_compaction,
    complete_delta_commit,
    create_table,
    initialize_partition,
    seal_target,
    write_logs,
    write_rollback_logs,
    write_seals,
)
from timeline.mdt.file_slices import TimelineFacts, list_file_groups
from timeline.mdt.hudi_commit_records import listing_records
from timeline.mdt.hudi_layout import FILES, compaction_instant, partition_init_instant
from timeline.mdt.slice_records import valid_instants
from timeline.mdt.storage_listing import list_storage
from timeline.table import Table

OPTIONS = {
    "hoodie.table.name": "uses_tandem_mdt",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
    "hoodie.parquet.small.file.limit": "0",
}
WITHOUT_MDT = {**OPTIONS, "hoodie.metadata.enable": "false"}
WITH_MDT = {**OPTIONS, "hoodie.metadata.enable": "true", "hoodie.metadata.compact.max.delta.commits": "3"}


def rows(ids: range, version: int) -> pa.Table:
    return pa.table(
        {
            "id": [f"k{i:04d}" for i in ids],
            "part": [f"p{i % 3}" for i in ids],
            "ts": [version] * len(ids),
            "v": [i * 10 + version for i in ids],
        }
    )


def files_records(listing: pa.Table) -> list[dict]:
    """`__all_partitions__` and one file list per partition, from a (partition, file, size) listing."""
    by_partition: dict[str, dict[str, int]] = {}
    for partition, name, size in zip(
        *(listing.column(c).to_pylist() for c in ("partition", "file", "size")), strict=True
    ):
        by_partition.setdefault(partition, {})[name] = size
    return listing_records(by_partition)


def initialize(base: str) -> str:
    """Tandem's `files` partition for the table at `base`, built from storage; returns its instant."""
    data = Storage(base)
    timeline = ActiveTimeline.load(data, ".hoodie")
    mdt = data.sub(".hoodie/metadata")
    create_table(mdt, read_config(data).name)
    instant = partition_init_instant(timeline.last_time(), 0)
    written = initialize_partition(mdt, FILES, instant, files_records(list_storage(data, timeline)))
    complete_delta_commit(ActiveTimeline.load(mdt, ".hoodie"), instant, written, "BULK_INSERT")
    record_metadata_partitions(data, [FILES])
    return instant


def read_ids(java_hudi, base: str, metadata: bool) -> list[str]:
    table = java_hudi.read(base, metadata=metadata)
    return sorted(table.column("id").to_pylist())


def tandem_log(base: str, records: list[dict]) -> None:
    """One Tandem log of `records` in the `files` partition, at the table's newest completed instant."""
    data = Storage(base)
    mdt = data.sub(".hoodie/metadata")
    groups = list_file_groups(mdt, FILES)
    newest = ActiveTimeline.load(data, ".hoodie").last_time()
    written = write_logs(mdt, FILES, newest, records, groups, {g.file_id: max(g.slices) for g in groups})
    assert written and all(".log." in w.path for w in written)


def test_java_lists_from_and_continues_a_tandem_metadata_table(java_hudi, java_hudi_1x, tmp_path):
    base = str(tmp_path / "table")
    java_hudi.write(base, rows(range(0, 30), 1), "insert", WITHOUT_MDT, mode="overwrite")
    java_hudi.write(base, rows(range(20, 40), 2), "upsert", WITHOUT_MDT)
    init = initialize(base)
    expected = [f"k{i:04d}" for i in range(40)]
    assert read_ids(java_hudi, base, metadata=True) == expected

    # a file storage holds and the metadata table does not list: Java (0.15 and 1.2) lists from the metadata table
    victim = next(n for n in sorted(os.listdir(os.path.join(base, "p1"))) if n.endswith(".parquet"))
    file_id, rest = victim.split("_", 1)
    stray = f"{file_id[:-10]}ffffffff{file_id[-2:]}_{rest}"
    shutil.copyfile(os.path.join(base, "p1", victim), os.path.join(base, "p1", stray))
    assert read_ids(java_hudi, base, metadata=True) == expected
    assert read_ids(java_hudi_1x, base, metadata=True) == expected
    stray_ids = pq.read_table(os.path.join(base, "p1", stray), columns=["id"]).column("id").to_pylist()
    assert stray_ids and read_ids(java_hudi, base, metadata=False) == sorted(expected + stray_ids)

    # Java continues the metadata table with a delta commit of its own
    java_hudi.write(base, rows(range(40, 45), 3), "insert", WITH_MDT)
    expected += [f"k{i:04d}" for i in range(40, 45)]
    mdt_times = {i.time for i in ActiveTimeline.load(Storage(base).sub(".hoodie/metadata"), ".hoodie").instants}
    assert init in mdt_times, "Java rebuilt the metadata table instead of continuing it"
    assert read_ids(java_hudi, base, metadata=True) == expected

    # a Tandem log listing the stray file: Java reads it (the stray's rows appear), then a Tandem tombstone
    size = os.path.getsize(os.path.join(base, "p1", stray))
    tandem_log(base, [hudi_records.file_list_record("p1", {stray: size})])
    assert read_ids(java_hudi, base, metadata=True) == sorted(expected + stray_ids)
    tandem_log(base, [hudi_records.file_list_record("p1", {}, deleted=[stray])])
    assert read_ids(java_hudi, base, metadata=True) == expected
    os.remove(os.path.join(base, "p1", stray))

    # Java goes on, compacting the metadata table once, and Tandem's reader lists what storage holds
    for version in range(4, 7):
        java_hudi.write(base, rows(range(version * 5, version * 5 + 8), version), "upsert", WITH_MDT)
    mdt_timeline = ActiveTimeline.load(Storage(base).sub(".hoodie/metadata"), ".hoodie")
    assert init in {i.time for i in mdt_timeline.instants}, "Java rebuilt the metadata table instead of continuing it"
    assert any(i.action == "compaction" and i.is_completed for i in mdt_timeline.instants)
    assert read_ids(java_hudi, base, metadata=True) == read_ids(java_hudi, base, metadata=False) == sorted(expected)
    view = snapshot(base)
    partitions = view.partitions()
    assert partitions == ["p0", "p1", "p2"]
    assert view.files(partitions) == storage_files(base, partitions)
    assert view.corrupt == []


def test_java_drops_the_blocks_a_tandem_rollback_command_names(java_hudi, tmp_path):
    """A Tandem log lists a stray file at a completed instant T; a Tandem MDT rollback of T (a command block
    in a new log, the rollback instant completed with Hudi's Avro plan and metadata) hides it from Java again."""
    base = str(tmp_path / "table")
    java_hudi.write(base, rows(range(0, 12), 1), "insert", WITHOUT_MDT, mode="overwrite")
    java_hudi.write(base, rows(range(6, 18), 2), "upsert", WITHOUT_MDT)
    initialize(base)
    expected = [f"k{i:04d}" for i in range(18)]
    victim = next(n for n in sorted(os.listdir(os.path.join(base, "p2"))) if n.endswith(".parquet"))
    file_id, rest = victim.split("_", 1)
    stray = f"{file_id[:-10]}eeeeeeee{file_id[-2:]}_{rest}"
    shutil.copyfile(os.path.join(base, "p2", victim), os.path.join(base, "p2", stray))
    stray_ids = pq.read_table(os.path.join(base, "p2", stray), columns=["id"]).column("id").to_pylist()
    tandem_log(base, [hudi_records.file_list_record("p2", {stray: os.path.getsize(os.path.join(base, "p2", stray))})])
    assert read_ids(java_hudi, base, metadata=True) == sorted(expected + stray_ids)

    data = Storage(base)
    mdt = data.sub(".hoodie/metadata")
    target = ActiveTimeline.load(data, ".hoodie").last_time()
    mdt_timeline = ActiveTimeline.load(mdt, ".hoodie")
    record = Instant(CLOCK.next_after(target, mdt_timeline.last_time()), ROLLBACK, State.REQUESTED)
    mdt_timeline.create_requested(record, avro_metadata.encode("HoodieRollbackPlan", rollback_plan(target, COMMIT, {})))
    groups = list_file_groups(mdt, FILES)
    write_rollback_logs(mdt, record.time, target, groups, {g.file_id: max(g.slices) for g in groups})
    done = rollback_metadata(record.time, 0, {"commitTime": target, "action": COMMIT}, {})
    mdt_timeline.complete(record, avro_metadata.encode("HoodieRollbackMetadata", done))
    assert read_ids(java_hudi, base, metadata=True) == expected
    view = snapshot(base)
    assert view.files(["p2"])["p2"] == {n: s for n, s in storage_files(base, ["p2"])["p2"].items() if n != stray}


def schedule_compaction(base: str) -> tuple[str, object]:
    """Tandem's plan for the `files` group at `<latest delta commit>001`: the slice sealed, then the plan of
    the logs below the seal, requested and inflight."""
    mdt = Storage(base).sub(".hoodie/metadata")
    mdt_timeline = ActiveTimeline.load(mdt, ".hoodie")
    latest = max(i.time for i in mdt_timeline.instants if i.action == DELTA_COMMIT and i.is_completed)
    compaction = compaction_instant(latest)
    (group,) = list_file_groups(mdt, FILES)
    current = group.slices[max(group.slices)]
    (seal,) = write_seals(mdt, compaction, latest, [group], {group.file_id: current.base_instant})
    (sealed,) = [b for b in read_blocks(mdt.read_bytes(seal.path))]
    assert seal_target(sealed) == compaction
    plan = avro_metadata.compaction_plan([compaction_operation(current, current.logs)])
    requested = mdt_timeline.create_requested(
        Instant(compaction, COMPACTION, State.REQUESTED), avro_metadata.encode("HoodieCompactionPlan", plan)
    )
    mdt_timeline.transition_to_inflight(requested)
    return compaction, current


def test_java_reads_through_and_after_a_tandem_compaction(java_hudi, tmp_path):
    """Tandem plans a compaction of the `files` partition (Hudi's Avro plan at `<latest delta commit>001`):
    Java reads the pending state, Tandem merges the planned logs into a new base file and completes it, and
    Java reads and writes on; a second Tandem plan is carried out by Java's next writer, as Java finishes
    any pending compaction it finds."""
    base = str(tmp_path / "table")
    java_hudi.write(base, rows(range(0, 15), 1), "insert", WITHOUT_MDT, mode="overwrite")
    initialize(base)
    no_compaction = {**WITH_MDT, "hoodie.metadata.compact.max.delta.commits": "50"}
    for version in (2, 3):
        java_hudi.write(base, rows(range(version * 4, version * 4 + 9), version), "upsert", no_compaction)
    expected = sorted({f"k{i:04d}" for i in range(0, 21)})
    assert read_ids(java_hudi, base, metadata=True) == expected

    data = Storage(base)
    mdt = data.sub(".hoodie/metadata")
    compaction, current = schedule_compaction(base)
    assert read_ids(java_hudi, base, metadata=True) == expected  # through the pending compaction
    facts = TimelineFacts.of(ActiveTimeline.load(mdt, ".hoodie"))
    is_valid = valid_instants(ActiveTimeline.load(data, ".hoodie"), ActiveTimeline.load(mdt, ".hoodie"))
    written = compact_group(mdt, current, current.logs, facts, is_valid, compaction)
    assert written is not None and written.path.endswith(f"_{compaction}.hfile")
    complete_compaction(ActiveTimeline.load(mdt, ".hoodie"), compaction, [written])
    assert read_ids(java_hudi, base, metadata=True) == expected

    for version in (4, 5):
        java_hudi.write(base, rows(range(version * 3, version * 3 + 5), version), "upsert", no_compaction)
    second, _ = schedule_compaction(base)
    java_hudi.write(base, rows(range(30, 34), 6), "insert", no_compaction)
    expected = sorted(expected + [f"k{i:04d}" for i in range(30, 34)])
    done = {i.time for i in ActiveTimeline.load(mdt, ".hoodie").instants if i.action == COMPACTION and i.is_completed}
    assert {compaction, second} <= done, "Java left Tandem's pending compaction undone"
    assert read_ids(java_hudi, base, metadata=True) == read_ids(java_hudi, base, metadata=False) == expected
    view = snapshot(base)
    assert view.files(view.partitions()) == storage_files(base, ["p0", "p1", "p2"])


def test_java_lists_skips_and_continues_the_metadata_table_of_a_tandem_table(java_hudi, java_hudi_1x, tmp_path):
    """A table Tandem creates with its metadata table in Hudi's format (`files` and both indexes), written by
    Tandem's writer through compactions and a clean of the metadata table. Java (0.15 and 1.2) lists from it,
    Java 0.15's data skipping prunes with its statistics, a Java writer continues it through a compaction of
    its own, and Tandem continues after Java: every reader agrees with storage throughout."""
    from tests.interop.test_java_skips_with_tandem_stats import WHERES, filtered_count

    base = str(tmp_path / "table")
    table = Table.create(base, "uses_tandem_mdt", ["id"], ["part"], precombine_field="ts", hudi_format=True)
    assert read_config(Storage(base)).java_metadata_partitions == ["bloom_filters", "column_stats", "files"]
    writer = LocalWriter(table, coordinator=CoordinatorConfig(max_delta_commits=3, lock_uri="memory"))
    expected: set[str] = set()
    for version in range(1, 10):
        ids = range(version * 7, version * 7 + 12)
        writer.write(rows(ids, version), "upsert")
        expected |= {f"k{i:04d}" for i in ids}
    mdt_timeline = ActiveTimeline.load(Storage(base).sub(".hoodie/metadata"), ".hoodie")
    assert sum(i.action == COMPACTION and i.is_completed for i in mdt_timeline.instants) >= 3
    assert any(i.action == "clean" and i.is_completed for i in mdt_timeline.instants)
    first = min(i.time for i in mdt_timeline.instants)
    tandem_compactions = {i.time for i in mdt_timeline.completed() if i.action == COMPACTION}
    assert read_ids(java_hudi, base, metadata=True) == sorted(expected)
    assert read_ids(java_hudi_1x, base, metadata=True) == sorted(expected)

    # a file storage holds and the metadata table does not list: invisible through it, to Java as to Tandem
    victim = next(n for n in sorted(os.listdir(os.path.join(base, "p1"))) if n.endswith(".parquet"))
    file_id, rest = victim.split("_", 1)
    stray = f"{file_id[:-10]}dddddddd{file_id[-2:]}_{rest}"
    shutil.copyfile(os.path.join(base, "p1", victim), os.path.join(base, "p1", stray))
    assert read_ids(java_hudi, base, metadata=True) == sorted(expected)
    assert read_ids(java_hudi, base, metadata=False) != sorted(expected)
    os.remove(os.path.join(base, "p1", stray))

    # Java 0.15 skips with Tandem's statistics: filtered counts equal with skipping on and off
    for where in WHERES:
        assert filtered_count(java_hudi, base, where, True) == filtered_count(java_hudi, base, where, False)

    # Java continues the metadata table (a compaction of its own), then Tandem continues after Java
    java_options = {**WITH_MDT, "hoodie.metadata.index.column.stats.enable": "true"}
    for version in range(10, 14):
        ids = range(version * 5, version * 5 + 8)
        java_hudi.write(base, rows(ids, version), "upsert", java_options)
        expected |= {f"k{i:04d}" for i in ids}
    mdt_timeline = ActiveTimeline.load(Storage(base).sub(".hoodie/metadata"), ".hoodie")
    assert first in {i.time for i in mdt_timeline.instants}, "Java rebuilt the metadata table instead of continuing it"
    assert {i.time for i in mdt_timeline.completed() if i.action == COMPACTION} - tandem_compactions, (
        "Java never compacted"
    )
    for version in range(14, 18):
        ids = range(version * 3, version * 3 + 6)
        LocalWriter(Table.open(base), coordinator=CoordinatorConfig(max_delta_commits=3, lock_uri="memory")).write(
            rows(ids, version), "upsert"
        )
        expected |= {f"k{i:04d}" for i in ids}
    table = Table.open(base)
    assert validate(table.metadata(), table.timeline()).errors == 0
    # Java's writer drops the index partitions its options leave off (here bloom_filters) ...
    assert read_config(Storage(base)).java_metadata_partitions == ["column_stats", "files"]
    # ... and Java 0.15's clean tombstones the statistics of the files it deletes under a wrong name (the
    # partition path's length cut off the file name), so theirs stay behind: stale, harmless (never listed)
    (stats,) = index_build.validate(table.metadata(), table.timeline())
    assert stats.partition == "column_stats" and stats.missing == stats.wrong == [] and stats.files, stats.to_json()
    view = snapshot(base)
    assert view.files(view.partitions()) == storage_files(base, view.partitions()) and view.corrupt == []
    assert read_ids(java_hudi, base, metadata=True) == read_ids(java_hudi, base, metadata=False) == sorted(expected)
    for where in WHERES:
        assert filtered_count(java_hudi, base, where, True) == filtered_count(java_hudi, base, where, False)
