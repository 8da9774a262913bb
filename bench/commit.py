"""Commit latency of small writes: Tandem's local writer against deltalake, pyiceberg and the physical floor.

Every comparison runs its systems round-robin in one process (bench.report.interleaved),
each system on its own local table holding the same rows, and reports median, p90 and
the ratios of the medians and p90s.

append   100 rows (new keys) over 5 partitions, and over 1 partition, into a table
         that already has 10 commits, 60 rounds:
  tandem      what `tandem write PATH --operation insert` does once its input is read:
              Table.open, default CoordinatorConfig (embedded file lock, MDT with its
              indexes), LocalWriter.write; every fsync of the commit protocol kept
  deltalake   write_deltalake(DeltaTable kept between appends, partition_by="part"):
              no log replay per append, the fastest append its docs allow
  pyiceberg   Table.append on a table of a SqlCatalog (sqlite), the table kept (skipped
              when pyiceberg is not installed)
  floor       the same parquet files (Tandem's five meta columns included, built before
              the clock) written with pyarrow, each fsynced, then each folder fsynced: no
              system that makes its files durable can commit faster

upsert   100 existing keys drawn at random over the whole table (so over every
         partition) into a table of 200 appends of the 5-partition kind, 15 rounds:
  tandem      the same CLI path with --operation upsert (BLOOM index on the MDT), on a
              table its 200 inserts built: each topped up its partitions' small file
              groups (Hudi's insert), so the table has one group per partition
  deltalake   DeltaTable.merge(predicate "t.id = s.id").when_matched_update_all()
              .when_not_matched_insert_all().execute(), the DeltaTable kept; it writes
              the rows of all the files it rewrites into one new file per partition
  floor       read each affected file, replace the updated rows, write it anew, fsync it
              and the folders: the file rewrite without locating a single key. Its table
              holds one file per partition, the layout inserts that top up small file
              groups leave (Tandem's and Hudi's); deltalake keeps its own (a file per
              append until a merge rewrites them into one per partition)

The upsert tables are checked to hold the same rows at the end (count, sum of fare).
After timing, cProfile records Tandem's appends and upserts on the same tables: the
top functions by cumulative time per write go to the JSON under "profile" (the writing
thread only). deltalake fsyncs nothing on local storage and pyiceberg only its sqlite
catalog, so they are measured without the durability Tandem pays for.

Run: .venv/bin/python -m bench.commit [--quick] [--workdir DIR]
(--quick: few rounds on small tables, report written to the workdir, not docs/bench).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.report import interleaved, summarize, write_report
from coordinator.config import CoordinatorConfig, parse_settings
from coordinator.write.writer import LocalWriter, WriteResult
from timeline.format.file_names import base_file_name, new_file_id, write_token
from timeline.format.meta_fields import META_COLUMNS
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

ROWS = 100  # rows per append and keys per upsert
PARTITIONS = 5
TARGET_APPEND_RATIO = 0.5  # Tandem's append median over the faster peer's
TARGET_FLOOR_GAP_MS = 5.0  # Tandem's append median above the floor's
TARGET_UPSERT_RATIO = 1.0  # Tandem's upsert median over deltalake merge's
TARGET_MOR_UPSERT_RATIO = 0.5  # Tandem's merge-on-read upsert median over deltalake merge's
PROFILE_LINES = 15
MERGE_PREDICATE = "t.id = s.id"  # keys are unique table-wide; with "AND t.part = s.part" the merge is slower

T = TypeVar("T")


@dataclass(frozen=True)
class Shape:
    preload: int  # commits in an append table before the clock starts
    append_rounds: int
    upsert_commits: int
    upsert_rounds: int
    profiled_appends: int
    profiled_upserts: int


FULL = Shape(
    preload=10, append_rounds=60, upsert_commits=200, upsert_rounds=15, profiled_appends=10, profiled_upserts=3
)
QUICK = Shape(preload=3, append_rounds=6, upsert_commits=20, upsert_rounds=2, profiled_appends=2, profiled_upserts=1)


# --------------------------------------------------------------------------- data


def batch(commit: int, partitions: int) -> pa.Table:
    """Commit `commit`'s rows: keys commit*ROWS .. +ROWS-1, key i in partition p{i % partitions}."""
    ids = range(commit * ROWS, (commit + 1) * ROWS)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % partitions}" for i in ids], pa.string()),
            "fare": pa.array([i * 0.5 for i in ids], pa.float64()),
            "city": pa.array(["lisbon"] * ROWS, pa.string()),
        }
    )


