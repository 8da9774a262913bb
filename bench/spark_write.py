"""Spark write jobs through Tandem against plain `df.write.parquet`, same session, same run.

1,000,000 rows (10 partitions by city) are inserted in batches, each batch as one
Tandem instant and as one plain partitioned append. Then 10% of the keys are
upserted: through Tandem (simple index, affected file groups rewritten), and the
plain way to get the same table, which rewrites the affected partitions:
read them, drop the updated keys, add the updates, write the partitions anew.
Every input is cached and counted before it is timed, so both sides start from
the same rows in memory. Figures are medians of the repeated jobs; the ratios
are what to compare (the machine is shared and noisy).
Run: .venv/bin/python -m bench.spark_write
"""

from __future__ import annotations

import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from bench.report import write_report

ROWS = 1_000_000
BATCHES = 4
UPSERTS = 5
UPDATE_FRACTION = 0.10
CITIES = 10
TARGET_INSERT = 1.15
TARGET_UPSERT = 1.5


def rows_frame(spark, start: int, count: int, version: int):
    return spark.range(start, start + count).selectExpr(
        "id",
        f"concat('city-', cast(id % {CITIES} as string)) as city",
        f"{version} as ts",
        f"cast((id * 7919 + {version}) % 10000 as double) / 100 as fare",
        "concat('trip-', cast(id as string)) as note",
    )


def cached(df):
    df = df.cache()
    df.count()
    return df


def timed(job) -> float:
    started = time.perf_counter()
    job()
    return time.perf_counter() - started


def plain_append(batch, path: str) -> None:
    batch.write.mode("append").partitionBy("city").parquet(path)


def plain_overwrite(spark, current: str, updates, target: str) -> None:
    """Rewrite the affected partitions: old rows minus updated keys, plus the updates."""
    touched = [r[0] for r in updates.select("city").distinct().collect()]
    old = spark.read.parquet(current).where(updates_filter(touched))
    merged = old.join(updates.select("id"), "id", "left_anti").unionByName(updates)
    merged.write.mode("overwrite").partitionBy("city").parquet(target)


def updates_filter(cities: list[str]) -> str:
    return "city in (" + ", ".join(f"'{c}'" for c in cities) + ")"


def main() -> None:
    from coordinator.spark.session import local_session
    from coordinator.spark.writer import SparkWriter
    from timeline.table import Table

    spark = local_session("tandem-bench")
    per_batch = ROWS // BATCHES
    with tempfile.TemporaryDirectory(prefix="tandem-bench-spark-") as tmp:
        root = Path(tmp)
        table = Table.create(str(root / "tandem"), "trips", ["id"], ["city"], hive_style=True, precombine_field="ts")
        writer = SparkWriter(spark, table)
        plain = f"file://{root / 'plain'}"
        warm = cached(rows_frame(spark, 10 * ROWS, 1000, 0))
        warm.write.mode("overwrite").parquet(f"file://{root / 'warm'}")
        warm_table = SparkWriter(spark, Table.create(str(root / "warm-t"), "w", ["id"], ["city"]))
        warm_table.write(warm, "insert")
        warm_table.write(warm, "upsert")  # both upsert paths compiled and their workers started once
        plain_overwrite(spark, f"file://{root / 'warm'}", warm, f"file://{root / 'warm-2'}")
        inserts: dict[str, list[float]] = {"tandem": [], "plain": []}
        for b in range(BATCHES):
            batch = cached(rows_frame(spark, b * per_batch, per_batch, 1))
            inserts["plain"].append(timed(partial(plain_append, batch, plain)))
            inserts["tandem"].append(timed(partial(writer.write, batch, "insert")))
            batch.unpersist()
            print(f"insert {b + 1}/{BATCHES}: tandem {inserts['tandem'][-1]:.2f} s, plain {inserts['plain'][-1]:.2f} s")
        upserts: dict[str, list[float]] = {"tandem": [], "plain": []}
        current = plain
        for u in range(UPSERTS):
            sample = spark.range(0, ROWS).where(f"(id * 2654435761 + {u}) % 100 < {int(UPDATE_FRACTION * 100)}")
            updates = cached(rows_frame(spark, 0, ROWS, u + 2).join(sample, "id", "left_semi"))
            target = f"file://{root / f'plain-v{u}'}"
            upserts["plain"].append(timed(partial(plain_overwrite, spark, current, updates, target)))
            current = target
            upserts["tandem"].append(timed(partial(writer.write, updates, "upsert")))
            print(
                f"upsert {u + 1}/{UPSERTS} ({updates.count()} rows): "
                f"tandem {upserts['tandem'][-1]:.2f} s, plain overwrite {upserts['plain'][-1]:.2f} s"
            )
            updates.unpersist()
        tandem_rows = spark.read.parquet(f"file://{root / 'tandem'}").count()
        print(f"rows in the tandem table's files (all versions): {tandem_rows}")
    spark.stop()
    medians = {
        f"{op}_{side}": statistics.median(v)
        for op, d in (("insert", inserts), ("upsert", upserts))
        for side, v in d.items()
    }
    insert_ratio = medians["insert_tandem"] / medians["insert_plain"]
    upsert_ratio = medians["upsert_tandem"] / medians["upsert_plain"]
    paired = statistics.median(t / p for t, p in zip(upserts["tandem"], upserts["plain"], strict=True))
    print(f"upsert, median of the per-round ratios: {paired:.2f}x")
    print(f"insert: tandem / plain write = {insert_ratio:.2f}x (target <= {TARGET_INSERT}x)")
    print(f"upsert 10%: tandem / plain overwrite of its partitions = {upsert_ratio:.2f}x (target <= {TARGET_UPSERT}x)")
    write_report(
        "spark_write",
        {
            "rows": ROWS,
            "insert_batches": BATCHES,
            "upserts": UPSERTS,
            "update_fraction": UPDATE_FRACTION,
            "seconds": {"insert": inserts, "upsert": upserts},
            "median_s": medians,
            "insert_ratio": round(insert_ratio, 3),
            "insert_target": TARGET_INSERT,
            "upsert_ratio": round(upsert_ratio, 3),
            "upsert_ratio_paired_median": round(paired, 3),
            "upsert_target": TARGET_UPSERT,
        },
        medians,
        "median seconds per Spark job",
        "Spark writes: Tandem vs plain parquet (lower is better)",
    )


if __name__ == "__main__":
    main()
