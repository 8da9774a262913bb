"""Java Hudi's table services on a shared table, default settings but for retention: its clean, archival,
clustering and insert_overwrite on a Tandem table; a Spark job SIGKILLed mid-write and Hudi's own rollback of it;
a 1.x writer upgrading a table past version 6 (Hudi 1.2 writes version 9); and Java tables with features Tandem
lacks (merge-on-read bootstrap, CDC).

After each, Tandem goes on (continuing the metadata table Java built, in Hudi's format) or refuses
in one line and changes nothing; every reader (Tandem, Java with its metadata table on and off) sees the model.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import tandem, wait_until
from tests.hudi_reference.client import HudiReference
from tests.hudi_reference.shared_table import (
    assert_all_read,
    data_files,
    delete,
    expected,
    jsonl,
    ok,
    properties,
    rows,
    snapshot,
    tandem_rows,
    upsert,
)

TRIPS = {  # what the table needs; Hudi's defaults otherwise (metadata table on, EAGER rollback, inline clean)
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.hive_style_partitioning": "true",
}
RETAIN_LITTLE = {  # so that a few commits make Java clean, archive and compact its metadata table
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.metadata.compact.max.delta.commits": "1",
}
CLUSTER_NOW = {"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "1"}


def key(row: dict) -> object:
    return row["id"]


def _tandem_table(path: str, model: dict) -> None:
    from coordinator.config import CoordinatorConfig
    from coordinator.write.writer import LocalWriter
    from timeline.table import Table

    table = Table.create(path, "trips", ["id"], ["city"], hive_style=True, precombine_field="ts")
    first = rows((1, "x", "a", 1.0, 1), (2, "x", "a", 2.0, 1), (3, "x", "b", 3.0, 1), (4, "x", "c", 4.0, 1))
    LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory")).write(first, "upsert")
    upsert(model, key, first)


def _completed(path: str, action: str) -> list[str]:
    return sorted(n.split(".")[0] for n in os.listdir(Path(path) / ".hoodie") if n.endswith(f".{action}"))


def _replaced_by_java(path: str) -> dict[str, str]:
    """Java's completed replacecommits: instant -> operationType (cluster, insert_overwrite)."""
    import json

    found = {}
    for instant in _completed(path, "replacecommit"):
        text = (Path(path) / ".hoodie" / f"{instant}.replacecommit").read_text()
        found[instant] = json.loads(text)["operationType"]
    return found


def _tandem_takes_back(java_hudi, tmp_path: Path, path: str, model: dict, name: str) -> None:
    """Tandem after a Java writer, continuing its metadata table: write (upsert and delete), clean, archive,
    validate; all readers agree."""
    changed = rows((2, "x", "a", 200.0, 50), (30, "x", "b", 30.0, 50))
    ok("write", path, "--input", jsonl(tmp_path, f"{name}-up", changed), "--operation", "upsert")
    upsert(model, key, changed)
    gone = rows((4, "x", "c", 4.0, 51))
    ok("write", path, "--input", jsonl(tmp_path, f"{name}-del", gone), "--operation", "delete")
    delete(model, key, gone)
    ok("clean", path, "--retained", "1")
    ok("archive", path)
    ok("recover", path)
    ok("metadata", "validate", path)
    assert_all_read(java_hudi, tmp_path, path, model, name)


def test_java_clean_archival_clustering_and_insert_overwrite_on_a_tandem_table(java_hudi, tmp_path):
    path = str(tmp_path / "trips")
    model: dict = {}
    _tandem_table(path, model)
    options = {**TRIPS, **RETAIN_LITTLE}
    for i in range(2, 6):  # rewrites of one file group: Java cleans the old versions and archives
        changed = rows((1, "x", "a", float(i), i))
        java_hudi.write(path, changed, "upsert", options)
        upsert(model, key, changed)
    for i in (10, 11):  # new file groups in city=a, then clustering rewrites the partition's small files
        java_hudi.write(path, rows((i, "x", "a", float(i), i)), "bulk_insert", options)
        upsert(model, key, rows((i, "x", "a", float(i), i)))
    java_hudi.write(path, rows((12, "x", "a", 12.0, 12)), "insert", {**options, **CLUSTER_NOW})
    upsert(model, key, rows((12, "x", "a", 12.0, 12)))
    overwrite = rows((20, "x", "b", 20.0, 13))  # replaces every record of city=b
    java_hudi.write(path, overwrite, "insert_overwrite", options)
    model = {k: v for k, v in model.items() if v[2] != "b"}
    upsert(model, key, overwrite)

    assert _completed(path, "clean"), "Java did not clean"
    assert any(n.startswith(".commits_.archive") for n in os.listdir(Path(path) / ".hoodie" / "archived"))
    assert sorted(_replaced_by_java(path).values()) == ["CLUSTER", "INSERT_OVERWRITE"]
    assert "hoodie.table.metadata.partitions=files" in properties(path)

    # Tandem reads Java's work (listing from Java's MDT), then takes the table back
    read = tandem("read", path, "--output", str(tmp_path / "before.parquet"))
    assert read.returncode == 0 and not read.stderr.strip(), read.stderr
    assert sorted(r["id"] for r in pq.read_table(tmp_path / "before.parquet").to_pylist()) == sorted(
        r[0] for r in model.values()
    )
    _tandem_takes_back(java_hudi, tmp_path, path, model, "back")

    # and Java once more on what Tandem cleaned and archived
    again = rows((1, "x", "a", 100.0, 60))
    java_hudi.write(path, again, "upsert", options)
    upsert(model, key, again)
    assert_all_read(java_hudi, tmp_path, path, model, "again")


