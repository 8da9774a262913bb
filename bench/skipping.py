"""Data skipping with the MDT's column_stats index, and bloom-index tagging for upserts, in one run.

Query part. A table of ROWS rows in FILES base files over PARTITIONS partitions
(`region`), written by bulk inserts through the local writer: `event_ts` (int64
epoch ms) is clustered, each file holds a narrow consecutive range of it (file j
holds rows j*R .. (j+1)*R-1 in time order, and lies in partition j % PARTITIONS),
`r` is random, `key` (the record key) is a scrambled 20-digit string (uuid-like:
every file's key range spans nearly the whole key space). A copy of the table
with the column_stats index dropped is the "index off" table. Each query (range
predicates of 0.1%, 1% and 10% selectivity on event_ts, an equality on the
record key) is run, interleaved round-robin over the variants:

  local+index     Table.open + plan_scan + read_plan (DuckDB applies the filter)
  local-noindex   the same on the copy without column_stats
  spark+index     coordinator.spark.reader.scan (Spark's parquet reader on the planned files)
  spark-noindex   the same on the copy
  spark-footers   spark.read.parquet(<every latest file>) with the filter: Spark's own footer pushdown
  duckdb+index    coordinator.duckdb.view.query (DuckDB reads only the needed columns of the planned files)
  duckdb-noindex  the same on the copy

Every variant computes count(*) and sum(event_ts) of the matching rows, checked
against the exact answer (the data is generated, so it is known).

Upsert part. A table of UPSERT_FILES file groups (UPSERT_ROWS rows each, same
shape) takes upserts of 1% and 10% of its rows, keys drawn at random over the
whole table ("random") or from the latest 1% / 10% of event_ts ("recent": late
updates to recent events, which sit in few files), with the BLOOM index (MDT
bloom_filters) and the SIMPLE index, interleaved; each run starts from a fresh
copy of the same table. Files opened for tagging are counted, and the
TAGGING_FILES_SKIPPED metric read. Both writers: the local one (tagging time
measured apart) and, unless --no-spark, the Spark writer (`SparkWriter.write`,
its input cached before the clock starts; Spark tags inside the job).

Run: .venv/bin/python -m bench.skipping [--quick] [--workdir DIR] [--repeats N] [--upserts-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.report import OUT, interleaved, summarize, write_report
from coordinator.config import BLOOM, SIMPLE, CoordinatorConfig
from coordinator.mdt import index_build
from coordinator.protocol.locking import table_lock
from coordinator.write.base_reads import BaseFileReads
from coordinator.write.writer import LocalWriter, WriteOptions
from timeline.format.file_names import BaseFile
from timeline.metrics import METRICS, TAGGING_FILES_SKIPPED
from timeline.table import Table

T0 = 1_700_000_000_000  # event_ts of row 0 (epoch ms); row i has T0 + i
SCRAMBLE = np.uint64(0x9E3779B97F4A7C15)  # odd: i -> i * SCRAMBLE mod 2^64 is a bijection, keys are unique
TARGET_FILES_RATIO = 20.0
TARGET_SPEEDUP = 5.0


@dataclass(frozen=True)
class Shape:
    rows: int
    files: int
    partitions: int
    files_per_commit: int

    @property
    def rows_per_file(self) -> int:
        return self.rows // self.files

    def tag(self, name: str) -> str:
        return f"{name}-{self.rows}r-{self.files}f-{self.partitions}p"


FULL = {"query": Shape(10_000_000, 1_000, 10, 100), "upsert": Shape(1_000_000, 1_000, 10, 500)}
QUICK = {"query": Shape(200_000, 100, 10, 50), "upsert": Shape(50_000, 100, 10, 100)}


# --------------------------------------------------------------------------- data


def keys_of(indexes: np.ndarray) -> pa.Array:
    scrambled = indexes.astype(np.uint64) * SCRAMBLE
    return pc.utf8_lpad(pc.cast(pa.array(scrambled), pa.string()), 20, "0")


def region_of(file_index: np.ndarray, partitions: int) -> pa.Array:
    labels = np.array([f"r{p:02d}" for p in range(partitions)], dtype=object)
    return pa.array(labels[file_index % partitions], pa.string())


def rows_of(indexes: np.ndarray, shape: Shape, seed: int) -> pa.Table:
    """The rows with these global row numbers (time order), with `r` drawn from `seed`."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "key": keys_of(indexes),
            "region": region_of(indexes // shape.rows_per_file, shape.partitions),
            "event_ts": pa.array(indexes.astype(np.int64) + T0),
            "r": pa.array(rng.random(len(indexes))),
        }
    )


