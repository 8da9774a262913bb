"""Cost of writing large batches against their size: time and peak memory of Tandem, deltalake, pyarrow and the floor.

Each input is one parquet file of N rows (id int64 unique, part p0..p4 = id % 5, fare
float64, city out of four values), generated once per size in the workdir, 1M rows at
a time. Every run is ONE child process started on a fresh target folder: its wall time
is taken around it and its peak RSS is its own ru_maxrss (os.wait4). The target is
created before the clock (`tandem init`) and deleted after it. The systems run
round-robin per size (bench.report.interleaved), --rounds rounds; median and p90 of
time and of peak RSS are reported per system per size.

write    N rows into an empty table partitioned by part:
  tandem-local bulk_insert  `tandem write T --input IN --operation bulk_insert` after
                            `tandem init T --name t --record-key id --partition-by part`:
                            default settings (embedded file lock, MDT with its indexes),
                            every fsync of the commit protocol kept; the CLI streams its
                            input in batches (input_files.read_input)
  tandem-local insert       the same with --operation insert
  tandem-spark bulk_insert  the same with --engine spark (a local Spark session, 2 cores),
                            only for N <= --spark-max-rows. The JVM outlives the Python
                            driver: the benchmark adopts it (a child subreaper) and
                            counts the driver's peak RSS plus the JVM's, each its own
                            peak, so an upper bound of their simultaneous sum
  deltalake                 write_deltalake(T, reader, partition_by=["part"]), reader a
                            pyarrow RecordBatchReader streaming the input: its fastest
                            way with bounded memory
  pyarrow-dataset           pyarrow.dataset.write_dataset(dataset(IN), T, partitioning
                            ["part"], hive flavor), default settings
  floor                     plain pyarrow: the same rows with Hudi's five meta columns in
                            front (strings, filled as bench/commit.py fills them), one
                            file per partition streamed with pq.ParquetWriter in row
                            groups of 128Ki rows (Tandem's default), each file fsynced,
                            then each folder: what any system that makes its files
                            durable must at least pay; it streams, so its memory is
                            bounded too

upsert   --upsert-rows base rows, then 10% of them (keys drawn at random, fixed seed,
         new fare and city; the update file written before the clock), each system on
         its own table loaded by its own bulk write before the clock, fresh per round:
  tandem-local upsert       `tandem write T --input UPDATES --operation upsert`
  deltalake merge           DeltaTable(T).merge(source, predicate="t.id = s.id", aliases
                            s and t).when_matched_update_all().when_not_matched_insert_all()
                            .execute(), the source read from the update file
         After each upsert, outside the clock, its table is checked to hold the expected rows
         (count, sum of fare).

Fairness: each peer is used its fastest bounded-memory way and every durability step is
kept for Tandem and the floor; deltalake and pyarrow fsync nothing, so they are measured
without the durability Tandem pays for. deltalake and pyarrow-dataset keep `part` in the
folder names only, Tandem and the floor in the files too (as Hudi does). Every system pays
one interpreter start (the JVM's too for Spark), which dominates the smallest sizes; a
sanity check counts the rows each run left on disk.

Run: .venv/bin/python -m bench.scale [--sizes 1000000,5000000] [--rounds 3] [--no-spark]
     [--spark-max-rows N] [--upsert-rows N] [--upsert-keys N] [--workdir DIR] [--keep]
     [--quick [--spark]]
(--quick: 100,000 and 300,000 rows, 1 round, upsert 200,000/20,000, no Spark unless
--spark; the report goes to the workdir, not docs/bench). A child run by itself:
.venv/bin/python -m bench.scale --run {deltalake,pyarrow-dataset,floor,deltalake-merge}
--input IN.parquet --target T.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.report import OUT, interleaved, percentile, summarize

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 5
CITIES = ("lisbon", "porto", "braga", "faro")
GENERATE_BATCH = 1_000_000  # rows per generated row group: generation memory stays bounded
ROW_GROUP = 128 * 1024  # the floor's row groups: Tandem's default (WriteOptions.row_group_size)
SIZES = (1_000_000, 5_000_000, 20_000_000, 50_000_000)
QUICK_SIZES = (100_000, 300_000)
UPSERT_ROWS, QUICK_UPSERT_ROWS = 5_000_000, 200_000
UPDATED = 0.1  # the share of the upsert table's keys updated, by default
SPARK_MAX_ROWS = 20_000_000
SEED = 20240601
MERGE_PREDICATE = "t.id = s.id"
MB = 1024 * 1024
TANDEM_BULK, TANDEM_INSERT = "tandem-local bulk_insert", "tandem-local insert"
TANDEM_UPSERT, DELTA_MERGE = "tandem-local upsert", "deltalake merge"
CHILDREN = ("deltalake", "pyarrow-dataset", "floor", "deltalake-merge")
# timeline.format.meta_fields.META_COLUMNS, spelled out: importing timeline.format costs the floor's child pandas
HUDI_META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
PR_SET_CHILD_SUBREAPER = 36
ORPHAN_WAIT_S = 120.0  # how long a timed run's orphaned descendants (Spark's JVM) may take to exit


# --------------------------------------------------------------------------- data


def shaped(ids: np.ndarray, fares: np.ndarray, city_shift: int = 0) -> pa.Table:
    """Rows of the benchmark's shape for these keys: part p{id % 5}, city one of CITIES."""
    parts = pa.array([f"p{p}" for p in range(PARTITIONS)], pa.string()).take(pa.array(ids % PARTITIONS))
    cities = pa.array(CITIES, pa.string()).take(pa.array((ids + city_shift) % len(CITIES)))
    return pa.table({"id": pa.array(ids, pa.int64()), "part": parts, "fare": pa.array(fares), "city": cities})


