"""The MDT's column_stats and bloom_filters indexes: exact through every path that changes the table, used by
readers to skip files and by upserts to skip tagging reads, and never trusted when damaged.

The oracle for the indexes is `index_build.validate` (records recomputed from the live files' footers and
data); for rows it is the `hudi` package's read filtered by DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.mdt import deltacommit, index_build
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import clean, compact
from coordinator.write.writer import LocalWriter
from tests.conftest import hudi_read, tandem, unzip_fixture
from timeline.mdt import layout
from timeline.mdt.health import MetadataFallbackWarning
from timeline.mdt.log import BLOOM_FILTERS, COLUMN_STATS, PARTITION_ATTRIBUTE, decode_log
from timeline.mdt.reader import MetadataReader
from timeline.metrics import METRICS, TAGGING_FILES_SKIPPED
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

BOTH = [COLUMN_STATS, BLOOM_FILTERS]


def batch(start: int, n: int, day: int) -> pa.Table:
    """n rows with ids from `start`, clustered `ts` (one value range per batch) and a partition per id % 3."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "city": [["ams", "ber", "cph"][i % 3] for i in ids],
            "ts": [day * 1000 + i % 1000 for i in ids],
            "name": [f"n{i:06d}" if i % 7 else None for i in ids],
            "x": [float("nan") if i % 11 == 0 else i / 3 for i in ids],
        }
    )


def assert_indexes_exact(table: Table) -> None:
    reports = index_build.validate(table.metadata(), table.timeline())
    assert {r.partition for r in reports} == set(table.config.metadata_indexes)
    for report in reports:
        assert report.errors == 0, report.to_json()
        assert report.files > 0


def filtered_oracle(table: Table, where: str) -> list[tuple]:
    rows = hudi_read(table.uri)
    found = duckdb.connect().execute(f"SELECT id FROM rows WHERE {where}").fetchall()
    assert rows.num_rows
    return sorted(found)


def ours(table: Table, where: str):
    plan = plan_scan(Table.open(table.uri), where)
    return sorted((i,) for i in read_plan(plan).column("id").to_pylist()), plan


@pytest.fixture
def table(tmp_path: Path) -> Table:
    """Tandem's previous format: the damage and record-layout tests below are of its files."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], precombine_field="ts", hudi_format=False)
    assert sorted(table.config.metadata_indexes) == sorted(BOTH)
    return table


@pytest.mark.parametrize("hudi_format", [False, True], ids=["tandem-format", "hudi-format"])
def test_every_path_that_changes_the_table_keeps_both_indexes_exact(tmp_path: Path, hudi_format: bool) -> None:
    """On Hudi's format the planner skips with Hudi's own records, as Java reads them."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], precombine_field="ts", hudi_format=hudi_format)
    config = CoordinatorConfig(commits_retained=1, clean_policy="KEEP_LATEST_COMMITS", max_delta_commits=3)
    writer = LocalWriter(table, coordinator=config)
    for day in range(4):
        writer.write(batch(day * 100, 100, day), "bulk_insert")
    assert_indexes_exact(table)
    writer.write(batch(50, 100, 9), "upsert")
    writer.write(batch(0, 30, 9).select(["id", "city", "ts"]), "delete")
    assert_indexes_exact(table)
    amsterdam = batch(1000, 10, 5).filter(pa.compute.equal(batch(1000, 10, 5).column("city"), "ams"))
    writer.write(amsterdam, "insert_overwrite")
    assert_indexes_exact(table)
    assert clean(table, config) is not None
    assert_indexes_exact(table)
    compact(table, config, table_lock(table, config), force=True)
    assert Path(table.storage.full(".hoodie/metadata")).joinpath(COLUMN_STATS).exists()
    assert_indexes_exact(table)
    assert table.metadata().is_hudi_format() == hudi_format
    for where, prunes in (("ts >= 9000 AND ts < 9010", True), ("name = 'n000051'", True), ("x < 17", False)):
        rows, plan = ours(table, where)
        assert rows == filtered_oracle(table, where), where
        assert plan.pruned_by_stats > 0 or not prunes, (where, plan.stats)


