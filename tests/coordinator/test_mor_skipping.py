"""Data skipping on merge-on-read tables: the column statistics of log files (as Hudi 0.15's append handle
records them, `timeline/mdt/hudi_log_stats.py`) let the planner skip a slice whose base and every log rule the
filter out, and never drop a row.

Oracles: for the statistics, values worked out in Python from the rows put in the blocks; for skipping, a
plain model of the table filtered in Python; for the records in the MDT, `index_build.validate`.
"""

from __future__ import annotations

import math
import random
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.config import CoordinatorConfig
from coordinator.mdt import index_build
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import compact_data
from coordinator.write.writer import LocalWriter, WriteOptions
from timeline.format.avro_schema import arrow_to_avro
from timeline.hudi_log import DeleteRecord, avro_block, delete_block, read_intact, rollback_block
from timeline.mdt import hudi_values as hv
from timeline.mdt.hudi_log_stats import log_column_stats
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

INSTANT = "20261127000000000"
SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("l", pa.int64()),
        ("d", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("nested", pa.struct([("x", pa.int32())])),
        ("tags", pa.map_(pa.string(), pa.string())),
    ]
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _maybe(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), values)


ROWS = st.fixed_dictionaries(
    {
        "i": _maybe(st.integers(-(2**31), 2**31 - 1)),
        "l": _maybe(st.integers(-(2**63), 2**63 - 1)),
        "d": _maybe(st.one_of(st.just(float("nan")), st.floats(allow_nan=False, allow_infinity=True))),
        "s": _maybe(st.text(max_size=6)),
        "b": _maybe(st.booleans()),
        "day": _maybe(st.one_of(st.dates(date(1582, 10, 1), date(1582, 10, 30)), st.dates(date(1, 1, 1)))),
        "at": _maybe(st.datetimes(datetime(1900, 1, 1), datetime(2200, 1, 1), timezones=st.just(timezone.utc))),
        "amount": _maybe(st.decimals(-(10**7), 10**7, places=2, allow_nan=False, allow_infinity=False)),
        "nested": _maybe(st.fixed_dictionaries({"x": _maybe(st.integers(0, 9))})),
        "tags": _maybe(st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2)),
    }
)


def _expected(column: str, values: list) -> tuple:
    """(min, max, value count, null count) of one column as Hudi records it, worked out plainly."""
    present = [v for v in values if v is not None]
    nulls = len(values) if column == "tags" else len(values) - len(present)
    if column in ("nested", "tags") or not present:
        return None, None, len(values), nulls
    if column == "d" and any(v != v for v in present):  # no NaN bound: Java's skipping drops such a file
        return hv.Wrapped(hv.DOUBLE, -math.inf), hv.Wrapped(hv.DOUBLE, math.inf), len(values), nulls
    wrapper = {
        "i": hv.INT, "l": hv.LONG, "d": hv.DOUBLE, "s": hv.STRING, "b": hv.BOOLEAN, "day": hv.DATE,
        "at": hv.LONG, "amount": hv.DECIMAL,
    }[column]  # fmt: skip

    def stored(value):
        if column == "day":
            return (value - date(1970, 1, 1)).days  # LocalDate.ofEpochDay: no calendar detour
        if column == "at":
            delta = value - _EPOCH
            return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        if column == "amount":
            return Decimal(value).quantize(Decimal(1).scaleb(-hv.DECIMAL_SCALE))
        return value

    low, high = min(present), max(present)
    return hv.Wrapped(wrapper, stored(low)), hv.Wrapped(wrapper, stored(high)), len(values), nulls


def _same(got: tuple, expected: tuple) -> bool:
    """Equal, a NaN bound equal to a NaN bound."""
    return repr(got) == repr(expected)


def _block(rows: list[dict]) -> bytes:
    records = pa.Table.from_pylist(rows, schema=SCHEMA).to_pylist()
    for record in records:
        if record["tags"] is not None:
            record["tags"] = dict(record["tags"])
    return avro_block(INSTANT, arrow_to_avro(SCHEMA, "t"), records)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(ROWS, min_size=1, max_size=6), min_size=1, max_size=3), st.booleans())
def test_log_statistics_are_the_values_of_its_data_blocks(blocks: list[list[dict]], with_deletes: bool) -> None:
    data = b"".join(_block(rows) for rows in blocks)
    if with_deletes:
        data += delete_block(INSTANT, [DeleteRecord("k", "", ("IntWrapper", 0))])
    stats = {s.column_name: s for s in log_column_stats(".f_1.log.1_0-0-0", read_intact(data), ["i"])}
    assert list(stats) == SCHEMA.names
    every = [row for rows in blocks for row in rows]
    for column in SCHEMA.names:
        found = stats[column]
        got = (found.min_value, found.max_value, found.value_count, found.null_count)
        assert _same(got, _expected(column, [row[column] for row in every])), column
        assert (found.total_size, found.total_uncompressed_size, found.file_name) == (0, 0, ".f_1.log.1_0-0-0")


