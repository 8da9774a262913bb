"""What the metadata table's format costs a commit: one upsert through Tandem's local writer on a table without
an MDT (the floor), with an MDT in Tandem's previous format and with one in Hudi's format (HFile base,
Hudi log blocks, the default; the other is `Table.create(..., hudi_format=False)`, `--metadata-format tandem`).

Builds three tables holding the same rows: partitioned by `part` into PARTITIONS partitions, ROWS rows loaded by
one insert, the MDT (if any) with its default indexes. Then every commit upserts KEYS keys over every partition
(UPDATES existing keys, the rest new), the same batch for each system: WARMUP commits untimed, then COMMITS
timed ones, systems interleaved round-robin in one process. A commit is what `tandem write PATH --operation
upsert` does once its input is read (bench.commit.tandem_write: Table.open, default CoordinatorConfig with the
embedded file lock, LocalWriter.write), every fsync of the commit protocol kept. The floor's writer also
sets `hoodie.metadata.enable=false` (`tandem write ... --set hoodie.metadata.enable=false`): by default a
write to a table without an MDT builds one first, as Hudi's writer does. Reported per system (ms):
median, p90, min; and the MDT compactions that completed during the timed commits (seen after each round,
outside the clock), with the rounds they fell in, since those commits pay for them. The tables are checked to
hold the same rows at the end.
Run: .venv/bin/python -m bench.commit_format [--commits N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bench.commit import each_round
from bench.report import interleaved, summarize, write_report
from coordinator.config import CoordinatorConfig, parse_settings
from coordinator.write.writer import LocalWriter, WriteResult
from timeline.mdt import layout
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

PARTITIONS = 20
ROWS = 10_000  # loaded before any upsert
KEYS = 100  # keys per upsert
UPDATES = 95  # of which existing keys; the other KEYS - UPDATES are inserts
COMMITS = 60  # timed commits per system
WARMUP = 3  # untimed commits per system before the clock
SYSTEMS: dict[str, tuple[dict[str, bool], tuple[str, ...]]] = {  # name -> (Table.create options, writer settings)
    "no metadata table": ({"with_metadata": False}, ("hoodie.metadata.enable=false",)),
    "tandem format": ({"hudi_format": False}, ()),
    "hudi format": ({"hudi_format": True}, ()),
}


def tandem_write(path: str, data: pa.Table, operation: str, settings: tuple[str, ...]) -> WriteResult:
    """bench.commit.tandem_write with the writer's `--set KEY=VALUE` settings: the floor must not build an MDT."""
    config = CoordinatorConfig.from_hudi(parse_settings(settings))
    return LocalWriter(Table.open(path), coordinator=config).write(data, operation)


def rows(ids: list[int], round_no: int) -> pa.Table:
    """The rows of keys `ids`, key i in partition p{i % PARTITIONS}; fares differ per round, so updates change."""
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % PARTITIONS}" for i in ids], pa.string()),
            "fare": pa.array([i * 0.5 + round_no for i in ids], pa.float64()),
            "city": pa.array(["lisbon" if round_no < 0 else "porto"] * len(ids), pa.string()),
        }
    )


def upsert_batches(count: int) -> list[pa.Table]:
    """`count` upserts: UPDATES existing keys drawn evenly over the partitions, then new keys (consecutive, so in
    distinct partitions). Drawn once, so every system writes the same batches."""
    rng = random.Random(7)
    next_id = ROWS
    batches = []
    for round_no in range(count):
        updates: set[int] = set()
        while len(updates) < UPDATES:
            partition = len(updates) % PARTITIONS
            in_partition = (next_id - partition + PARTITIONS - 1) // PARTITIONS  # existing keys i % PARTITIONS == p
            updates.add(partition + PARTITIONS * rng.randrange(in_partition))
        inserts = list(range(next_id, next_id + KEYS - UPDATES))
        next_id += len(inserts)
        batches.append(rows(sorted(updates) + inserts, round_no))
    return batches


def build(root: Path) -> dict[str, str]:
    """The three tables, each loaded with the same ROWS rows by one insert; returns name -> path."""
    initial = rows(list(range(ROWS)), -1)
    paths = {}
    for k, (name, (options, settings)) in enumerate(SYSTEMS.items()):
        path = str(root / f"table{k}")
        Table.create(path, "trips", ["id"], ["part"], **options)
        tandem_write(path, initial, "insert", settings)
        paths[name] = path
    check_formats(paths)
    return paths