def test_turning_an_index_on_builds_it_and_off_deletes_it(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], indexes=())
    writer = LocalWriter(table)
    for day in range(3):
        writer.write(batch(day * 50, 50, day), "bulk_insert")
    assert Table.open(table.uri).config.metadata_indexes == []
    done = tandem("metadata", "create", table.uri, "--index", "column_stats,bloom_filters")
    assert done.returncode == 0, done.stderr
    table = Table.open(table.uri)
    assert sorted(table.config.metadata_indexes) == sorted(BOTH)
    assert_indexes_exact(table)
    stats = json.loads(tandem("metadata", "stats", table.uri, "--json").stdout)
    assert stats["partitions"][COLUMN_STATS]["records"] >= 9 * 4
    assert stats["partitions"][BLOOM_FILTERS]["records"] == 9
    explained = json.loads(tandem("read", table.uri, "--where", "ts < 1000", "--explain", "--json").stdout)
    assert explained["pruned_by_column_stats"] == 6 and explained["files_to_read"] == 3
    done = tandem("metadata", "delete", table.uri, "--index", "column_stats")
    assert done.returncode == 0, done.stderr
    table = Table.open(table.uri)
    assert table.config.metadata_indexes == [BLOOM_FILTERS]
    assert not Path(table.storage.full(f"{layout.MDT_DIR}/{COLUMN_STATS}")).exists()
    explained = json.loads(tandem("read", table.uri, "--where", "ts < 1000", "--explain", "--json").stdout)
    assert explained["pruned_by_column_stats"] == 0 and explained["column_stats"] == "no column_stats index"
    bad = tandem("metadata", "create", table.uri, "--index", "zone_maps")
    assert bad.returncode == 2 and "zone_maps" in bad.stderr


def test_a_writer_setting_turns_an_index_on(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], indexes=())
    LocalWriter(table).write(batch(0, 30, 0), "bulk_insert")
    config = CoordinatorConfig.from_hudi({"hoodie.metadata.index.column.stats.enable": "true"})
    LocalWriter(Table.open(table.uri), coordinator=config).write(batch(30, 30, 1), "bulk_insert")
    table = Table.open(table.uri)
    assert table.config.metadata_indexes == [COLUMN_STATS]
    assert_indexes_exact(table)


@pytest.mark.parametrize("checksummed", [True, False])
def test_a_damaged_index_is_never_trusted(table: Table, checksummed: bool) -> None:
    """With its compaction's checksum the health check sends the read to storage; without one (a compaction
    from before the checksums) the planner itself finds the index unreadable and plans without it."""
    config = CoordinatorConfig(max_delta_commits=2)
    writer = LocalWriter(table, coordinator=config)
    for day in range(3):
        writer.write(batch(day * 100, 100, day), "bulk_insert")
    compact(table, config, table_lock(table, config), force=True)
    base = layout.latest_completed_compaction(table.metadata().timeline())
    path = Path(table.storage.full(f"{layout.MDT_DIR}/{layout.index_base_path(COLUMN_STATS, base)}"))
    assert path.exists()
    path.write_bytes(b"PAR1 not a parquet file PAR1")
    if not checksummed:
        completed = Path(table.storage.full(f"{layout.MDT_META_DIR}/{base}.commit"))
        doc = json.loads(completed.read_bytes())
        del doc["extraMetadata"][layout.BASE_CHECKSUMS_KEY]
        completed.write_text(json.dumps(doc))
    where = "ts < 1000"
    if checksummed:  # the health check names the damaged base in its one fallback warning
        with pytest.warns(MetadataFallbackWarning, match="do not match compaction"):
            rows, plan = ours(table, where)
    else:
        rows, plan = ours(table, where)
    assert rows == filtered_oracle(table, where)
    expected = "the listing came from storage" if checksummed else "unreadable"
    assert plan.pruned_by_stats == 0 and expected in plan.stats, plan.stats
    report = tandem("metadata", "validate", table.uri, "--json")
    assert report.returncode == 1


