"""What the lost-lock and MDT-corruption schedules share: a table, its lock URI and the `tandem` processes on it.

Both build their tables, drive real processes and run side by side the same way; only their faults differ.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from chaos.checker import Write
from chaos.enumerator import expire_heartbeats
from chaos.scenarios import run_service
from coordinator.config import CoordinatorConfig
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import recover_table
from coordinator.write.writer import LocalWriter
from locks.config import open_lock
from timeline.crash_points import CRASH_EXIT_CODE
from timeline.errors import TandemError
from timeline.table import Table

HEARTBEAT_MS = 500  # x 2 tolerable misses: a frozen process's heartbeat expires within 1 s
LEASE_MS = 1500  # `expiry`: the lease or ZooKeeper session A outlives while frozen
WAIT_MS = 30000  # bound on any process's lock acquisition
DEADLINE_S = 90.0  # bound on every wait for a process or a condition
SETTINGS = {
    "hoodie.cleaner.policy.failed.writes": "LAZY",
    "hoodie.client.heartbeat.interval_in_ms": str(HEARTBEAT_MS),
    "hoodie.client.heartbeat.tolerable.misses": "2",
}
TABLE_NAME = "schedule"
KEYS = tuple(f"k{i}" for i in range(6))
T = TypeVar("T")
R = TypeVar("R")


class ScheduleError(Exception):
    """The schedule could not be built as designed (a process never reached its point, a wait timed out)."""


def writer_rows(writer: str, keys: tuple[str, ...] = KEYS) -> dict[str, dict]:
    """The rows a writer sends: its name is the value, so a visible row names whose write it is."""
    return {k: {"id": k, "part": f"p{int(k[1:]) % 2}", "v": writer} for k in keys}


def _arrow(rows: dict[str, dict]) -> pa.Table:
    return pa.Table.from_pylist(
        list(rows.values()), pa.schema([("id", pa.string()), ("part", pa.string()), ("v", pa.string())])
    )


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


class Run:
    """One table, one lock URI, and the `tandem` processes that work on them."""

    def __init__(self, work: Path, lock_uri: str) -> None:
        self.work = work
        self.base = str(work / "table")
        self.lock_uri = lock_uri
        self.config = replace(CoordinatorConfig.from_hudi(SETTINGS), lock_uri=lock_uri)
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("TANDEM_LOCK", "TANDEM_CRASH_AT", "TANDEM_PAUSE_AT")
        }

    def coordinator_args(self) -> list[str]:
        out = ["--lock", self.lock_uri]
        for key, value in SETTINGS.items():
            out += ["--set", f"{key}={value}"]
        return out

    def start(self, args: list[str], pause_at: str | None = None, crash_at: str | None = None) -> subprocess.Popen:
        env = dict(self.env)
        if pause_at:
            env["TANDEM_PAUSE_AT"] = pause_at
        if crash_at:
            env["TANDEM_CRASH_AT"] = crash_at
        return subprocess.Popen(
            [sys.executable, "-m", "coordinator", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, args: list[str], crash_at: str | None = None) -> subprocess.CompletedProcess:
        proc = self.start(args, crash_at=crash_at)
        try:
            out, err = proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired as timeout:
            proc.kill()
            proc.communicate()
            raise ScheduleError(f"`tandem {' '.join(args[:2])}` did not finish within {DEADLINE_S:g}s") from timeout
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def input_file(self, writer: str, rows: dict[str, dict]) -> str:
        path = self.work / f"{writer}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
        return str(path)

    def write_args(self, writer: str, rows: dict[str, dict]) -> list[str]:
        path = self.input_file(writer, rows)
        return ["write", self.base, "--input", path, "--operation", "upsert", "--json", *self.coordinator_args()]

    def write(self, writer: str, rows: dict[str, dict]) -> tuple[Write, str]:
        """A `tandem write` upsert to completion, as its client sees it, and its last stderr line."""
        done = self.run(self.write_args(writer, rows))
        return as_write(writer, rows, done.returncode, done.stdout), last_line(done.stderr)

    def setup_write(self, writer: str, operation: str, keys: tuple[str, ...] = KEYS) -> Write:
        """A write of the table's history, in this process, on the schedule's own lock service."""
        rows = writer_rows(writer, keys)
        table = Table.open(self.base)
        lock = table_lock(table, self.config)
        try:
            result = LocalWriter(table, coordinator=self.config, lock=lock).write(_arrow(rows), operation)
        finally:
            lock.close()
        return Write(writer, 0, result.instant, rows)

    def orphan_write(self, writer: str) -> Write:
        """A writer killed after its MDT deltacommit; then time passes: its lock and heartbeat expire."""
        rows = writer_rows(writer)
        done = self.run(self.write_args(writer, rows), crash_at="commit.mdt")
        if done.returncode != CRASH_EXIT_CODE:
            raise ScheduleError(f"the orphan writer exited {done.returncode}, not at commit.mdt")
        table = Table.open(self.base)
        provider = open_lock(self.lock_uri, table.uri, table.config.name)
        try:
            provider.force_release()
        finally:
            provider.close()
        expire_heartbeats(table, self.config.heartbeat_expiry_s)
        return Write(writer, done.returncode, None, rows)

    def recover(self) -> tuple[int, str]:
        """Everyone has stopped, so every heartbeat may be taken as expired; then what `tandem recover` runs.

        In this process (as the nemesis does): an interpreter start less per schedule. The exit code and
        error line are those the command would give.
        """
        expire_heartbeats(Table.open(self.base), self.config.heartbeat_expiry_s)
        try:
            run_service(self.base, recover_table, self.config)
        except TandemError as err:
            return err.exit_code, str(err)
        except Exception as err:
            return 1, f"{type(err).__name__}: {err}"
        return 0, ""


def as_write(writer: str, rows: dict[str, dict], code: int, stdout: str) -> Write:
    """What the client learned: exit 0 with the instant `--json` printed is an acknowledged write."""
    try:
        instant = json.loads(stdout)["instant"] if code == 0 else None
    except (ValueError, KeyError):
        instant = None
    return Write(writer, code, instant, rows)


def harness_error(err: Exception) -> str:
    return str(err) if isinstance(err, ScheduleError) else f"{type(err).__name__}: {err}"


def side_by_side(
    root: Path, named: dict[str, T], run_one: Callable[[T, Path], R], jobs: int, on_result: Callable[[R], None] | None
) -> list[R]:
    """Run each item in `root/<name>`, `jobs` at a time; keep only the folders of results that found something.

    Most of a schedule is waiting (for a lease to pass, for a process to start), and
    schedules share nothing but the lock servers, so a few run side by side.
    """

    def one(name: str) -> R:
        folder = root / name
        folder.mkdir()
        result = run_one(named[name], folder)
        if result.violations or result.error:
            result.kept_dir = str(folder)
        else:
            shutil.rmtree(folder, ignore_errors=True)
        return result

    results: dict[str, R] = {}
    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        futures = {pool.submit(one, name): name for name in named}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            if on_result is not None:
                on_result(results[futures[future]])
    if not any(r.kept_dir for r in results.values()):
        shutil.rmtree(root, ignore_errors=True)
    return [results[name] for name in named]
