"""RFC-40's question on a 100,000-file table: how long until an engine knows what to read, and until it has a
first row, for one partition and for the whole table; a real Trino (476, its Hudi connector) against Tandem's
own planner, in one process, systems interleaved round-robin.

The table is bench.scan's (10,000 hive-style partitions x 10 small parquet files, 100 of them upserted, so those
hold superseded versions), registered in Glue by `coordinator.catalog.sync` with a `local:///` location (Trino's
local file system) at moto's Glue endpoint; Trino lists storage (476 has no metadata-table listing).

  floor: list folders       os.scandir of the partition's folder (or of all 10,000): the floor of planning by listing
  floor: first row ...      one known file opened, its first row read: the floor of a first row
  tandem plan               Table.open + plan_scan (the splits: metadata table, pruning, column stats)
  tandem first row          the plan, then the first batch of its first split (pyarrow)
  tandem count              the plan, then every split read (read_plan), count(*) (one partition)
  trino planning            Trino's own planning time of the first-row query (queryStats.planningTime: metadata,
                            Glue's partitions, pruning; its splits are listed later, while it runs)
  trino first row           SELECT * ... until the client holds the first row (planning, split listing, first read)
  trino count               SELECT count(*) ..., end to end (one partition)
Trino's figures include its requests to moto's Glue (a local Python server, one request at a time): real Glue
answers partition pages faster, so they are an upper bound on its catalog cost.

Run: .venv/bin/python -m bench.trino [--quick] [--workdir DIR] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from bench.report import interleaved, summarize, write_report
from bench.scan import FULL, QUICK, Shape, cached, expected, partition_value
from chaos.servers import MotoServer, TrinoServer
from coordinator.catalog.glue import GlueCatalog
from coordinator.catalog.sync import sync
from timeline.format.partition_path import file_path
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table


def tandem_plan(base: str, where: str | None):
    def run() -> int:
        return plan_scan(Table.open(base), where).num_splits

    return run


def tandem_first_row(base: str, where: str | None):
    """The plan, then the first row of its first split, taken from the plan's columns (a connector's fastest
    way: no Python object per split)."""

    def run() -> int:
        table = Table.open(base)
        files = plan_scan(table, where).files
        first = file_path(files.column("partition")[0].as_py(), files.column("file")[0].as_py())
        with table.storage.open_input(first) as handle:
            batch = next(pq.ParquetFile(handle).iter_batches(batch_size=1))
        return batch.num_rows

    return run


def tandem_count(base: str, where: str | None):
    def run() -> int:
        return read_plan(plan_scan(Table.open(base), where)).num_rows

    return run


def floor_listing(base: str, partition: str | None):
    """The physical floor of planning by listing: the folder(s) listed, nothing else decided."""

    def run() -> int:
        folders = (
            [os.path.join(base, partition)] if partition else [e.path for e in os.scandir(base) if e.name[0] != "."]
        )
        return sum(1 for folder in folders for e in os.scandir(folder) if e.name.endswith(".parquet"))

    return run


def floor_first_row(path: str):
    """The physical floor of a first row: one known file opened and its first row read."""

    def run() -> int:
        return next(pq.ParquetFile(path).iter_batches(batch_size=1)).num_rows

    return run


def trino_first_row(trino: TrinoServer, database: str, where: str | None, planning: list[float]):
    """SELECT * until the first row; Trino's planning time of each run goes to `planning` (milliseconds)."""
    sql = "SELECT * FROM scan" + (f" WHERE {where}" if where else "")

    def run() -> int:
        cursor = trino.execute(sql, database)
        row = cursor.fetchone()
        cursor.cancel()
        planning.append(_planning_ms(trino, cursor.query_id))
        return len(row)

    return run


def trino_count(trino: TrinoServer, database: str, where: str | None):
    sql = "SELECT count(*) FROM scan" + (f" WHERE {where}" if where else "")

    def run() -> int:
        return trino.execute(sql, database).fetchone()[0]

    return run


def _planning_ms(trino: TrinoServer, query_id: str) -> float:
    import json
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{trino.port}/v1/query/{query_id}", headers={"X-Trino-User": "bench"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        stats = json.load(answer)["queryStats"]
    return _duration_ms(stats["planningTime"])


def _duration_ms(text: str) -> float:
    units = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    raise ValueError(f"not a duration: {text}")


def run(shape: Shape, workdir: Path, repeats: int) -> dict:
    base, upserted = cached(workdir, shape)
    value = partition_value(upserted[0])
    where = f"p = '{value}'"
    work = Path(tempfile.mkdtemp(prefix="bench-trino-", dir=workdir))
    moto = MotoServer(work).start()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    trino = None
    try:
        database = f"bench_{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        report = sync(Table.open(base), GlueCatalog(moto.url), database, location=f"local://{base}")
        sync_s = time.perf_counter() - started
        trino = TrinoServer(work, moto.url).start()
        results: dict = {"shape": shape.__dict__, "files": shape.files, "partition": value,
                         "glue_sync_s": round(sync_s, 1), "partitions_registered": report.added_partitions}  # fmt: skip
        for scope, filtered in (("one partition", where), ("all files", None)):
            planning: list[float] = []
            first_file = plan_scan(Table.open(base), filtered).files
            known = os.path.join(
                base, file_path(first_file.column("partition")[0].as_py(), first_file.column("file")[0].as_py())
            )
            systems = {
                "floor: list folders": floor_listing(base, f"p={value}" if filtered else None),
                "floor: first row of a known file": floor_first_row(known),
                "tandem plan": tandem_plan(base, filtered),
                "tandem first row": tandem_first_row(base, filtered),
                "trino first row": trino_first_row(trino, database, filtered, planning),
            }
            if filtered:  # a whole-table count reads every file: minutes in Trino, no planning question
                systems |= {
                    "tandem count": tandem_count(base, filtered),
                    "trino count": trino_count(trino, database, filtered),
                }
            samples, last = interleaved(systems, repeats)
            scoped = {name: summarize(s) for name, s in samples.items()}
            scoped["trino planning"] = summarize(planning)
            results[scope] = {"timings": scoped}
            if filtered:
                counts = {
                    "tandem": last["tandem count"],
                    "trino": last["trino count"],
                    "expected": expected(value, shape)[0],
                }
                results[scope]["rows"] = counts
            print(f"  {scope}: " + ", ".join(f"{n} {v['median_ms']:.0f} ms" for n, v in scoped.items()))
        return results
    finally:
        if trino is not None:
            trino.stop()
        moto.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 files instead of 100,000")
    parser.add_argument("--workdir", default=None, help="where the table is built (and reused)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.gettempdir()) / "tandem-bench"
    workdir.mkdir(parents=True, exist_ok=True)
    results = run(QUICK if args.quick else FULL, workdir, args.repeats)
    groups = {
        scope: {name: v["median_ms"] for name, v in results[scope]["timings"].items()}
        for scope in ("one partition", "all files")
    }
    path = write_report("trino", results, None, "median ms (log)", "Trino 476 vs Tandem's planner, "
                        f"{results['files']:,} files", groups=groups, log=True)  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
