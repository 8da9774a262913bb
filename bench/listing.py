"""Listing through the metadata table vs listing storage, on local disk and on the S3 endpoint; the lookup
targets on both MDT formats (Tandem's previous one and Hudi's own), side by side in one run.

Builds a table of PARTITIONS x FILES_PER_PARTITION files by bulk commits (each a
real instant mirrored into the MDT; files are placeholders: nothing reads
them), then times (a) all partitions, (b) all files, (c) one partition's
files, from the MDT and from a storage listing, in the same run. Then times an
MDT lookup as a table takes 100 to 2,000 commits with compaction on: a table
of constant size (upserts and cleans through the coordinator; the flat-lookup
target) and an append-only one (its partitions grow with the commits).
Those three parts use the previous format (`bench.listing_format` compares listings across formats).
Then the lookup targets, systems interleaved round-robin (median and p90); `cycle` and `s3 cold` run on
a table of each MDT format (Hudi's: only its `files` partition, as the placeholder files are not Parquet to
build `column_stats` and `bloom_filters` from; a listing reads only `files`), the formats taking turns, each
format's figures checked against the same targets:
  cycle   one-partition lookup as `tandem ls --partition` does it (open, health check,
          MDT read of that partition) on 2,000 partitions x 5 files, through several MDT
          compaction cycles: a writer in another process commits a new version of a
          file of the partition looked up and cleans the old one (the partition keeps
          its 5 files); after each commit the first lookup in this
          (long-lived) process, then warm lookups against `os.listdir` of the folder;
          each point of the cycle is the median of its first lookups; one writer process per
          format, the formats committing in turn (which goes first alternates)
  cli     `tandem ls PATH --partition P` in a fresh process against
          `python -c "import pyarrow.parquet"` (previous format)
  s3 cold a one-partition lookup in a fresh process on the S3 endpoint: requests
          counted by a recording proxy and time, against the LIST of the folder it replaces; each
          round runs each format's lookup and LIST
Run: .venv/bin/python -m bench.listing [--partitions N] [--s3-partitions N]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.report import interleaved, summarize, write_report
from coordinator.config import CoordinatorConfig
from coordinator.mdt import deltacommit
from coordinator.mdt.compaction import execute, run_pending, schedule
from coordinator.mdt.maintenance import housekeeping
from coordinator.protocol.archival import archive
from coordinator.services.steps import clean
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.file_names import base_file_name, new_file_id, write_token
from timeline.format.instant import CLOCK, COMMIT, Instant, State
from timeline.mdt import hudi_layout, layout
from timeline.mdt import records as mdt_records
from timeline.mdt.file_slices import TimelineFacts, list_file_groups, slices_to_read
from timeline.mdt.reader import MetadataReader
from timeline.mdt.storage_listing import list_storage
from timeline.table import Table

FILES_PER_PARTITION = 10
REPEATS = 5
PHASE_WINDOW = 10  # commits per MDT compaction cycle sampled at each growth checkpoint
CYCLE_PARTITIONS, CYCLE_FILES = 2_000, 5
CYCLE_LENGTH = 10  # MDT deltacommits per MDT compaction: a commit and its clean make two
CYCLE_COMMITS = 50  # ten compaction cycles: each point of the cycle sampled ten times
WARM_ROUNDS = 20
CLI_ROUNDS = 10
S3_COLD_ROUNDS = 5
ONE = "p=00007"
TARGETS = {"warm_ms": 1.0, "any_point_ms": 5.0, "cli_over_import": 2.0, "all_files_ms": 25.0, "s3_requests": 4}
PREVIOUS, HUDI = "previous format", "hudi format"
FORMATS = {PREVIOUS: False, HUDI: True}  # system -> `hudi_format` of `Table.create`


def bulk_commit(
    table: Table, partitions: list[str], files_per_partition: int, known: set[str], file_id: str | None = None
) -> None:
    """One real instant adding files: requested -> inflight -> files -> MDT deltacommit -> completed.

    The deltacommit goes to the MDT in its format (`deltacommit.apply` hands Hudi's to `hudi_deltacommit.apply`).
    `file_id`: every file is a new version of that file group, not a new group."""
    timeline = table.timeline()
    stamp = CLOCK.next_after(timeline.last_time(), table.metadata().timeline().last_time())
    instant = Instant(stamp, COMMIT, State.REQUESTED)
    timeline.create_requested(instant)
    inflight = timeline.transition_to_inflight(instant, CommitMetadata(operation_type="BULK_INSERT").to_json_bytes())
    metadata = CommitMetadata(operation_type="BULK_INSERT")
    jobs = []
    for partition in partitions:
        for task in range(files_per_partition):
            path = f"{partition}/{base_file_name(file_id or new_file_id(), write_token(task), stamp)}"
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
    deltacommit.apply(table.metadata(), stamp, mdt_records.from_commit(metadata, known))
    known.update(partitions)
    timeline.complete(inflight, metadata.to_json_bytes())


def build(
    base: str, partitions: int, per_commit: int = 1000, files: int = FILES_PER_PARTITION, hudi_format: bool = False
) -> Table:
    """A table of `partitions` x `files` placeholder files by bulk commits, its MDT compacted once.

    `hudi_format`: the MDT in Hudi's format with only `files`: the index partitions would read the
    placeholders' Parquet footers, and none exist (a listing reads only `files`)."""
    indexes = {"indexes": ()} if hudi_format else {}  # the previous format keeps the default it always had
    table = Table.create(base, "bench", ["id"], ["p"], hive_style=True, hudi_format=hudi_format, **indexes)
    names = [f"p={i:05d}" for i in range(partitions)]
    known: set[str] = set()
    for start in range(0, partitions, per_commit):
        bulk_commit(table, names[start : start + per_commit], files, known)
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
    """All partitions, all files and one partition: from the MDT and from storage, interleaved round-robin."""
    timeline = table.timeline()
    reader = lambda: MetadataReader(table.metadata(), timeline)  # noqa: E731
    mdt_files = reader().listing()
    storage_files = list_storage(table.storage, timeline)
    assert mdt_files.num_rows == storage_files.num_rows, (mdt_files.num_rows, storage_files.num_rows)
    queries = {
        "all_partitions_ms": (
            lambda: reader().all_partitions(),
            lambda: [i for i in table.storage.list_dir("") if not i.base_name.startswith(".")],
        ),
        "all_files_ms": (lambda: reader().listing(), lambda: list_storage(table.storage, timeline)),
        "one_partition_ms": (lambda: reader().listing([ONE]), lambda: table.storage.list_files(ONE)),
    }
    figures: dict = {"files": mdt_files.num_rows}
    for key, (metadata, storage) in queries.items():
        samples, _ = interleaved({"metadata": metadata, "storage": storage}, REPEATS)
        figures[key] = {name: statistics.median(values) for name, values in samples.items()}
        figures[key]["metadata_p90"] = summarize(samples["metadata"])["p90_ms"]
        figures[key]["storage_over_metadata"] = figures[key]["storage"] / figures[key]["metadata"]
    return figures


def lookup(base: str, partition: str = ONE) -> list:
    """A one-partition lookup as `tandem ls --partition` makes it: open, health check, that partition's files."""
    return Table.open(base).view(partitions=[partition]).latest_base_files(partition)


def commit_loop(base: str) -> None:
    """The writer of `cycle`, in its own process: per line on stdin one commit of a new version of one of ONE's
    file groups (in turn), then MDT compaction, a clean keeping one version and archival as the coordinator runs
    them, so ONE keeps its size however many cycles run; "ok" on stdout when done."""
    table = Table.open(base)
    known = set(MetadataReader(table.metadata(), table.timeline()).all_partitions())
    groups = sorted(f.file_id for f in table.view(partitions=[ONE]).latest_base_files(ONE))
    keep_one = CoordinatorConfig(clean_policy="KEEP_LATEST_FILE_VERSIONS", file_versions_retained=1)
    for n, _ in enumerate(sys.stdin):
        bulk_commit(table, [ONE], 1, known, file_id=groups[n % len(groups)])
        housekeeping(table.metadata(), table.timeline(), max_delta_commits=CYCLE_LENGTH)
        clean(table, keep_one)
        archive(table)
        print("ok", flush=True)


def current_logs(table: Table) -> int:
    """Log files on the slice a lookup merges (0 right after a compaction); on Hudi's format, the most any
    `files` file group has on the latest slice a reader merges."""
    mdt = table.metadata()
    if mdt.is_hudi_format():
        facts = TimelineFacts.of(mdt.timeline())
        merged = (slices_to_read(g, facts) for g in list_file_groups(mdt.storage, hudi_layout.FILES))
        return max((len(found[-1].logs) for found in merged if found), default=0)
    slices = mdt.slices()
    latest = slices.get(layout.latest_completed_compaction(mdt.timeline()))
    return len(latest.logs) if latest else 0


def cycle(base: str) -> dict:
    """One-partition lookups through MDT compaction cycles on a table of each MDT format, each with its writer
    in another process; the formats commit in turn (which goes first alternates), then their warm lookups
    and `os.listdir` of their folders run interleaved."""
    bases = {name: os.path.join(base, name.split()[0]) for name in FORMATS}
    tables = {
        name: build(bases[name], CYCLE_PARTITIONS, files=CYCLE_FILES, hudi_format=hudi)
        for name, hudi in FORMATS.items()
    }
    expected = {name: len(lookup(b)) for name, b in bases.items()}  # this reader process is warm before the commits
    writers = {
        name: subprocess.Popen(
            [sys.executable, "-m", "bench.listing", "--commit-loop", b],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name, b in bases.items()
    }
    warm_runs = {}
    for name, b in bases.items():
        warm_runs[name] = lambda b=b: lookup(b)
        warm_runs[f"{name} os.listdir"] = lambda folder=os.path.join(b, ONE): os.listdir(folder)
    points: dict[str, list[dict]] = {name: [] for name in FORMATS}
    try:
        for n in range(1, CYCLE_COMMITS + 1):
            first: dict[str, float] = {}
            for name in list(FORMATS) if n % 2 else list(FORMATS)[::-1]:
                writers[name].stdin.write("commit\n")
                writers[name].stdin.flush()
                if writers[name].stdout.readline().strip() != "ok":
                    raise RuntimeError(f"the writer process of the lookup cycle ({name}) failed")
                started = time.perf_counter()
                found = lookup(bases[name])
                first[name] = (time.perf_counter() - started) * 1000
                if len(found) != expected[name]:
                    raise AssertionError(
                        f"{name} lookup after commit {n}: {len(found)} files, {expected[name]} expected"
                    )
            samples, _ = interleaved(warm_runs, WARM_ROUNDS)
            line = []
            for name in FORMATS:
                point = {
                    "commit": n,
                    "logs_on_slice": current_logs(tables[name]),
                    "first_after_commit_ms": round(first[name], 3),
                    "warm": summarize(samples[name]),
                    "os.listdir": summarize(samples[f"{name} os.listdir"]),
                }
                points[name].append(point)
                line.append(
                    f"{name}: {point['logs_on_slice']:>2} logs, first {first[name]:.2f} ms, "
                    f"warm {point['warm']['median_ms']:.2f} ms, os.listdir {point['os.listdir']['median_ms']:.3f} ms"
                )
            print(f"  commit {n:>2}: " + "; ".join(line), flush=True)
    finally:
        for writer in writers.values():
            writer.stdin.close()
        for writer in writers.values():
            writer.wait(timeout=120)
    shape = {"partitions": CYCLE_PARTITIONS, "files_per_partition": CYCLE_FILES, "commits": CYCLE_COMMITS}
    return {"shape": shape, **{name: cycle_figures(points[name]) for name in FORMATS}}


def cycle_figures(points: list[dict]) -> dict:
    """One format's cycle: its points, each point of the cycle over the cycles run, and the figures targeted."""
    warm = [p["warm"]["median_ms"] for p in points]
    by_point = per_point_of_cycle(points)
    return {
        "points": points,
        "by_point_of_cycle": by_point,
        "warm_median_ms": statistics.median(warm),
        "warm_worst_median_ms": max(warm),
        "worst_any_point_ms": max(max(p["first_median_ms"], p["warm_p90_median_ms"]) for p in by_point),
        "worst_single_first_lookup_ms": max(p["first_after_commit_ms"] for p in points),
    }


def per_point_of_cycle(points: list[dict]) -> list[dict]:
    """Each point of the compaction cycle (logs on the slice: fewest right after a compaction) over the cycles run:
    the first lookup after the commit, median and worst, and the warm p90. One sample of a point is one lookup,
    and on a noisy machine a single read can take ten times its median; the median over cycles is the point's."""
    out = []
    for logs in sorted({p["logs_on_slice"] for p in points}):
        at = [p for p in points if p["logs_on_slice"] == logs]
        first = [p["first_after_commit_ms"] for p in at]
        out.append(
            {
                "logs_on_slice": logs,
                "samples": len(at),
                "first_median_ms": statistics.median(first),
                "first_max_ms": max(first),
                "warm_p90_median_ms": statistics.median(p["warm"]["p90_ms"] for p in at),
            }
        )
    return out


def cli_lookup(base: str) -> dict:
    """`tandem ls --partition` in a fresh process against a bare `import pyarrow.parquet`, interleaved."""
    tandem = str(Path(sys.executable).with_name("tandem"))

    def run(*command: str) -> None:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)

    samples, _ = interleaved(
        {
            "tandem ls --partition": lambda: run(tandem, "ls", base, "--partition", ONE),
            "python -c 'import pyarrow.parquet'": lambda: run(sys.executable, "-c", "import pyarrow.parquet"),
        },
        CLI_ROUNDS,
    )
    figures = {name: summarize(values) for name, values in samples.items()}
    ls, bare = figures["tandem ls --partition"], figures["python -c 'import pyarrow.parquet'"]
    figures["ratio"] = {"median": ls["median_ms"] / bare["median_ms"], "p90": ls["p90_ms"] / bare["p90_ms"]}
    return figures


def cold_probe(mode: str, base: str) -> None:
    """In a fresh process: one cold one-partition lookup (or the folder LIST); prints files and ms."""
    started = time.perf_counter()
    if mode == "lookup":
        found = len(lookup(base))
    else:
        found = len(Table.open(base).storage.list_files(ONE, recursive=False))
    print(found, (time.perf_counter() - started) * 1000)


def s3_cold(bases: dict[str, str], moto_port: int) -> dict:
    """Requests and time of a cold lookup and of the LIST it replaces, each in a fresh process behind the proxy,
    for the table of each format (`bases`: system -> table URI), the systems taking turns in each round."""
    from bench.object_store import RecordingProxy

    proxy = RecordingProxy(moto_port).start()
    env = {**os.environ, "AWS_ENDPOINT_URL_S3": proxy.url}
    out: dict = {name: {} for name in bases}
    try:
        for _ in range(S3_COLD_ROUNDS):
            for name, base in bases.items():
                for mode in ("lookup", "list"):
                    before = proxy.server.snapshot(("bench",))
                    printed = subprocess.run(
                        [sys.executable, "-m", "bench.listing", "--cold", mode, base],
                        check=True,
                        capture_output=True,
                        text=True,
                        env=env,
                    ).stdout.split()
                    counts = proxy.server.snapshot(("bench",)) - before
                    entry = out[name].setdefault(mode, {"samples_ms": [], "files": int(printed[0])})
                    entry["samples_ms"].append(float(printed[1]))
                    entry["requests"] = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("op:")}
                    entry["total_requests"] = sum(v for k, v in counts.items() if k.startswith("kind:"))
    finally:
        proxy.stop()
    for figures in out.values():
        for entry in figures.values():
            entry.update(summarize(entry.pop("samples_ms")))
        figures["lookup_over_list"] = figures["lookup"]["median_ms"] / figures["list"]["median_ms"]
    return out


