"""The single-writer scenarios the enumerator crashes: one protocol run each.

A scenario builds a table in a template folder (`prepare`, run once, never
crashed) and then performs one action on a copy of it (`act`, run in a forked
child that the enumerator kills at every crash state). Rows are small and the
file lock is the embedded default, so a crash state costs milliseconds; tables
on S3 take the lock `use_s3_lock` names instead (the file lock refuses S3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.bootstrap.run import FULL_RECORD, METADATA_ONLY, BootstrapRequest, bootstrap
from coordinator.config import CoordinatorConfig
from coordinator.mdt import index_build
from coordinator.mdt.bootstrap import initialize
from coordinator.protocol import restore, savepoint
from coordinator.protocol.locking import held, table_lock
from coordinator.services.steps import archive_table, clean, compact, compact_data, recover_table
from coordinator.write.writer import LocalWriter
from locks.base import LockProvider
from timeline.crash_points import SimulatedCrash, simulate
from timeline.format import properties
from timeline.format.bootstrap_index import INDEX_CLASS
from timeline.format.source_file import BOOTSTRAP_BASE_PATH, BOOTSTRAP_INDEX_CLASS
from timeline.format.table_config import METADATA_FORMAT, PROPERTIES_FILE, record_metadata_indexes
from timeline.mdt.log import BLOOM_FILTERS, COLUMN_STATS
from timeline.table import Table

KEY = "id"
PARTITIONS = ("p0", "p1")
# hudi-rs 0.5 reads a merge-on-read table without a precombine field as APPEND_ONLY (every version of a key), and
# counts the blocks of instants that never completed (docs/hudi-mor-format.md §8)
HUDI_RS_MOR = "hudi-rs 0.5 merges no precombine-less table and reads failed instants' log blocks"
HUDI_RS_RESTORE = "hudi-rs 0.5, like Java, reads a table mid-restore half restored (Tandem reads it as the savepoint)"
HUDI_RS_BOOTSTRAP = "hudi-rs 0.5 reads a bootstrapped table's skeleton files without their source data"
_s3_lock_uri = "file"  # refused for an s3:// table until `use_s3_lock` names a lock service


def use_s3_lock(uri: str) -> None:
    """The lock scenario steps on s3:// tables take from now on, in this process and the children it forks."""
    global _s3_lock_uri
    _s3_lock_uri = uri


def config(base: str = "") -> CoordinatorConfig:
    """Single-writer settings for the table at `base`: EAGER rollback, archival and MDT compaction left to
    their scenarios; the file lock, or on S3 the lock `use_s3_lock` named."""
    return CoordinatorConfig(
        lock_uri=_s3_lock_uri if base.startswith("s3://") else "file",
        failed_writes_policy="EAGER",
        auto_archive=False,
        max_delta_commits=1000,
        clean_policy="KEEP_LATEST_FILE_VERSIONS",
        file_versions_retained=1,
    )


def rows(ids: list[int], version: int) -> pa.Table:
    return pa.table(
        {
            KEY: [f"k{i:03d}" for i in ids],
            "part": [PARTITIONS[i % 2] for i in ids],
            "v": pa.array([version] * len(ids), pa.int64()),
        }
    )


def run_service(
    base: str, run: Callable[[Table, CoordinatorConfig, object], object], settings: CoordinatorConfig | None = None
) -> None:
    """Runs one protocol step on the table under its lock, as a process would: open, lock, run, close."""
    table = Table.open(base)
    settings = settings or config(base)
    lock = table_lock(table, settings)
    try:
        run(table, settings, lock)
    finally:
        lock.close()


def write(base: str, data: pa.Table, operation: str, settings: CoordinatorConfig | None = None) -> None:
    run_service(
        base, lambda table, c, lock: LocalWriter(table, coordinator=c, lock=lock).write(data, operation), settings
    )


def _new_table(base: str, hudi_format: bool = False) -> None:
    Table.create(base, "chaos", [KEY], ["part"], hudi_format=hudi_format)
    write(base, rows(list(range(8)), 0), "insert")


def _with_history(base: str, hudi_format: bool = False) -> None:
    """A table whose file groups have several versions (for clean) and several MDT deltacommits."""
    _new_table(base, hudi_format)
    for version in range(1, 4):
        write(base, rows([0, 1, 2, 3], version), "upsert")


