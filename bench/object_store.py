"""Object-store requests per commit: Tandem (command line and in-process) against deltalake, on a local S3 endpoint.

Every request goes through a recording HTTP proxy in front of moto (one
request at a time, as the test suite runs it), so requests from pyarrow's C++
S3 client, boto3 and deltalake's Rust client are counted alike: GET, HEAD,
LIST (a bucket-level GET), PUT, POST, DELETE and DynamoDB (by X-Amz-Target).
Each series writes its own bucket (and DynamoDB lock table), which is how a
request is attributed to it.

Two workloads, each 100 rows over 4 partitions per commit, on fresh tables:
insert (100 new keys) and upsert (50 updates of the keys the previous commit
added, 50 new keys; the first commit has nothing to update and adds 100).
Updating recent keys keeps the data rewritten per commit constant: updates
spread over every key make a copy-on-write table rewrite ever more file
groups, a cost of the workload rather than of the commit. Three series each,
run round-robin commit by commit:

  tandem cli         `python -m coordinator write s3://... --operation OP --lock dynamodb://...`, a process per commit
  tandem in-process  one long-lived `LocalWriter(...).write(batch, OP)` with the same DynamoDB lock
  deltalake          `write_deltalake(s3://..., batch, mode="append")` with conditional put (If-None-Match)

deltalake appends the upsert batches too (no merge). Requests and wall time
are reported at commits 1, 3, 10, 30 and 100 (--quick: 1, 3, 10; --commits
to choose), every commit's total in the JSON; the issue's targets (commit 30
against commit 3) are checked on the CLI series.

Run: .venv/bin/python -m bench.object_store [--quick | --commits 1,3,10,30] [--workdir DIR] [--log FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from bench.report import COLOURS, OUT, interleaved, summarize
from chaos.servers import relay

KINDS = ("GET", "HEAD", "LIST", "PUT", "POST", "DELETE", "DynamoDB")
OPERATIONS = ("insert", "upsert")
SYSTEMS = ("tandem cli", "tandem in-process", "deltalake")
BUCKETS = {"tandem cli": "tandem-cli", "tandem in-process": "tandem-lib", "deltalake": "delta"}
FULL = (1, 3, 10, 30, 100)
QUICK = (1, 3, 10)
ROWS = 100
PARTITIONS = 4
TARGET_REQUESTS = 60
TARGET_GROWTH = 1.25
TARGET_AT, BASELINE_AT = 30, 3
REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": REGION}


# --------------------------------------------------------------------------- the recording proxy


def s3_request(method: str, target: str, headers: Any) -> tuple[str, str, str]:
    """(bucket, kind, S3 operation) of a path-style S3 request."""
    parts = urlsplit(target)
    bucket, _, key = parts.path.lstrip("/").partition("/")
    query = parse_qs(parts.query, keep_blank_values=True)
    if method == "GET":
        if key:
            return bucket, "GET", "GetObject (range)" if "Range" in headers else "GetObject"
        if "uploads" in query:
            return bucket, "LIST", "ListMultipartUploads"
        return bucket, "LIST", "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
    if method == "HEAD":
        return bucket, "HEAD", "HeadObject" if key else "HeadBucket"
    if method == "PUT":
        if "x-amz-copy-source" in headers:
            return bucket, "PUT", "CopyObject"
        if "partNumber" in query:
            return bucket, "PUT", "UploadPart"
        if not key:
            return bucket, "PUT", "CreateBucket"
        if "If-None-Match" in headers:
            return bucket, "PUT", "PutObject If-None-Match"
        return bucket, "PUT", "PutObject (empty folder marker)" if key.endswith("/") else "PutObject"
    if method == "POST":
        if "delete" in query:
            return bucket, "POST", "DeleteObjects"
        return bucket, "POST", "CreateMultipartUpload" if "uploads" in query else "CompleteMultipartUpload"
    if method == "DELETE":
        return bucket, "DELETE", "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    return bucket, method, method


class _Recording(BaseHTTPRequestHandler):
    """Forward one request to moto unchanged and count it under its bucket (or DynamoDB table)."""

    protocol_version = "HTTP/1.1"
    server: RecordingServer

    def log_message(self, *args: Any) -> None:  # quiet
        return

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self) -> None:
        body = self._body()
        if "X-Amz-Target" in self.headers:
            scope = json.loads(body or b"{}").get("TableName", "")
            kind, operation = "DynamoDB", self.headers["X-Amz-Target"].rpartition(".")[2]
        else:
            scope, kind, operation = s3_request(self.command, self.path, self.headers)
        status = relay(self, self.server.upstream_port, body, dict(self.headers.items()), timeout=120)
        self.server.record(scope, kind, operation, status, f"{self.command} {self.path}")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class RecordingServer(ThreadingHTTPServer):
    """The proxy's server: per scope, a count of each kind and of each operation (with its status if not 2xx)."""

    daemon_threads = True

    def __init__(self, upstream_port: int, log: TextIO | None) -> None:
        super().__init__(("127.0.0.1", 0), _Recording)
        self.upstream_port = upstream_port
        self.log = log
        self.counts: dict[str, Counter[str]] = {}
        self.lock = threading.Lock()

    def record(self, scope: str, kind: str, operation: str, status: int, line: str) -> None:
        name = operation if status < 300 else f"{operation} -> {status}"
        with self.lock:
            counts = self.counts.setdefault(scope, Counter())
            counts[f"kind:{kind}"] += 1
            counts[f"op:{name}"] += 1
            if self.log:
                self.log.write(f"{scope}\t{kind}\t{name}\t{line}\n")

    def snapshot(self, scopes: tuple[str, ...]) -> Counter[str]:
        with self.lock:
            return sum((self.counts.get(s, Counter()) for s in scopes), Counter())