@pytest.mark.parametrize("hudi_format", [False, True], ids=["tandem-format", "hudi-format"])
def test_upserts_tag_with_the_bloom_index_and_agree_with_the_simple_one(tmp_path: Path, hudi_format: bool) -> None:
    """On Hudi's format the filters are Hudi's records, without key ranges."""
    results = {}
    for index_type in ("BLOOM", "SIMPLE"):
        path = str(tmp_path / index_type)
        table = Table.create(path, "t", ["id"], ["city"], precombine_field="ts", hudi_format=hudi_format)
        config = CoordinatorConfig(index_type=index_type)
        writer = LocalWriter(table, coordinator=config)
        for day in range(6):
            writer.write(batch(day * 90, 90, day), "bulk_insert")
        skipped = METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0)
        writer.write(batch(10, 20, 7), "upsert")
        results[index_type] = (
            METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0) - skipped,
            sorted(tuple(r.values()) for r in hudi_read(table.uri).select(["id", "city", "ts", "name"]).to_pylist()),
        )
        assert_indexes_exact(table)
    assert results["BLOOM"][1] == results["SIMPLE"][1]
    assert results["BLOOM"][0] >= 10 and results["SIMPLE"][0] == 0


@pytest.mark.parametrize(
    "fixture", ["v6_simplekeygen_nonhivestyle", "v6_simplekeygen_hivestyle_no_metafields", "v6_nonpartitioned"]
)
def test_spark_written_fixtures_get_exact_indexes_and_skip_to_the_same_rows(fixture: str, tmp_path: Path) -> None:
    base = unzip_fixture(fixture, tmp_path)
    if not Table.open(str(base)).metadata().exists():
        assert tandem("metadata", "create", str(base)).returncode == 0
    done = tandem("metadata", "create", str(base), "--index", "column_stats,bloom_filters")
    assert done.returncode == 0, done.stderr
    table = Table.open(str(base))
    assert_indexes_exact(table)
    oracle = hudi_read(base)
    assert oracle.num_rows
    for column in [c for c in oracle.column_names if not c.startswith("_hoodie")][:4]:
        for where in (f"{column} IS NOT NULL", f"{column} IS NULL", f"{column} = (SELECT min({column}) FROM oracle)"):
            if "SELECT" in where:
                low = duckdb.connect().execute(f"SELECT min({column}) FROM oracle").fetchone()[0]
                where = f"{column} = {low!r}" if isinstance(low, (int, str)) else f"{column} IS NOT NULL"
            rows = read_plan(plan_scan(table, where))
            expected = duckdb.connect().execute(f"SELECT count(*) FROM oracle WHERE {where}").fetchone()[0]
            assert rows.num_rows == expected, where


def test_compaction_drops_records_of_files_it_no_longer_lists(table: Table, monkeypatch) -> None:
    """Compaction is the indexes' garbage collector, whatever tombstones a clean did or did not write."""
    config = CoordinatorConfig(commits_retained=1, max_delta_commits=100)
    writer = LocalWriter(table, coordinator=config)
    for version in range(3):
        writer.write(batch(0, 30, version), "upsert")
    monkeypatch.setattr("timeline.mdt.indexes.tombstones", lambda paths, indexes: {})
    assert clean(table, config) is not None
    stale = {r.partition: len(r.stale) for r in index_build.validate(table.metadata(), table.timeline())}
    assert stale[COLUMN_STATS] > 0 and stale[BLOOM_FILTERS] > 0
    compact(table, config, table_lock(table, config), force=True)
    assert_indexes_exact(table)


def test_a_writer_opened_before_an_index_was_turned_on_still_maintains_it(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["city"], indexes=())
    early = LocalWriter(table)  # holds the table's config from before the build
    early.write(batch(0, 30, 0), "bulk_insert")
    assert index_build.build(table.metadata(), table.timeline(), BOTH) is not None
    early.write(batch(30, 30, 1), "bulk_insert")
    assert_indexes_exact(Table.open(table.uri))