def _with_previous_format_history(base: str) -> None:
    """A table with history whose MDT is in Tandem's previous format, made before Hudi's became the default:
    no record that the table asked for the previous format, so its next write migrates it."""
    _with_history(base, hudi_format=False)
    storage = Table.open(base).storage
    props = properties.loads(storage.read_bytes(PROPERTIES_FILE).decode())
    del props[METADATA_FORMAT]
    storage.write_bytes(PROPERTIES_FILE, properties.dumps(props).encode())


def _with_failed_write(base: str, hudi_format: bool = False) -> None:
    """A write that died after its MDT deltacommit and before its data completion."""
    _new_table(base, hudi_format)
    try:
        with simulate("commit.mdt"):
            write(base, rows([1, 2, 20], 9), "upsert")
    except SimulatedCrash:
        pass
    table = Table.open(base)
    table_lock(table, config(base)).force_release()  # the dead writer's lease has passed


def _with_compactions(base: str, hudi_format: bool = False) -> None:
    """Three completed MDT compactions, so the next one's MDT clean has old slices to delete."""
    _with_history(base, hudi_format)
    for n in range(3):
        write(base, rows([50 + n], n), "insert")
        run_service(base, _forced_compaction)
    write(base, rows([60], 0), "insert")  # something for the scenario's own compaction to absorb


def _forced_compaction(table: Table, settings: CoordinatorConfig, lock: LockProvider) -> None:
    compact(table, settings, lock, force=True)


def _with_many_commits(base: str) -> None:
    """34 commits with MDT compaction on (data archival never passes the latest MDT compaction)."""
    _new_table(base)
    settings = replace(config(base), max_delta_commits=10)
    for n in range(1, 34):
        write(base, rows([100 + n], n), "insert", settings)


def _without_indexes(base: str, hudi_format: bool = False) -> None:
    """A table with history whose MDT keeps no index yet."""
    Table.create(base, "chaos", [KEY], ["part"], indexes=(), hudi_format=hudi_format)
    write(base, rows(list(range(8)), 0), "insert")
    write(base, rows([0, 1, 2], 1), "upsert")


def _without_metadata(base: str) -> None:
    """A table with history and no metadata table."""
    Table.create(base, "chaos", [KEY], ["part"], with_metadata=False)
    write(base, rows(list(range(8)), 0), "insert", replace(config(base), metadata_enabled=False))
    write(base, rows([0, 1, 2], 1), "upsert", replace(config(base), metadata_enabled=False))


def _create_metadata_in_hudi_format(table: Table, settings: CoordinatorConfig, lock: LockProvider) -> None:
    """`tandem metadata create --format hudi --index files,column_stats,bloom_filters`, under the lock."""
    with held(lock):
        record_metadata_indexes(table.storage, [COLUMN_STATS, BLOOM_FILTERS])
        initialize(table.metadata(), table.config.name, table.timeline(), hudi_format=True)


def _build_indexes(table: Table, settings: CoordinatorConfig, lock: LockProvider) -> None:
    with held(lock):
        index_build.build(table.metadata(), table.timeline(), [COLUMN_STATS, BLOOM_FILTERS])


def _mor_table(base: str) -> None:
    """A merge-on-read table with history: updates in logs over every file group, one compaction behind."""
    Table.create(base, "chaos", [KEY], ["part"], table_type="MERGE_ON_READ")
    write(base, rows(list(range(8)), 0), "insert")
    write(base, rows([0, 1, 2, 3], 1), "upsert")
    run_service(base, _forced_data_compaction)
    write(base, rows([2, 3, 4, 5], 2), "upsert")
    write(base, rows([6], 0), "delete")


def _mor_failed_write(base: str) -> None:
    """A merge-on-read table whose last upsert died after its MDT deltacommit, its logs written."""
    _mor_table(base)
    try:
        with simulate("commit.mdt"):
            write(base, rows([1, 2, 20], 9), "upsert")
    except SimulatedCrash:
        pass
    table_lock(Table.open(base), config(base)).force_release()


def _mor_compacted(base: str) -> None:
    """A merge-on-read table compacted after its last logs, so a clean has superseded slices to take."""
    _mor_table(base)
    run_service(base, _forced_data_compaction)
    write(base, rows([0, 7], 3), "upsert")


def _forced_data_compaction(table: Table, settings: CoordinatorConfig, lock: LockProvider) -> None:
    compact_data(table, settings, lock, force=True)