def test_a_delete_only_log_has_empty_records_and_a_rollback_log_none() -> None:
    deletes = delete_block(INSTANT, [DeleteRecord("k", "", ("IntWrapper", 0))])
    stats = log_column_stats(".f_1.log.1_0-0-0", read_intact(deletes), ["id", "v"])
    assert [(s.column_name, s.min_value, s.max_value, s.value_count, s.null_count) for s in stats] == [
        ("id", None, None, 0, 0),
        ("v", None, None, 0, 0),
    ]
    assert log_column_stats(".f_1.log.2_0-0-0", read_intact(rollback_block(INSTANT, INSTANT)), ["id"]) == []


CONFIG = CoordinatorConfig(lock_uri="memory", auto_archive=False, column_stats_enabled=True)
PARTITIONS = 4


def _batch(rows: dict[int, tuple[str, int | None, int]]) -> pa.Table:
    ids = sorted(rows)
    return pa.table(
        {
            "id": ids,
            "p": [rows[i][0] for i in ids],
            "v": pa.array([rows[i][1] for i in ids], pa.int64()),
            "ts": [rows[i][2] for i in ids],
        }
    )


def _filters(rng: random.Random, model: dict[int, tuple[str, int | None, int]]) -> list[tuple[str, object]]:
    """(SQL, the same test in Python) pairs: ranges around one partition's values, points, a list, nulls."""
    low = rng.randrange(PARTITIONS) * 1000 + rng.randrange(-50, 100)
    high = low + rng.randrange(0, 300)
    point = rng.choice([v for _, v, _ in model.values() if v is not None] or [0])
    values = rng.sample(range(0, PARTITIONS * 1000, 7), 3)
    return [
        (f"v BETWEEN {low} AND {high}", lambda v: v is not None and low <= v <= high),
        (f"v >= {high}", lambda v: v is not None and v >= high),
        (f"v < {low}", lambda v: v is not None and v < low),
        (f"v = {point}", lambda v: v == point),
        (f"v IN ({', '.join(map(str, values))})", lambda v: v in values),
        ("v IS NULL", lambda v: v is None),
    ]


@pytest.mark.parametrize("seed", range(4))
def test_skipping_slices_by_their_logs_statistics_never_drops_a_row(tmp_path, seed):
    """Random upserts (mostly within each partition's value range, sometimes far out of it, sometimes null),
    deletes and compactions; after each step every filter reads exactly the model's rows, and over the run
    slices with logs were skipped (the log statistics are used, not only tolerated)."""
    rng = random.Random(seed)
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"], precombine_field="ts", table_type="MERGE_ON_READ")
    writer = LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG)
    model = {i: (f"p{i % PARTITIONS}", (i % PARTITIONS) * 1000 + i // PARTITIONS, 1) for i in range(40)}
    writer.write(_batch(model), "insert")
    lock = table_lock(table, CONFIG)
    skipped_with_logs = 0
    for step in range(10):
        keys = rng.sample(range(44), rng.randint(1, 6))
        if rng.random() < 0.2:
            writer.write(_batch({k: (f"p{k % PARTITIONS}", 0, step + 2) for k in keys}), "delete")
            for key in keys:
                model.pop(key, None)
        else:
            changed = {}
            for key in keys:
                near = (key % PARTITIONS) * 1000 + rng.randrange(100)
                value = rng.choice([near, near, near, rng.randrange(PARTITIONS * 1000), None])
                changed[key] = (f"p{key % PARTITIONS}", value, step + 2)
            writer.write(_batch(changed), "upsert")
            model.update(changed)
        if rng.random() < 0.15:
            compact_data(table, CONFIG, lock, force=True)
        current = Table.open(table.uri)
        everything = plan_scan(current)
        logged = set(everything.merge.logs) if everything.merge is not None else set()
        for where, test in _filters(rng, model):
            plan = plan_scan(current, where)
            got = sorted(r["id"] for r in read_plan(plan).to_pylist())
            assert got == sorted(i for i, (_, v, _) in model.items() if test(v)), (step, where)
            kept = set(zip(*(plan.files.column(c).to_pylist() for c in ("partition", "file_id")), strict=True))
            skipped_with_logs += len(logged - kept)
    assert skipped_with_logs > 0, "no slice with logs was ever skipped"
    for report in index_build.validate(current.metadata(), current.timeline()):
        assert not (report.missing or report.wrong or report.stale or report.unreadable), report