def generated(start: int, count: int) -> pa.Table:
    """Keys start .. start+count-1, fare id * 0.5 (bench/commit.py's batch, vectorised)."""
    ids = np.arange(start, start + count, dtype=np.int64)
    return shaped(ids, ids * 0.5)


def input_file(folder: Path, rows: int) -> Path:
    """The input of `rows` rows, written once (kept in a kept workdir), GENERATE_BATCH rows at a time."""
    path = folder / f"rows-{rows}.parquet"
    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    started = time.perf_counter()
    with pq.ParquetWriter(partial, generated(0, 1).schema) as writer:
        for start in range(0, rows, GENERATE_BATCH):
            writer.write_table(generated(start, min(GENERATE_BATCH, rows - start)), row_group_size=GENERATE_BATCH)
    partial.rename(path)
    took = time.perf_counter() - started
    print(f"input: {rows:,} rows, {path.stat().st_size / MB:.1f} MB, written in {took:.1f} s ({path})", flush=True)
    return path


def update_file(folder: Path, base_rows: int, keys: int) -> Path:
    """`keys` existing keys drawn at random (fixed seed) with a new fare and city."""
    path = folder / f"updates-{base_rows}-{keys}.parquet"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        ids = np.sort(np.random.default_rng(SEED).choice(base_rows, size=keys, replace=False)).astype(np.int64)
        pq.write_table(shaped(ids, -ids - 1.0, city_shift=1), path)
    return path


# --------------------------------------------------------------------------- children (one system run each)


def input_reader(path: str) -> pa.RecordBatchReader:
    """The input streamed batch by batch (the dataset scanner's default batches and read-ahead)."""
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").scanner().to_reader()


def run_deltalake(input_path: str, target: str) -> None:
    from deltalake import write_deltalake

    write_deltalake(target, input_reader(input_path), partition_by=["part"])


def run_deltalake_merge(input_path: str, target: str) -> None:
    from deltalake import DeltaTable

    merger = DeltaTable(target).merge(
        pq.read_table(input_path), predicate=MERGE_PREDICATE, source_alias="s", target_alias="t"
    )
    merger.when_matched_update_all().when_not_matched_insert_all().execute()


def run_pyarrow_dataset(input_path: str, target: str) -> None:
    import pyarrow.dataset as ds

    dataset = ds.dataset(input_path, format="parquet")
    ds.write_dataset(dataset, target, format="parquet", partitioning=["part"], partitioning_flavor="hive")