def test_a_killed_java_write_rolled_back_by_hudi_then_tandem_goes_on(java_hudi, tmp_path):
    """A second Spark driver (the run's one other JVM) is SIGKILLed once its first data file appears."""
    path = str(tmp_path / "trips")
    model: dict = {}
    _tandem_table(path, model)
    changed = rows((2, "x", "a", 20.0, 2))
    java_hudi.write(path, changed, "upsert", TRIPS)
    upsert(model, key, changed)

    before = data_files(path)
    pending_before = set(os.listdir(Path(path) / ".hoodie"))
    doomed = rows(*[(1000 + i, "x", ("a", "b", "c")[i % 3], float(i), 3) for i in range(200_000)])
    victim = HudiReference()
    try:
        victim.start_write(path, doomed, "bulk_insert", TRIPS)
        wait_until(lambda: data_files(path) - before, 240, "the doomed write's first data file")
    finally:
        victim.kill()
        victim.close()
    inflight = sorted(
        n.split(".")[0] for n in set(os.listdir(Path(path) / ".hoodie")) - pending_before if n.endswith(".inflight")
    )
    assert len(inflight) == 1 and inflight[0] not in _completed(path, "commit"), inflight
    partial = data_files(path) - before
    assert partial and all(inflight[0] in f for f in partial), partial

    # nobody reads the killed write
    assert tandem_rows(tmp_path, path, "killed") == expected(model)
    assert {r["id"] for r in java_hudi.read(path, metadata=False).to_pylist()} == {r[0] for r in model.values()}

    # Java's next write rolls it back (Hudi's default EAGER policy), deleting its files
    changed = rows((3, "x", "b", 30.0, 4))
    java_hudi.write(path, changed, "upsert", TRIPS)
    upsert(model, key, changed)
    assert _completed(path, "rollback"), "Hudi did not roll the killed write back"
    assert not partial & data_files(path), "Hudi's rollback left files of the killed write"
    _tandem_takes_back(java_hudi, tmp_path, path, model, "after-kill")


def test_a_hudi_1x_writer_upgrades_the_table_past_6_and_tandem_refuses_it(java_hudi_1x, tmp_path):
    path = str(tmp_path / "trips")
    model: dict = {}
    _tandem_table(path, model)
    java_hudi_1x.write(path, rows((5, "x", "a", 5.0, 2)), "upsert", TRIPS)
    version = next(
        line.split("=")[1] for line in properties(path).splitlines() if line.startswith("hoodie.table.version=")
    )
    assert int(version) >= 8, f"Hudi 1.x no longer upgrades on write (version {version})"  # 1.2 writes 9
    before = snapshot(path)
    source = jsonl(tmp_path, "in", rows((6, "x", "a", 6.0, 3)))
    for args in (
        ("write", path, "--input", source, "--operation", "upsert"),
        ("recover", path),
        ("read", path),
        ("clean", path),
        ("metadata", "repair", path),
    ):
        refused = tandem(*args)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1, (args, refused.returncode, refused.stderr)
        assert f"table version '{version}' is not supported" in lines[0], (args, lines)
    assert snapshot(path) == before


