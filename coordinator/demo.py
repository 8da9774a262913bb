"""The main job on the embedded defaults: a small pipeline of several commits, narrated."""

from __future__ import annotations

import random
import tempfile
import time

import pyarrow as pa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table as RichTable

from coordinator.writer import LocalWriter
from timeline.reader import read_view
from timeline.table import Table

CITIES = ["amsterdam", "berlin", "chennai", "denver", "lisbon"]


def _batch(rng: random.Random, ids: list[int], stamp: int) -> pa.Table:
    return pa.table(
        {
            "trip_id": ids,
            "city": [CITIES[i % len(CITIES)] for i in ids],
            "ts": [stamp] * len(ids),
            "fare": [round(rng.uniform(5, 80), 2) for _ in ids],
        }
    )


def run_demo(path: str | None, console: Console, batches: int = 6, rows: int = 2000) -> Table:
    base = path or tempfile.mkdtemp(prefix="tandem-demo-")
    table = Table.create(base, "trips", ["trip_id"], ["city"], hive_style=True, precombine_field="ts")
    console.print(f"table [bold]trips[/] at {table.uri} (local storage, partitioned by city)")
    rng = random.Random(7)
    writer = LocalWriter(table)
    steps = [("insert", list(range(rows)))]
    for b in range(1, batches - 2):
        steps.append(("upsert", rng.sample(range(rows + b * 100), rows // 10)))
    steps.append(("delete", rng.sample(range(rows), rows // 20)))
    steps.append(("insert_overwrite", list(range(rows * 10, rows * 10 + 50, len(CITIES)))))
    with Progress(console=console) as progress:
        task = progress.add_task("commits", total=len(steps))
        for stamp, (operation, ids) in enumerate(steps, start=1):
            started = time.perf_counter()
            result = writer.write(_batch(rng, ids, stamp), operation)
            elapsed = (time.perf_counter() - started) * 1000
            progress.console.print(
                f"  {result.instant}  {operation:<16} {len(ids):>5} rows -> "
                f"{len(result.files_written)} file(s), {elapsed:.0f} ms"
            )
            progress.advance(task)
    timeline = RichTable(title="timeline")
    for column in ("instant", "action", "state"):
        timeline.add_column(column)
    for instant in table.timeline().instants:
        timeline.add_row(instant.time, instant.action, instant.state.value)
    console.print(timeline)
    view = table.storage_view()
    rows_now = read_view(table, view)
    per_city = RichTable(title=f"read back: {rows_now.num_rows} rows")
    per_city.add_column("partition")
    per_city.add_column("rows", justify="right")
    per_city.add_column("files", justify="right")
    for partition in view.partitions():
        count = sum(1 for p in rows_now.column("_hoodie_partition_path").to_pylist() if p == partition)
        per_city.add_row(partition, str(count), str(len(view.latest_base_files(partition))))
    console.print(per_city)
    return table
