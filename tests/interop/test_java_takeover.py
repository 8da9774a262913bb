"""Takeover both ways with default settings: Java Hudi 0.15 writes Tandem's tables, Tandem writes Java's.

Observed (docs/design.md, "Sharing a table with Java Hudi"): a Java writer with the default
hoodie.metadata.enable=true finds `.hoodie/metadata` but `hoodie.table.metadata.partitions` empty, so it
deletes a metadata table in Tandem's own format, bootstraps its own HFile metadata table there (instant
<last commit>010) and records `hoodie.table.metadata.partitions=files`. From then on the two take turns on
one metadata table in Hudi's format: Tandem's readers list from it, its writers continue it with delta
commits of their own (and compact it), Java continues after them without rebuilding it, and no row is lost.
`tandem metadata repair` rebuilds it in Hudi's format.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.conftest import tandem
from tests.hudi_reference.shared_table import (
    assert_all_read,
    canon,
    delete,
    expected,
    java_both,
    jsonl,
    ok,
    properties,
    rows,
    snapshot,
    tandem_rows,
    upsert,
)
from timeline.format.active_timeline import ActiveTimeline
from timeline.io.storage import Storage


def _mdt_times(path: str) -> set[str]:
    return {i.time for i in ActiveTimeline.load(Storage(path).sub(".hoodie/metadata"), ".hoodie").instants}


def _java_writes_again(java_hudi, tmp_path, path: str, model: dict, key, options: dict, name: str) -> None:
    """A Java upsert of one more key, continuing the metadata table (its first instant stays); both Java
    reads and Tandem's equal the model."""
    first = min(_mdt_times(path))
    again = rows((6, "x", "b", 6.0, 5))
    java_hudi.write(path, again, "upsert", options)
    upsert(model, key, again)
    assert first in _mdt_times(path), "Java rebuilt the metadata table instead of continuing it"
    assert_all_read(java_hudi, tmp_path, path, model, name)
    ok("metadata", "validate", path)


# -- (a) a Tandem table, Java writes with default options, Tandem takes it back


def test_java_writes_a_tandem_table_then_tandem_takes_it_back(java_hudi, tmp_path):
    from coordinator.config import CoordinatorConfig
    from coordinator.write.writer import LocalWriter
    from timeline.table import Table

    path = str(tmp_path / "trips")
    table = Table.create(path, "trips", ["id"], ["city"], hive_style=True, precombine_field="ts")
    key = lambda r: r["id"]  # noqa: E731
    model: dict = {}
    first = rows((1, "x", "a", 1.0, 1), (2, "x", "a", 2.0, 1), (3, "x", "b", 3.0, 1))
    LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory")).write(first, "upsert")
    upsert(model, key, first)

    java_options = {  # only what the table needs: Hudi's defaults otherwise (metadata table on)
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.hive_style_partitioning": "true",
    }
    changed = rows((2, "x", "a", 20.0, 2), (4, "x", "c", 4.0, 2))
    java_hudi.write(path, changed, "upsert", java_options)
    upsert(model, key, changed)
    gone = rows((1, "x", "a", 1.0, 3))
    java_hudi.write(path, gone, "delete", java_options)
    delete(model, key, gone)
    assert "hoodie.table.metadata.partitions=files" in properties(path), "Java no longer builds its own MDT here"

    # readers list from Java's MDT (no warning); no row lost
    read = tandem("read", path, "--output", str(tmp_path / "r0.parquet"))
    assert read.returncode == 0, read.stderr
    assert canon(pq.read_table(tmp_path / "r0.parquet")) == expected(model)
    assert not read.stderr.strip(), read.stderr

    # Tandem's writers continue Java's metadata table: a delta commit of theirs, listed by both sides
    java_init = min(_mdt_times(path))
    more = rows((3, "x", "b", 30.0, 4), (5, "x", "a", 5.0, 4))
    ok("recover", path)
    ok("write", path, "--input", jsonl(tmp_path, "more", more), "--operation", "upsert")
    upsert(model, key, more)
    assert java_init in _mdt_times(path) and "hoodie.table.metadata.partitions=files" in properties(path)
    ok("metadata", "validate", path)
    read = ok("read", path, "--output", str(tmp_path / "r2.parquet"))
    assert not read.stderr.strip(), read.stderr  # from the MDT
    assert canon(pq.read_table(tmp_path / "r2.parquet")) == expected(model)
    assert java_both(java_hudi, path) == {False: expected(model), True: expected(model)}

    # Java again, after Tandem: it continues the metadata table; a repair rebuilds it in Hudi's format
    _java_writes_again(java_hudi, tmp_path, path, model, key, java_options, "r3")
    ok("metadata", "repair", path)
    assert "hoodie.table.metadata.partitions=files" in properties(path)
    ok("metadata", "validate", path)
    assert tandem_rows(tmp_path, path, "r4") == expected(model)
    assert java_both(java_hudi, path) == {False: expected(model), True: expected(model)}