def check_formats(paths: dict[str, str]) -> None:
    """Each table still has the MDT its name says (none for the floor): otherwise the figures compare nothing."""
    assert not Table.open(paths["no metadata table"]).metadata().exists()
    assert Table.open(paths["hudi format"]).metadata().is_hudi_format()
    tandem = Table.open(paths["tandem format"]).metadata()
    assert tandem.exists() and not tandem.is_hudi_format()


def completed_compactions(path: str) -> set[str]:
    """Completed MDT compactions on the active timeline (none without an MDT). Archival only moves those older
    than the last few, so looking after every round sees each one."""
    mdt = Table.open(path).metadata()
    if not mdt.exists():
        return set()
    return {i.time for i in layout.compactions(mdt.timeline()) if i.is_completed}


def run(paths: dict[str, str], commits: int) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """WARMUP untimed rounds, then `commits` timed ones (one `interleaved` round each, so the compactions can be
    looked at between rounds, off the clock); returns the samples and, per system, the rounds that compacted."""
    batches = upsert_batches(WARMUP + commits)
    runs = {
        name: each_round(batches, lambda data, p=path, s=SYSTEMS[name][1]: tandem_write(p, data, "upsert", s))
        for name, path in paths.items()
    }
    interleaved(runs, WARMUP)
    seen = {name: completed_compactions(path) for name, path in paths.items()}
    samples: dict[str, list[float]] = {name: [] for name in paths}
    compacted: dict[str, list[int]] = {name: [] for name in paths}
    for round_no in range(commits):
        one, _ = interleaved(runs, 1)
        for name, path in paths.items():
            samples[name] += one[name]
            now = completed_compactions(path)
            compacted[name] += [round_no] * len(now - seen[name])
            seen[name] |= now
    return samples, compacted


def same_rows(paths: dict[str, str]) -> dict[str, Any]:
    """Row count and sum of fare per table: equal, or the systems did not do the same work."""
    seen = {}
    for name, path in paths.items():
        table = read_plan(plan_scan(Table.open(path)))
        seen[name] = (table.num_rows, round(pc.sum(table.column("fare")).as_py(), 3))
    return {"equal": len(set(seen.values())) == 1, **{k: {"rows": n, "fare_sum": s} for k, (n, s) in seen.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=COMMITS, help="timed commits per system")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tandem-bench-commit-format-") as root:
        paths = build(Path(root))
        print(f"built {len(paths)} tables of {ROWS} rows in {time.perf_counter() - started:.1f} s", flush=True)
        samples, compacted = run(paths, args.commits)
        check_formats(paths)
        check = same_rows(paths)
    systems: dict[str, Any] = {}
    for name, taken in samples.items():
        figures = summarize(taken)
        has_mdt = SYSTEMS[name][0].get("with_metadata", True)
        figures["mdt_compactions"] = len(compacted[name]) if has_mdt else None
        figures["compaction_rounds"] = compacted[name]
        if compacted[name]:
            figures["median_ms_compacting_commits"] = round(statistics.median(taken[r] for r in compacted[name]), 3)
        systems[name] = figures
        print(f"  {name:<18} median {figures['median_ms']:8.2f} ms   p90 {figures['p90_ms']:8.2f} ms   "
              f"min {figures['min_ms']:8.2f} ms   MDT compactions {figures['mdt_compactions']}")  # fmt: skip
    print(f"  same rows in every table: {check['equal']}")
    results = {
        "partitions": PARTITIONS,
        "rows_loaded": ROWS,
        "keys_per_upsert": KEYS,
        "updates_per_upsert": UPDATES,
        "warmup_commits": WARMUP,
        "timed_commits": args.commits,
        "systems": systems,
        "same_rows": check,
        "total_s": round(time.perf_counter() - started, 1),
    }
    groups = {stat: {name: f[f"{stat}_ms"] for name, f in systems.items()} for stat in ("median", "p90", "min")}
    title = f"Upsert of {KEYS} keys over {PARTITIONS} partitions: no MDT vs the MDT's two formats (lower is better)"
    path = write_report("commit_format", results, None, "ms per commit", title, groups=groups)
    print(f"wrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
