"""The main job on the embedded defaults: a Spark pipeline with async table services beside it.

Local storage, the file lock, local Spark. Batches of inserts, upserts and
deletes go into a partitioned merge-on-read table through `SparkWriter` (updates
and deletes land in log files) while a clean worker and a compaction worker (the
data table's log files into base files, then the MDT) run as their own processes
on the same lock (the LAZY failed-writes policy, as for any table with several
writers). Then the
timelines, the table read back through Spark, and what listing costs through
the metadata table against storage.
"""

from __future__ import annotations

import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from coordinator.config import CoordinatorConfig
from coordinator.services.worker import worker_command
from timeline.errors import ConflictError
from timeline.table import Table

if TYPE_CHECKING:
    from coordinator.spark.writer import SparkWriter
    from coordinator.write.writer import WriteResult

CITIES = ["amsterdam", "berlin", "chennai", "denver", "lisbon"]
SETTINGS = {
    "hoodie.cleaner.policy.failed.writes": "LAZY",
    "hoodie.metadata.compact.max.delta.commits": "4",
    "hoodie.compact.inline.max.delta.commits": "2",
    "hoodie.compact.schedule.inline": "true",  # the writer plans each compaction, the worker executes it
    "hoodie.cleaner.commits.retained": "2",
}
WORKER_INTERVAL_S = 2.0
CONFLICT_RETRIES = 3  # attempts of one write job that loses conflicts
WORKER_STOP_S = 60


def _rows(rng: random.Random, ids: list[int], stamp: int) -> list[dict]:
    return [
        {"trip_id": i, "city": CITIES[i % len(CITIES)], "ts": stamp, "fare": round(rng.uniform(5, 80), 2)} for i in ids
    ]


def _steps(rng: random.Random, batches: int, rows: int) -> list[tuple[str, list[int]]]:
    steps = [("insert", list(range(rows)))]
    for b in range(1, max(batches - 2, 2)):
        steps.append(("upsert", rng.sample(range(rows), rows // 10) + list(range(rows + b * 100, rows + b * 100 + 50))))
    steps.append(("delete", rng.sample(range(rows), rows // 20)))
    steps.append(("insert", list(range(rows * 10, rows * 10 + rows // 4))))
    return steps


def _start_worker(kind: str, base: str, logs: Path) -> tuple[subprocess.Popen, Path]:
    log = logs / f"worker-{kind}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            worker_command(kind, base, SETTINGS, WORKER_INTERVAL_S), stdout=out, stderr=subprocess.STDOUT
        )
    return proc, log


def _stop_worker(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(WORKER_STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_demo(path: str | None, console: Console, batches: int = 6, rows: int = 20000) -> Table:
    from coordinator.spark.session import local_session
    from coordinator.spark.writer import SparkWriter

    base = path or tempfile.mkdtemp(prefix="tandem-demo-")
    table = Table.create(
        base, "trips", ["trip_id"], ["city"], hive_style=True, precombine_field="ts", table_type="MERGE_ON_READ"
    )
    console.print(
        f"merge-on-read table [bold]trips[/] at {table.uri}: local storage, file lock, local Spark, partitioned by city"
    )
    rng = random.Random(7)
    steps = _steps(rng, batches, rows)
    with console.status("starting Spark (local mode)"):
        spark = local_session("tandem-demo")
    logs = Path(tempfile.mkdtemp(prefix="tandem-demo-logs-"))
    workers = [_start_worker(kind, base, logs) for kind in ("clean", "compact")]
    console.print(f"async clean and compaction workers started (every {WORKER_INTERVAL_S:g} s, same lock)")
    writer = SparkWriter(spark, table, coordinator=CoordinatorConfig.from_hudi(SETTINGS))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console) as progress:
            task = progress.add_task("Spark write jobs", total=len(steps))
            for stamp, (operation, ids) in enumerate(steps, start=1):
                started = time.perf_counter()
                result = _write_retrying(writer, spark.createDataFrame(_rows(rng, ids, stamp)), operation, progress)
                elapsed = (time.perf_counter() - started) * 1000
                progress.console.print(
                    f"  {result.instant}  {operation:<7} {len(ids):>6} rows -> "
                    f"{len(result.files_written)} file(s), {elapsed:.0f} ms"
                )
                progress.advance(task)
        with console.status("stopping the workers (SIGTERM)"):
            for proc, _ in workers:
                _stop_worker(proc)
        for _, log in workers:
            last = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            console.print(f"  {last[-1] if last else log.name + ': no output'}")
        _print_timelines(table, console)
        _print_read_back(spark, table, console)
    finally:
        for proc, _ in workers:
            if proc.poll() is None:
                proc.kill()
        spark.stop()
    _print_listing(table, console)
    return table


def _write_retrying(writer: SparkWriter, frame, operation: str, progress: Progress) -> WriteResult:
    """One write job, retried when it loses a conflict (with the compaction worker finishing a slice it wrote,
    say): a conflict commits nothing, so the same batch is written again (Hudi's
    `hoodie.write.num.retries.on.conflict.failures`)."""
    attempt = 1
    while True:
        try:
            return writer.write(frame, operation)
        except ConflictError as err:
            if attempt == CONFLICT_RETRIES:
                raise
            attempt += 1
            progress.console.print(f"  [yellow]conflict, nothing committed; writing the batch again[/]: {err}")


def _print_timelines(table: Table, console: Console) -> None:
    shown = RichTable(title="data timeline (newest 12)")
    for column in ("instant", "action", "state"):
        shown.add_column(column)
    for instant in table.timeline().instants[-12:]:
        shown.add_row(instant.time, instant.action, instant.state.value)
    console.print(shown)
    mdt = table.metadata().timeline()
    actions: dict[str, int] = {}
    for instant in mdt.completed():
        actions[instant.action] = actions.get(instant.action, 0) + 1
    console.print("metadata timeline: " + ", ".join(f"{n} {action}" for action, n in sorted(actions.items())))


def _print_read_back(spark, table: Table, console: Console) -> None:
    from coordinator.spark.reader import read_table

    df = read_table(spark, table.uri)
    per_city = df.groupBy("city").count().orderBy("city").collect()
    console.print(f"read back through Spark: {df.count()} rows (file list from the metadata table)")
    shown = RichTable()
    shown.add_column("city")
    shown.add_column("rows", justify="right")
    for row in per_city:
        shown.add_row(row["city"], str(row["count"]))
    console.print(shown)


def _print_listing(table: Table, console: Console) -> None:
    timings = {}
    for source in ("metadata", "storage"):
        started = time.perf_counter()
        files = table.view(source=source).latest_base_files()
        timings[source] = ((time.perf_counter() - started) * 1000, len(files))
    (mdt_ms, mdt_files), (fs_ms, fs_files) = timings["metadata"], timings["storage"]
    console.print(
        f"listing the latest files: metadata table {mdt_ms:.1f} ms ({mdt_files} files), "
        f"storage {fs_ms:.1f} ms ({fs_files} files)"
        + ("" if mdt_files == fs_files else "  [red]the two listings differ[/]")
    )
