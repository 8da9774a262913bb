"""Long-running table-service workers: `tandem worker clean|compact PATH --lock URI`.

Each run takes the same lock as the writers. SIGTERM (or SIGINT) lets the
current run finish, then the worker exits cleanly; every run logs one line.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

from coordinator.config import CoordinatorConfig
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import clean, compact
from locks.base import LockProvider
from timeline.errors import BadInputError, TandemError
from timeline.table import Table

KINDS = ("clean", "compact")


def worker_command(
    kind: str, base: str, settings: dict[str, object], interval_s: float, lock_uri: str | None = None
) -> list[str]:
    """The command line of a worker process, for jobs that run one beside their writers (demo, nemesis)."""
    command = [sys.executable, "-m", "coordinator", "worker", kind, base, "--interval", f"{interval_s:g}"]
    if lock_uri is not None:
        command += ["--lock", lock_uri]
    return command + [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def _clean_once(table: Table, config: CoordinatorConfig, lock: LockProvider) -> str:
    done = clean(table, config, lock)
    return f"cleaned at {done}" if done else "nothing to clean"


def _compact_once(table: Table, config: CoordinatorConfig, lock: LockProvider) -> str:
    report = compact(table, config, lock)
    done = []
    if report.data_compacted:
        done.append(f"compacted data {', '.join(report.data_compacted)}")
    if report.compacted:
        done.append(f"compacted {', '.join(report.compacted)}, removed {report.cleaned_files} old metadata file(s)")
    return "; ".join(done) or "nothing to compact"


@contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` (in the main thread); the caller's handlers are put back afterwards, so a
    library call leaves none behind."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_worker(
    table: Table,
    kind: str,
    config: CoordinatorConfig,
    interval_s: float,
    max_runs: int | None,
    log: Callable[[str], None],
    stop: threading.Event | None = None,
) -> int:
    """Run `kind` every `interval_s` until stopped (SIGTERM or SIGINT in the main thread, or `stop`) or
    `max_runs` runs; returns the number of runs."""
    stop = stop or threading.Event()
    once = {"clean": _clean_once, "compact": _compact_once}[kind]
    lock = table_lock(table, config)
    runs = 0
    with _stopped_by_signals(stop):
        try:
            while not stop.is_set() and (max_runs is None or runs < max_runs):
                started = time.monotonic()
                try:
                    summary = once(table, config, lock)
                except BadInputError:
                    raise  # the table itself is wrong: no later run can do better
                except TandemError as err:
                    # Lock timeouts and conflicts; also a step another process finished first, as when
                    # a frozen lock service cost this run its lease. Every step is crash-safe, so the
                    # next run starts over.
                    summary = f"skipped: {err}"
                except FileNotFoundError as err:  # a file removed while this run read it (same cause)
                    summary = f"skipped: {err.filename or err} was removed while this run read it"
                runs += 1
                stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                log(f"{stamp} worker {kind} run {runs}: {summary} ({(time.monotonic() - started) * 1000:.0f} ms)")
                if max_runs is None or runs < max_runs:
                    stop.wait(interval_s)
        finally:
            lock.close()
    log(f"worker {kind} stopped after {runs} run(s)")
    return runs
