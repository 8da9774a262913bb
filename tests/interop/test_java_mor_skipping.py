"""Java Hudi 0.15's data skipping on a merge-on-read table Tandem wrote with the `column_stats` index: the log
files' records Tandem writes (`timeline/mdt/hudi_log_stats.py`) are read by Java, and skipping with them loses
no row.

Java keeps a slice when its base file or any of its logs may match (HoodieFileIndex). So a filtered read with
skipping on returns what it returns with skipping off, and what Tandem's pruned read returns. That Java reads
Tandem's log records (their keys, wrappers and counts) is shown on a second table where one log's `v` range is
false (moved below every value): Java then skips that log's slice, which the record alone can make it do.
"""

from __future__ import annotations

import dataclasses
import math

import pyarrow as pa

from coordinator.config import CoordinatorConfig
from coordinator.mdt import hudi_deltacommit
from coordinator.write.writer import LocalWriter, WriteOptions
from tests.interop.test_java_skips_with_tandem_stats import filtered_count
from timeline.mdt import hudi_values as hv
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

CONFIG = CoordinatorConfig(lock_uri="memory", auto_archive=False, column_stats_enabled=True)
# partition pK holds values K*1000..K*1000+99; the upsert moves key 5 (in p1) to 3500 and nulls key 6 (p2)
# f = v / 10, NaN for keys divisible by 7 (Tandem writes floats without footer statistics: their records come
# from the values, NaN ordered above every number as Java orders it)
WHERES = ["v >= 3400", "v < 100", "v BETWEEN 1000 AND 1099", "v = 3500", "v IS NULL", "v > 100000",
          "f > 340", "f < 10", "f = 350.0", "f BETWEEN 100 AND 109", "f > 1000000", "isnan(f)"]  # fmt: skip


def _batch(values: dict[int, int | None], ts: int) -> pa.Table:
    ids = sorted(values)
    return pa.table(
        {
            "id": ids,
            "p": [f"p{i % 4}" for i in ids],
            "v": pa.array([values[i] for i in ids], pa.int64()),
            "f": pa.array([None if values[i] is None else math.nan if i % 7 == 0 else values[i] / 10 for i in ids]),
            "ts": [ts] * len(ids),
        }
    )


def _write(base: str) -> None:
    table = Table.create(base, "t", ["id"], ["p"], precombine_field="ts", table_type="MERGE_ON_READ")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    writer.write(_batch({i: (i % 4) * 1000 + i for i in range(24)}, 1), "insert")
    writer.write(_batch({5: 3500, 6: None, 8: 3}, 2), "upsert")  # logs in p1, p2 and p0
    writer.write(_batch({9: 0}, 3), "delete")  # a log of deletes alone in p1


def test_java_skipping_with_tandems_log_statistics_loses_no_row(java_hudi, tmp_path):
    base = str(tmp_path / "t")
    _write(base)
    table = Table.open(base)
    pruned = 0
    for where in WHERES:
        plan = plan_scan(table, where)
        pruned += plan.pruned_by_stats
        tandem = read_plan(plan).num_rows
        skipped, full = filtered_count(java_hudi, base, where, True), filtered_count(java_hudi, base, where, False)
        assert skipped == full == tandem, where
    assert pruned > 0
    assert filtered_count(java_hudi, base, "v >= 3400", skipping=False) == 1


def test_java_skips_a_slice_by_a_logs_record(java_hudi, tmp_path, monkeypatch):
    """The log holding key 5's move to 3500 gets a false `v` range; with skipping Java no longer finds key 5,
    without skipping it does."""
    real = hudi_deltacommit.log_column_stats

    def lying(file_name, blocks, indexed):
        stats = real(file_name, blocks, indexed)
        if not any(s.column_name == "v" and s.max_value == hv.Wrapped(hv.LONG, 3500) for s in stats):
            return stats
        below = hv.Wrapped(hv.LONG, -9), hv.Wrapped(hv.LONG, -1)
        return [dataclasses.replace(s, min_value=below[0], max_value=below[1]) if s.column_name == "v" else s
                for s in stats]  # fmt: skip

    monkeypatch.setattr(hudi_deltacommit, "log_column_stats", lying)
    base = str(tmp_path / "lying")
    _write(base)
    assert filtered_count(java_hudi, base, "v = 3500", skipping=False) == 1
    assert filtered_count(java_hudi, base, "v = 3500", skipping=True) == 0
    plan = plan_scan(Table.open(base), "v = 3500")
    assert read_plan(plan).num_rows == 0, "Tandem trusts the same record"
