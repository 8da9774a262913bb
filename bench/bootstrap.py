"""Bootstrap (RFC-12) of a 10,000-file parquet dataset: metadata-only against full-record, a plain insert of the
same rows and the physical floor; then the read cost of the skeleton join against reading the source directly.

The source is what `df.write.partitionBy("day").parquet(...)` leaves: 100 hive folders `day=YYYY-MM-DD` x 100
files named as Spark names them (`part-NNNNN-<uuid>.c000.snappy.parquet`, a `_SUCCESS`
at the top), the partition column only in the folder names. Columns: id int64 (the record key, unique), name
string (one of 1,000 values), amount double, ts timestamp[us, UTC] (within the file's day). It is written once
per workdir with pyarrow (snappy), untimed, and reused by every round (and by later runs given --workdir).

Size: 100 x 100 = 10,000 files (the count the issue asks for) of ROWS_PER_FILE = 500 rows, 5,000,000 rows,
about 140 MB of parquet. The file count is what a bootstrap pays for (a footer, a key column, a skeleton, an
index entry and a metadata-table record per file), so it is kept; the rows per file were lowered so that the
whole run (3 write rounds x 4 systems, 5 read rounds, one profile) stays near 7 minutes on 2 cores: at 1,000
rows per file (10,000,000 rows) one write round took about 100 s and one read round about 40 s, a run of
10 minutes, while the metadata-only bootstrap and the skeleton-join scan barely changed (both per-file costs).
`--rows-per-file` changes it.

write   each round a fresh target per system, the systems interleaved round-robin (bench.report.interleaved)
        in this process, 3 rounds (quick: 1); every fsync kept:
  metadata_only   coordinator.bootstrap.run.bootstrap(BootstrapRequest(source, target, ["id"])) with the CLI's
                  default config (`tandem bootstrap SOURCE TARGET --record-key id`): every footer and key
                  column of the source read and checked, a skeleton per file (the five meta columns), the
                  HFile bootstrap index, the metadata table, the commit
  full_record     the same with mode="full_record": the rows copied into ordinary base files (a bulk insert
                  at instant 00000000000002)
  bulk_insert     Table.create(target, ["id"], ["day"], hive_style) + LocalWriter.write(reader, "bulk_insert"),
                  the reader a pyarrow.dataset scan of the source (hive partitioning, `day` a string): the
                  read of the source is inside the clock, as a user loading the same data pays it
  floor           the 10,000 skeletons alone written with pyarrow (pq.write_table, snappy), on as many threads
                  as Tandem's write pool, each file fsynced, then each folder: what any metadata-only bootstrap
                  that makes its skeletons durable must at least do. The skeleton tables (the same rows' meta
                  columns) are built before the clock; reading the source's keys is not in it
  Bytes written: the sum of the file sizes under each target after the round, data files and `.hoodie`
  (timeline, metadata table, bootstrap index) apart. A metadata-only table's rows stay in the source: its
  bytes are what the bootstrap wrote, not what the table holds.

read    on the last round's metadata-only and full-record tables, 5 interleaved rounds (quick: 2), each query
        end to end (Table.open, plan, read into one Arrow table in memory):
  full scan         tandem metadata_only: read_plan(plan_scan(table)), every skeleton joined with its source
                    file by position; tandem full_record: the same over ordinary base files; pyarrow source:
                    pyarrow.dataset(source, hive partitioning).to_table() (the fastest plain read);
                    duckdb source: read_parquet('<source>/*/*.parquet', hive_partitioning = true) to Arrow
  data columns      the Tandem tables without the meta columns: timeline.query.reader.read_files(storage,
                    plan.splits, columns=[id, name, amount, ts, day]) (a skeleton is then not opened),
                    against the same pyarrow read of the source, timed again in these rounds
  one partition     `day = '<a middle day>'` on each: plan_scan(table, where) + read_plan; the dataset with
                    filter=ds.field("day") == day; DuckDB with WHERE day = ...
  The one-partition queries run first, after one untimed call of each (imports, code paths); the files are
  in the page cache already (all were just written or read by the write rounds), so the scans get no
  separate warm-up. Tandem keeps a read bootstrap index per process while its file is unchanged, so after
  the warm-up the metadata-only reads find it read (a long-lived reader's case; reading it costs about
  0.2 s at 10,000 files). Every read is checked to return the same rows (count, sum of id). The Tandem reads carry
  the five meta columns (as Hudi's snapshot query does) unless projected; the source reads have none.

After timing, cProfile records one more metadata-only bootstrap in a fresh (spawned) interpreter: the calling
thread and every worker thread (the write pool's, the footer and key readers'; not the lock's lease and the
heartbeat threads, which sleep between beats). Its top functions by cumulative and by own time, summed over
the threads, the thread machinery's waiting left out, go to the JSON under "profile".

Run: .venv/bin/python -m bench.bootstrap [--quick] [--workdir DIR] [--rows-per-file N]
(--quick: 100 files, one write round, report written to the workdir, not docs/bench).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bench.commit import label
from bench.report import interleaved, summarize, write_report
from bench.scale import fsync
from coordinator.bootstrap.run import FULL_RECORD, METADATA_ONLY, BootstrapRequest, BootstrapResult, bootstrap
from coordinator.config import CoordinatorConfig, parse_settings
from coordinator.write.pool import LOCAL_IO_THREADS
from coordinator.write.writer import LocalWriter
from timeline.format.file_names import base_file_name, new_file_id, write_token
from timeline.format.meta_fields import META_COLUMNS
from timeline.format.source_file import METADATA_BOOTSTRAP_INSTANT
from timeline.query.reader import read_files, read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

ROWS_PER_FILE = 500
NAMES = 1_000  # distinct values of the string column
FIRST_DAY = date(2024, 1, 1)
DATA_COLUMNS = ["id", "name", "amount", "ts", "day"]
SYSTEMS = ("metadata_only", "full_record", "bulk_insert", "floor")
PROFILE_LINES = 10
HOODIE = ".hoodie"


@dataclass(frozen=True)
class Shape:
    partitions: int
    files_per_partition: int
    rows_per_file: int
    write_rounds: int
    read_rounds: int

    @property
    def files(self) -> int:
        return self.partitions * self.files_per_partition

    @property
    def rows(self) -> int:
        return self.files * self.rows_per_file

    def tag(self) -> str:
        return f"source-{self.partitions}p-{self.files_per_partition}f-{self.rows_per_file}r"


FULL = Shape(partitions=100, files_per_partition=100, rows_per_file=ROWS_PER_FILE, write_rounds=3, read_rounds=5)
QUICK = Shape(partitions=4, files_per_partition=25, rows_per_file=ROWS_PER_FILE, write_rounds=1, read_rounds=2)


def day_of(partition: int) -> str:
    return (FIRST_DAY + timedelta(days=partition)).isoformat()


# --------------------------------------------------------------------------- source


def source_file(partition: int, slot: int, shape: Shape, names: pa.Array) -> pa.Table:
    """The rows of one source file: ids in a block of their own, the other columns drawn from a seeded rng."""
    n = shape.rows_per_file
    first = (partition * shape.files_per_partition + slot) * n
    rng = np.random.default_rng(first)
    midnight = datetime.combine(FIRST_DAY + timedelta(days=partition), datetime.min.time(), timezone.utc)
    micros = int(midnight.timestamp()) * 1_000_000 + rng.integers(0, 86_400 * 1_000_000, n)
    return pa.table(
        {
            "id": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "name": names.take(pa.array(rng.integers(0, len(names), n))),
            "amount": pa.array(np.round(rng.random(n) * 1000, 2)),
            "ts": pa.array(micros, pa.timestamp("us", tz="UTC")),
        }
    )


def write_source(root: Path, shape: Shape) -> None:
    """The dataset as Spark's partitionBy("day") leaves it: a folder per day, Spark's file names, `_SUCCESS`."""
    names = pa.array([f"name-{i:04d}" for i in range(NAMES)], pa.string())
    job = uuid.uuid4()

    def one(partition: int) -> None:
        folder = root / f"day={day_of(partition)}"
        folder.mkdir(parents=True)
        for slot in range(shape.files_per_partition):
            rows = source_file(partition, slot, shape, names)
            pq.write_table(rows, folder / f"part-{slot:05d}-{job}.c000.snappy.parquet", compression="snappy")

    with ThreadPoolExecutor(LOCAL_IO_THREADS) as pool:
        list(pool.map(one, range(shape.partitions)))
    (root / "_SUCCESS").touch()


def cached_source(workdir: Path, shape: Shape) -> Path:
    root = workdir / shape.tag()
    done = root.with_suffix(".built.json")
    if done.exists() and root.exists():
        print(f"  reusing the source {root}")
        return root
    if root.exists():
        shutil.rmtree(root)
    started = time.perf_counter()
    write_source(root, shape)
    seconds = time.perf_counter() - started
    done.write_text(json.dumps({"shape": shape.__dict__, "write_s": round(seconds, 1)}))
    print(f"  wrote the source {root}: {shape.files:,} files, {shape.rows:,} rows in {seconds:.1f} s")
    return root


def source_dataset(source: Path) -> ds.Dataset:
    """The source as a pyarrow dataset, `day` from the folder names as a string (Tandem's partition type)."""
    partitioning = ds.partitioning(pa.schema([("day", pa.string())]), flavor="hive")
    return ds.dataset(str(source), format="parquet", partitioning=partitioning)


def tree_bytes(root: Path) -> dict[str, int]:
    """Sizes of the files under `root`: data (outside .hoodie) and .hoodie, and their counts."""
    out = {"data_bytes": 0, "hoodie_bytes": 0, "data_files": 0, "hoodie_files": 0}
    for folder, _, files in os.walk(root):
        kind = "hoodie" if HOODIE in Path(folder).relative_to(root).parts else "data"
        for name in files:
            out[f"{kind}_bytes"] += os.path.getsize(os.path.join(folder, name))
            out[f"{kind}_files"] += 1
    out["total_bytes"] = out["data_bytes"] + out["hoodie_bytes"]
    return out


# --------------------------------------------------------------------------- write systems


def cli_config() -> CoordinatorConfig:
    """What `tandem bootstrap` and `tandem write` run with when given no --set."""
    return CoordinatorConfig.from_hudi(parse_settings(()))


def run_bootstrap(source: Path, target: Path, mode: str) -> BootstrapResult:
    return bootstrap(BootstrapRequest(str(source), str(target), ["id"], mode=mode), cli_config())


def plain_insert(source: Path, target: Path) -> int:
    table = Table.create(str(target), target.name, ["id"], ["day"], hive_style=True)
    reader = source_dataset(source).scanner().to_reader()
    result = LocalWriter(table, coordinator=cli_config()).write(reader, "bulk_insert")
    return len(result.files_written)


def skeleton_tables(source: Path) -> list[tuple[str, str, pa.Table]]:
    """(partition folder, file name, the five meta columns of its rows, filled as the bootstrap fills them) for
    every source file: the floor's input, built before the clock."""
    out = []
    files = sorted(p for p in source.rglob("*.parquet"))
    for task, path in enumerate(files):
        partition = path.parent.name
        keys = pc.cast(pq.read_table(path, columns=["id"]).column("id"), pa.string())
        n = len(keys)
        name = base_file_name(new_file_id(), write_token(task), METADATA_BOOTSTRAP_INSTANT)
        seqno = pc.binary_join_element_wise(
            f"{METADATA_BOOTSTRAP_INSTANT}_{task}_", pc.cast(pa.array(np.arange(n)), pa.string()), ""
        )
        columns = {
            "_hoodie_commit_time": pa.repeat(pa.scalar(METADATA_BOOTSTRAP_INSTANT), n),
            "_hoodie_commit_seqno": seqno,
            "_hoodie_record_key": keys,
            "_hoodie_partition_path": pa.repeat(pa.scalar(partition), n),
            "_hoodie_file_name": pa.repeat(pa.scalar(name), n),
        }
        out.append((partition, name, pa.table({c: columns[c] for c in META_COLUMNS})))
    return out


def floor_write(skeletons: list[tuple[str, str, pa.Table]], target: Path) -> int:
    """Every skeleton written and fsynced on LOCAL_IO_THREADS threads, then every folder fsynced."""
    folders = sorted({target / partition for partition, _, _ in skeletons})
    for folder in folders:
        folder.mkdir(parents=True)

    def one(item: tuple[str, str, pa.Table]) -> None:
        partition, name, rows = item
        path = target / partition / name
        pq.write_table(rows, path, compression="snappy")
        fsync(path)

    with ThreadPoolExecutor(LOCAL_IO_THREADS) as pool:
        list(pool.map(one, skeletons))
    for folder in [*folders, target]:
        fsync(folder, folder=True)
    return len(skeletons)


def write_part(source: Path, root: Path, shape: Shape) -> tuple[dict[str, Any], dict[str, Path]]:
    """The interleaved write rounds; returns the figures and the last round's targets."""
    started = time.perf_counter()
    skeletons = skeleton_tables(source)
    print(f"  built the floor's {len(skeletons):,} skeleton tables in {time.perf_counter() - started:.1f} s")
    targets: dict[str, list[Path]] = {s: [root / f"round{r}" / s for r in range(shape.write_rounds)] for s in SYSTEMS}
    pending = {s: iter(paths) for s, paths in targets.items()}
    runs: dict[str, Callable[[], Any]] = {
        "metadata_only": lambda: run_bootstrap(source, next(pending["metadata_only"]), METADATA_ONLY),
        "full_record": lambda: run_bootstrap(source, next(pending["full_record"]), FULL_RECORD),
        "bulk_insert": lambda: plain_insert(source, next(pending["bulk_insert"])),
        "floor": lambda: floor_write(skeletons, next(pending["floor"])),
    }
    for paths in targets.values():
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
    samples, last = interleaved(runs, shape.write_rounds)
    systems = {}
    for name in SYSTEMS:
        sizes = [tree_bytes(path) for path in targets[name]]
        same = len({s["total_bytes"] for s in sizes}) == 1
        systems[name] = {**summarize(samples[name]), **sizes[-1], "same_bytes_every_round": same}
    for mode in ("metadata_only", "full_record"):
        result: BootstrapResult = last[mode]
        systems[mode]["reported"] = {
            "rows": result.rows,
            "bytes_written": result.bytes_written,
            "metadata_only_files": result.metadata_only_files,
            "full_record_files": result.full_record_files,
        }
    source_size = tree_bytes(source)["data_bytes"]
    out: dict[str, Any] = {"rounds": shape.write_rounds, "source_bytes": source_size, "systems": systems}
    out["ratios"] = {
        f"metadata_only_over_{peer}": ratio(samples, "metadata_only", peer)
        for peer in ("full_record", "bulk_insert", "floor")
    }
    out["ratios"]["full_record_over_bulk_insert"] = ratio(samples, "full_record", "bulk_insert")
    out["bytes_ratios"] = {
        f"metadata_only_over_{peer}": round(systems["metadata_only"]["total_bytes"] / systems[peer]["total_bytes"], 4)
        for peer in ("full_record", "bulk_insert", "floor")
    }
    out["per_file_ms"] = {name: round(systems[name]["median_ms"] / shape.files, 3) for name in SYSTEMS}
    return out, {name: paths[-1] for name, paths in targets.items()}


def ratio(samples: dict[str, list[float]], system: str, peer: str) -> dict[str, float]:
    mine, theirs = summarize(samples[system]), summarize(samples[peer])
    return {
        "median": round(mine["median_ms"] / theirs["median_ms"], 3),
        "p90": round(mine["p90_ms"] / theirs["p90_ms"], 3),
    }


# --------------------------------------------------------------------------- read systems


def digest(rows: pa.Table) -> tuple[int, int]:
    """Row count and sum of id: two reads that agree on both read the same rows."""
    return rows.num_rows, pc.sum(rows.column("id")).as_py() if rows.num_rows else 0


def tandem_read(path: Path, where: str | None = None) -> Callable[[], tuple[int, int]]:
    return lambda: digest(read_plan(plan_scan(Table.open(str(path)), where)))


def tandem_columns(path: Path) -> Callable[[], tuple[int, int]]:
    def run() -> tuple[int, int]:
        table = Table.open(str(path))
        return digest(read_files(table.storage, plan_scan(table).splits, columns=DATA_COLUMNS))

    return run


def pyarrow_read(source: Path, day: str | None = None) -> Callable[[], tuple[int, int]]:
    where = None if day is None else ds.field("day") == day
    return lambda: digest(source_dataset(source).to_table(filter=where))


def duckdb_read(connection, source: Path, day: str | None = None) -> Callable[[], tuple[int, int]]:
    where = "" if day is None else f" WHERE day = '{day}'"
    sql = (
        f"SELECT * FROM read_parquet('{source}/*/*.parquet', hive_partitioning = true, "
        f"hive_types_autocast = false){where}"
    )
    return lambda: digest(connection.sql(sql).to_arrow_table())


def read_part(source: Path, tables: dict[str, Path], shape: Shape) -> dict[str, Any]:
    import duckdb

    connection = duckdb.connect()
    day = day_of(shape.partitions // 2)
    meta, full = tables["metadata_only"], tables["full_record"]
    queries: dict[str, dict[str, Callable[[], tuple[int, int]]]] = {
        "one partition": {
            "tandem metadata_only": tandem_read(meta, f"day = '{day}'"),
            "tandem full_record": tandem_read(full, f"day = '{day}'"),
            "pyarrow source": pyarrow_read(source, day),
            "duckdb source": duckdb_read(connection, source, day),
        },
        "full scan": {
            "tandem metadata_only": tandem_read(meta),
            "tandem full_record": tandem_read(full),
            "pyarrow source": pyarrow_read(source),
            "duckdb source": duckdb_read(connection, source),
        },
        "data columns": {
            "tandem metadata_only": tandem_columns(meta),
            "tandem full_record": tandem_columns(full),
            "pyarrow source": pyarrow_read(source),
        },
    }
    out: dict[str, Any] = {"rounds": shape.read_rounds, "day": day}
    for query, systems in queries.items():
        if query == "one partition":  # a warm-up of every code path and import, cheap on one partition
            for fn in systems.values():
                fn()
        samples, last = interleaved(systems, shape.read_rounds)
        expected = last["pyarrow source"]
        figures = {
            name: {
                "rows": last[name][0],
                "sum_id": last[name][1],
                "same_rows": last[name] == expected,
                **summarize(samples[name]),
            }
            for name in systems
        }
        ratios = {
            f"{t}_over_pyarrow": ratio(samples, f"tandem {t}", "pyarrow source")
            for t in ("metadata_only", "full_record")
        }
        ratios["metadata_only_over_full_record"] = ratio(samples, "tandem metadata_only", "tandem full_record")
        out[query] = {"systems": figures, "ratios": ratios}
        print(f"  {query}:")
        for name, f in figures.items():
            print(
                f"    {name:<22} {f['rows']:>10,} rows {'same' if f['same_rows'] else 'DIFFERENT':<9} "
                f"median {f['median_ms']:9.1f} ms   p90 {f['p90_ms']:9.1f} ms"
            )
    connection.close()
    return out


# --------------------------------------------------------------------------- profile


def _profiled_bootstrap(source: str, target: str, lines: int, answer) -> None:
    """In a fresh interpreter: one metadata-only bootstrap with every thread profiled (each new thread starts
    its own profiler through threading.setprofile); the merged top functions sent back on `answer`."""
    profilers: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start(*_: Any) -> None:
        if not threading.current_thread().name.startswith(WORKERS):
            sys.setprofile(None)  # the lock's lease and the heartbeat threads: they sleep between beats
            return
        profiler = cProfile.Profile()
        with lock:
            profilers.append(profiler)
        profiler.enable()

    main = cProfile.Profile()
    threading.setprofile(start)
    started = time.perf_counter()
    main.enable()
    run_bootstrap(Path(source), Path(target), METADATA_ONLY)
    main.disable()
    seconds = time.perf_counter() - started
    threading.setprofile(None)
    stats = pstats.Stats(main, stream=io.StringIO())
    for profiler in profilers:
        profiler.disable()  # only stops collecting on the thread that calls it; create_stats snapshots the rest
        stats.add(profiler)
    entries = [(where, stat) for where, stat in stats.stats.items() if not waiting(where)]

    def top(column: int) -> list[dict[str, Any]]:
        ranked = sorted(entries, key=lambda entry: entry[1][column], reverse=True)
        return [
            {"function": label(where), "calls": calls, "cumulative_s": round(cumulative, 3), "own_s": round(own, 3)}
            for where, (_, calls, own, cumulative, _) in ranked[:lines]
        ]

    answer.send({"wall_s": round(seconds, 3), "threads_profiled": len(profilers) + 1, "top": top(3), "top_own": top(2)})
    answer.close()


WORKERS = ("tandem-io", "ThreadPoolExecutor")  # the write pool's threads and the key readers'
IDLE = (f"{os.sep}threading.py", f"{os.sep}queue.py", f"concurrent{os.sep}futures{os.sep}")
IDLE_BUILTINS = ("<method 'acquire' of '_thread", "<method 'get' of '_queue", "_lsprof")


def waiting(where: tuple[str, int, str]) -> bool:
    """A frame of the thread machinery (a worker waiting for work, `each` waiting for its items): summed over
    idle pool threads it would top the list without saying where the time goes; this module's own frames too."""
    path, _, name = where
    mine = path.endswith(os.path.join("bench", "bootstrap.py"))
    return mine or any(p in path for p in IDLE) or any(b in name for b in IDLE_BUILTINS)


def profile(source: Path, target: Path) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_profiled_bootstrap, args=(str(source), str(target), PROFILE_LINES, send))
    child.start()
    send.close()
    result = receive.recv()
    child.join()
    return result


# --------------------------------------------------------------------------- report


def print_write(result: dict[str, Any]) -> None:
    for name, f in result["systems"].items():
        print(
            f"  {name:<14} median {f['median_ms'] / 1000:8.2f} s   p90 {f['p90_ms'] / 1000:8.2f} s   "
            f"data {f['data_bytes'] / 1e6:9.1f} MB in {f['data_files']:>6} files   "
            f".hoodie {f['hoodie_bytes'] / 1e6:7.1f} MB in {f['hoodie_files']:>5} files"
        )
    for name, r in result["ratios"].items():
        print(f"  {name:<32} median {r['median']:7.3f}x   p90 {r['p90']:7.3f}x")


def report(results: dict[str, Any], out: Path | None) -> Path:
    write = results["write"]["systems"]
    groups = {
        "write: seconds": {n: f["median_ms"] / 1000 for n, f in write.items()},
        "write: MB written": {n: f["total_bytes"] / 1e6 for n, f in write.items()},
    }
    for query in ("one partition", "full scan", "data columns"):
        systems = results["read"][query]["systems"]
        groups[f"read {query}: ms"] = {n.removeprefix("tandem "): f["median_ms"] for n, f in systems.items()}
    shape = results["shape"]
    return write_report(
        "bootstrap",
        results,
        None,
        "median (log scale)",
        f"Bootstrap of {shape['partitions'] * shape['files_per_partition']:,} files "
        f"({shape['rows_per_file']} rows each): write, and read (lower is better)",
        groups=groups,
        log=True,
        out=out,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 files, one write round; report kept in the workdir")
    parser.add_argument("--workdir", help="where the source (kept, reused) and the tables go (default: a temp folder)")
    parser.add_argument("--rows-per-file", type=int, default=None, help=f"rows per source file ({ROWS_PER_FILE})")
    parser.add_argument("--no-profile", action="store_true", help="leave out the profiled bootstrap")
    args = parser.parse_args()
    shape = QUICK if args.quick else FULL
    if args.rows_per_file:
        shape = replace(shape, rows_per_file=args.rows_per_file)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="tandem-bench-bootstrap-"))
    workdir.mkdir(parents=True, exist_ok=True)
    tables = workdir / "tables"
    shutil.rmtree(tables, ignore_errors=True)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "quick": args.quick,
        "shape": {**shape.__dict__, "files": shape.files, "rows": shape.rows},
        "write_threads": LOCAL_IO_THREADS,
    }
    try:
        source = cached_source(workdir, shape)
        print(f"write: {shape.files:,} files, {shape.rows:,} rows, {shape.write_rounds} interleaved round(s):")
        results["write"], last = write_part(source, tables / "write", shape)
        print_write(results["write"])
        print(f"read: {shape.read_rounds} interleaved rounds on the last round's tables:")
        results["read"] = read_part(source, last, shape)
        if not args.no_profile:
            results["profile"] = profile(source, tables / "profiled")
            p = results["profile"]
            print(f"metadata-only bootstrap under cProfile ({p['wall_s']:.1f} s, {p['threads_profiled']} threads):")
            for title, key in (("cumulative", "top"), ("own", "top_own")):
                print(f" by {title} time (summed over threads):")
                for entry in p[key]:
                    cumulative, own, calls = entry["cumulative_s"], entry["own_s"], entry["calls"]
                    print(f"  {cumulative:8.2f} s cum {own:7.2f} s own {calls:>8}x  {entry['function']}")
        results["total_s"] = round(time.perf_counter() - started, 1)
        path = report(results, workdir if args.quick else None)  # a check run never replaces the figures
        print(f"wrote {path} and {path.with_suffix('.png')} (total {results['total_s']} s)")
    finally:
        shutil.rmtree(tables, ignore_errors=True)
        if not args.workdir and not args.quick:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
