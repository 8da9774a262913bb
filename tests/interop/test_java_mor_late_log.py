"""A log that landed after its instant was rolled back (its writer was paused past the rollback) is rolled back
by that writer with a command block of its own. Java Hudi is the judge once the instants around it are archived:
Java counts the blocks of an instant older than the active timeline as committed unless a command block says
otherwise, so without that block it would read the late log's update."""

from __future__ import annotations

import pyarrow as pa
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.protocol import rollback
from coordinator.write.writer import LocalWriter, WriteOptions
from tandem import api
from timeline.errors import FencedError
from timeline.table import Table

# archival as soon as it may: the rolled-back instant ends up older than the active timeline
CONFIG = CoordinatorConfig(lock_uri="memory", commits_retained=1, archive_min_commits=2, archive_max_commits=3)
NO_METADATA = {"hoodie.metadata.enable": "false"}


def _batch(ids: list[int], values: list[int]) -> pa.Table:
    return pa.table({"id": ids, "p": [f"p{i % 2}" for i in ids], "v": values, "ts": values})


def _rows(data: pa.Table) -> dict[int, int]:
    return {r["id"]: r["v"] for r in data.select(["id", "v"]).to_pylist()}


def test_java_reads_no_row_of_a_log_that_landed_after_its_rollback(java_hudi, tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type="MERGE_ON_READ")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(_batch([1, 2], [1, 1]), "insert")
    victim = []

    def rolled_back_meanwhile(time: str) -> None:
        victim.append(time)
        assert rollback.rollback(Table.open(table.uri), table.timeline().find(time)) is not None

    with pytest.raises(FencedError):
        writer.write(_batch([1], [9]), "upsert", on_begin=rolled_back_meanwhile)
    for value in range(2, 9):
        writer.write(_batch([2], [value]), "upsert")
    timeline = Table.open(table.uri).timeline()
    assert timeline.earliest_time() > victim[0], "the instants around the late log are archived"
    expected = {1: 1, 2: 8}
    assert _rows(api.read(table.uri)) == expected
    assert _rows(java_hudi.read(table.uri, options=NO_METADATA)) == expected
    assert _rows(java_hudi.read(table.uri)) == expected