def fsync(path: Path, folder: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class PartitionFile:
    """One partition's file of the floor: rows buffered to full row groups, the meta columns put in front."""

    root: Path
    partition: str
    instant: str
    schema: pa.Schema
    pending: list[pa.RecordBatch] = field(default_factory=list)
    pending_rows: int = 0
    written: int = 0

    def __post_init__(self) -> None:
        self.name = f"{uuid.uuid4()}-0_0-1-0_{self.instant}.parquet"  # Hudi's fileId-0_writeToken_instant
        self.path = self.root / self.partition / self.name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        meta = pa.schema([(c, pa.string()) for c in HUDI_META_COLUMNS])
        self.writer = pq.ParquetWriter(self.path, pa.schema([*meta, *self.schema]))

    def add(self, rows: pa.RecordBatch) -> None:
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        if self.pending_rows >= ROW_GROUP:
            rows = pa.Table.from_batches(self.pending)
            full = rows.num_rows - rows.num_rows % ROW_GROUP
            self.writer.write_table(self.with_meta(rows.slice(0, full)), row_group_size=ROW_GROUP)
            self.pending = rows.slice(full).combine_chunks().to_batches()
            self.pending_rows = rows.num_rows - full

    def with_meta(self, rows: pa.Table) -> pa.Table:
        """commit time, `{instant}_0_{i}` (i counting the file's rows), record key, partition, file name."""
        n = rows.num_rows
        seqno = pa.array(np.arange(self.written, self.written + n)).cast(pa.string())
        meta = [
            pa.repeat(pa.scalar(self.instant, pa.string()), n),
            pc.binary_join_element_wise(pa.scalar(f"{self.instant}_0_"), seqno, ""),
            rows.column("id").cast(pa.string()),
            pa.repeat(pa.scalar(self.partition, pa.string()), n),
            pa.repeat(pa.scalar(self.name, pa.string()), n),
        ]
        self.written += n
        names = self.writer.schema.names
        return pa.Table.from_arrays(meta + list(rows.columns), names=names)

    def close(self) -> None:
        if self.pending_rows:
            self.writer.write_table(self.with_meta(pa.Table.from_batches(self.pending)), row_group_size=ROW_GROUP)
        self.writer.close()
        fsync(self.path)


def run_floor(input_path: str, target: str) -> None:
    """The rows split by partition batch by batch into one durable file per partition, then the folders fsynced."""
    root = Path(target)
    instant = datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S%f")[:17]
    reader = input_reader(input_path)
    files: dict[str, PartitionFile] = {}
    for batch in reader:
        parts = batch.column("part")
        for partition in pc.unique(parts).to_pylist():
            if partition not in files:
                files[partition] = PartitionFile(root, partition, instant, reader.schema)
            files[partition].add(batch.filter(pc.equal(parts, partition)))
    for file in files.values():
        file.close()
    for partition in files:
        fsync(root / partition, folder=True)
    fsync(root, folder=True)


def run_child(system: str, input_path: str, target: str) -> None:
    runs: dict[str, Callable[[str, str], None]] = {
        "deltalake": run_deltalake,
        "pyarrow-dataset": run_pyarrow_dataset,
        "floor": run_floor,
        "deltalake-merge": run_deltalake_merge,
    }
    runs[system](input_path, target)


# --------------------------------------------------------------------------- measuring


@dataclass
class Sample:
    seconds: float
    rss_mb: float  # the child's ru_maxrss plus those of its descendants that outlived it
    descendants_mb: float  # the second part alone (Spark's JVM)
    files: int
    rows: int


class RunFailed(Exception):
    pass


def tandem_cli() -> str:
    local = Path(sys.executable).with_name("tandem")
    return str(local) if local.exists() else shutil.which("tandem") or "tandem"


def child_command(system: str, input_path: Path, target: Path) -> list[str]:
    return [sys.executable, "-m", "bench.scale", "--run", system, "--input", str(input_path), "--target", str(target)]


def tandem_init(target: Path) -> list[str]:
    return [tandem_cli(), "init", str(target), "--name", "t", "--record-key", "id", "--partition-by", "part"]


def tandem_write(target: Path, input_path: Path, operation: str, engine: str = "local") -> list[str]:
    argv = [tandem_cli(), "write", str(target), "--input", str(input_path), "--operation", operation]
    return argv + (["--engine", engine] if engine != "local" else [])


def adopt_orphans() -> bool:
    """Make this process a child subreaper (Linux prctl), so descendants that outlive a run's process (the JVM
    `tandem write --engine spark` starts) become its children, to be waited for and their peak RSS counted."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans() -> list[float]:
    """Wait for every remaining child (orphaned descendants of the last run); the peak RSS (MB) of each."""
    peaks: list[float] = []
    deadline = time.monotonic() + ORPHAN_WAIT_S
    while time.monotonic() < deadline:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return peaks
        if pid:
            peaks.append(usage.ru_maxrss * 1024 / MB)
        else:
            time.sleep(0.05)
    print(f"  (descendants still running after {ORPHAN_WAIT_S:.0f} s: their memory is not counted)", flush=True)
    return peaks


def untimed(argv: list[str], log: Path) -> None:
    with log.open("w") as out:
        done = subprocess.run(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, check=False)
    reap_orphans()
    if done.returncode:
        raise RunFailed(f"{shlex.join(argv)} exited {done.returncode}: {tail(log)}")


def timed(argv: list[str], log: Path) -> tuple[float, float, float]:
    """Wall seconds of one child process, its peak RSS (MB) with its orphaned descendants', and theirs alone.

    The child's own ru_maxrss (KiB on Linux) comes from wait4; Linux makes it the largest of its own and
    those of the children it reaped. Descendants it left running are waited for after the clock."""
    with log.open("w") as out:
        started = time.perf_counter()
        child = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    descendants = sum(reap_orphans())
    if child.returncode:
        raise RunFailed(f"{shlex.join(argv)} exited {child.returncode}: {tail(log)}")
    return seconds, usage.ru_maxrss * 1024 / MB + descendants, descendants


def tail(log: Path, lines: int = 8) -> str:
    return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])


def data_files(target: Path) -> Iterator[Path]:
    """The parquet files a run left, its logs (.hoodie, _delta_log) and hidden files left out."""
    for folder, subfolders, names in os.walk(target):
        subfolders[:] = [s for s in subfolders if not s.startswith((".", "_"))]
        yield from (Path(folder) / n for n in names if n.endswith(".parquet") and not n.startswith((".", "_")))


def on_disk(target: Path) -> tuple[int, int]:
    """(files, rows) of the data files under `target`: each run writes into an empty table, so all are its own."""
    files = list(data_files(target))
    return len(files), sum(pq.ParquetFile(f).metadata.num_rows for f in files)


@dataclass
class System:
    """One timed command on a fresh target; before the clock `prepare` (a table's init, or its load), after it
    `check` (the upserted rows verified)."""

    name: str
    command: Callable[[Path], list[str]]
    prepare: Callable[[Path, Path], None] | None = None
    check: Callable[[Path], None] | None = None


@dataclass
class Runner:
    """Runs systems on fresh targets under `tables`, printing each run; a system that fails once is dropped."""

    tables: Path
    failed: dict[str, str] = field(default_factory=dict)

    def once(self, system: System, rows: int) -> Sample | None:
        if system.name in self.failed:
            return None
        slug = system.name.replace(" ", "-")
        target, log = self.tables / slug, self.tables / f"{slug}.log"
        shutil.rmtree(target, ignore_errors=True)
        self.tables.mkdir(parents=True, exist_ok=True)
        try:
            if system.prepare is not None:
                system.prepare(target, log)
            seconds, rss, descendants = timed(system.command(target), log)
            if system.check is not None:
                system.check(target)
            files, written = on_disk(target)
        except RunFailed as err:
            self.failed[system.name] = str(err)
            print(f"  {rows:>12,} rows  {system.name:<26} FAILED: {err}", flush=True)
            return None
        finally:
            shutil.rmtree(target, ignore_errors=True)
        print(f"  {rows:>12,} rows  {system.name:<26} {seconds:9.2f} s {rss:9.0f} MB  {files:4d} files", flush=True)
        return Sample(seconds, rss, descendants, files, written)

    def rounds(self, systems: list[System], rows: int, rounds: int) -> dict[str, list[Sample]]:
        """Every system once per round, round-robin (bench.report.interleaved); the samples of each.

        interleaved's own clock would include the untimed steps (init, load, check, removal): each run is
        timed around its child process alone."""
        samples: dict[str, list[Sample]] = {s.name: [] for s in systems}

        def run(system: System) -> Callable[[], None]:
            def go() -> None:
                sample = self.once(system, rows)
                if sample is not None:
                    samples[system.name].append(sample)

            return go

        interleaved({s.name: run(s) for s in systems}, rounds)
        return samples


# --------------------------------------------------------------------------- the parts


def write_systems(input_path: Path, spark: bool) -> list[System]:
    def tandem(operation: str, engine: str = "local") -> System:
        name = {"local": "tandem-local", "spark": "tandem-spark"}[engine] + f" {operation}"
        return System(
            name,
            lambda target: tandem_write(target, input_path, operation, engine),
            lambda target, log: untimed(tandem_init(target), log),
        )

    systems = [tandem("bulk_insert"), tandem("insert")]
    if spark:
        systems.append(tandem("bulk_insert", "spark"))
    systems += [System(name, lambda target, n=name: child_command(n, input_path, target)) for name in CHILDREN[:3]]
    return systems


def figures(samples: list[Sample]) -> dict[str, Any]:
    """Median and p90 of time (ms, bench.report.summarize) and of peak RSS (MB); files and rows written."""
    rss = [s.rss_mb for s in samples]
    descendants = any(s.descendants_mb for s in samples)
    return {
        "time": summarize([s.seconds * 1000 for s in samples]),
        "rss": {
            "median_mb": round(statistics.median(rss), 1),
            "p90_mb": round(percentile(rss, 90), 1),
            "max_mb": round(max(rss), 1),
            "samples_mb": [round(r, 1) for r in rss],
        },
        "files": samples[-1].files,
        "rows_written": samples[-1].rows,
    } | ({"rss_of_descendants_mb": [round(s.descendants_mb, 1) for s in samples]} if descendants else {})


def ratio(systems: dict[str, Any], over: str, under: str) -> dict[str, float] | None:
    if over not in systems or under not in systems:
        return None
    a, b = systems[over], systems[under]
    return {
        "time_median": round(a["time"]["median_ms"] / b["time"]["median_ms"], 3),
        "time_p90": round(a["time"]["p90_ms"] / b["time"]["p90_ms"], 3),
        "rss_median": round(a["rss"]["median_mb"] / b["rss"]["median_mb"], 3),
        "rss_p90": round(a["rss"]["p90_mb"] / b["rss"]["p90_mb"], 3),
    }


def size_part(runner: Runner, inputs: Path, rows: int, rounds: int, spark: bool) -> dict[str, Any]:
    print(f"write {rows:,} rows, {rounds} interleaved round(s):", flush=True)
    input_path = input_file(inputs, rows)
    samples = runner.rounds(write_systems(input_path, spark), rows, rounds)
    systems = {name: figures(s) for name, s in samples.items() if s}
    for f in systems.values():
        if f["rows_written"] != rows:
            f["note"] = f"{f['rows_written']} rows on disk, {rows} expected"
    pairs = [(t, p) for t in (TANDEM_BULK, TANDEM_INSERT) for p in ("floor", "pyarrow-dataset")]
    ratios = {f"{t} / {p}": ratio(systems, t, p) for t, p in pairs}
    result = {"rows": rows, "input_mb": round(input_path.stat().st_size / MB, 1), "systems": systems}
    result["ratios"] = {k: v for k, v in ratios.items() if v is not None}
    print_size(result)
    return result


def upsert_part(runner: Runner, inputs: Path, base_rows: int, keys: int, rounds: int) -> dict[str, Any]:
    print(f"upsert {keys:,} existing keys into {base_rows:,} rows, {rounds} interleaved round(s):", flush=True)
    base = input_file(inputs, base_rows)
    updates = update_file(inputs, base_rows, keys)
    expected = digest_expected(base, updates)
    checks: dict[str, Any] = {}

    def load_tandem(target: Path, log: Path) -> None:
        untimed(tandem_init(target), log)
        untimed(tandem_write(target, base, "bulk_insert"), log)

    def check(name: str, read: Callable[[Path], tuple[int, float]]) -> Callable[[Path], None]:
        def verify(target: Path) -> None:
            rows, fares = read(target)
            checks[name] = {"rows": rows, "fare_sum": fares}
            checks[name]["equal"] = rows == expected[0] and math.isclose(fares, expected[1], rel_tol=1e-9)

        return verify

    systems = [
        System(
            TANDEM_UPSERT,
            lambda target: tandem_write(target, updates, "upsert"),
            load_tandem,
            check(TANDEM_UPSERT, digest_tandem),
        ),
        System(
            DELTA_MERGE,
            lambda target: child_command("deltalake-merge", updates, target),
            lambda target, log: untimed(child_command("deltalake", base, target), log),
            check(DELTA_MERGE, digest_delta),
        ),
    ]
    samples = runner.rounds(systems, base_rows, rounds)  # each round checked after the clock; the last kept
    result: dict[str, Any] = {"base_rows": base_rows, "keys": keys, "rounds": rounds}
    result["systems"] = {name: figures(s) for name, s in samples.items() if s}
    for f in result["systems"].values():  # the table's files after the upsert: the loaded ones included
        f["files_in_table"] = f.pop("files")
        f.pop("rows_written")
    upsert_ratio = ratio(result["systems"], TANDEM_UPSERT, DELTA_MERGE)
    result["ratios"] = {f"{TANDEM_UPSERT} / {DELTA_MERGE}": upsert_ratio} if upsert_ratio else {}
    result["expected"] = {"rows": expected[0], "fare_sum": expected[1]}
    result["checks"] = checks
    print_size(result)
    for name, c in checks.items():
        print(
            f"  {name}: {c['rows']:,} rows, sum of fare {c['fare_sum']:.1f}: {'as expected' if c['equal'] else 'WRONG'}"
        )
    return result


def digest_expected(base: Path, updates: Path) -> tuple[int, float]:
    """Rows and sum of fare the upserted table must hold: the base's, with the updated keys' fares replaced."""
    rows = pq.ParquetFile(base).metadata.num_rows
    ids = pq.read_table(updates, columns=["id"]).column("id").to_numpy()
    fares = pq.read_table(updates, columns=["fare"]).column("fare").to_numpy()
    total = float(np.arange(rows, dtype=np.float64).sum() * 0.5 - (ids * 0.5).sum() + fares.sum())
    return rows, total


def digest_files(paths: list[str]) -> tuple[int, float]:
    rows, fares = 0, 0.0
    for path in paths:
        column = pq.read_table(path, columns=["fare"]).column("fare")
        rows += len(column)
        fares += pc.sum(column).as_py() or 0.0
    return rows, fares


def digest_tandem(target: Path) -> tuple[int, float]:
    from timeline.query.scan import plan_scan
    from timeline.table import Table

    return digest_files([str(target / p) for p in plan_scan(Table.open(str(target))).paths])


def digest_delta(target: Path) -> tuple[int, float]:
    from deltalake import DeltaTable

    return digest_files(DeltaTable(str(target)).file_uris())


# --------------------------------------------------------------------------- report


def print_size(result: dict[str, Any]) -> None:
    print(f"  {'system':<26} {'median s':>9} {'p90 s':>8} {'median MB':>10} {'p90 MB':>8} {'files':>6}")
    for name, f in result["systems"].items():
        t, r = f["time"], f["rss"]
        files = f.get("files", f.get("files_in_table", 0))
        line = f"  {name:<26} {t['median_ms'] / 1000:9.2f} {t['p90_ms'] / 1000:8.2f}"
        print(f"{line} {r['median_mb']:10.0f} {r['p90_mb']:8.0f} {files:6d} {f.get('note', '')}")
    for name, r in result["ratios"].items():
        print(f"  {name:<42} time {r['time_median']:6.2f}x (p90 {r['time_p90']:5.2f}x)   RSS {r['rss_median']:6.2f}x")


def machine() -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "deltalake": version("deltalake"),
        "platform": platform.platform(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1),
    }


def plot(sizes: list[dict[str, Any]], path: Path, title: str) -> None:
    """Two log-log panels, median seconds and median peak RSS against rows, one line per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    names = list(dict.fromkeys(n for s in sizes for n in s["systems"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name in names:
        points = [(s["rows"], s["systems"][name]) for s in sizes if name in s["systems"]]
        rows = [r for r, _ in points]
        style = {"marker": "o", "label": name, "linestyle": "--" if name == "floor" else "-"}
        left.plot(rows, [f["time"]["median_ms"] / 1000 for _, f in points], **style)
        right.plot(rows, [f["rss"]["median_mb"] for _, f in points], **style)
    for ax, label in ((left, "median wall seconds"), (right, "median peak RSS (MB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows written")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    left.set_title("time (lower is better)")
    right.set_title("peak memory (lower is better)")
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def report(results: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "scale",
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": f"{sys.executable} -m bench.scale {shlex.join(sys.argv[1:])}".strip(),
        "results": results,
    }
    path = out / "scale.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    plot(results["sizes"], path.with_suffix(".png"), "Writing N rows in one batch, one process per run")
    return path


def print_overview(sizes: list[dict[str, Any]]) -> None:
    names = list(dict.fromkeys(n for s in sizes for n in s["systems"]))
    print("\nmedian seconds / median peak RSS MB per size:")
    print(f"  {'system':<26}" + "".join(f"{s['rows']:>20,}" for s in sizes))
    for name in names:
        cells = []
        for s in sizes:
            f = s["systems"].get(name)
            cells.append(f"{f['time']['median_ms'] / 1000:10.2f} s {f['rss']['median_mb']:5.0f} MB" if f else "-")
        print(f"  {name:<26}" + "".join(f"{c:>20}" for c in cells))


# --------------------------------------------------------------------------- main


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="rows per write, comma separated (default 1M,5M,20M,50M)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per size (default 3)")
    parser.add_argument("--spark", action="store_true", help="include tandem-spark in a --quick run")
    parser.add_argument("--no-spark", action="store_true", help="leave tandem-spark out")
    parser.add_argument("--spark-max-rows", type=int, default=SPARK_MAX_ROWS, help="tandem-spark up to this size")
    parser.add_argument("--upsert-rows", type=int, help="the upsert table's rows (default 5,000,000)")
    parser.add_argument("--upsert-keys", type=int, help="keys the upsert updates (default 10%% of its rows)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round; the report goes to the workdir")
    parser.add_argument("--workdir", help="inputs and tables (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the inputs (and a temporary workdir)")
    parser.add_argument("--run", choices=CHILDREN, help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.run:
        run_child(args.run, args.input, args.target)
        return
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(QUICK_SIZES if args.quick else SIZES)
    rounds = args.rounds or (1 if args.quick else 3)
    upsert_rows = args.upsert_rows or (QUICK_UPSERT_ROWS if args.quick else UPSERT_ROWS)
    upsert_keys = args.upsert_keys or int(upsert_rows * UPDATED)
    spark = not args.no_spark and (args.spark or not args.quick)
    temporary = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="tandem-bench-scale-")).resolve()
    print(f"workdir {workdir}; sizes {', '.join(f'{n:,}' for n in sorted(sizes))}; {rounds} round(s)", flush=True)
    runner = Runner(workdir / "tables")
    inputs = workdir / "inputs"
    results: dict[str, Any] = {
        "quick": args.quick,
        "rounds": rounds,
        "spark_max_rows": args.spark_max_rows if spark else 0,
        "sizes": [],
    }
    results["descendants_counted"] = adopt_orphans()
    started = time.perf_counter()
    try:
        for rows in sorted(sizes):
            with_spark = spark and rows <= args.spark_max_rows
            results["sizes"].append(size_part(runner, inputs, rows, rounds, with_spark))
        results["upsert"] = upsert_part(runner, inputs, upsert_rows, upsert_keys, rounds)
        results["failed"] = runner.failed
        results["total_s"] = round(time.perf_counter() - started, 1)
        print_overview(results["sizes"])
        path = report(results, workdir if args.quick else OUT)  # a check run never replaces the figures
        print(f"wrote {path} and {path.with_suffix('.png')}")
    finally:
        if not args.keep:
            shutil.rmtree(inputs, ignore_errors=True)
            shutil.rmtree(runner.tables, ignore_errors=True)
            if temporary and not args.quick:
                shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