def _savepoint_and_clean(table: Table, settings: CoordinatorConfig, lock: LockProvider) -> None:
    """A savepoint of an older commit (under the lock), whose files newer versions supersede, then a clean
    keeping one version: it must keep the savepoint's."""
    with held(lock):
        savepoint.create(table, table.timeline().completed_writes()[-2].time, "chaos")
    clean(table, settings, lock)


def _with_savepoint_behind(base: str) -> None:
    """A table with history, a savepoint of its first upsert, then an upsert and a delete after it."""
    _with_history(base, hudi_format=True)
    run_service(base, lambda t, c, lock: savepoint.create(t, t.timeline().completed_writes()[1].time, "chaos"))
    write(base, rows([2, 3, 30], 8), "upsert")
    write(base, rows([0], 0), "delete")


def _mor_with_savepoint_behind(base: str) -> None:
    """A merge-on-read table savepointed, then logs over kept slices and a new group, a compaction and logs in
    its slices: a restore takes every kind of undo (command blocks, removed slices)."""
    _mor_table(base)
    run_service(base, lambda t, c, lock: savepoint.create(t, t.timeline().completed_writes()[-1].time, "chaos"))
    write(base, rows([1, 2, 40], 3), "upsert")
    run_service(base, _forced_data_compaction)
    write(base, rows([2, 3], 4), "upsert")


def _restore_to_savepoint(table: Table, settings: CoordinatorConfig, lock: LockProvider) -> None:
    with held(lock):
        restore.restore(table, savepoint.listed(table)[0].time)


def bootstrap_source(base: str) -> str:
    """The parquet dataset a bootstrap scenario takes in: beside the tables (every crash state's copy shares it,
    and it must never change)."""
    return str(Path(base).parent / "bootstrap-source")


def _bootstrap_template(base: str) -> None:
    """A `df.write.partitionBy("part")`-shaped source (two files in p0, one in p1) and the empty table a
    bootstrap of it creates first (a crash inside the bootstrap leaves at least that)."""
    source = bootstrap_source(base)
    for name, ids in (("part=p0/part-00000.parquet", [0, 2]), ("part=p0/part-00001.parquet", [4]),
                      ("part=p1/part-00000.parquet", [1, 3, 5])):  # fmt: skip
        Path(source, name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows(ids, 0).drop_columns(["part"]), str(Path(source, name)))
    Table.create(base, "chaos", [KEY], ["part"], hive_style=True, extra={BOOTSTRAP_BASE_PATH: source,
                 BOOTSTRAP_INDEX_CLASS: INDEX_CLASS})  # fmt: skip


def _bootstrap(base: str, mode: str) -> None:
    request = BootstrapRequest(bootstrap_source(base), base, [KEY], mode=mode)
    run_service(base, lambda table, settings, lock: bootstrap(request, settings, lock))


