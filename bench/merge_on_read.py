"""What merge-on-read costs readers, and what its compaction costs, against the physical floor.

read     A merge-on-read table of 200,000 rows (5 partitions x 8 file groups of 5,000 rows), then rounds of
         upserts of 2,000 random existing keys each (one log per touched group and round). After 0, 1, 4, 8
         and 16 rounds: a full snapshot read through Tandem's reader (every slice's logs merged), interleaved
         with the same read of a copy-on-write table holding the same rows (its rewritten base files), and
         with the floor: pyarrow reading the copy-on-write table's latest base files, nothing merged.
compact  The table after 16 rounds compacted (`data_compaction.execute`: every slice merged and written as a
         new base file, each fsynced) against the floor: pyarrow reading each base file and writing it back
         as a new file, fsynced, the logs not even read. Rows per second of each.

Every durability step is kept (Tandem fsyncs every file it writes). Run:
    .venv/bin/python -m bench.merge_on_read [--quick] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.report import interleaved, summarize, write_report
from coordinator.config import CoordinatorConfig
from coordinator.protocol import compaction_plan
from coordinator.protocol.locking import held, table_lock
from coordinator.services import data_compaction
from coordinator.write.writer import LocalWriter, WriteOptions
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

PARTITIONS, GROUPS, ROWS_PER_FILE = 5, 8, 5_000
UPSERT_KEYS = 2_000
ROUNDS = (0, 1, 4, 8, 16)
CONFIG = CoordinatorConfig(lock_uri="memory", auto_archive=False)


def rows(ids: list[int], version: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % PARTITIONS}" for i in ids], pa.string()),
            "fare": pa.array([i * 0.5 + version for i in ids], pa.float64()),
            "version": pa.array([version] * len(ids), pa.int64()),
            "city": pa.array(["lisbon"] * len(ids), pa.string()),
        }
    )


def build(root: Path, table_type: str, total: int) -> Table:
    table = Table.create(str(root / table_type.lower()), "trips", ["id"], ["part"], table_type=table_type)
    options = WriteOptions(max_file_size=ROWS_PER_FILE * 40, small_file_limit=0)  # ~GROUPS files a partition
    writer = LocalWriter(table, options, CONFIG)
    per_batch = total // GROUPS
    for start in range(0, total, per_batch):
        writer.write(rows(list(range(start, start + per_batch)), 0), "insert")
    return table


def upsert(table: Table, round_no: int, total: int) -> None:
    ids = sorted(random.Random(round_no).sample(range(total), UPSERT_KEYS))
    LocalWriter(table, WriteOptions(small_file_limit=0), CONFIG).write(rows(ids, round_no + 1), "upsert")


def tandem_read(table: Table) -> pa.Table:
    return read_plan(plan_scan(Table.open(table.uri)))


def floor_read(table: Table) -> pa.Table:
    """The latest base files read with pyarrow, nothing planned or merged (the copy-on-write table's)."""
    plan = plan_scan(Table.open(table.uri))
    return pa.concat_tables([pq.read_table(table.storage.full(s.path)) for s in plan.splits])


def digest(data: pa.Table) -> tuple[int, float]:
    return data.num_rows, round(sum(data.column("fare").to_pylist()), 3)


def read_part(root: Path, total: int, repeats: int) -> dict[str, Any]:
    mor, cow = build(root, "MERGE_ON_READ", total), build(root, "COPY_ON_WRITE", total)
    out: dict[str, Any] = {}
    done = 0
    for rounds in ROUNDS:
        for round_no in range(done, rounds):
            upsert(mor, round_no, total)
            upsert(cow, round_no, total)
        done = rounds
        assert digest(tandem_read(mor)) == digest(tandem_read(cow)), "the two tables hold other rows"
        runs = {
            "tandem_mor": lambda: tandem_read(mor),
            "tandem_cow": lambda: tandem_read(cow),
            "floor": lambda: floor_read(cow),
        }
        samples, _ = interleaved(runs, repeats)
        logs = sum(len(g) for g in Table.open(mor.uri).view().slice_logs().values())
        out[f"{rounds}_rounds"] = {
            "log_files": logs,
            "systems": {name: summarize(s) for name, s in samples.items()},
        }
        print(f"  {rounds:>2} rounds ({logs} logs): " + ", ".join(
            f"{n} {summarize(s)['median_ms']:.0f} ms" for n, s in samples.items()
        ))  # fmt: skip
    out["compact"] = compact_part(root, mor, cow, total)
    return out


def fsynced_copy(source: str, target: str) -> None:
    """The floor of a compaction: a base file read and written anew, then made durable."""
    data = pq.read_table(source)
    pq.write_table(data, target)
    with open(target, "rb") as handle:
        os.fsync(handle.fileno())


def compact_part(root: Path, mor: Table, cow: Table, total: int) -> dict[str, Any]:
    with held(table_lock(mor, CONFIG)):
        time_c = compaction_plan.schedule(mor, force=True)
    started = time.perf_counter()
    staged = data_compaction.execute(mor, time_c)
    tandem_s = time.perf_counter() - started
    with held(table_lock(mor, CONFIG)):
        data_compaction.complete(mor, staged, CONFIG.max_delta_commits)
    assert digest(tandem_read(mor)) == digest(tandem_read(cow)), "compaction changed the rows"
    plan = plan_scan(Table.open(cow.uri))
    target = root / "floor-rewrite"
    target.mkdir()
    started = time.perf_counter()
    for n, split in enumerate(plan.splits):
        fsynced_copy(cow.storage.full(split.path), str(target / f"{n}.parquet"))
    floor_s = time.perf_counter() - started
    figures = {
        "slices": len(staged.stats),
        "rows": total,
        "tandem_s": round(tandem_s, 3),
        "floor_s": round(floor_s, 3),
        "tandem_rows_per_s": round(total / tandem_s),
        "floor_rows_per_s": round(total / floor_s),
        "tandem_over_floor": round(tandem_s / floor_s, 2),
    }
    print(f"  compaction: {figures}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small table, 3 reads a point (report to workdir)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="tandem-bench-mor-"))
    total = 40_000 if args.quick else PARTITIONS * GROUPS * ROWS_PER_FILE
    try:
        results = read_part(root, total, 3 if args.quick else 9)
        points = {f"{k.split('_')[0]} rounds": v for k, v in results.items() if k.endswith("_rounds")}
        groups = {
            label: {name: f["median_ms"] for name, f in point["systems"].items()} for label, point in points.items()
        }
        out = root if args.quick else None
        path = write_report(
            "merge_on_read",
            results,
            None,
            "full snapshot read, median ms",
            f"merge-on-read reads with pending logs ({total:,} rows)",
            groups=groups,
            out=out,
        )
        print(f"wrote {path}")
    finally:
        if not args.quick and args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
