"""This checkout against another revision of Tandem, interleaved round by round: small commits, listings and
one-partition scans, each version in a child process of its own tree (`python -m bench.versus --against REV`).

What a restructure must show: no figure worse. Each round runs both versions, alternating which goes first; each
child times its operations after a warm-up and reports them; the report has every sample, median and p90 per
version and the ratio of the medians (this checkout / REV). The tables are built once, by this checkout, and
read by both (the format is the same); every write keeps all its fsyncs.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import summarize, write_report

REPO = Path(__file__).resolve().parents[1]
KINDS = ("commit", "listing", "scan")
PARTITIONS = 1_000  # the listing and scan table: one file per partition, with its metadata table
COMMITS = 15  # small commits per child and round
LOOKUPS = 15  # listings and scans per child and round


def _imports() -> dict:
    """The few entry points, wherever a version keeps them (the restructure moved them into sub-packages)."""
    try:
        from coordinator.write.writer import LocalWriter
        from timeline.query.reader import read_plan
        from timeline.query.scan import plan_scan
    except ImportError:  # the layout before the restructure
        from coordinator.writer import LocalWriter  # type: ignore[no-redef]
        from timeline.reader import read_plan  # type: ignore[no-redef]
        from timeline.scan import plan_scan  # type: ignore[no-redef]
    from timeline.table import Table

    return {"LocalWriter": LocalWriter, "read_plan": read_plan, "plan_scan": plan_scan, "Table": Table}


def _read(api: dict, plan, where: str):
    """The rows of the plan with the filter applied: before the plan carried its filter, it was passed again."""
    if "where" in inspect.signature(api["read_plan"]).parameters:
        return api["read_plan"](plan, where)
    return api["read_plan"](plan)


def child(kind: str, workdir: Path, table_path: str) -> list[float]:
    """Milliseconds of each timed operation of one kind, after one untimed warm-up."""
    import pyarrow as pa

    api = _imports()
    samples = []
    if kind == "commit":
        table = api["Table"].create(str(workdir / f"c-{os.getpid()}-{time.monotonic_ns()}"), "c", ["id"], ["p"])
        writer = api["LocalWriter"](table)
        for n in range(COMMITS + 1):
            ids = list(range(n * 100, n * 100 + 100))
            rows = pa.table({"id": ids, "p": [f"p{i % 5}" for i in ids], "v": [float(n)] * 100})
            started = time.perf_counter()
            writer.write(rows, "insert")
            samples.append((time.perf_counter() - started) * 1000)
        return samples[1:]
    for n in range(LOOKUPS + 1):
        where = f"p = 'p{(n * 37) % PARTITIONS:04d}'"
        started = time.perf_counter()
        table = api["Table"].open(table_path)
        if kind == "listing":
            files = table.view().latest_base_files()
            assert len(files) == PARTITIONS
        else:
            rows = _read(api, api["plan_scan"](table, where), where)
            assert rows.num_rows == 1
        samples.append((time.perf_counter() - started) * 1000)
    return samples[1:]


def build_table(path: Path) -> None:
    """One file in each of PARTITIONS partitions, with the metadata table (built by this checkout)."""
    import pyarrow as pa

    api = _imports()
    table = api["Table"].create(str(path), "wide", ["id"], ["p"])
    ids = list(range(PARTITIONS))
    api["LocalWriter"](table).write(
        pa.table({"id": ids, "p": [f"p{i:04d}" for i in ids], "v": [1.0] * PARTITIONS}), "bulk_insert"
    )


def _run_child(tree: Path, kind: str, workdir: Path, table: Path) -> list[float]:
    """This file run with `tree` first on the path, so every Tandem module comes from that tree (loaded from its
    path: run as a script, its folder would come first and bench/locks.py would hide the `locks` package)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    loader = (
        f"import importlib.util as u; s = u.spec_from_file_location('versus_child', {__file__!r}); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); m.main()"
    )
    command = [sys.executable, "-c", loader, "--child", kind, "--workdir", str(workdir), "--table", str(table)]
    out = subprocess.run(
        [*command, "--tree", str(tree)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the git revision to compare with (e.g. HEAD~5)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import timeline

        assert Path(timeline.__file__).resolve().is_relative_to(args.tree.resolve()), timeline.__file__
        print(json.dumps(child(args.child, args.workdir, args.table)))
        return
    if not args.against:
        parser.error("--against REV is required")
    work = Path(tempfile.mkdtemp(prefix="tandem-versus-"))
    other = work / "other"
    try:
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), args.against], cwd=REPO, check=True)
        revision = subprocess.run(
            ["git", "rev-parse", "--short", args.against], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        table = work / "wide"
        build_table(table)
        trees = {"this checkout": REPO, revision: other}
        samples: dict[str, dict[str, list[float]]] = {k: {name: [] for name in trees} for k in KINDS}
        for round_no in range(args.rounds):
            order = list(trees) if round_no % 2 == 0 else list(reversed(trees))
            for kind in KINDS:
                for name in order:
                    samples[kind][name] += _run_child(trees[name], kind, work, str(table))
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
        results = {
            kind: {
                **{name: summarize(values) for name, values in by_version.items()},
                "ratio_of_medians": round(
                    summarize(by_version["this checkout"])["median_ms"] / summarize(by_version[revision])["median_ms"],
                    3,
                ),
            }
            for kind, by_version in samples.items()
        }
        results["against"] = revision
        for kind in KINDS:
            line = " ".join(f"{n} {results[kind][n]['median_ms']:.2f} ms" for n in trees)
            print(f"{kind:8s} median: {line}, ratio {results[kind]['ratio_of_medians']}")
        groups = {kind: {name: results[kind][name]["median_ms"] for name in trees} for kind in KINDS}
        write_report("versus", results, None, "median ms", f"this checkout vs {revision}", groups=groups, log=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=REPO, check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
