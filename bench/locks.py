"""Lock latency and throughput per provider, in one run, on local servers.

Prints acquire+release latency (median, p99, uncontended) and acquisitions per
second with 4 processes contending, for the file, ZooKeeper and DynamoDB
providers, with the in-process lock as the baseline the ratios are taken to.
Run: .venv/bin/python -m bench.locks
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import write_report
from chaos.servers import MotoServer, ZooKeeperServer
from locks.config import open_lock

ROUNDS = 300
CONTENDERS = 4
PER_CONTENDER = 50


def latency(uri: str, base: str) -> dict:
    lock = open_lock(uri, base, "bench")
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        lock.acquire(timeout_s=30)
        lock.release()
        samples.append((time.perf_counter() - started) * 1000)
    lock.close()
    samples.sort()
    return {"median_ms": statistics.median(samples), "p99_ms": samples[int(len(samples) * 0.99) - 1]}


def contention(uri: str, base: str, work: Path) -> float:
    counter, log = work / "counter", work / "log"
    counter.write_text("0")
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.lock_worker", uri, base, str(PER_CONTENDER), str(counter), str(log)]
        )
        for _ in range(CONTENDERS)
    ]
    for proc in procs:
        proc.wait(600)
        if proc.returncode != 0:
            raise RuntimeError(f"contender exited with {proc.returncode}")
    elapsed = time.perf_counter() - started
    assert counter.read_text() == str(CONTENDERS * PER_CONTENDER)
    return CONTENDERS * PER_CONTENDER / elapsed


def main() -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    work = Path(tempfile.mkdtemp(prefix="tandem-lock-bench-"))
    (work / "zk").mkdir()
    zk = ZooKeeperServer(work / "zk").start()
    moto = MotoServer(work).start()
    uris = {
        "memory": "memory",
        "file": "file",
        "zookeeper": f"zk://{zk.hosts}/bench",
        "dynamodb": f"dynamodb://bench-locks?region=us-east-1&endpoint={moto.url}",
    }
    results: dict[str, dict] = {}
    try:
        for name, uri in uris.items():
            base = str(work / f"table-{name}")
            os.makedirs(base)
            figures = latency(uri, base)
            if name != "memory":  # the in-process lock cannot be shared by processes
                (work / name).mkdir()
                figures["acquisitions_per_s_4way"] = contention(uri, base, work / name)
            results[name] = figures
    finally:
        zk.stop()
        moto.stop()
    baseline = results["file"]["median_ms"]
    for figures in results.values():
        figures["median_vs_file_lock"] = figures["median_ms"] / baseline
    print(f"{'provider':<10} {'median ms':>10} {'p99 ms':>9} {'x file':>7} {'acq/s (4 procs)':>16}")
    for name, f in results.items():
        rate = f.get("acquisitions_per_s_4way")
        print(
            f"{name:<10} {f['median_ms']:>10.3f} {f['p99_ms']:>9.3f} {f['median_vs_file_lock']:>7.2f} "
            f"{(f'{rate:.1f}' if rate else '-'):>16}"
        )
    path = write_report(
        "locks",
        results,
        {name: f["median_ms"] for name, f in results.items()},
        "acquire+release median (ms)",
        "Lock latency per provider (uncontended)",
    )
    print(f"wrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
