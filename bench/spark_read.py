"""Spark reads of one table: the native path (`read_table`: planned files to Spark's parquet reader) against
the `tandem` Python data source (`spark.read.format("tandem")`: planned files read by Python workers), and
Spark's own `spark.read.parquet` of the same files as the floor, interleaved round-robin in one session.

A full scan and a filtered one (a narrow range of a clustered column, pruned by column statistics). Every
system must return the same row count. The faster of the two Tandem paths is what
`tandem read --engine spark` should use.
Run: .venv/bin/python -m bench.spark_read [--rows N] [--files N] [--repeats N]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pyarrow as pa

from bench.report import interleaved, summarize, write_report
from coordinator.write.writer import LocalWriter, WriteOptions
from timeline.table import Table

PARTITIONS = 5
WHERE = "ts >= 300 AND ts < 310"  # rows of the fourth insert only


def build(base: str, rows: int, files: int) -> Table:
    """`files` inserts of rows/files rows each over 5 partitions; `ts` grows with the insert (clustered)."""
    table = Table.create(base, "reads", ["id"], ["city"])
    writer = LocalWriter(table, WriteOptions())
    per = rows // files
    for n in range(files // PARTITIONS):
        ids = pa.array(range(n * per * PARTITIONS, (n + 1) * per * PARTITIONS), pa.int64())
        writer.write(
            pa.table(
                {
                    "id": ids,
                    "city": pa.array([f"c{i % PARTITIONS}" for i in ids.to_pylist()]),
                    "ts": pa.array([n * 100 + i % 100 for i in range(len(ids))], pa.int64()),
                    "fare": pa.array([i * 0.5 for i in range(len(ids))]),
                }
            ),
            "bulk_insert",
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from coordinator.spark.reader import read_table
    from coordinator.spark.session import local_session

    with tempfile.TemporaryDirectory() as tmp:
        table = build(str(Path(tmp) / "t"), args.rows, args.files)
        files = [f"file://{table.storage.full(f.path)}" for f in table.view().latest_base_files()]
        spark = local_session("bench-spark-read")
        results = {}
        for label, where in (("full scan", None), ("filtered", WHERE)):

            def native(where=where):
                return read_table(spark, table.uri, where=where).count()

            def source(where=where):
                df = spark.read.format("tandem").load(table.uri)
                return (df.filter(where) if where else df).count()

            def parquet(where=where):
                df = spark.read.parquet(*files)
                return (df.filter(where) if where else df).count()

            systems = {"read_table (native)": native, "format('tandem')": source, "spark.read.parquet": parquet}
            for fn in systems.values():
                fn()  # warm-up: JIT, Python workers, file cache
            samples, counts = interleaved(systems, args.repeats)
            floor = summarize(samples["spark.read.parquet"])["median_ms"]
            results[label] = {
                "where": where,
                "rows": counts,
                "same_rows": len(set(counts.values())) == 1,
                "systems": {name: summarize(s) for name, s in samples.items()},
                "ratio_to_parquet": {name: round(summarize(s)["median_ms"] / floor, 2) for name, s in samples.items()},
            }
            print(label, {n: summarize(s)["median_ms"] for n, s in samples.items()}, counts)
        spark.stop()
    groups = {label: {name: v["median_ms"] for name, v in r["systems"].items()} for label, r in results.items()}
    write_report(
        "spark_read",
        {"rows": args.rows, "files": args.files, "partitions": PARTITIONS, **results},
        None,
        "median ms",
        "Spark reads: native vs data source vs spark.read.parquet",
        groups=groups,
    )


if __name__ == "__main__":
    main()