class RecordingProxy:
    """The recording proxy on 127.0.0.1 (a free port), serving on a daemon thread."""

    def __init__(self, upstream_port: int, log: TextIO | None = None) -> None:
        self.server = RecordingServer(upstream_port, log)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> RecordingProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------- the workloads


def batch(operation: str, commit: int) -> pa.Table:
    """The 100 rows of `commit` (1-based): insert adds 100 new keys; upsert updates the 50 keys the previous
    commit added and adds 50 (its first commit adds 100)."""
    if operation == "insert":
        ids = list(range((commit - 1) * ROWS, commit * ROWS))
    elif commit == 1:
        ids = list(range(ROWS))
    else:
        existing = ROWS + (commit - 2) * (ROWS // 2)
        ids = list(range(existing - ROWS // 2, existing + ROWS // 2))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": [f"p{i % PARTITIONS}" for i in ids],
            "fare": pa.array([i * 0.5 + commit for i in ids], pa.float64()),
            "city": ["lisbon"] * len(ids),
            "batch": pa.array([commit] * len(ids), pa.int64()),
        }
    )


def expected_rows(operation: str, commits: int) -> int:
    """Rows a Tandem table holds after `commits` batches (every key once)."""
    return commits * ROWS if operation == "insert" else ROWS + (commits - 1) * (ROWS // 2)


@dataclass
class Series:
    """One system writing one workload into its own bucket; counts and wall time of every commit."""

    system: str
    operation: str
    bucket: str
    commit: Callable[[pa.Table, int], None]
    lock_table: str | None = None
    counts: list[Counter[str]] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)

    @property
    def scopes(self) -> tuple[str, ...]:
        return (self.bucket, self.lock_table) if self.lock_table else (self.bucket,)

    @property
    def base(self) -> str:
        return f"s3://{self.bucket}/table"


def bucket_name(system: str, operation: str) -> str:
    return f"{BUCKETS[system]}-{operation}"


def make_series(system: str, operation: str, proxy: RecordingProxy, workdir: Path) -> Series:
    """A fresh table in the bucket of (`system`, `operation`), and how that system commits a batch to it."""
    from coordinator.config import CoordinatorConfig
    from coordinator.write.writer import LocalWriter
    from timeline.table import Table

    bucket = bucket_name(system, operation)
    base = f"s3://{bucket}/table"
    if system == "deltalake":
        from deltalake import write_deltalake

        options = delta_options(proxy.url)
        return Series(
            system,
            operation,
            bucket,
            lambda rows, _: write_deltalake(base, rows, mode="append", partition_by=["part"], storage_options=options),
        )
    lock_table = f"locks-{bucket}"
    lock = f"dynamodb://{lock_table}?region={REGION}&endpoint={proxy.url}"
    Table.create(base, "trips", ["id"], ["part"], hive_style=True)
    if system == "tandem in-process":
        writer = LocalWriter(Table.open(base), coordinator=CoordinatorConfig(lock_uri=lock))
        return Series(system, operation, bucket, lambda rows, _: writer.write(rows, operation), lock_table)

    def run_cli(rows: pa.Table, commit: int) -> None:
        path = workdir / f"{operation}-{commit}.parquet"
        pq.write_table(rows, path)
        command = [sys.executable, "-m", "coordinator", "write", base, "--input", str(path)]
        done = subprocess.run(
            command + ["--operation", operation, "--lock", lock], capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise RuntimeError(f"tandem write exited {done.returncode}: {done.stderr.strip()}")

    return Series(system, operation, bucket, run_cli, lock_table)


def delta_options(endpoint: str) -> dict[str, str]:
    """deltalake on the endpoint with its safe S3 commit: the log entry is a PutObject with If-None-Match."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "conditional_put": "etag",
    }


def step(series: Series, proxy: RecordingProxy, commit: int) -> Callable[[], None]:
    """One commit of `series`, its requests recorded."""
    rows = batch(series.operation, commit)

    def run() -> None:
        before = proxy.server.snapshot(series.scopes)
        series.commit(rows, commit)
        series.counts.append(proxy.server.snapshot(series.scopes) - before)

    return run


def check(series: Series, commits: int, endpoint: str) -> None:
    """The table holds what was written: Tandem's rows by key, deltalake's version."""
    if series.system == "deltalake":
        from deltalake import DeltaTable

        version = DeltaTable(series.base, storage_options=delta_options(endpoint)).version()
        if version != commits - 1:
            raise RuntimeError(f"{series.base}: delta version {version}, expected {commits - 1}")
        return
    from timeline.query.reader import read_view
    from timeline.table import Table

    table = Table.open(series.base)
    rows = read_view(table, table.view()).num_rows
    if rows != expected_rows(series.operation, commits):
        raise RuntimeError(f"{series.base}: {rows} rows, expected {expected_rows(series.operation, commits)}")


def cli_startup_ms(repeats: int) -> dict[str, Any]:
    """Wall time of `python -m coordinator --help`: the interpreter and the CLI's imports, no request."""
    samples, _ = interleaved(
        {"startup": lambda: subprocess.run([sys.executable, "-m", "coordinator", "--help"], capture_output=True)},
        repeats,
    )
    return summarize(samples["startup"])


# --------------------------------------------------------------------------- the run


def run(commits: tuple[int, ...], workdir: Path, log: TextIO | None) -> dict[str, Any]:
    import boto3

    import timeline.io.storage as storage_module
    from chaos.servers import MotoServer

    os.environ.update(CREDENTIALS)
    moto = MotoServer(workdir).start()
    proxy = RecordingProxy(moto.port, log).start()
    try:
        os.environ["AWS_ENDPOINT_URL_S3"] = proxy.url
        storage_module._s3_client = None
        direct = boto3.client("s3", endpoint_url=moto.url, region_name=REGION)
        series = []
        for operation in OPERATIONS:
            for system in SYSTEMS:
                direct.create_bucket(Bucket=bucket_name(system, operation))
                series.append(make_series(system, operation, proxy, workdir))
        last = max(commits)
        started = time.perf_counter()
        for commit in range(1, last + 1):
            samples, _ = interleaved({f"{s.system} {s.operation}": step(s, proxy, commit) for s in series}, 1)
            for s in series:
                s.wall_ms.append(samples[f"{s.system} {s.operation}"][0])
            if commit in commits:
                print(f"  commit {commit:>3} done ({time.perf_counter() - started:.0f} s)", flush=True)
        for s in series:
            check(s, last, proxy.url)
        return {
            "series": {op: {s.system: figures(s, commits) for s in series if s.operation == op} for op in OPERATIONS},
            "cli_startup": cli_startup_ms(5),
        }
    finally:
        proxy.stop()
        moto.stop()
        os.environ.pop("AWS_ENDPOINT_URL_S3", None)
        storage_module._s3_client = None


def figures(series: Series, commits: tuple[int, ...]) -> dict[str, Any]:
    """Per reported commit: requests by kind and by operation, and wall time; every commit's total."""
    at = {}
    for commit in commits:
        counts = series.counts[commit - 1]
        kinds = {k: counts[f"kind:{k}"] for k in KINDS}
        operations = {k[3:]: v for k, v in sorted(counts.items()) if k.startswith("op:")}
        at[str(commit)] = {
            "total": sum(kinds.values()),
            "by_kind": kinds,
            "by_operation": operations,
            "wall_ms": round(series.wall_ms[commit - 1], 1),
        }
    totals = [sum(c[f"kind:{k}"] for k in KINDS) for c in series.counts]
    return {
        "bucket": series.bucket,
        "at_commit": at,
        "total_per_commit": totals,
        "mean_requests_per_commit": round(sum(totals) / len(totals), 1),
        "wall": summarize(series.wall_ms),
    }


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets on the CLI series: <= 60 requests at commit 30, and commit 30 <= 1.25x commit 3."""
    out: dict[str, Any] = {}
    for operation in OPERATIONS:
        at = results["series"][operation]["tandem cli"]["at_commit"]
        if str(TARGET_AT) not in at or str(BASELINE_AT) not in at:
            out[operation] = {"measured": False}
            continue
        total, baseline = at[str(TARGET_AT)]["total"], at[str(BASELINE_AT)]["total"]
        out[operation] = {
            "measured": True,
            "requests_at_30": total,
            "requests_at_3": baseline,
            "growth_30_over_3": round(total / baseline, 3),
            "requests_met": total <= TARGET_REQUESTS,
            "growth_met": total <= TARGET_GROWTH * baseline,
        }
    return out


def print_table(results: dict[str, Any], commits: tuple[int, ...]) -> None:
    head = f"{'operation':<9} {'system':<18} {'commit':>6} {'total':>6} " + " ".join(f"{k:>8}" for k in KINDS)
    print(f"\nrequests per commit (100 rows, {PARTITIONS} partitions)\n{head} {'wall ms':>9}")
    for operation in OPERATIONS:
        for system in SYSTEMS:
            at = results["series"][operation][system]["at_commit"]
            for commit in commits:
                f = at[str(commit)]
                kinds = " ".join(f"{f['by_kind'][k]:>8}" for k in KINDS)
                print(f"{operation:<9} {system:<18} {commit:>6} {f['total']:>6} {kinds} {f['wall_ms']:>9.0f}")
        for system in SYSTEMS:
            mean = results["series"][operation][system]["mean_requests_per_commit"]
            print(f"{operation:<9} {system:<18} mean over commits 1-{max(commits)}: {mean} requests")
    startup = results["cli_startup"]
    print(f"CLI start-up (python -m coordinator --help): median {startup['median_ms']:.0f} ms")


def print_targets(found: dict[str, Any]) -> None:
    print()
    for operation, t in found.items():
        if not t["measured"]:
            print(f"target {operation}: commits {BASELINE_AT} and {TARGET_AT} not both measured in this run")
            continue
        met = "met" if t["requests_met"] else "NOT met"
        print(
            f"target CLI {operation} at commit {TARGET_AT}: {t['requests_at_30']} requests "
            f"(target <= {TARGET_REQUESTS}): {met}"
        )
        met = "met" if t["growth_met"] else "NOT met"
        print(
            f"target CLI {operation} commit {TARGET_AT} / commit {BASELINE_AT}: {t['growth_30_over_3']:.2f}x "
            f"({t['requests_at_30']} / {t['requests_at_3']}, target <= {TARGET_GROWTH}x): {met}"
        )


# --------------------------------------------------------------------------- the report


def plot(results: dict[str, Any], commits: tuple[int, ...], path: Path) -> None:
    """Per workload: at each reported commit one bar per system, stacked by request kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    hatches = {"tandem cli": "", "tandem in-process": "//", "deltalake": ".."}
    width = 0.8 / len(SYSTEMS)
    fig, axes = plt.subplots(1, len(OPERATIONS), figsize=(13, 4.8), sharey=True)
    for ax, operation in zip(axes, OPERATIONS, strict=True):
        for g, commit in enumerate(commits):
            for k, system in enumerate(SYSTEMS):
                f = results["series"][operation][system]["at_commit"][str(commit)]
                x = g - 0.4 + width * (k + 0.5)
                bottom = 0
                for colour, kind in zip(COLOURS, KINDS, strict=False):
                    value = f["by_kind"][kind]
                    ax.bar([x], [value], width, bottom=bottom, color=colour, hatch=hatches[system], edgecolor="white")
                    bottom += value
                ax.annotate(str(f["total"]), (x, bottom), ha="center", va="bottom", fontsize=7)
        ax.axhline(TARGET_REQUESTS, color="#555555", linestyle="--", linewidth=0.8)
        ax.set_xticks(range(len(commits)))
        ax.set_xticklabels([f"commit {c}" for c in commits], fontsize=8)
        ax.set_title(f"100-row {operation} ({'deltalake appends' if operation == 'upsert' else 'all append'})")
    axes[0].set_ylabel(f"requests per commit (dashed: target {TARGET_REQUESTS})")
    legend = [Patch(facecolor=c, label=k) for c, k in zip(COLOURS, KINDS, strict=False)]
    legend += [Patch(facecolor="white", edgecolor="#333333", hatch=h, label=s) for s, h in hatches.items()]
    axes[-1].legend(handles=legend, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle("Object-store requests per commit, local S3 endpoint: Tandem vs deltalake")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(results: dict[str, Any], commits: tuple[int, ...], out: Path) -> Path:
    """object_store.json (the layout bench.report writes) and object_store.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "object_store",
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "results": results,
    }
    path = out / "object_store.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    plot(results, commits, path.with_suffix(".png"))
    return path


def main() -> None:
    from importlib.metadata import version

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="commits 1, 3 and 10 (a check that everything runs)")
    parser.add_argument(
        "--workdir",
        help="moto's log, the CLI's input files and a --quick report (default: TMP/tandem-bench-object-store)",
    )
    parser.add_argument("--log", help="write every request (series, kind, operation, method and path) to this file")
    parser.add_argument("--commits", help="commits to report, comma separated (default 1,3,10,30,100)")
    args = parser.parse_args()
    commits = (
        tuple(sorted({int(c) for c in args.commits.split(",")})) if args.commits else QUICK if args.quick else FULL
    )
    if commits[0] < 1:
        parser.error("commits count from 1")
    workdir = Path(args.workdir or Path(tempfile.gettempdir()) / "tandem-bench-object-store")
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"{len(OPERATIONS) * len(SYSTEMS)} series, commits 1-{max(commits)}, reported at {commits}")
    with open(args.log, "w") if args.log else nullcontext() as log:
        results: dict[str, Any] = {
            "quick": args.quick,
            "commits": list(commits),
            "rows_per_commit": ROWS,
            "partitions": PARTITIONS,
            "endpoint": "moto_server (chaos.moto_serial, one request at a time) behind a recording proxy",
            "deltalake": {"version": version("deltalake"), "conditional_put": "etag"},
            **run(commits, workdir, log),
        }
    results["targets"] = targets(results)
    results["total_s"] = round(time.perf_counter() - started, 1)
    print_table(results, commits)
    print_targets(results["targets"])
    path = write(results, commits, workdir if args.quick else OUT)  # a check run never replaces the figures
    print(f"wrote {path} and {path.with_suffix('.png')} (total {results['total_s']} s)")


if __name__ == "__main__":
    main()
