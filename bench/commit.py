"""Small-append commit latency: Tandem (file lock, MDT on) vs deltalake and pyiceberg, same run.

Each system appends the same 100-row, one-partition batch ROUNDS times into a
fresh local table; the median and p90 latency per append are printed and the
ratios to the faster peer taken. A bare `pyarrow.parquet.write_table` of the
batch gives Tandem's overhead beyond writing the file itself.
Run: .venv/bin/python -m bench.commit
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.report import write_report
from coordinator.writer import LocalWriter
from timeline.table import Table

ROUNDS = 60
WARMUP = 5


def batch(round_no: int) -> pa.Table:
    ids = list(range(round_no * 100, round_no * 100 + 100))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": ["2026-11-22"] * 100,
            "fare": pa.array([i * 0.5 for i in ids], pa.float64()),
            "city": ["lisbon"] * 100,
        }
    )


def timed(append: Callable[[pa.Table], None]) -> dict:
    for r in range(WARMUP):
        append(batch(r))
    samples = []
    for r in range(WARMUP, WARMUP + ROUNDS):
        data = batch(r)
        started = time.perf_counter()
        append(data)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"median_ms": statistics.median(samples), "p90_ms": samples[int(len(samples) * 0.9) - 1]}


def tandem(root: Path) -> Callable[[pa.Table], None]:
    table = Table.create(str(root / "tandem"), "trips", ["id"], ["part"])
    writer = LocalWriter(table)
    return lambda data: writer.write(data, "insert")


def parquet_only(root: Path) -> Callable[[pa.Table], None]:
    folder = root / "parquet" / "part=2026-11-22"
    folder.mkdir(parents=True)
    counter = iter(range(10**9))
    return lambda data: pq.write_table(data, folder / f"{next(counter)}.parquet")


def delta(root: Path) -> Callable[[pa.Table], None]:
    from deltalake import write_deltalake

    path = str(root / "delta")
    return lambda data: write_deltalake(path, data, mode="append", partition_by=["part"])


def iceberg(root: Path) -> Callable[[pa.Table], None]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import IdentityTransform

    catalog = SqlCatalog("bench", uri=f"sqlite:///{root / 'iceberg.db'}", warehouse=f"file://{root / 'warehouse'}")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.trips", schema=batch(0).schema)
    with table.update_spec() as spec:
        spec.add_field("part", IdentityTransform(), "part")
    return lambda data: table.append(data)


def main() -> None:
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tandem-bench-commit-") as tmp:
        root = Path(tmp)
        for name, make in (
            ("tandem", tandem),
            ("parquet_only", parquet_only),
            ("deltalake", delta),
            ("pyiceberg", iceberg),
        ):
            results[name] = timed(make(root))
            print(f"{name:>13}: median {results[name]['median_ms']:7.2f} ms   p90 {results[name]['p90_ms']:7.2f} ms")
    peer = min(results["deltalake"]["median_ms"], results["pyiceberg"]["median_ms"])
    faster_peer = "deltalake" if results["deltalake"]["median_ms"] <= results["pyiceberg"]["median_ms"] else "pyiceberg"
    ratio = results["tandem"]["median_ms"] / peer
    overhead = results["tandem"]["median_ms"] - results["parquet_only"]["median_ms"]
    summary = {
        "rounds": ROUNDS,
        "rows_per_append": 100,
        "faster_peer": faster_peer,
        "tandem_over_faster_peer": round(ratio, 3),
        "target_ratio": 0.7,
        "tandem_overhead_beyond_parquet_ms": round(overhead, 2),
        "tandem_over_parquet_only": round(results["tandem"]["median_ms"] / results["parquet_only"]["median_ms"], 2),
    }
    print(f"Tandem / {faster_peer}: {ratio:.2f}x (target <= 0.7x); overhead beyond the parquet write {overhead:.1f} ms")
    write_report(
        "commit",
        {"systems": results, "summary": summary},
        {k: v["median_ms"] for k, v in results.items()},
        "median ms per 100-row append",
        "small append latency (lower is better)",
    )


if __name__ == "__main__":
    main()