def growth(base: str, checkpoints=(100, 500, 1000, 2000), partitions: int = 100) -> dict:
    """MDT lookup time as a table grows by single-file commits.

    Table services as the coordinator runs them after each commit: MDT
    compaction every 10 deltacommits (with MDT clean) and archival of both
    timelines at the default 20/30 instants.
    """
    table = Table.create(base, "grow", ["id"], ["p"], hive_style=True, hudi_format=False)
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

    from coordinator.config import CoordinatorConfig
    from coordinator.protocol.locking import table_lock
    from coordinator.services.steps import clean
    from coordinator.write.writer import LocalWriter

    table = Table.create(base, "steady", ["id"], ["p"], hive_style=False, hudi_format=False)
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


def targets(results: dict) -> dict:
    """Each format's figures against the same targets (system -> target -> value, target, met); the CLI and
    all-files figures come from the previous format's table only (`bench.listing_format` compares those)."""
    limits = {
        "warm_one_partition_ms": (TARGETS["warm_ms"], f"<= {TARGETS['warm_ms']} ms"),
        "any_point_of_cycle_ms": (TARGETS["any_point_ms"], f"<= {TARGETS['any_point_ms']} ms"),
        "cli_ls_partition_over_import": (TARGETS["cli_over_import"], f"<= {TARGETS['cli_over_import']}x"),
        "all_files_ms": (TARGETS["all_files_ms"], f"<= {TARGETS['all_files_ms']} ms"),
        "s3_cold_lookup_requests": (TARGETS["s3_requests"], f"<= {TARGETS['s3_requests']}"),
        "s3_cold_lookup_over_list": (1.0, "< 1 (faster than the LIST)"),
    }
    out: dict = {}
    for name in FORMATS:
        cycle_, s3 = results["cycle"][name], results["s3_cold"][name]
        found = {
            "warm_one_partition_ms": cycle_["warm_median_ms"],
            "any_point_of_cycle_ms": cycle_["worst_any_point_ms"],
            "s3_cold_lookup_requests": s3["lookup"]["total_requests"],
            "s3_cold_lookup_over_list": s3["lookup_over_list"],
        }
        if name == PREVIOUS:
            found["cli_ls_partition_over_import"] = results["cli"]["ratio"]["median"]
            found["all_files_ms"] = results["local"]["all_files_ms"]["metadata"]
        out[name] = {
            target: {
                "value": round(value, 3),
                "target": limits[target][1],
                "met": value < 1 if target == "s3_cold_lookup_over_list" else value <= limits[target][0],
            }
            for target, value in found.items()
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--s3-partitions", type=int, default=1_000)
    parser.add_argument("--commits", type=int, default=2_000)
    parser.add_argument("--growth-only", action="store_true", help="Only the lookup-growth part (prints, no report).")
    parser.add_argument("--commit-loop", metavar="BASE", help=argparse.SUPPRESS)  # the cycle's writer process
    parser.add_argument("--cold", nargs=2, metavar=("MODE", "BASE"), help=argparse.SUPPRESS)  # an s3 cold probe
    args = parser.parse_args()
    if args.commit_loop:
        commit_loop(args.commit_loop)
        return
    if args.cold:
        cold_probe(*args.cold)
        return
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
    print(f"tandem ls --partition in a fresh process, {CLI_ROUNDS} interleaved rounds")
    results["cli"] = cli_lookup(str(work / "local"))
    print(
        f"lookup through {CYCLE_COMMITS} commits and cleans: {CYCLE_PARTITIONS} partitions x {CYCLE_FILES} files, "
        f"{' and '.join(FORMATS)} in turn"
    )
    results["cycle"] = cycle(str(work / "cycle"))

    from chaos.servers import MotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    moto = MotoServer(work, threaded=True).start()
    try:
        import boto3

        os.environ["AWS_ENDPOINT_URL_S3"] = moto.url
        boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1").create_bucket(Bucket="bench")
        print(f"S3 endpoint: {args.s3_partitions} partitions x {FILES_PER_PARTITION} files")
        s3_bases = {PREVIOUS: "s3://bench/table", HUDI: "s3://bench/table-hudi"}
        s3_tables = {}
        for name, hudi in FORMATS.items():
            started = time.perf_counter()
            s3_tables[name] = build(s3_bases[name], args.s3_partitions, per_commit=250, hudi_format=hudi)
            print(f"  {name} built in {time.perf_counter() - started:.1f} s")
        results["s3"] = compare(s3_tables[PREVIOUS])
        results["s3_cold"] = s3_cold(s3_bases, moto.port)
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
    cli, cold = results["cli"], results["s3_cold"]
    ratio = cli["ratio"]
    print(f"tandem ls --partition / import pyarrow.parquet: median {ratio['median']:.2f}x, p90 {ratio['p90']:.2f}x")
    for name in FORMATS:
        for mode in ("lookup", "list"):
            entry = cold[name][mode]
            print(
                f"{name} s3 cold {mode}: {entry['total_requests']} requests {entry['requests']}, "
                f"{entry['median_ms']:.1f} ms"
            )
    steady, g = results["steady_growth"], results["growth"]
    print(
        f"lookup {checkpoints[-1]} vs {checkpoints[0]} commits, steady size: x{steady['ratio_last_over_first']:.2f} "
        f"(max/min over checkpoints x{steady['ratio_max_over_min']:.2f}; target <= 1.5x); "
        f"append-only: x{g['ratio_last_over_first']:.2f} (partition files grow x{checkpoints[-1] // checkpoints[0]})"
    )
    results["targets"] = targets(results)
    for system, found in results["targets"].items():
        for name, target in found.items():
            met = "met" if target["met"] else "NOT met"
            print(f"{system} target {name}: {target['value']} ({target['target']}): {met}")
    chart = {
        f"{w} {k.split('_ms')[0].replace('_', ' ')}": results[w][k]["storage_over_metadata"]
        for w in ("local", "s3")
        for k in ("all_partitions_ms", "all_files_ms", "one_partition_ms")
    }
    title = "Listing: storage vs metadata table (previous MDT format)"
    path = write_report("listing", results, chart, "storage time / metadata time", title)
    print(f"wrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