@dataclass(frozen=True)
class Scenario:
    name: str
    doc: str
    prepare: Callable[[str], None]
    act: Callable[[str], None]
    # why the independent `hudi` package (hudi-rs) does not judge this scenario, if it does not
    without_hudi_rs: str | None = None


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("insert", "insert new keys into two partitions", _new_table,
                 lambda b: write(b, rows([10, 11, 12, 13], 1), "insert")),
        Scenario("upsert", "update two keys, add two", _with_history,
                 lambda b: write(b, rows([2, 3, 30, 31], 7), "upsert")),
        Scenario("delete", "delete two keys", _new_table,
                 lambda b: write(b, rows([4, 5], 0), "delete")),
        Scenario("insert_overwrite", "replace partition p0", _new_table,
                 lambda b: write(b, rows([40, 42], 5), "insert_overwrite")),
        Scenario("clean", "KEEP_LATEST_FILE_VERSIONS=1 clean of old versions", _with_history,
                 lambda b: run_service(b, lambda t, c, lock: clean(t, c, lock))),
        Scenario("rollback", "`tandem recover` of a write that died after its MDT deltacommit",
                 _with_failed_write, lambda b: run_service(b, recover_table)),
        Scenario("mdt_compaction", "forced MDT compaction as the worker runs it", _with_history,
                 lambda b: run_service(b, _forced_compaction)),
        Scenario("mdt_clean", "MDT compaction then MDT clean of slices past the last 3 compactions",
                 _with_compactions, lambda b: run_service(b, _forced_compaction)),
        Scenario("archival", "archival of both timelines (34 commits)", _with_many_commits,
                 lambda b: run_service(b, archive_table)),
        Scenario("index_build", "`tandem metadata create --index column_stats,bloom_filters`", _without_indexes,
                 lambda b: run_service(b, _build_indexes)),
        # the same protocol on a metadata table in Hudi's format
        Scenario("hudi_upsert", "update two keys, add two (MDT in Hudi's format)",
                 partial(_with_history, hudi_format=True), lambda b: write(b, rows([2, 3, 30, 31], 7), "upsert")),
        Scenario("hudi_rollback", "`tandem recover` of a write that died after its MDT deltacommit (Hudi's format)",
                 partial(_with_failed_write, hudi_format=True), lambda b: run_service(b, recover_table)),
        Scenario("hudi_mdt_clean", "MDT compaction then MDT clean (Hudi's format)",
                 partial(_with_compactions, hudi_format=True), lambda b: run_service(b, _forced_compaction)),
        Scenario("hudi_index_build", "column_stats and bloom_filters built on an MDT in Hudi's format",
                 partial(_without_indexes, hudi_format=True), lambda b: run_service(b, _build_indexes)),
        Scenario("hudi_metadata_create", "`tandem metadata create --format hudi` on a table with files",
                 _without_metadata, lambda b: run_service(b, _create_metadata_in_hudi_format)),
        Scenario("hudi_savepoint", "`tandem savepoint create` of an older commit, then a clean (Hudi's format)",
                 partial(_with_history, hudi_format=True), lambda b: run_service(b, _savepoint_and_clean)),
        Scenario("hudi_restore", "`tandem restore` to a savepoint two upserts back (Hudi's format)",
                 _with_savepoint_behind, lambda b: run_service(b, _restore_to_savepoint), HUDI_RS_RESTORE),
        Scenario("hudi_migration", "an upsert that first rebuilds a previous-format MDT in Hudi's format",
                 _with_previous_format_history, lambda b: write(b, rows([2, 3, 30, 31], 7), "upsert")),
        # merge-on-read tables (MDT in Hudi's format)
        Scenario("mor_upsert", "merge-on-read: update four keys (logs), add two (base files)", _mor_table,
                 lambda b: write(b, rows([1, 2, 5, 7, 40, 41], 7), "upsert"), HUDI_RS_MOR),
        Scenario("mor_delete", "merge-on-read: delete three keys (delete blocks)", _mor_table,
                 lambda b: write(b, rows([0, 3, 4], 0), "delete"), HUDI_RS_MOR),
        Scenario("mor_rollback", "merge-on-read: `tandem recover` of an upsert that died after its MDT deltacommit",
                 _mor_failed_write, lambda b: run_service(b, recover_table), HUDI_RS_MOR),
        Scenario("mor_compaction", "merge-on-read: forced compaction of the data table as the worker runs it",
                 _mor_table, lambda b: run_service(b, _forced_data_compaction), HUDI_RS_MOR),
        Scenario("mor_clean", "merge-on-read: clean of compacted slices with their logs", _mor_compacted,
                 lambda b: run_service(b, lambda t, c, lock: clean(t, c, lock)), HUDI_RS_MOR),
        Scenario("mor_restore", "merge-on-read: `tandem restore` past logs, a new group and a compaction",
                 _mor_with_savepoint_behind, lambda b: run_service(b, _restore_to_savepoint), HUDI_RS_MOR),
        # bootstrap (RFC-12) of a parquet dataset, one scenario per mode (each is one instant)
        Scenario("bootstrap_metadata_only", "metadata-only bootstrap: skeletons, bootstrap index, instant 01",
                 _bootstrap_template, partial(_bootstrap, mode=METADATA_ONLY), HUDI_RS_BOOTSTRAP),
        Scenario("bootstrap_full_record", "full-record bootstrap: a bulk insert at instant 02",
                 _bootstrap_template, partial(_bootstrap, mode=FULL_RECORD), HUDI_RS_BOOTSTRAP),
    )
}  # fmt: skip
HUDI_FORMAT_SCENARIOS = tuple(name for name in SCENARIOS if name.startswith("hudi_"))
MOR_SCENARIOS = tuple(name for name in SCENARIOS if name.startswith("mor_"))
BOOTSTRAP_SCENARIOS = tuple(name for name in SCENARIOS if name.startswith("bootstrap_"))
