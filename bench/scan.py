"""Scan planning and one-partition queries on a 100,000-file, 10,000-partition table, against storage globs.

The table (PARTITIONS hive-style partitions `p=NNNNN` x FILES_PER_PARTITION tiny
real parquet base files) is built by bulk commits: each a real instant
(requested -> inflight -> files -> MDT deltacommit with the files' column_stats
and bloom_filters records -> completed), files written on threads, the MDT
compacted at the end. Then real upserts through the local writer rewrite one
file group in each of UPSERTED partitions, so those partitions hold superseded
file versions, as every table that takes updates does.

Interleaved round-robin, the same process:

planning (which files to read)
  tandem plan 1 partition   Table.open + plan_scan(where p = X): MDT listing, partition pruning, column_stats
  tandem plan all files     Table.open + plan_scan() with no filter: every latest file, as columnar splits
  tandem plan all + Splits  the same, then one Python `Split` object per file (plan.splits)
  duckdb glob all files     DuckDB's own listing of `<base>/*/*.parquet` (glob()), which read_parquet does first
  hudi file slices (1 / all) hudi.HudiTable(path).get_file_slices(): the `hudi` package's planning (storage listing)

one-partition query, end to end (count(*), sum(v) WHERE p = X, X a partition with superseded versions)
  tandem duckdb view        coordinator.duckdb.view.query: plan, then DuckDB over the planned files
  tandem read_plan          plan_scan + timeline.query.reader.read_plan
  duckdb hive glob          read_parquet('<base>/*/*.parquet', hive_partitioning = true) WHERE p = X
  duckdb folder glob        read_parquet('<base>/p=X/*.parquet'): the fastest plain DuckDB can do, given the folder
  hudi read                 hudi.HudiTable(path).read(filters p = X)

The storage globs read every file version in the folder, superseded ones too:
their row counts are wrong, and reported as such.

With --s3, a smaller table on the local S3 endpoint (moto): planning through
the MDT against listing the objects (pyarrow's recursive listing, what a glob
does; DuckDB's httpfs extension is not installed here) and against the planner
over a storage listing (source="storage").

Run: .venv/bin/python -m bench.scan [--quick] [--workdir DIR] [--s3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from bench.report import OUT, interleaved, summarize, write_report
from coordinator.config import CoordinatorConfig
from coordinator.mdt import deltacommit
from coordinator.mdt.compaction import execute, schedule
from coordinator.write.parquet_files import open_parquet
from coordinator.write.writer import LocalWriter
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.file_names import base_file_name, new_file_id, write_token
from timeline.format.instant import CLOCK, COMMIT, Instant, State
from timeline.format.meta_fields import META_COLUMNS
from timeline.mdt import indexes as mdt_indexes
from timeline.mdt import records as mdt_records
from timeline.table import Table

ROWS_PER_FILE = 4
TARGET_ONE_PARTITION_MS = 10.0
TARGET_ALL_FILES_MS = 60.0
TARGET_S3_RATIO = 20.0
THREADS = 16


@dataclass(frozen=True)
class Shape:
    partitions: int
    files_per_partition: int
    partitions_per_commit: int
    upserted: int  # partitions whose file groups get a second version

    @property
    def files(self) -> int:
        return self.partitions * self.files_per_partition

    def tag(self) -> str:
        return f"scan-{self.partitions}p-{self.files_per_partition}f"


FULL = Shape(10_000, 10, 1_000, 100)
QUICK = Shape(500, 10, 250, 20)
S3_FULL = Shape(1_000, 10, 250, 20)
S3_QUICK = Shape(100, 10, 50, 10)


def partition_name(i: int) -> str:
    return f"p={i:05d}"


def partition_value(i: int) -> str:
    return f"{i:05d}"


# --------------------------------------------------------------------------- build


def file_rows(partition: int, slot: int, per_partition: int) -> pa.Table:
    first = (partition * per_partition + slot) * ROWS_PER_FILE
    ids = range(first, first + ROWS_PER_FILE)
    return pa.table(
        {
            "key": pa.array([f"k{i:010d}" for i in ids], pa.string()),
            "p": pa.array([partition_value(partition)] * ROWS_PER_FILE, pa.string()),
            "v": pa.array(list(ids), pa.int64()),
        }
    )


def with_meta(rows: pa.Table, stamp: str, task: int, partition: str, name: str) -> pa.Table:
    n = rows.num_rows
    meta = {
        "_hoodie_commit_time": [stamp] * n,
        "_hoodie_commit_seqno": [f"{stamp}_{task}_{i}" for i in range(n)],
        "_hoodie_record_key": rows.column("key").to_pylist(),
        "_hoodie_partition_path": [partition] * n,
        "_hoodie_file_name": [name] * n,
    }
    columns = [pa.array(meta[c], pa.string()) for c in META_COLUMNS] + list(rows.columns)
    return pa.Table.from_arrays(columns, names=META_COLUMNS + rows.column_names)


def write_one(table: Table, stamp: str, partition: int, slot: int, shape: Shape) -> WriteStat:
    """One base file as the local writer writes it (meta columns, `open_parquet`), and its index records."""
    path_partition = partition_name(partition)
    file_id = new_file_id()
    name = base_file_name(file_id, write_token(slot), stamp)
    path = f"{path_partition}/{name}"
    rows = with_meta(file_rows(partition, slot, shape.files_per_partition), stamp, slot, path_partition, name)
    with table.storage.open_output(path) as out:
        with open_parquet(out, rows.schema) as writer:
            writer.write_table(rows, row_group_size=128 * 1024)
        footer = writer.writer.metadata
    size = table.storage.size(path)
    stats, bloom = mdt_indexes.records_for_file(
        table.config, path_partition, name, rows, rows.column("_hoodie_record_key"), footer
    )
    return WriteStat(
        file_id,
        path,
        path_partition,
        num_writes=rows.num_rows,
        num_inserts=rows.num_rows,
        total_write_bytes=size,
        file_size_in_bytes=size,
        column_stats=stats,
        bloom_filter=bloom,
    )


def bulk_commit(table: Table, partitions: range, shape: Shape, known: set[str], pool: ThreadPoolExecutor) -> None:
    """One real instant adding every file of `partitions`: requested -> inflight -> files -> MDT -> completed."""
    timeline = table.timeline()
    stamp = CLOCK.next_after(timeline.last_time(), table.metadata().timeline().last_time())
    instant = Instant(stamp, COMMIT, State.REQUESTED)
    timeline.create_requested(instant)
    inflight = timeline.transition_to_inflight(instant, CommitMetadata(operation_type="BULK_INSERT").to_json_bytes())
    metadata = CommitMetadata(operation_type="BULK_INSERT")
    body = f"#partition metadata\ncommitTime={stamp}\npartitionDepth=1\n".encode()
    list(
        pool.map(
            lambda p: table.storage.write_bytes(f"{partition_name(p)}/.hoodie_partition_metadata", body), partitions
        )
    )
    jobs = [(p, s) for p in partitions for s in range(shape.files_per_partition)]
    for stat in pool.map(lambda job: write_one(table, stamp, job[0], job[1], shape), jobs):
        metadata.add(stat)
    names = [partition_name(p) for p in partitions]
    index_records = mdt_indexes.from_write_stats(metadata.write_stats(), table.config.metadata_indexes)
    records = mdt_records.from_commit(metadata, known)
    deltacommit.apply(table.metadata(), stamp, records, footprint=None, index_records=index_records)
    known.update(names)
    timeline.complete(inflight, metadata.to_json_bytes())


def upsert_some(table: Table, shape: Shape, lock_uri: str = "file") -> list[int]:
    """Real upserts (local writer, BLOOM index): one key in each of `upserted` partitions gets a new value,
    so one file group there gets a second version. Returns the upserted partition numbers."""
    step = max(1, shape.partitions // shape.upserted)
    chosen = list(range(0, shape.partitions, step))[: shape.upserted]
    keys, values, parts = [], [], []
    for p in chosen:
        first = p * shape.files_per_partition * ROWS_PER_FILE
        keys.append(f"k{first:010d}")
        parts.append(partition_value(p))
        values.append(-first)
    writer = LocalWriter(table, coordinator=CoordinatorConfig(lock_uri=lock_uri))
    writer.write(pa.table({"key": keys, "p": parts, "v": pa.array(values, pa.int64())}), "upsert")
    return chosen


def build(base: str, shape: Shape, lock_uri: str = "file") -> tuple[Table, list[int]]:
    table = Table.create(base, "scan", ["key"], ["p"], hive_style=True, hudi_format=False)
    known: set[str] = set()
    with ThreadPoolExecutor(THREADS) as pool:
        for start in range(0, shape.partitions, shape.partitions_per_commit):
            bulk_commit(
                table, range(start, min(shape.partitions, start + shape.partitions_per_commit)), shape, known, pool
            )
    upserted = upsert_some(table, shape, lock_uri)
    mdt = table.metadata()
    scheduled = schedule(mdt, table.timeline())
    if scheduled:
        execute(mdt, table.timeline(), scheduled)
    return table, upserted


def cached(workdir: Path, shape: Shape) -> tuple[str, list[int]]:
    base = workdir / shape.tag()
    done = base.with_suffix(".built.json")
    if done.exists() and (base / ".hoodie").exists():
        print(f"  reusing {base}")
        return str(base), json.loads(done.read_text())["upserted"]
    if base.exists():
        shutil.rmtree(base)
    started = time.perf_counter()
    _, upserted = build(str(base), shape)
    seconds = time.perf_counter() - started
    done.write_text(json.dumps({"shape": shape.__dict__, "upserted": upserted, "build_s": round(seconds, 1)}))
    print(f"  built {base}: {shape.files:,} files in {shape.partitions:,} partitions in {seconds:.1f} s")
    return str(base), upserted


# --------------------------------------------------------------------------- systems


def tandem_plan(base: str, where: str | None, objects: bool = False):
    """The plan as the planner returns it (columnar splits: path, size, partition, instant per file); with
    `objects`, also one Python `Split` per file (what a caller iterating `plan.splits` pays)."""
    from timeline.query.scan import plan_scan

    def run() -> int:
        plan = plan_scan(Table.open(base), where)
        return len(plan.splits) if objects else plan.num_splits

    return run


def duckdb_glob_listing(connection, base: str):
    def run() -> int:
        return connection.execute(f"SELECT count(*) FROM glob('{base}/*/*.parquet')").fetchone()[0]

    return run


def hudi_slices(base: str, value: str | None, options: dict[str, str]):
    import hudi
    from hudi import HudiReadOptions

    read = HudiReadOptions(filters=[("p", "=", value)]) if value is not None else None

    def run() -> int:
        return len(hudi.HudiTable(base, options).get_file_slices(read))

    return run


def tandem_duckdb(base: str, value: str):
    from coordinator.duckdb.view import query

    def run() -> tuple[int, tuple[int, int]]:
        rows, plan = query(base, f"SELECT count(*) AS n, sum(v) AS s FROM t WHERE p = '{value}'")
        return len(plan.splits), (rows.column("n")[0].as_py(), rows.column("s")[0].as_py())

    return run


def tandem_read_plan(base: str, value: str):
    import pyarrow.compute as pc

    from timeline.query.reader import read_plan
    from timeline.query.scan import plan_scan

    where = f"p = '{value}'"

    def run() -> tuple[int, tuple[int, int]]:
        plan = plan_scan(Table.open(base), where)
        rows = read_plan(plan)
        return len(plan.splits), (rows.num_rows, pc.sum(rows.column("v")).as_py())

    return run


def duckdb_query(connection, pattern: str, value: str, hive: bool):
    where = f" WHERE p = '{value}'" if hive else ""
    sql = (
        f"SELECT count(*), sum(v), count(DISTINCT filename) FROM read_parquet('{pattern}', "
        f"hive_partitioning = {str(hive).lower()}, filename = true){where}"
    )

    def run() -> tuple[int, tuple[int, int]]:
        n, s, files = connection.execute(sql).fetchone()
        return files, (n, s)

    return run


def hudi_read(base: str, value: str, options: dict[str, str]):
    import hudi
    from hudi import HudiReadOptions

    read = HudiReadOptions(filters=[("p", "=", value)])

    def run() -> tuple[int, tuple[int, int]]:
        table = hudi.HudiTable(base, options)
        files = len(table.get_file_slices(read))
        batches = table.read(read)
        rows = pa.Table.from_batches(batches) if batches else pa.table({"v": pa.array([], pa.int64())})
        return files, (rows.num_rows, sum(rows.column("v").to_pylist()))

    return run


def expected(value: str, shape: Shape) -> tuple[int, int]:
    """count and sum(v) of partition `value` after the upserts (the key of the first row was negated)."""
    p = int(value)
    first = p * shape.files_per_partition * ROWS_PER_FILE
    ids = range(first, first + shape.files_per_partition * ROWS_PER_FILE)
    return len(ids), sum(ids) - 2 * first


def hudi_options() -> dict[str, str]:
    return {"hoodie.plan.listing.parallelism": str(max(THREADS, (os.cpu_count() or 2) * 4))}


# --------------------------------------------------------------------------- parts


def local_part(workdir: Path, shape: Shape, repeats: int) -> dict:
    import duckdb

    base, upserted = cached(workdir, shape)
    connection = duckdb.connect()
    one_clean = partition_value(shape.partitions // 2 + 1)
    one_upserted = partition_value(upserted[len(upserted) // 2])
    opts = hudi_options()
    out: dict = {"shape": shape.__dict__, "files": shape.files, "upserted_partitions": len(upserted)}

    print(f"planning, {repeats} interleaved rounds:")
    planning = {
        "tandem plan 1 partition": tandem_plan(base, f"p = '{one_clean}'"),
        "tandem plan all files": tandem_plan(base, None),
        "tandem plan all + Splits": tandem_plan(base, None, objects=True),
        "duckdb glob all files": duckdb_glob_listing(connection, base),
        "hudi slices 1 partition": hudi_slices(base, one_clean, opts),
        "hudi slices all files": hudi_slices(base, None, opts),
    }
    for fn in planning.values():
        fn()
    samples, last = interleaved(planning, repeats)
    out["planning"] = {name: {"files": last[name], **summarize(samples[name])} for name in planning}
    for name, f in out["planning"].items():
        print(f"  {name:<26} {f['files']:>8} files  median {f['median_ms']:9.1f} ms  p90 {f['p90_ms']:9.1f} ms")

    print(f"one-partition query (p = '{one_upserted}', a partition with a superseded file version):")
    right = expected(one_upserted, shape)
    pattern = f"{base}/*/*.parquet"
    folder = f"{base}/{partition_name(int(one_upserted))}/*.parquet"
    queries = {
        "tandem duckdb view": tandem_duckdb(base, one_upserted),
        "tandem read_plan": tandem_read_plan(base, one_upserted),
        "duckdb hive glob": duckdb_query(connection, pattern, one_upserted, hive=True),
        "duckdb folder glob": duckdb_query(connection, folder, one_upserted, hive=False),
        "hudi read": hudi_read(base, one_upserted, opts),
    }
    for fn in queries.values():
        fn()
    samples, last = interleaved(queries, repeats)
    out["query"] = {"partition": one_upserted, "expected": {"count": right[0], "sum_v": right[1]}, "systems": {}}
    for name in queries:
        files, (count, total) = last[name]
        out["query"]["systems"][name] = {
            "files_read": files,
            "rows": count,
            "sum_v": total,
            "correct": (count, total) == right,
            "extra_rows": count - right[0],
            **summarize(samples[name]),
        }
    for name, f in out["query"]["systems"].items():
        verdict = "right" if f["correct"] else f"WRONG ({f['extra_rows']:+d} rows)"
        print(
            f"  {name:<22} {f['files_read']:>4} files {f['rows']:>5} rows {verdict:<18} "
            f"median {f['median_ms']:8.1f} ms  p90 {f['p90_ms']:8.1f} ms"
        )
    connection.close()
    return out


def s3_part(workdir: Path, shape: Shape, repeats: int) -> dict:
    import boto3
    import pyarrow.fs as pafs

    import timeline.io.storage as storage_module
    from chaos.servers import MotoServer
    from timeline.mdt.storage_listing import list_storage

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    moto = MotoServer(workdir, threaded=True).start()
    try:
        os.environ["AWS_ENDPOINT_URL_S3"] = moto.url
        storage_module._s3_client = None
        boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1").create_bucket(Bucket="bench")
        base = "s3://bench/table"
        started = time.perf_counter()
        table, _ = build(base, shape, f"dynamodb://bench-locks?region=us-east-1&endpoint={moto.url}")
        print(f"  built {base} on {moto.url}: {shape.files:,} files in {time.perf_counter() - started:.1f} s")
        fs = pafs.S3FileSystem(
            endpoint_override=moto.url, access_key="bench", secret_key="bench", region="us-east-1", scheme="http"
        )
        one = partition_value(shape.partitions // 2 + 1)

        def glob_all() -> int:
            infos = fs.get_file_info(pafs.FileSelector("bench/table", recursive=True))
            return sum(1 for i in infos if i.path.endswith(".parquet") and "/.hoodie/" not in i.path)

        def glob_one() -> int:
            infos = fs.get_file_info(pafs.FileSelector(f"bench/table/{partition_name(int(one))}", recursive=True))
            return sum(1 for i in infos if i.path.endswith(".parquet"))

        def storage_plan(where: str | None):
            from timeline.query.scan import plan_scan

            return lambda: plan_scan(Table.open(base), where, source="storage").num_splits

        systems = {
            "tandem plan 1 partition": tandem_plan(base, f"p = '{one}'"),
            "tandem plan all files": tandem_plan(base, None),
            "s3 glob 1 partition (folder)": glob_one,
            "s3 glob all files": glob_all,
            "tandem storage listing": lambda: list_storage(table.storage, table.timeline()).num_rows,
            "tandem plan all, source=storage": storage_plan(None),
        }
        for fn in systems.values():
            fn()
        samples, last = interleaved(systems, repeats)
        out: dict = {"shape": shape.__dict__, "files": shape.files, "endpoint": "moto_server (threaded)", "systems": {}}
        for name in systems:
            out["systems"][name] = {"files": last[name], **summarize(samples[name])}
            f = out["systems"][name]
            print(f"  {name:<32} {f['files']:>7} files  median {f['median_ms']:9.1f} ms  p90 {f['p90_ms']:9.1f} ms")
        s = out["systems"]
        out["ratios"] = {
            "glob_all_over_plan_all": s["s3 glob all files"]["median_ms"] / s["tandem plan all files"]["median_ms"],
            "glob_all_over_plan_one": s["s3 glob all files"]["median_ms"] / s["tandem plan 1 partition"]["median_ms"],
            "storage_plan_over_plan_all": s["tandem plan all, source=storage"]["median_ms"]
            / s["tandem plan all files"]["median_ms"],
        }
        return out
    finally:
        moto.stop()
        os.environ.pop("AWS_ENDPOINT_URL_S3", None)
        storage_module._s3_client = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small tables (a check that everything runs)")
    parser.add_argument("--workdir", help="where the table is built and kept (reused when present)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved rounds (default 7, quick 3)")
    parser.add_argument("--s3", action="store_true", help="also plan on the local S3 endpoint (a smaller table)")
    parser.add_argument(
        "--s3-only", action="store_true", help="only the S3 part; its figures replace those in the existing report"
    )
    args = parser.parse_args()
    shape, s3_shape = (QUICK, S3_QUICK) if args.quick else (FULL, S3_FULL)
    repeats = args.repeats or (3 if args.quick else 7)
    workdir = Path(args.workdir or Path(tempfile.gettempdir()) / "tandem-bench-scan")
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"local table in {workdir}")
    results: dict = {"quick": args.quick, "workdir": str(workdir), "repeats": repeats}
    if args.s3_only:
        previous = (Path(workdir) if args.quick else OUT) / "scan.json"
        results = json.loads(previous.read_text())["results"]  # the local part as last run
    else:
        results["local"] = local_part(workdir, shape, repeats)
    if args.s3 or args.s3_only:
        print(f"S3 endpoint: {s3_shape.files:,} files in {s3_shape.partitions:,} partitions")
        results["s3"] = s3_part(workdir, s3_shape, repeats)
    results["total_s" if not args.s3_only else "s3_total_s"] = round(time.perf_counter() - started, 1)
    report(results)


def report(results: dict) -> None:
    local = results["local"]
    planning = local["planning"]
    one = planning["tandem plan 1 partition"]["median_ms"]
    every = planning["tandem plan all files"]["median_ms"]
    files = local["files"]
    targets = {
        "plan_1_partition_ms": {
            "value": one,
            "target": f"< {TARGET_ONE_PARTITION_MS} ms",
            "met": one < TARGET_ONE_PARTITION_MS,
        },
        "plan_all_files_ms": {
            "value": every,
            "target": f"< {TARGET_ALL_FILES_MS} ms ({files:,} files)",
            "met": every < TARGET_ALL_FILES_MS,
        },
    }
    if "s3" in results:
        ratio = results["s3"]["ratios"]["glob_all_over_plan_all"]
        targets["s3_glob_over_plan_all"] = {
            "value": ratio,
            "target": f">= {TARGET_S3_RATIO}x",
            "met": ratio >= TARGET_S3_RATIO,
        }
    wrong = {n: f["extra_rows"] for n, f in local["query"]["systems"].items() if not f["correct"]}
    results["wrong_answers"] = wrong
    results["targets"] = targets
    print()
    for name, t in targets.items():
        unit = "x" if name.startswith("s3") else " ms"
        print(f"target {name}: {t['value']:.2f}{unit} (target {t['target']}): {'met' if t['met'] else 'NOT met'}")
    print(f"wrong row counts: {wrong or 'none'}")
    groups = {
        "planning": {n: f["median_ms"] for n, f in planning.items()},
        "1-partition query": {n: f["median_ms"] for n, f in local["query"]["systems"].items()},
    }
    if "s3" in results:
        groups["S3 planning"] = {n: f["median_ms"] for n, f in results["s3"]["systems"].items()}
    path = write_report(
        "scan",
        results,
        None,
        "median ms (log scale)",
        f"Scan planning and 1-partition query, {files:,} files",
        groups=groups,
        log=True,
        out=Path(results["workdir"]) if results["quick"] else None,  # a check run never replaces the figures
    )
    print(f"wrote {path} and {path.with_suffix('.png')} (total {results.get('s3_total_s', results['total_s'])} s)")


if __name__ == "__main__":
    main()
