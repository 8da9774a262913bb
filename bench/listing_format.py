"""The metadata table's two formats side by side: one listing read through Tandem's readers from Tandem's own
format (parquet base, Tandem log blocks) and from Hudi's (HFile base, Hudi log blocks, as Java writes it).

Builds a table of PARTITIONS x FILES files (bench.listing.build: real commits mirrored into Tandem's MDT, then
compacted), and beside it the same data timeline with an MDT in Hudi's format holding the same listing (its
`files` partition initialized at `<last commit>010`, as Java initializes one). Then LOGS more commits each
add a file to one partition, mirrored into both. At 0, LOGS / 2 and LOGS logs over the base, systems
interleaved round-robin in one process (median, p90):
  one_partition_ms  what the scan planner does for one partition: open the table, choose the listing source
                    (the health check), read the partition's base files from the MDT
  all_files_ms      the same for every file of the table
and the first such read in a fresh process (`tandem ls PATH --partition P`), the format's cold cost.
Run: .venv/bin/python -m bench.listing_format [--partitions N] [--files N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

from bench.listing import ONE, build, bulk_commit
from bench.report import interleaved, summarize, write_report
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.table_config import record_metadata_partitions
from timeline.io.storage import Storage
from timeline.mdt import hudi_records
from timeline.mdt.file_group_writes import complete_delta_commit, create_table, initialize_partition, write_logs
from timeline.mdt.file_slices import list_file_groups
from timeline.mdt.hudi_commit_records import listing_records
from timeline.mdt.hudi_layout import partition_init_instant
from timeline.mdt.reader import MetadataReader
from timeline.table import Table

PARTITIONS, FILES = 2_000, 50  # 100,000 files
LOGS = 10
ROUNDS = 15
COLD_ROUNDS = 5


def hudi_twin(table: Table, folder: str) -> Table:
    """The table's data timeline beside an MDT in Hudi's format listing what Tandem's MDT lists."""
    shutil.copytree(Path(table.storage.base_uri.removeprefix("file://")) / ".hoodie", Path(folder) / ".hoodie",
                    ignore=shutil.ignore_patterns("metadata"))  # fmt: skip
    data = Storage(folder)
    timeline = ActiveTimeline.load(data, ".hoodie")
    listing = MetadataReader(table.metadata(), table.timeline()).listing()
    files: dict[str, dict[str, int]] = {}
    for partition, name, size in zip(
        *(listing.column(c).to_pylist() for c in ("partition", "file", "size")), strict=True
    ):
        files.setdefault(partition, {})[name] = size
    records = listing_records(files)
    mdt = data.sub(".hoodie/metadata")
    create_table(mdt, "bench")
    instant = partition_init_instant(timeline.last_time(), 0)
    written = initialize_partition(mdt, "files", instant, records)
    complete_delta_commit(ActiveTimeline.load(mdt, ".hoodie"), instant, written, "BULK_INSERT")
    record_metadata_partitions(data, ["files"])
    return Table.open(folder)


def add_commit(table: Table, twin: Table, known: set[str]) -> None:
    """One more commit adding a file to partition ONE, mirrored into both MDTs."""
    bulk_commit(table, [ONE], 1, known)
    timeline = table.timeline()
    last = timeline.last_time()
    for name in (f"{last}.commit.requested", f"{last}.commit.inflight", f"{last}.commit"):
        if table.storage.exists(f".hoodie/{name}"):
            twin.storage.write_bytes(f".hoodie/{name}", table.storage.read_bytes(f".hoodie/{name}"))
    added = [s for s in timeline.commit_metadata(timeline.find(last)).write_stats() if s.path]
    records = [
        hudi_records.partition_list_record([ONE]),
        hudi_records.file_list_record(ONE, {s.path.rsplit("/", 1)[1]: s.file_size_in_bytes for s in added}),
    ]
    mdt = twin.storage.sub(".hoodie/metadata")
    groups = list_file_groups(mdt, "files")
    slices = {g.file_id: max(g.slices) for g in groups}
    written = write_logs(mdt, "files", last, records, groups, slices)
    complete_delta_commit(ActiveTimeline.load(mdt, ".hoodie"), last, written, "UPSERT_PREPPED")


def planner_listing(uri: str, partitions: list[str] | None) -> pa.Table:
    found = Table.open(uri).listing_source()
    assert found.mdt is not None, found.fallback_reason
    return MetadataReader(found.mdt, found.timeline).listing(partitions, base_files=True)


def measure(systems: dict[str, Table]) -> dict:
    out: dict = {}
    first, second = (planner_listing(t.uri, None).sort_by("file") for t in systems.values())
    assert first.equals(second) and first.num_rows > 0
    for query, partitions in (("one_partition_ms", [ONE]), ("all_files_ms", None)):
        runs = {name: (lambda t=t, p=partitions: planner_listing(t.uri, p)) for name, t in systems.items()}
        samples, _ = interleaved(runs, ROUNDS)
        out[query] = {name: summarize(s) for name, s in samples.items()}
    cold = {
        name: (
            lambda t=t: subprocess.run(
                [sys.executable, "-m", "coordinator", "ls", t.uri, "--partition", ONE], check=True, capture_output=True
            )
        )  # fmt: skip
        for name, t in systems.items()
    }
    samples, _ = interleaved(cold, COLD_ROUNDS)
    out["cold_cli_ms"] = {name: summarize(s) for name, s in samples.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--files", type=int, default=FILES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tandem-bench-format-") as root:
        table = build(f"{root}/tandem", args.partitions, files=args.files)
        twin = hudi_twin(table, f"{root}/hudi")
        systems = {"tandem format": table, "hudi format": twin}
        known = set(MetadataReader(table.metadata(), table.timeline()).all_partitions())
        points: dict[str, dict] = {}
        for logs in range(LOGS + 1):
            if logs in (0, LOGS // 2, LOGS):
                points[str(logs)] = measure(systems)
                print(f"{logs} logs over the base:", {q: {n: round(v["median_ms"], 2) for n, v in by.items()}
                                                       for q, by in points[str(logs)].items()}, flush=True)  # fmt: skip
            if logs < LOGS:
                add_commit(table, twin, known)
    results = {"partitions": args.partitions, "files_per_partition": args.files, "logs_over_base": points}
    groups = {
        f"{query.removesuffix('_ms').replace('_', ' ')}, {logs} logs": {name: by[name]["median_ms"] for name in by}
        for logs, point in points.items()
        for query, by in point.items()
        if query != "cold_cli_ms"
    }
    title = "MDT listing through the scan planner: Tandem's format vs Hudi's"
    path = write_report("listing_format", results, None, "ms (median)", title, groups=groups)
    print(path)


if __name__ == "__main__":
    main()