def build(path: Path, shape: Shape) -> Table:
    """The table, by bulk inserts of `files_per_commit` files each (one commit per batch)."""
    if path.exists():
        shutil.rmtree(path)
    table = Table.create(str(path), "events", ["key"], ["region"])
    per_file = shape.rows_per_file
    sample = rows_of(np.arange(per_file, dtype=np.int64), shape, 0)
    # Every row has the same width, so a file of `per_file` rows is this many bytes in the writer's
    # sizing; 1% slack absorbs the offsets' extra entry (at most 100 files per partition per commit).
    max_file_size = int(sample.nbytes * 1.01)
    config = CoordinatorConfig()
    lock = table_lock(table, config)
    writer = LocalWriter(table, WriteOptions(max_file_size=max_file_size), config, lock)
    try:
        for first in range(0, shape.files, shape.files_per_commit):
            files = min(shape.files_per_commit, shape.files - first)
            indexes = np.arange(first * per_file, (first + files) * per_file, dtype=np.int64)
            result = writer.write(rows_of(indexes, shape, first), "bulk_insert")
            if len(result.files_written) != files:
                raise RuntimeError(f"commit {result.instant} wrote {len(result.files_written)} files, not {files}")
    finally:
        lock.close()
    return table


def cached_table(workdir: Path, shape: Shape, name: str) -> Path:
    """Build once per shape; a finished build leaves `built.json` beside the table."""
    path = workdir / shape.tag(name)
    done = path.with_suffix(".built.json")
    if done.exists() and (path / ".hoodie").exists():
        print(f"  reusing {path}")
        return path
    started = time.perf_counter()
    build(path, shape)
    seconds = time.perf_counter() - started
    done.write_text(json.dumps({"shape": shape.__dict__, "build_s": round(seconds, 1)}))
    print(f"  built {path} ({shape.rows:,} rows, {shape.files:,} files) in {seconds:.1f} s")
    return path


def without_column_stats(source: Path) -> Path:
    """A copy of the table with the column_stats index dropped (the planner then reads every file)."""
    target = source.with_name(source.name + "-no-column-stats")
    done = target.with_suffix(".built.json")
    if done.exists() and (target / ".hoodie").exists():
        return target
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    index_build.drop(Table.open(str(target)).metadata(), ["column_stats"])
    done.write_text("{}")
    return target


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Query:
    name: str
    where: str
    count: int  # the exact answer
    ts_sum: int


def range_query(name: str, shape: Shape, fraction: float, start_fraction: float) -> Query:
    width = max(1, round(shape.rows * fraction))
    low = int(shape.rows * start_fraction) + shape.rows_per_file // 3  # not aligned to file boundaries
    low = min(low, shape.rows - width)
    high = low + width  # exclusive
    ts_sum = sum(range(low, high)) + T0 * width
    return Query(name, f"event_ts >= {T0 + low} AND event_ts < {T0 + high}", width, ts_sum)


def queries(shape: Shape) -> list[Query]:
    one = int(shape.rows * 0.6180339) + 7
    key = keys_of(np.array([one], dtype=np.int64))[0].as_py()
    return [
        range_query("range 0.1%", shape, 0.001, 0.4567),
        range_query("range 1%", shape, 0.01, 0.2345),
        range_query("range 10%", shape, 0.10, 0.6789),
        Query("key equality", f"key = '{key}'", 1, T0 + one),
    ]