# -- (b) Java-written copy-on-write tables, Tandem writes them


LAYOUTS = {
    "complex-hive": (
        {
            "hoodie.datasource.write.recordkey.field": "id,region",
            "hoodie.datasource.write.partitionpath.field": "city",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
        },
        lambda r: (r["id"], r["region"]),
    ),
    "complex-two-fields": (  # two partition fields, not hive-style: region/city
        {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "region,city",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
        },
        lambda r: (r["id"], r["region"], r["city"]),  # a record is its key in its partition (non-global index)
    ),
    "non-partitioned": (
        {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        },
        lambda r: r["id"],
    ),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_tandem_writes_a_java_written_table(java_hudi, tmp_path, layout):
    options, key = LAYOUTS[layout]
    options = {"hoodie.table.name": "j", "hoodie.datasource.write.precombine.field": "ts", **options}
    path = str(tmp_path / "j")
    model: dict = {}
    first = rows((1, "x", "a", 1.0, 1), (1, "y", "b", 1.5, 1), (2, "x", "a", 2.0, 1), (3, "x", "b", 3.0, 1))
    java_hudi.write(path, first, "upsert", options)
    upsert(model, key, first)
    second = rows((2, "x", "a", 20.0, 2), (4, "x", "c", 4.0, 2))
    java_hudi.write(path, second, "upsert", options)
    upsert(model, key, second)

    # Java's own (HFile) MDT is there: Tandem lists from it to read and continues it when it writes
    assert "hoodie.table.metadata.partitions=files" in properties(path), "Java no longer builds its MDT by default"
    java_init = min(_mdt_times(path))
    assert tandem_rows(tmp_path, path, "t0") == expected(model)
    changed = rows((3, "x", "b", 30.0, 3), (5, "y", "a", 5.0, 3))
    ok("write", path, "--input", jsonl(tmp_path, "up", changed), "--operation", "upsert")
    upsert(model, key, changed)
    gone = rows((1, "x", "a", 1.0, 4))
    ok("write", path, "--input", jsonl(tmp_path, "del", gone), "--operation", "delete")
    delete(model, key, gone)

    assert java_init in _mdt_times(path)
    ok("metadata", "validate", path)
    assert tandem_rows(tmp_path, path, "t") == expected(model)
    assert java_both(java_hudi, path) == {False: expected(model), True: expected(model)}

    # Java writes again, continuing the metadata table, and every reader still sees the model
    _java_writes_again(java_hudi, tmp_path, path, model, key, options, "t2")


# -- (c) a Java-written table with a feature Tandem lacks


def test_tandem_writes_and_compacts_a_java_merge_on_read_table(java_hudi, tmp_path):
    """A merge-on-read table Java wrote (its updates in logs): Tandem reads it as Java does, upserts into it,
    recovers and compacts it, and Java reads every step as Tandem does."""
    path = str(tmp_path / "mor")
    options = {
        "hoodie.table.name": "mor",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.compact.inline": "false",
    }
    java_hudi.write(path, rows((1, "x", "a", 1.0, 1), (2, "x", "b", 2.0, 1)), "upsert", options)
    java_hudi.write(path, rows((1, "x", "a", 10.0, 2)), "upsert", options)
    assert any(".log." in name for name in snapshot(path)), "Java wrote its update to a log"
    expected_rows = [(1, "x", "a", 10.0), (2, "x", "b", 2.0)]
    assert java_both(java_hudi, path)[True] == expected_rows
    assert tandem_rows(tmp_path, path, "java") == expected_rows
    ok("write", path, "--input", jsonl(tmp_path, "in", rows((2, "x", "b", 20.0, 3), (3, "x", "a", 3.0, 3))),
       "--operation", "upsert")  # fmt: skip
    ok("recover", path)
    expected_rows = [(1, "x", "a", 10.0), (2, "x", "b", 20.0), (3, "x", "a", 3.0)]
    assert tandem_rows(tmp_path, path, "tandem") == expected_rows
    assert java_both(java_hudi, path) == {False: expected_rows, True: expected_rows}
    ok("compact", path)
    assert tandem_rows(tmp_path, path, "compacted") == expected_rows
    assert java_both(java_hudi, path) == {False: expected_rows, True: expected_rows}