def upsert_batch(round_no: int, commits: int) -> pa.Table:
    """ROWS existing keys, drawn at random over `commits` appends of 5 partitions, with new fares."""
    ids = sorted(random.Random(round_no).sample(range(commits * ROWS), ROWS))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % PARTITIONS}" for i in ids], pa.string()),
            "fare": pa.array([-float(i) - round_no for i in ids], pa.float64()),
            "city": pa.array(["porto"] * ROWS, pa.string()),
        }
    )


def hudi_files(rows: pa.Table, stamp: int) -> list[tuple[str, str, pa.Table]]:
    """(partition, file name, rows with Tandem's meta columns) per partition: the files Tandem writes for `rows`."""
    files = []
    for partition in sorted(set(rows.column("part").to_pylist())):
        part = rows.filter(pc.equal(rows.column("part"), partition))
        files.append((partition, *with_meta(part, stamp, partition)))
    return files


def with_meta(rows: pa.Table, stamp: int, partition: str) -> tuple[str, pa.Table]:
    """A new file name for `rows` and the rows with the five meta columns in front, filled as Tandem fills them."""
    instant = f"{stamp:017d}"
    name = base_file_name(new_file_id(), write_token(0), instant)
    n = rows.num_rows
    meta = {
        "_hoodie_commit_time": [instant] * n,
        "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in range(n)],
        "_hoodie_record_key": [str(k) for k in rows.column("id").to_pylist()],
        "_hoodie_partition_path": [partition] * n,
        "_hoodie_file_name": [name] * n,
    }
    columns = [pa.array(meta[c], pa.string()) for c in META_COLUMNS] + list(rows.columns)
    return name, pa.Table.from_arrays(columns, names=META_COLUMNS + rows.column_names)


def each_round(inputs: list[T], run: Callable[[T], Any]) -> Callable[[], Any]:
    """A no-argument call for `interleaved` that takes the next input, prepared before the clock."""
    pending = iter(inputs)
    return lambda: run(next(pending))


# --------------------------------------------------------------------------- systems


def tandem_write(path: str, data: pa.Table, operation: str) -> WriteResult:
    """`tandem write PATH --operation OPERATION` in-process, from the rows on: coordinator/cli/write_read.py `write`."""
    config = CoordinatorConfig.from_hudi(parse_settings(()))
    return LocalWriter(Table.open(path), coordinator=config).write(data, operation)


def tandem_table(path: str, table_type: str = "COPY_ON_WRITE") -> Callable[[pa.Table], WriteResult]:
    """`tandem init PATH --name trips --record-key id --partition-by part [--table-type T]`; returns an append."""
    Table.create(path, "trips", ["id"], ["part"], table_type=table_type)
    return lambda data: tandem_write(path, data, "insert")