def answer_of(rows: pa.Table) -> tuple[int, int]:
    if rows.num_rows == 0:
        return 0, 0
    return rows.num_rows, pc.sum(rows.column("event_ts")).as_py()


def local(path: str, where: str):
    from timeline.query.reader import read_plan
    from timeline.query.scan import plan_scan

    def run() -> tuple[int, tuple[int, int]]:
        plan = plan_scan(Table.open(path), where, dialect="duckdb")
        return len(plan.splits), answer_of(read_plan(plan))

    return run


def duckdb_view(path: str, where: str):
    from coordinator.duckdb.view import query

    def run() -> tuple[int, tuple[int, int]]:
        rows, plan = query(path, f"SELECT count(*) AS n, sum(event_ts) AS s FROM t WHERE {where}")
        n, s = rows.column("n")[0].as_py(), rows.column("s")[0].as_py()
        return len(plan.splits), (n, s or 0)

    return run


def spark_scan(spark, path: str, where: str):
    from coordinator.spark.reader import scan

    def run() -> tuple[int, tuple[int, int]]:
        df, plan = scan(spark, path, where=where)
        row = df.selectExpr("count(*) AS n", "sum(event_ts) AS s").collect()[0]
        return len(plan.splits), (row["n"], row["s"] or 0)

    return run


def spark_footers(spark, files: list[str], where: str):
    def run() -> tuple[int, tuple[int, int]]:
        row = spark.read.parquet(*files).where(where).selectExpr("count(*) AS n", "sum(event_ts) AS s").collect()[0]
        return len(files), (row["n"], row["s"] or 0)

    return run


def query_part(spark, indexed: Path, plain: Path, shape: Shape, repeats: int) -> dict:
    from timeline.query.scan import plan_scan

    table = Table.open(str(indexed))
    latest = [f"file://{table.storage.full(p)}" for p in plan_scan(table).paths]
    out: dict = {"shape": shape.__dict__, "latest_files": len(latest), "queries": {}}
    for n, q in enumerate(queries(shape)):
        systems = {
            "local+index": local(str(indexed), q.where),
            "local-noindex": local(str(plain), q.where),
            "duckdb+index": duckdb_view(str(indexed), q.where),
            "duckdb-noindex": duckdb_view(str(plain), q.where),
        }
        if spark is not None:
            systems |= {
                "spark+index": spark_scan(spark, str(indexed), q.where),
                "spark-noindex": spark_scan(spark, str(plain), q.where),
                "spark-footers": spark_footers(spark, latest, q.where),
            }
        if n == 0:  # warm once: page cache, imports, Spark's classes, JIT and Python workers
            for fn in systems.values():
                fn()
        samples, last = interleaved(systems, repeats)
        figures: dict = {"where": q.where, "expected": {"count": q.count, "sum_event_ts": q.ts_sum}, "systems": {}}
        wrong = 0
        for name, (files, (count, ts_sum)) in last.items():
            right = (count, ts_sum) == (q.count, q.ts_sum)
            wrong += not right
            figures["systems"][name] = {
                "files_read": files,
                "rows": count,
                "sum_event_ts": ts_sum,
                "correct": right,
                **summarize(samples[name]),
            }
        figures["wrong_answers"] = wrong
        s = figures["systems"]
        med = {name: f["median_ms"] for name, f in s.items()}
        figures["ratios"] = {
            "files_noindex_over_index": s["local-noindex"]["files_read"] / max(1, s["local+index"]["files_read"]),
            "time_local_noindex_over_index": med["local-noindex"] / med["local+index"],
            "time_duckdb_noindex_over_index": med["duckdb-noindex"] / med["duckdb+index"],
        }
        if spark is not None:
            figures["ratios"] |= {
                "time_spark_noindex_over_index": med["spark-noindex"] / med["spark+index"],
                "time_spark_footers_over_spark_index": med["spark-footers"] / med["spark+index"],
                "time_spark_footers_over_local_index": med["spark-footers"] / med["local+index"],
            }
        out["queries"][q.name] = figures
        line = ", ".join(f"{n} {f['files_read']}f {f['median_ms']:.0f}ms" for n, f in s.items())
        print(f"  {q.name}: {line}; wrong answers: {wrong}")
    return out


