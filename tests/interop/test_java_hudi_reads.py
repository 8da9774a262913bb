"""Apache Hudi's own Spark reader judges Tandem's tables (tests/hudi_reference, `make hudi-reference`).

A differential test: random histories of Tandem writes and table services over every layout
(tests/hudi_reference/differential.py), read back by Java Hudi 0.15 (snapshot, time travel to every instant, to a
time between two, in the `yyyy-MM-dd HH:mm:ss.SSS` form, before the first instant, incremental ranges; snapshots
with hoodie.metadata.enable true and false, the other reads alternating between the two) and compared with an
independent model and with Tandem's reader. Hudi 1.2 (the second judge) reads a few histories too.
Longer runs: `.venv/bin/python -m tests.java_hudi_long --sequences 500 [--both-metadata] [--reader hudi-1.x]`.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from tests.hudi_reference.differential import (
    MODEL_COLUMNS,
    READER_COLUMNS,
    SCHEMA,
    Sequence,
    canon_rows,
    diff,
    random_row,
)

SEEDS = range(12)  # the suite's bounded subset: `python -m tests.java_hudi_long --sequences 500` runs more
SEEDS_1X = range(100, 104)  # Hudi 1.x reads version-6 tables too: a few histories through the second judge


def _report(found) -> str:
    return f"{len(found)} disagreement(s) between Java Hudi and Tandem/the model:\n\n" + "\n\n".join(
        str(d) for d in found
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_java_hudi_reads_tandem_histories(java_hudi, tmp_path, seed):
    sequence = Sequence(seed, java_hudi, root=tmp_path)
    found = sequence.run()
    assert not found, _report(found)


@pytest.mark.parametrize("seed", SEEDS_1X)
def test_java_hudi_1x_reads_tandem_histories(java_hudi_1x, tmp_path, seed):
    sequence = Sequence(seed, java_hudi_1x, root=tmp_path)
    found = sequence.run()
    assert not found, _report(found)


# -- incremental reads whose range holds archived instants


@pytest.fixture
def archived_history(tmp_path):
    """Key 1 inserted in partition a (a file group only archived commits wrote), keys 2-5 upserted one by one in
    partition b (one file group, topped up each time), the older instants archived, then key 6 upserted in b.
    Every row is live: an incremental read from before the first instant should return all six."""
    import random

    from coordinator.config import CoordinatorConfig
    from coordinator.protocol.locking import table_lock
    from coordinator.services.steps import archive_table
    from coordinator.write.writer import LocalWriter
    from timeline.table import Table

    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p1"])
    config = CoordinatorConfig(
        lock_uri="memory",
        commits_retained=1,
        archive_min_commits=2,
        archive_max_commits=3,
        max_delta_commits=2,
        auto_archive=False,
    )
    writer = LocalWriter(table, coordinator=config)
    rng = random.Random(7)

    def write(key: int, partition: str, op: str) -> str:
        rows = [random_row(rng, (key, "x", partition, 1))]
        return writer.write(pa.Table.from_pylist(rows, schema=SCHEMA), op).instant

    instants = [write(1, "a", "insert")] + [write(key, "b", "upsert") for key in (2, 3, 4, 5)]
    lock = table_lock(table, config)
    try:
        archived = archive_table(table, config, lock).data
    finally:
        lock.close()
    assert instants[0] in archived, "the history must archive the insert into partition a to say anything"
    instants.append(write(6, "b", "upsert"))
    return table, instants, archived


FULL_SCAN = {"hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}
BEFORE = "20000101000000000"


def _tandem_incremental(table, since: str, until: str) -> Counter:
    from timeline.query.reader import read_plan
    from timeline.query.scan import plan_scan

    return canon_rows(read_plan(plan_scan(table, since=since, until=until)).to_pylist(), READER_COLUMNS)


def _keys(rows: Counter) -> list[int]:
    return sorted(dict(row)["id"] for row in rows.elements())


def test_java_hudi_full_scan_incremental_across_archived_instants(java_hudi, archived_history):
    """Hudi's incremental read with its full-scan fallback returns every row committed in the range (the model)."""
    table, instants, _ = archived_history
    java = java_hudi.read(table.uri, "incremental", begin=BEFORE, end=instants[-1], options=FULL_SCAN)
    assert _keys(canon_rows(java.to_pylist(), MODEL_COLUMNS)) == [1, 2, 3, 4, 5, 6]


def test_tandem_incremental_across_archived_instants(java_hudi, archived_history):
    table, instants, _ = archived_history
    java = canon_rows(
        java_hudi.read(table.uri, "incremental", begin=BEFORE, end=instants[-1], options=FULL_SCAN).to_pylist(),
        READER_COLUMNS,
    )
    theirs = _tandem_incremental(table, BEFORE, instants[-1])
    assert java == theirs, f"Java keys {_keys(java)}, Tandem keys {_keys(theirs)}\n" + diff(java, theirs)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="Hudi 0.15's incremental read without hoodie.datasource.read.incr.fallback.fulltablescan.enable "
    "only reads the active timeline's commits and leaves out rows whose commit was archived (keys 1-3 here, "
    "though 2 and 3 sit in a file the active commits rewrote); Tandem returns keys 2-6",
)
def test_java_hudi_default_incremental_across_archived_instants(java_hudi, archived_history):
    table, instants, _ = archived_history
    java = canon_rows(
        java_hudi.read(table.uri, "incremental", begin=BEFORE, end=instants[-1]).to_pylist(), READER_COLUMNS
    )
    theirs = _tandem_incremental(table, BEFORE, instants[-1])
    assert java == theirs, f"Java keys {_keys(java)}, Tandem keys {_keys(theirs)}\n" + diff(java, theirs)


# -- time travel to an instant a clean has since made incomplete

CLEANED_UP = "Cleaner cleaned up the timestamp of interest"


@pytest.fixture
def cleaned_history(tmp_path):
    """Three upserts of the same key (three versions of one file group), then a clean keeping the last commit."""
    import random

    from coordinator.config import CoordinatorConfig
    from coordinator.services.steps import clean
    from coordinator.write.writer import LocalWriter
    from timeline.table import Table

    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    config = CoordinatorConfig(lock_uri="memory", commits_retained=1)
    writer = LocalWriter(table, coordinator=config)
    rng = random.Random(3)
    instants = [
        writer.write(pa.Table.from_pylist([random_row(rng, (1, "x", "a", 1))], schema=SCHEMA), "upsert").instant
        for _ in range(3)
    ]
    assert clean(table, config) is not None, "the clean must delete file versions to say anything"
    return table, instants


def test_java_hudi_refuses_time_travel_before_the_cleaned_instants(java_hudi, cleaned_history):
    table, instants = cleaned_history
    with pytest.raises(Exception, match=CLEANED_UP):
        java_hudi.read(table.uri, "as_of", as_of=instants[0])


def test_tandem_refuses_time_travel_before_the_cleaned_instants(cleaned_history):
    from timeline.query.reader import read_plan
    from timeline.query.scan import plan_scan

    table, instants = cleaned_history
    try:
        rows = read_plan(plan_scan(table, as_of=instants[0]))
    except Exception as err:
        assert "clean" in str(err).lower(), f"refused, but not for the clean: {err}"
        return
    raise AssertionError(f"Tandem answered {rows.num_rows} row(s) as of {instants[0]}, a cleaned instant")