def test_the_spark_writer_tags_with_the_bloom_index_too_and_spark_builds_an_index(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from coordinator.spark.session import local_session
    from coordinator.spark.writer import SparkWriter

    spark = local_session("tandem-bloom-tagging")
    try:
        built = Table.create(str(tmp_path / "built"), "t", ["id"], ["city"], indexes=())
        for day in range(3):
            LocalWriter(built).write(batch(day * 40, 40, day), "bulk_insert")
        assert index_build.build(built.metadata(), built.timeline(), BOTH, spark=spark) is not None
        assert_indexes_exact(Table.open(built.uri))
        results = {}
        for index_type in ("BLOOM", "SIMPLE"):
            table = Table.create(str(tmp_path / index_type), "t", ["id"], ["city"], precombine_field="ts")
            local = LocalWriter(table)
            for day in range(5):
                local.write(batch(day * 90, 90, day), "bulk_insert")
            skipped = METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0)
            writer = SparkWriter(spark, table, coordinator=CoordinatorConfig(index_type=index_type))
            writer.write(spark.createDataFrame(batch(10, 20, 7).drop_columns(["x"]).to_pandas()), "upsert")
            rows = hudi_read(table.uri).select(["id", "city", "ts", "name"]).to_pylist()
            results[index_type] = (METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0) - skipped, sorted(map(str, rows)))
            assert_indexes_exact(table)
    finally:
        spark.stop()
    assert results["BLOOM"][1] == results["SIMPLE"][1]
    assert results["BLOOM"][0] >= 9 and results["SIMPLE"][0] == 0


def test_a_bloom_filter_that_cannot_be_read_keeps_its_file(table: Table, monkeypatch) -> None:
    """A filter of another version (or garbage) is no answer: tagging opens the file, and no key is duplicated."""
    writer = LocalWriter(table, coordinator=CoordinatorConfig(index_type="BLOOM"))
    for day in range(3):
        writer.write(batch(day * 60, 60, day), "bulk_insert")

    def unreadable(data):
        raise ValueError("unsupported bloom filter version 1")

    monkeypatch.setattr("coordinator.write.bloom_index.BloomFilter.from_bytes", unreadable)
    writer.write(batch(0, 60, 9), "upsert")
    ids = hudi_read(table.uri).column("id").to_pylist()
    assert sorted(ids) == list(range(180))


def test_validate_reports_a_bloom_filter_no_reader_can_use(table: Table) -> None:
    LocalWriter(table).write(batch(0, 30, 0), "bulk_insert")
    good = index_build.validate(table.metadata(), table.timeline())
    assert all(r.errors == 0 for r in good)
    stored = MetadataReader(table.metadata(), table.timeline()).index(BLOOM_FILTERS).to_pylist()[0]
    index_build.commit_records(
        table.metadata(), table.timeline(), {BLOOM_FILTERS: [{**stored, "bloomFilter": b"junk"}]}
    )
    reports = {r.partition: r for r in index_build.validate(table.metadata(), table.timeline())}
    assert len(reports[BLOOM_FILTERS].wrong) == 1


def test_index_records_cut_into_many_log_blocks_read_as_one(table: Table, monkeypatch) -> None:
    """A commit's index records go out a block of about INDEX_BLOCK_BYTES at a time (a large insert's bloom
    filters never sit encoded in memory together): cut into a block per record, they read back exact."""
    monkeypatch.setattr(deltacommit, "INDEX_BLOCK_BYTES", 1)
    writer = LocalWriter(table)
    writer.write(batch(0, 60, 0), "bulk_insert")
    writer.write(batch(60, 60, 1), "bulk_insert")
    logs = sorted(Path(table.storage.full(layout.MDT_DIR)).rglob("*.log.*"))
    blocks = [b for log in logs for b in decode_log(log.read_bytes()).blocks]
    index_blocks = [b for b in blocks if b.attributes.get(PARTITION_ATTRIBUTE) in BOTH]
    assert index_blocks and all(len(b.records) == 1 for b in index_blocks)
    assert {b.attributes[PARTITION_ATTRIBUTE] for b in index_blocks} == set(BOTH)
    assert_indexes_exact(table)
    got, plan = ours(table, "ts >= 1000")
    assert got == filtered_oracle(table, "ts >= 1000") and plan.pruned_by_stats > 0