def delta_table(path: str, first: pa.Table):
    """A Delta table created by its first append; the DeltaTable object is kept and reused."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(path, first, mode="append", partition_by=["part"])
    return DeltaTable(path)


def delta_append(table) -> Callable[[pa.Table], None]:
    from deltalake import write_deltalake

    return lambda data: write_deltalake(table, data, mode="append", partition_by=["part"])


def delta_merge(table) -> Callable[[pa.Table], dict]:
    def merge(data: pa.Table) -> dict:
        merger = table.merge(data, MERGE_PREDICATE, source_alias="s", target_alias="t")
        return merger.when_matched_update_all().when_not_matched_insert_all().execute()

    return merge


def iceberg_installed() -> bool:
    return importlib.util.find_spec("pyiceberg") is not None


def iceberg_table(root: Path, schema: pa.Schema) -> Callable[[pa.Table], None]:
    """An identity-partitioned table in a sqlite SqlCatalog, kept between appends."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import IdentityTransform

    root.mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root / 'warehouse'}")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.trips", schema=schema)
    with table.update_spec() as spec:
        spec.add_field("part", IdentityTransform(), "part")
    return table.append


def fsync(path: str | Path, folder: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Floor:
    """Plain parquet files in partition folders, made durable: what any durable commit must at least do."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.current: dict[tuple[int, str], Path] = {}  # (commit, partition) -> its file's latest version

    def append(self, files: list[tuple[str, str, pa.Table]]) -> None:
        folders = set()
        for partition, name, rows in files:
            folder = self.root / partition
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(rows, folder / name)
            fsync(folder / name)
            folders.add(folder)
        for folder in folders:
            fsync(folder, folder=True)

    def load(self, commit: int, files: list[tuple[str, str, pa.Table]]) -> None:
        """An untimed append that remembers where each (commit, partition) group's rows are."""
        self.append(files)
        for partition, name, _ in files:
            self.current[(commit, partition)] = self.root / partition / name

    def rewrite(self, updates: list[tuple[tuple[int, str], str, pa.Table]]) -> None:
        """Each affected file read, its updated rows replaced, written anew and fsynced; then the folders."""
        folders = set()
        for group, name, fresh in updates:
            rows = pq.ParquetFile(self.current[group]).read()
            kept = rows.filter(pc.invert(pc.is_in(rows.column("id"), value_set=fresh.column("id"))))
            target = self.current[group].parent / name
            pq.write_table(pa.concat_tables([kept, fresh]), target)
            fsync(target)
            folders.add(target.parent)
            self.current[group] = target
        for folder in folders:
            fsync(folder, folder=True)

    def rows(self) -> pa.Table:
        return pa.concat_tables(pq.ParquetFile(path).read() for path in self.current.values())


def floor_updates(data: pa.Table, stamp: int) -> list[tuple[tuple[int, str], str, pa.Table]]:
    """The upsert's rows per affected partition (the floor's table has one file each, loaded as commit 0), each
    with its new file's name and meta columns."""
    updates = []
    for partition in sorted(set(data.column("part").to_pylist())):
        rows = data.filter(pc.equal(data.column("part"), partition))
        updates.append(((0, partition), *with_meta(rows, stamp, partition)))
    return updates


# --------------------------------------------------------------------------- parts


def ratio_of(samples: dict[str, list[float]], system: str, peer: str) -> dict[str, float]:
    """`system`'s median and p90 over `peer`'s."""
    mine, theirs = summarize(samples[system]), summarize(samples[peer])
    return {
        "median": round(mine["median_ms"] / theirs["median_ms"], 3),
        "p90": round(mine["p90_ms"] / theirs["p90_ms"], 3),
    }


def figures(samples: dict[str, list[float]], peers: Iterable[str], floor: str) -> dict[str, Any]:
    """Per system summaries, Tandem's ratios to each peer (median and p90) and its gap to the floor."""
    systems = {name: summarize(s) for name, s in samples.items()}
    tandem = systems["tandem"]
    ratios = {}
    for peer in peers:
        ratios[f"tandem_over_{peer}"] = ratio_of(samples, "tandem", peer)
    ratios["tandem_over_floor"] = {
        "median": round(tandem["median_ms"] / systems[floor]["median_ms"], 3),
        "p90": round(tandem["p90_ms"] / systems[floor]["p90_ms"], 3),
    }
    ratios["tandem_minus_floor_ms"] = {
        "median": round(tandem["median_ms"] - systems[floor]["median_ms"], 3),
        "p90": round(tandem["p90_ms"] - systems[floor]["p90_ms"], 3),
    }
    return {"systems": systems, "ratios": ratios}


def print_figures(result: dict[str, Any]) -> None:
    for name, f in result["systems"].items():
        print(f"  {name:<10} median {f['median_ms']:9.2f} ms   p90 {f['p90_ms']:9.2f} ms")
    for name, r in result["ratios"].items():
        unit = " ms" if name.endswith("_ms") else "x"
        print(f"  {name:<28} median {r['median']:8.2f}{unit}   p90 {r['p90']:8.2f}{unit}")


def append_part(root: Path, partitions: int, shape: Shape) -> tuple[dict[str, Any], Callable[[], Any]]:
    """The interleaved appends; also returns a further Tandem append on the same table, for the profiler."""
    first = batch(0, partitions)
    systems_by_name: dict[str, Callable[[pa.Table], Any]] = {
        "tandem": tandem_table(str(root / "tandem")),
        "deltalake": delta_append(delta_table(str(root / "delta"), first)),
    }
    if iceberg_installed():
        systems_by_name["pyiceberg"] = iceberg_table(root / "iceberg", first.schema)
    floor = Floor(root / "floor")
    for commit in range(shape.preload):
        data = batch(commit, partitions)
        for name, append in systems_by_name.items():
            if not (name == "deltalake" and commit == 0):  # its first append created the table
                append(data)
        floor.append(hudi_files(data, commit))
    commits = range(shape.preload, shape.preload + shape.append_rounds)
    runs = {name: each_round([batch(c, partitions) for c in commits], fn) for name, fn in systems_by_name.items()}
    runs["floor"] = each_round([hudi_files(batch(c, partitions), c) for c in commits], floor.append)
    samples, last = interleaved(runs, shape.append_rounds)
    result = figures(samples, [p for p in ("deltalake", "pyiceberg") if p in runs], "floor")
    result.update(commits_before=shape.preload, rounds=shape.append_rounds, rows=ROWS, partitions=partitions)
    result["tandem_files_per_append"] = len(last["tandem"].files_written)
    more = iter(range(shape.preload + shape.append_rounds, 10**9))
    return result, lambda: systems_by_name["tandem"](batch(next(more), partitions))


def upsert_part(root: Path, shape: Shape) -> tuple[dict[str, Any], Callable[[], Any]]:
    """The interleaved upserts; also returns a further Tandem upsert on the same table, for the profiler."""
    from deltalake import write_deltalake

    tandem_append = tandem_table(str(root / "tandem"))
    mor_append = tandem_table(str(root / "tandem_mor"), "MERGE_ON_READ")
    delta = delta_table(str(root / "delta"), batch(0, PARTITIONS))
    floor = Floor(root / "floor")
    started = time.perf_counter()
    for commit in range(shape.upsert_commits):
        data = batch(commit, PARTITIONS)
        tandem_append(data)
        mor_append(data)
        if commit:
            write_deltalake(delta, data, mode="append", partition_by=["part"])
    floor.load(0, hudi_files(pa.concat_tables(batch(c, PARTITIONS) for c in range(shape.upsert_commits)), 0))
    print(f"  built the upsert tables: {shape.upsert_commits} commits each in {time.perf_counter() - started:.1f} s")
    inputs = [upsert_batch(r, shape.upsert_commits) for r in range(shape.upsert_rounds)]
    tandem_path, mor_path = str(root / "tandem"), str(root / "tandem_mor")
    runs = {
        "tandem": each_round(inputs, lambda data: tandem_write(tandem_path, data, "upsert")),
        "tandem_mor": each_round(inputs, lambda data: tandem_write(mor_path, data, "upsert")),
        "deltalake": each_round(inputs, delta_merge(delta)),
        "floor": each_round(
            [floor_updates(data, shape.upsert_commits + r) for r, data in enumerate(inputs)], floor.rewrite
        ),
    }
    samples, last = interleaved(runs, shape.upsert_rounds)
    result = figures(samples, ["deltalake"], "floor")
    result["ratios"]["tandem_mor_over_deltalake"] = ratio_of(samples, "tandem_mor", "deltalake")
    result.update(commits_before=shape.upsert_commits, rounds=shape.upsert_rounds, keys=ROWS)
    result["files_rewritten_last_round"] = {
        "tandem": len(last["tandem"].files_written),
        "tandem_mor_logs_written": len(last["tandem_mor"].files_written),
        "deltalake_removed": last["deltalake"]["num_target_files_removed"],
        "deltalake_added": last["deltalake"]["num_target_files_added"],
        "floor": len(floor_updates(inputs[-1], 0)),
    }
    result["same_rows"] = same_rows({"tandem": tandem_path, "tandem_mor": mor_path}, delta, floor)
    more = iter(range(shape.upsert_rounds, 10**9))
    return result, lambda: tandem_write(tandem_path, upsert_batch(next(more), shape.upsert_commits), "upsert")


def same_rows(tandem_paths: dict[str, str], delta, floor: Floor) -> dict[str, Any]:
    """Row count and sum of fare of each upsert table: equal, or the systems did not do the same work."""

    def digest(rows: pa.Table) -> tuple[int, float]:
        return rows.num_rows, round(pc.sum(rows.column("fare")).as_py(), 3)

    seen = {
        **{name: digest(read_plan(plan_scan(Table.open(path)))) for name, path in tandem_paths.items()},
        "deltalake": digest(delta.to_pyarrow_table()),
        "floor": digest(floor.rows()),
    }
    return {"equal": len(set(seen.values())) == 1, **{k: {"rows": n, "fare_sum": s} for k, (n, s) in seen.items()}}


def profile(run: Callable[[], Any], calls: int) -> list[dict[str, Any]]:
    """The top functions by cumulative time per call of `run` (this module's own frames left out)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        run()
    profiler.disable()
    entries = [
        (where, stat)
        for where, stat in pstats.Stats(profiler).stats.items()
        if not where[0].endswith(os.path.join("bench", "commit.py")) and "_lsprof" not in where[2]
    ]
    entries.sort(key=lambda entry: entry[1][3], reverse=True)
    return [
        {
            "function": label(where),
            "calls": round(calls_total / calls, 2),
            "cumulative_ms": round(cumulative * 1000 / calls, 3),
            "own_ms": round(own * 1000 / calls, 3),
        }
        for where, (_, calls_total, own, cumulative, _) in entries[:PROFILE_LINES]
    ]


def label(where: tuple[str, int, str]) -> str:
    path, line, name = where
    if path == "~":
        return name
    short = path.split("site-packages" + os.sep)[-1].removeprefix(str(Path(__file__).resolve().parents[1]) + os.sep)
    return f"{short}:{line}({name})"


def print_profile(title: str, lines: list[dict[str, Any]]) -> None:
    print(title)
    for entry in lines:
        cumulative, own, calls = entry["cumulative_ms"], entry["own_ms"], entry["calls"]
        print(f"  {cumulative:8.2f} ms cum {own:7.2f} ms own {calls:7.1f}x  {entry['function']}")


# --------------------------------------------------------------------------- report


def targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The issues' targets, on the 5-partition append and the upserts (merge-on-read: issue 32)."""
    append = results["append_5_partitions"]
    peers = {p: append["systems"][p]["median_ms"] for p in ("deltalake", "pyiceberg") if p in append["systems"]}
    faster = min(peers, key=peers.__getitem__)
    ratio = append["ratios"][f"tandem_over_{faster}"]["median"]
    gap = append["ratios"]["tandem_minus_floor_ms"]["median"]
    upsert = results["upsert"]["ratios"]["tandem_over_deltalake"]["median"]
    upsert_mor = results["upsert"]["ratios"]["tandem_mor_over_deltalake"]["median"]
    return {
        "append_over_faster_peer": {
            "value": ratio,
            "peer": faster,
            "target": f"<= {TARGET_APPEND_RATIO}x",
            "met": ratio <= TARGET_APPEND_RATIO,
        },
        "append_above_floor_ms": {
            "value": gap,
            "target": f"<= {TARGET_FLOOR_GAP_MS} ms",
            "met": gap <= TARGET_FLOOR_GAP_MS,
        },
        "upsert_over_deltalake_merge": {
            "value": upsert,
            "target": f"<= {TARGET_UPSERT_RATIO}x",
            "met": upsert <= TARGET_UPSERT_RATIO,
        },
        "upsert_merge_on_read_over_deltalake_merge": {
            "value": upsert_mor,
            "target": f"<= {TARGET_MOR_UPSERT_RATIO}x",
            "met": upsert_mor <= TARGET_MOR_UPSERT_RATIO,
        },
    }


def report(results: dict[str, Any], out: Path | None) -> None:
    results["targets"] = targets(results)
    print()
    for name, t in results["targets"].items():
        unit = " ms" if name.endswith("_ms") else "x"
        print(f"target {name}: {t['value']:.2f}{unit} (target {t['target']}): {'met' if t['met'] else 'NOT met'}")
    groups = {
        f"append {ROWS} rows, {PARTITIONS} partitions": results["append_5_partitions"],
        f"append {ROWS} rows, 1 partition": results["append_1_partition"],
        f"upsert {ROWS} keys, {results['upsert']['commits_before']} commits": results["upsert"],
    }
    path = write_report(
        "commit",
        results,
        None,
        "median ms per write (log scale)",
        "Small-write commit latency, interleaved (lower is better)",
        groups={g: {n: f["median_ms"] for n, f in part["systems"].items()} for g, part in groups.items()},
        log=True,
        out=out,
    )
    print(f"wrote {path} and {path.with_suffix('.png')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds on small tables; report kept in the workdir")
    parser.add_argument("--workdir", help="where the tables go (default: a fresh temporary folder, removed after)")
    args = parser.parse_args()
    shape = QUICK if args.quick else FULL
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="tandem-bench-commit-"))
    started = time.perf_counter()
    results: dict[str, Any] = {"quick": args.quick, "shape": shape.__dict__}
    if not iceberg_installed():
        results["note"] = "pyiceberg is not installed: left out of the appends"
        print(results["note"])
    try:
        for key, partitions in (("append_5_partitions", PARTITIONS), ("append_1_partition", 1)):
            print(f"append, {ROWS} rows over {partitions} partition(s), {shape.append_rounds} interleaved rounds:")
            results[key], next_append = append_part(workdir / key, partitions, shape)
            print_figures(results[key])
            if partitions == PARTITIONS:
                results["profile"] = {"append": profile(next_append, shape.profiled_appends)}
        print(f"upsert, {ROWS} existing keys, {shape.upsert_rounds} interleaved rounds:")
        results["upsert"], next_upsert = upsert_part(workdir / "upsert", shape)
        print_figures(results["upsert"])
        print(f"  files rewritten (last round): {results['upsert']['files_rewritten_last_round']}")
        print(f"  same rows in every upsert table: {results['upsert']['same_rows']['equal']}")
        results["profile"]["upsert"] = profile(next_upsert, shape.profiled_upserts)
        print_profile(f"Tandem append, {PARTITIONS} partitions (cProfile, per write):", results["profile"]["append"])
        print_profile("Tandem upsert (cProfile, per write):", results["profile"]["upsert"])
        results["total_s"] = round(time.perf_counter() - started, 1)
        report(results, workdir if args.quick else None)  # a check run never replaces the figures
    finally:
        if not args.workdir and not args.quick:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