@pytest.mark.parametrize("feature", ["bootstrap", "cdc", "custom-keygen"])
def test_java_tables_with_features_tandem_lacks_are_refused(java_hudi, tmp_path, feature):
    path = str(tmp_path / feature)
    options = {**TRIPS, "hoodie.table.name": feature}
    if feature == "bootstrap":  # a parquet folder taken in as a merge-on-read table (RFC-12; copy-on-write is read)
        source = tmp_path / "source" / "city=a"
        source.mkdir(parents=True)
        pq.write_table(rows((1, "x", "a", 1.0, 1)), source / "part-0.parquet")
        options["hoodie.bootstrap.base.path"] = str(tmp_path / "source")
        options["hoodie.datasource.write.table.type"] = "MERGE_ON_READ"
        java_hudi.write(path, rows((1, "x", "a", 1.0, 1)), "bootstrap", options)
        message = "bootstrapped merge-on-read tables are not supported"
    elif feature == "custom-keygen":  # Hudi's CustomKeyGenerator (field:TYPE partition fields); Tandem has none
        options["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.CustomKeyGenerator"
        options["hoodie.datasource.write.partitionpath.field"] = "city:SIMPLE"
        java_hudi.write(path, rows((1, "x", "a", 1.0, 1)), "upsert", options)
        message = "key generator org.apache.hudi.keygen.CustomKeyGenerator is not supported"
    else:
        options["hoodie.table.cdc.enabled"] = "true"
        java_hudi.write(path, rows((1, "x", "a", 1.0, 1)), "upsert", options)
        java_hudi.write(path, rows((1, "x", "a", 2.0, 2)), "upsert", options)
        message = "CDC tables are not supported"
    before = snapshot(path)
    source = jsonl(tmp_path, "in", rows((3, "x", "a", 3.0, 3)))
    for args in (("write", path, "--input", source, "--operation", "upsert"), ("recover", path), ("read", path)):
        refused = tandem(*args)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1 and message in lines[0], (args, refused.stderr)
    assert snapshot(path) == before


def _latest_commit(path: str) -> str:
    return max(_completed(path, "commit") + _completed(path, "replacecommit"))


def test_tandem_on_a_java_table_java_cleaned_archived_clustered_and_rolled_back(java_hudi, tmp_path):
    """Java creates the table with its metadata table, runs every service on it and rolls a commit back; Tandem
    takes it over; then a Java writer with its metadata table off (which deletes `.hoodie/metadata`, Tandem's
    included), and Tandem again."""
    path = str(tmp_path / "trips")
    options = {**TRIPS, **RETAIN_LITTLE}
    model: dict = {}
    first = rows((1, "x", "a", 1.0, 1), (2, "x", "a", 2.0, 1), (3, "x", "b", 3.0, 1), (4, "x", "c", 4.0, 1))
    java_hudi.write(path, first, "upsert", options)
    upsert(model, key, first)
    for i in range(2, 5):
        java_hudi.write(path, rows((1, "x", "a", float(i), i)), "upsert", options)
        upsert(model, key, rows((1, "x", "a", float(i), i)))
    for i in (10, 11):
        java_hudi.write(path, rows((i, "x", "a", float(i), i)), "bulk_insert", options)
        upsert(model, key, rows((i, "x", "a", float(i), i)))
    java_hudi.write(path, rows((12, "x", "a", 12.0, 12)), "insert", {**options, **CLUSTER_NOW})
    upsert(model, key, rows((12, "x", "a", 12.0, 12)))
    java_hudi.write(path, rows((20, "x", "b", 20.0, 13)), "insert_overwrite", options)
    model = {k: v for k, v in model.items() if v[2] != "b"}
    upsert(model, key, rows((20, "x", "b", 20.0, 13)))
    java_hudi.write(path, rows((99, "x", "c", 99.0, 14)), "upsert", options)  # then rolled back by Java
    java_hudi.sql(f"CREATE TABLE IF NOT EXISTS java_trips USING hudi LOCATION '{path}'")
    java_hudi.sql(f"CALL rollback_to_instant(table => 'java_trips', instant_time => '{_latest_commit(path)}')")
    java_hudi.sql("DROP TABLE java_trips")  # the catalog entry only; the files stay

    assert _completed(path, "clean") and _completed(path, "rollback")
    assert any(n.startswith(".commits_.archive") for n in os.listdir(Path(path) / ".hoodie" / "archived"))
    assert sorted(_replaced_by_java(path).values()) == ["CLUSTER", "INSERT_OVERWRITE"]
    assert_all_read(java_hudi, tmp_path, path, model, "java")
    _tandem_takes_back(java_hudi, tmp_path, path, model, "tandem")

    no_mdt = {**options, "hoodie.metadata.enable": "false"}
    java_hudi.write(path, rows((5, "x", "c", 5.0, 70)), "upsert", no_mdt)
    upsert(model, key, rows((5, "x", "c", 5.0, 70)))
    assert "hoodie.table.metadata.partitions=" not in properties(path).replace("partitions=\n", "")
    assert_all_read(java_hudi, tmp_path, path, model, "java-no-mdt")
    _tandem_takes_back(java_hudi, tmp_path, path, model, "tandem-again")
