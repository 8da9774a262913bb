"""Listing through the metadata table vs listing storage, on local disk and on the S3 endpoint.

Builds a table of PARTITIONS x FILES_PER_PARTITION files by bulk commits (each a
real instant mirrored into the MDT; files are placeholders: nothing reads
them), then times (a) all partitions, (b) all files, (c) one partition's
files, from the MDT and from a storage listing, in the same run. Then times an
MDT lookup as a table takes 100 to 2,000 commits with compaction on: a table
of constant size (upserts and cleans through the coordinator; the flat-lookup
target) and an append-only one (its partitions grow with the commits).
Run: .venv/bin/python -m bench.listing [--partitions N] [--s3-partitions N]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.report import write_report
from coordinator.archival import archive
from timeline.commit_metadata import CommitMetadata, WriteStat
from timeline.file_names import base_file_name, new_file_id, write_token
from timeline.instant import CLOCK, COMMIT, Instant, State
from timeline.mdt import records as mdt_records
from timeline.mdt.bootstrap import list_storage
from timeline.mdt.compaction import execute, run_pending, schedule
from timeline.mdt.maintenance import housekeeping
from timeline.mdt.reader import MetadataReader
from timeline.table import Table

FILES_PER_PARTITION = 10
REPEATS = 5
PHASE_WINDOW = 10  # commits per MDT compaction cycle sampled at each growth checkpoint


def bulk_commit(table: Table, partitions: list[str], files_per_partition: int, known: set[str]) -> None:
    """One real instant adding files: requested -> inflight -> files -> MDT deltacommit -> completed."""
    timeline = table.timeline()
    stamp = CLOCK.next_after(timeline.last_time(), table.metadata().timeline().last_time())
    instant = Instant(stamp, COMMIT, State.REQUESTED)
    timeline.create_requested(instant)
    inflight = timeline.transition_to_inflight(instant, CommitMetadata(operation_type="BULK_INSERT").to_json_bytes())
    metadata = CommitMetadata(operation_type="BULK_INSERT")
    jobs = []
    for partition in partitions:
        for task in range(files_per_partition):
            path = f"{partition}/{base_file_name(new_file_id(), write_token(task), stamp)}"
            jobs.append(path)
            metadata.add(
                WriteStat(
                    path.rsplit("/", 1)[1][:38],
                    path,
                    partition,
                    num_writes=1,
                    num_inserts=1,
                    total_write_bytes=64,
                    file_size_in_bytes=64,
                )
            )
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda p: table.storage.write_bytes(p, b"x" * 64), jobs))
    table.metadata().apply(stamp, mdt_records.from_commit(metadata, known))
    known.update(partitions)
    timeline.complete(inflight, metadata.to_json_bytes())


def build(base: str, partitions: int, per_commit: int = 1000) -> Table:
    table = Table.create(base, "bench", ["id"], ["p"], hive_style=True)
    names = [f"p={i:05d}" for i in range(partitions)]
    known: set[str] = set()
    for start in range(0, partitions, per_commit):
        bulk_commit(table, names[start : start + per_commit], FILES_PER_PARTITION, known)
    mdt = table.metadata()
    scheduled = schedule(mdt, table.timeline())
    execute(mdt, table.timeline(), scheduled)
    return table


def timed_samples(fn, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def timed(fn, repeats: int = REPEATS) -> float:
    return statistics.median(timed_samples(fn, repeats))


def compare(table: Table) -> dict:
    timeline = table.timeline()
    reader = lambda: MetadataReader(table.metadata(), timeline)  # noqa: E731
    one = "p=00007"
    mdt_files = reader().listing()
    storage_files = list_storage(table.storage, timeline)
    assert mdt_files.num_rows == storage_files.num_rows, (mdt_files.num_rows, storage_files.num_rows)
    figures = {
        "files": mdt_files.num_rows,
        "all_partitions_ms": {
            "metadata": timed(lambda: reader().all_partitions()),
            "storage": timed(lambda: [i for i in table.storage.list_dir("") if not i.base_name.startswith(".")]),
        },
        "all_files_ms": {
            "metadata": timed(lambda: reader().listing()),
            "storage": timed(lambda: list_storage(table.storage, timeline)),
        },
        "one_partition_ms": {
            "metadata": timed(lambda: reader().listing([one])),
            "storage": timed(lambda: table.storage.list_files(one)),
        },
    }
    for key in ("all_partitions_ms", "all_files_ms", "one_partition_ms"):
        f = figures[key]
        f["storage_over_metadata"] = f["storage"] / f["metadata"]
    return figures


def growth(base: str, checkpoints=(100, 500, 1000, 2000), partitions: int = 100) -> dict:
    """MDT lookup time as a table grows by single-file commits.

    Table services as the coordinator runs them after each commit: MDT
    compaction every 10 deltacommits (with MDT clean) and archival of both
    timelines at the default 20/30 instants.
    """
    table = Table.create(base, "grow", ["id"], ["p"], hive_style=True)
    names = [f"p={i:03d}" for i in range(partitions)]
    known: set[str] = set()
    rng = random.Random(1)
    out = {}
    for n in range(1, max(checkpoints) + 1):
        bulk_commit(table, [rng.choice(names)], 1, known)
        housekeeping(table.metadata(), table.timeline(), max_delta_commits=10)
        archive(table)
        if n in checkpoints:
            run_pending(table.metadata(), table.timeline())
            loaded = table.timeline()
            lookup = timed(lambda loaded=loaded: MetadataReader(table.metadata(), loaded).listing(["p=007"]), 50)
            with_timelines = timed(lambda: MetadataReader(table.metadata(), table.timeline()).listing(["p=007"]), 50)
            out[str(n)] = {
                "lookup_ms": lookup,
                "lookup_with_timeline_loads_ms": with_timelines,
                "log_files": sum(len(s.logs) for s in table.metadata().slices().values()),
                "active_instants": len(loaded.instants),
                "metadata_active_instants": len(table.metadata().timeline().instants),
            }
            print(f"  {n:>5} commits: lookup {lookup:.2f} ms, with timeline loads {with_timelines:.2f} ms")
    first, last = out[str(checkpoints[0])], out[str(checkpoints[-1])]
    out["ratio_last_over_first"] = last["lookup_ms"] / first["lookup_ms"]
    out["ratio_with_timelines_last_over_first"] = (
        last["lookup_with_timeline_loads_ms"] / first["lookup_with_timeline_loads_ms"]
    )
    return out


def steady_growth(base: str, checkpoints=(100, 500, 1000, 2000), partitions: int = 100) -> dict:
    """MDT lookup time as a table of constant size takes 100 to 2,000 commits.

    Everything goes through the coordinator: one insert creates a file group per
    partition, then every commit upserts one row (a new version of one file
    group), a KEEP_LATEST_FILE_VERSIONS clean every 10 commits deletes the old
    versions, MDT compaction and archival run as the coordinator runs them. So
    the number of live files stays put and only the history grows: the figure
    the "flat lookup" target is about.
    """
    import pyarrow as pa

    from coordinator.clean import clean
    from coordinator.config import CoordinatorConfig
    from coordinator.locking import table_lock
    from coordinator.writer import LocalWriter

    table = Table.create(base, "steady", ["id"], ["p"], hive_style=False)
    config = CoordinatorConfig(clean_policy="KEEP_LATEST_FILE_VERSIONS", file_versions_retained=1)
    lock = table_lock(table, config)
    writer = LocalWriter(table, coordinator=config, lock=lock)
    names = [f"{i:03d}" for i in range(partitions)]

    def rows(ids: list[int], value: float) -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int64()), "p": [names[i] for i in ids], "v": [value] * len(ids)})

    rng = random.Random(1)
    writer.write(rows(list(range(partitions)), 0.0), "insert")
    out: dict = {}
    samples: list[float] = []
    try:
        for n in range(2, max(checkpoints) + 1):
            writer.write(rows([rng.randrange(partitions)], float(n)), "upsert")
            if n % 10 == 0:
                clean(table, config, lock)
            checkpoint = next((c for c in checkpoints if c - PHASE_WINDOW < n <= c), None)
            if checkpoint is None:
                continue
            # Sampled over the last compaction cycle before the checkpoint, so each
            # figure covers every phase (0 to 10 logs on the current slice).
            loaded = table.timeline()
            samples += timed_samples(
                lambda loaded=loaded: MetadataReader(table.metadata(), loaded).listing(["007"]), 10
            )
            if n == checkpoint:
                listing = MetadataReader(table.metadata(), loaded).listing()
                out[str(n)] = {
                    "lookup_ms": statistics.median(samples),
                    "live_files": listing.num_rows,
                    "log_files": sum(len(s.logs) for s in table.metadata().slices().values()),
                    "active_instants": len(loaded.instants),
                    "metadata_active_instants": len(table.metadata().timeline().instants),
                }
                samples = []
                print(f"  {n:>5} commits: lookup {out[str(n)]['lookup_ms']:.2f} ms, {listing.num_rows} live files")
    finally:
        lock.close()
    figures = [out[str(c)]["lookup_ms"] for c in checkpoints]
    out["ratio_last_over_first"] = figures[-1] / figures[0]
    out["ratio_max_over_min"] = max(figures) / min(figures)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--s3-partitions", type=int, default=1_000)
    parser.add_argument("--commits", type=int, default=2_000)
    parser.add_argument("--growth-only", action="store_true", help="Only the lookup-growth part (prints, no report).")
    args = parser.parse_args()
    if args.growth_only:
        checkpoints = tuple(c for c in (100, 500, 1000, 2000) if c <= args.commits)
        steady_growth(tempfile.mkdtemp(prefix="tandem-steady-"), checkpoints)
        growth(tempfile.mkdtemp(prefix="tandem-growth-"), checkpoints)
        return
    work = Path(tempfile.mkdtemp(prefix="tandem-listing-bench-"))
    results: dict = {}
    print(f"local disk: {args.partitions} partitions x {FILES_PER_PARTITION} files")
    started = time.perf_counter()
    local = build(str(work / "local"), args.partitions)
    print(f"  built in {time.perf_counter() - started:.1f} s")
    results["local"] = compare(local)

    from chaos.servers import MotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    moto = MotoServer(work, threaded=True).start()
    try:
        import boto3

        os.environ["AWS_ENDPOINT_URL_S3"] = moto.url
        boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1").create_bucket(Bucket="bench")
        print(f"S3 endpoint: {args.s3_partitions} partitions x {FILES_PER_PARTITION} files")
        started = time.perf_counter()
        s3 = build("s3://bench/table", args.s3_partitions, per_commit=250)
        print(f"  built in {time.perf_counter() - started:.1f} s")
        results["s3"] = compare(s3)
    finally:
        moto.stop()
    checkpoints = tuple(c for c in (100, 500, 1000, 2000) if c <= args.commits)
    print(f"steady-size growth: {checkpoints[0]} -> {checkpoints[-1]} commits (upserts + clean, compaction, archival)")
    results["steady_growth"] = steady_growth(str(work / "steady"), checkpoints)
    print(f"append-only growth: {checkpoints[0]} -> {checkpoints[-1]} one-file commits (the table grows with them)")
    results["growth"] = growth(str(work / "grow"), checkpoints)

    print(f"{'where':<6} {'query':<16} {'metadata ms':>12} {'storage ms':>11} {'storage/metadata':>17}")
    for where in ("local", "s3"):
        for key in ("all_partitions_ms", "all_files_ms", "one_partition_ms"):
            f = results[where][key]
            ratio = f["storage_over_metadata"]
            print(f"{where:<6} {key[:-3]:<16} {f['metadata']:>12.1f} {f['storage']:>11.1f} {ratio:>17.1f}")
    steady, g = results["steady_growth"], results["growth"]
    print(
        f"lookup {checkpoints[-1]} vs {checkpoints[0]} commits, steady size: x{steady['ratio_last_over_first']:.2f} "
        f"(max/min over checkpoints x{steady['ratio_max_over_min']:.2f}; target <= 1.5x); "
        f"append-only: x{g['ratio_last_over_first']:.2f} (partition files grow x{checkpoints[-1] // checkpoints[0]})"
    )
    chart = {
        f"{w} {k.split('_ms')[0].replace('_', ' ')}": results[w][k]["storage_over_metadata"]
        for w in ("local", "s3")
        for k in ("all_partitions_ms", "all_files_ms", "one_partition_ms")
    }
    path = write_report("listing", results, chart, "storage time / metadata time", "Listing: storage vs metadata table")
    print(f"wrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