# --------------------------------------------------------------------------- upserts


class CountingReads(BaseFileReads):
    """A write's base-file reads, counting the files opened to read keys while tagging."""

    opened = 0

    def keys_of(self, base: BaseFile, bloom_index: bool) -> list[str]:
        self.opened += 1
        return super().keys_of(base, bloom_index)


class CountingWriter(LocalWriter):
    """The local writer, counting the base files it opens to read keys while tagging."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reads = CountingReads(self.table, self.config)

    @property
    def opened(self) -> int:
        return self.reads.opened


def upsert_rows(shape: Shape, fraction: float, kind: str, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    count = max(1, round(shape.rows * fraction))
    if kind == "random":
        indexes = np.sort(rng.choice(shape.rows, size=count, replace=False))
    else:  # the latest `fraction` of event_ts: every row of the newest files
        indexes = np.arange(shape.rows - count, shape.rows, dtype=np.int64)
    return rows_of(indexes.astype(np.int64), shape, seed + 1)


def upsert_part(pristine: Path, shape: Shape, repeats: int, scratch: Path, spark=None) -> dict:
    """Local writer (and, given a session, the Spark writer) upserting with each index, from fresh copies."""
    out: dict = {"shape": shape.__dict__, "cases": {}}
    cases = [(0.01, "recent"), (0.10, "recent"), (0.01, "random"), (0.10, "random")]
    for fraction, kind in cases:
        name = f"{fraction:.0%} {kind}"
        data = upsert_rows(shape, fraction, kind, seed=int(fraction * 1000) + len(kind))
        details: dict[str, dict] = {}

        def runner(index_type: str, engine: str = "local", data: pa.Table = data, details: dict = details):
            name = index_type if engine == "local" else f"spark {index_type}"

            def run() -> None:
                copy = scratch / f"upsert-{engine}-{index_type}"
                if copy.exists():
                    shutil.rmtree(copy)
                shutil.copytree(pristine, copy)  # untimed: the clock starts in `timed_upsert`
                details.setdefault(name, {"samples_ms": []})
                timed = timed_upsert if engine == "local" else timed_spark_upsert(spark)
                details[name]["last"] = timed(copy, index_type, data, details[name])

            return run

        systems = {SIMPLE: runner(SIMPLE), BLOOM: runner(BLOOM)}
        if spark is not None:
            systems |= {f"spark {SIMPLE}": runner(SIMPLE, "spark"), f"spark {BLOOM}": runner(BLOOM, "spark")}
        interleaved(systems, repeats)  # wall time includes the copy; the upsert's own time is in details
        figures: dict = {"rows": data.num_rows, "systems": {}}
        for index_type, d in details.items():
            figures["systems"][index_type] = {**d["last"], **summarize(d["samples_ms"])}
        s = figures["systems"]
        figures["ratios"] = {
            "files_opened_simple_over_bloom": s[SIMPLE]["files_opened_for_tagging"]
            / max(1, s[BLOOM]["files_opened_for_tagging"]),
            "time_simple_over_bloom": s[SIMPLE]["median_ms"] / s[BLOOM]["median_ms"],
            "tagging_time_simple_over_bloom": s[SIMPLE]["tagging_ms"] / max(1e-9, s[BLOOM]["tagging_ms"]),
        }
        if spark is not None:
            figures["ratios"]["spark_time_simple_over_bloom"] = (
                s[f"spark {SIMPLE}"]["median_ms"] / s[f"spark {BLOOM}"]["median_ms"]
            )
        out["cases"][name] = figures
        print(
            f"  upsert {name} ({data.num_rows:,} rows): "
            + ", ".join(
                f"{t} opened {f['files_opened_for_tagging']} (skipped {f['tagging_files_skipped']}), "
                + (f"tagging {f['tagging_ms']:.0f} ms, " if f.get("tagging_ms") is not None else "")
                + f"upsert {f['median_ms']:.0f} ms, {f['files_written']} files written"
                for t, f in s.items()
            )
        )
    return out


def timed_upsert(path: Path, index_type: str, data: pa.Table, details: dict) -> dict:
    table = Table.open(str(path))
    config = CoordinatorConfig(index_type=index_type)
    lock = table_lock(table, config)
    writer = CountingWriter(table, coordinator=config, lock=lock)
    tagging = {"ms": 0.0}
    original_tag = writer.tag

    def tag(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original_tag(*args, **kwargs)
        finally:
            tagging["ms"] += (time.perf_counter() - started) * 1000

    writer.tag = tag
    skipped_before = METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0)
    try:
        started = time.perf_counter()
        result = writer.write(data, "upsert")
        details["samples_ms"].append((time.perf_counter() - started) * 1000)
    finally:
        lock.close()
    return {
        "files_opened_for_tagging": writer.opened,
        "tagging_files_skipped": METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0) - skipped_before,
        "tagging_ms": round(tagging["ms"], 3),
        "files_written": len(result.files_written),
    }


def timed_spark_upsert(spark):
    """The Spark writer's upsert; files opened for tagging = candidates left after the bloom index (Spark
    tags lazily inside the job, so there is no separate tagging time)."""
    from coordinator.spark.writer import SparkWriter

    def timed(path: Path, index_type: str, data: pa.Table, details: dict) -> dict:
        table = Table.open(str(path))
        config = CoordinatorConfig(index_type=index_type)
        lock = table_lock(table, config)
        latest = len(table.view().latest_base_files())
        skipped_before = METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0)
        frame = spark.createDataFrame(data.to_pandas()).cache()
        frame.count()  # the input in memory before the clock starts, as for the local writer
        try:
            started = time.perf_counter()
            result = SparkWriter(spark, table, coordinator=config, lock=lock).write(frame, "upsert")
            details["samples_ms"].append((time.perf_counter() - started) * 1000)
        finally:
            frame.unpersist()
            lock.close()
        skipped = METRICS.snapshot().get(TAGGING_FILES_SKIPPED, 0) - skipped_before
        return {
            "files_opened_for_tagging": latest - skipped,
            "tagging_files_skipped": skipped,
            "tagging_ms": None,
            "files_written": len(result.files_written),
        }

    return timed


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small tables (a check that everything runs)")
    parser.add_argument("--workdir", help="where the tables are built and kept (reused when present)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved rounds per query (default 5, quick 3)")
    parser.add_argument("--upsert-repeats", type=int, default=None, help="rounds per upsert case (default 2)")
    parser.add_argument("--no-spark", action="store_true", help="leave out the Spark variants")
    parser.add_argument("--skip-upserts", action="store_true")
    parser.add_argument(
        "--upserts-only", action="store_true", help="only the upserts; the queries' figures are kept from the report"
    )
    args = parser.parse_args()
    shapes = QUICK if args.quick else FULL
    repeats = args.repeats or (3 if args.quick else 5)
    upsert_repeats = args.upsert_repeats or 2
    workdir = Path(args.workdir or Path(tempfile.gettempdir()) / "tandem-bench-skipping")
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {"quick": args.quick, "workdir": str(workdir), "repeats": repeats}

    spark = None
    if not args.no_spark:
        from coordinator.spark.session import local_session

        spark = local_session("tandem-bench-skipping")
    try:
        if args.upserts_only:
            kept = json.loads((OUT / "skipping.json").read_text())["results"]
            results |= {k: kept[k] for k in ("build_s", "queries")}
        else:
            print(f"query table in {workdir}")
            indexed = cached_table(workdir, shapes["query"], "events")
            plain = without_column_stats(indexed)
            results["build_s"] = json.loads(indexed.with_suffix(".built.json").read_text())["build_s"]
            print(f"queries, {repeats} interleaved rounds:")
            results["queries"] = query_part(spark, indexed, plain, shapes["query"], repeats)
        if not args.skip_upserts:
            print("upsert table:")
            pristine = cached_table(workdir, shapes["upsert"], "upsert")
            scratch = workdir / "scratch"
            scratch.mkdir(exist_ok=True)
            print(f"upserts, {upsert_repeats} interleaved rounds, each from a fresh copy:")
            results["upserts"] = upsert_part(pristine, shapes["upsert"], upsert_repeats, scratch, spark)
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if spark is not None:
            spark.stop()
    results["total_s"] = round(time.perf_counter() - started, 1)
    report(results, spark is not None)


def report(results: dict, with_spark: bool) -> None:
    qs = results["queries"]["queries"]
    names = list(next(iter(qs.values()))["systems"])
    print()
    print(f"{'query':<14}" + "".join(f"{n:>16}" for n in names))
    for qname, f in qs.items():
        print(f"{qname + ' files':<14}" + "".join(f"{f['systems'][n]['files_read']:>16}" for n in names))
        print(f"{qname + ' ms':<14}" + "".join(f"{f['systems'][n]['median_ms']:>16.1f}" for n in names))
        print(f"{'  p90 ms':<14}" + "".join(f"{f['systems'][n]['p90_ms']:>16.1f}" for n in names))
    wrong = sum(f["wrong_answers"] for f in qs.values())
    results["wrong_answers"] = wrong
    print(f"wrong answers (count or sum differs from the exact answer): {wrong}")
    tiny = qs["range 0.1%"]
    r = tiny["ratios"]
    targets = {
        "files_ratio_at_0.1%": {"value": r["files_noindex_over_index"], "target": f">= {TARGET_FILES_RATIO}x"},
        "local_speedup_at_0.1%": {"value": r["time_local_noindex_over_index"], "target": f">= {TARGET_SPEEDUP}x"},
    }
    if with_spark:
        targets["spark_speedup_at_0.1%"] = {
            "value": r["time_spark_noindex_over_index"],
            "target": f">= {TARGET_SPEEDUP}x",
        }
        targets["spark_footers_over_spark_index_at_0.1%"] = {
            "value": r["time_spark_footers_over_spark_index"],
            "target": "> 1 (faster than Spark's footer pushdown)",
        }
        targets["spark_footers_over_local_index_at_0.1%"] = {
            "value": r["time_spark_footers_over_local_index"],
            "target": "> 1 (faster than Spark's footer pushdown)",
        }
    for name, t in targets.items():
        t["met"] = t["value"] >= (TARGET_FILES_RATIO if "files" in name else TARGET_SPEEDUP if "speedup" in name else 1)
        print(f"target {name}: {t['value']:.2f}x (target {t['target']}): {'met' if t['met'] else 'NOT met'}")
    results["targets"] = targets
    groups = {q: {n: f["systems"][n]["median_ms"] for n in names} for q, f in qs.items()}
    if "upserts" in results:
        for case, f in results["upserts"]["cases"].items():
            groups[f"upsert {case}"] = {f"upsert {t}": s["median_ms"] for t, s in f["systems"].items()}
    path = write_report(
        "skipping",
        results,
        None,
        "median ms (log scale)",
        "Data skipping: column_stats index on/off vs Spark footers; upserts BLOOM vs SIMPLE",
        groups=groups,
        log=True,
        out=Path(results["workdir"]) if results["quick"] else None,  # a check run never replaces the figures
    )
    print(f"wrote {path} and {path.with_suffix('.png')} (total {results['total_s']} s)")


if __name__ == "__main__":
    main()
