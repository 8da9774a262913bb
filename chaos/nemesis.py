"""Process nemeses (Jepsen's idea): real writers and workers, real faults, a history checked afterwards.

Three writer processes (`chaos.nemesis_writer`), a clean worker and an MDT
compaction worker share one table and one lock service. A seeded schedule
SIGKILLs a process (and starts a replacement), SIGSTOPs one for longer than
the lock lease and the heartbeat expiry (then SIGCONTs it), or faults the lock
service: ZooKeeper is restarted, or kept down past the session timeout so every
session expires; the DynamoDB endpoint is stopped (frozen: moto keeps its
tables in memory, so a real restart would be a data loss DynamoDB never has)
and resumed. At the end everything is stopped, the table recovered, and
checked: DESIGN §8 on the table, and on the history that every acknowledged
commit is completed, no aborted write is, and no fencing token was handed out twice.
With `s3` the table is an `s3://` prefix on a moto endpoint of its own (served
one request at a time, so create-if-absent is atomic), apart from the lock
service's, so a lock-service fault never stalls storage.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from chaos import s3 as chaos_s3
from chaos.checker import check_table
from chaos.enumerator import expire_heartbeats
from chaos.nemesis_writer import HOT_KEYS, partition_of
from chaos.scenarios import run_service
from chaos.servers import MotoServer, ZooKeeperServer
from coordinator.config import CoordinatorConfig
from coordinator.services.steps import recover_table
from coordinator.services.worker import worker_command
from coordinator.write.writer import LocalWriter
from timeline.format.active_timeline import BUNDLE_PREFIX, read_bundle
from timeline.format.instant import ROLLBACK, WRITE_ACTIONS
from timeline.table import ARCHIVED_FOLDER, Table

LOCK_SERVICES = ("file", "zookeeper", "dynamodb")
HEARTBEAT_MS = 1000
LEASE_MS = 3000
SETTINGS = {
    "failed_writes_policy": "LAZY",
    "heartbeat_interval_ms": HEARTBEAT_MS,
    "heartbeat_tolerable_misses": 2,
    "max_delta_commits": 10,
    "compaction_delta_commits": 3,  # a merge-on-read table's compaction worker has slices to fold often
}
PAUSE_S = (LEASE_MS / 1000 + 1, LEASE_MS / 1000 + 4)  # longer than the lease and the heartbeat expiry


@dataclass
class NemesisReport:
    lock_service: str
    seed: int
    storage: str = "local"
    table_type: str = "COPY_ON_WRITE"
    seconds: float = 0.0
    commits: int = 0
    aborts_conflict: int = 0
    aborts_other: int = 0
    abort_reasons: dict[str, int] = field(default_factory=dict)
    killed_mid_write: int = 0
    rollbacks: int = 0
    kills: int = 0
    pauses: int = 0
    lock_service_faults: int = 0
    process_crashes: int = 0
    kept_dir: str | None = None
    violations: list[dict] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class LockService:
    """The lock service under test: its URI and the faults it can suffer."""

    name = "file"

    def start(self, work: Path) -> None: ...

    def stop(self) -> None: ...

    def uri(self) -> str:
        return f"file?lease_ms={LEASE_MS}"

    def fault(self, rng: random.Random) -> str | None:
        return None


class ZooKeeperService(LockService):
    name = "zookeeper"
    session_ms = 4000

    def start(self, work: Path) -> None:
        self.server = ZooKeeperServer(work / "zookeeper").start()

    def stop(self) -> None:
        self.server.stop()

    def uri(self) -> str:
        return f"zk://{self.server.hosts}/tandem-nemesis?session_timeout_ms={self.session_ms}"

    def fault(self, rng: random.Random) -> str:
        outage = rng.random() < 0.5
        down_s = self.session_ms / 1000 + 2 if outage else 0.5
        self.server.stop()
        _sleep(down_s)
        self.server.start()
        return f"zookeeper {'down past the session timeout' if outage else 'restarted'} ({down_s:g}s)"


class DynamoDBService(LockService):
    name = "dynamodb"

    def start(self, work: Path) -> None:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "nemesis")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "nemesis")
        self.server = MotoServer(work).start()

    def stop(self) -> None:
        self.server.proc.send_signal(signal.SIGCONT)
        self.server.stop()

    def uri(self) -> str:
        return f"dynamodb://tandem_nemesis?region=us-east-1&endpoint={self.server.url}&lease_ms={LEASE_MS}"

    def fault(self, rng: random.Random) -> str:
        down_s = rng.uniform(1, LEASE_MS / 1000 + 2)
        self.server.proc.send_signal(signal.SIGSTOP)
        _sleep(down_s)
        self.server.proc.send_signal(signal.SIGCONT)
        return f"dynamodb endpoint stopped for {down_s:.1f}s"


def _sleep(seconds: float) -> None:
    """Fault windows are durations by design (a schedule), not synchronisation."""
    time.sleep(seconds)


def _service(name: str) -> LockService:
    return {"file": LockService, "zookeeper": ZooKeeperService, "dynamodb": DynamoDBService}[name]()


class Fleet:
    """The writer and worker processes, restartable under new names."""

    def __init__(self, base: str, uri: str, history: Path, logs: Path) -> None:
        self.base, self.uri, self.history, self.logs = base, uri, history, logs
        self.procs: dict[str, subprocess.Popen] = {}
        self.generation: dict[str, int] = {}
        self.crashes: list[str] = []

    def _command(self, role: str, name: str) -> list[str]:
        if role.startswith("writer"):
            settings = json.dumps(SETTINGS)
            return [
                sys.executable,
                "-m",
                "chaos.nemesis_writer",
                self.base,
                name,
                self.uri,
                str(self.history),
                settings,
            ]
        return worker_command(role.removeprefix("worker-"), self.base, SETTINGS, 1, self.uri)

    def start(self, role: str) -> None:
        self.generation[role] = self.generation.get(role, 0) + 1
        name = f"{role}.{self.generation[role]}"
        log = open(self.logs / f"{name}.log", "wb")
        self.procs[role] = subprocess.Popen(self._command(role, name), stdout=log, stderr=subprocess.STDOUT)

    def reap(self) -> None:
        """Restart any process that exited on its own (and remember it: that is a crash)."""
        for role, proc in list(self.procs.items()):
            if proc.poll() is not None:
                self.crashes.append(f"{role} exited with {proc.returncode}")
                self.start(role)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            _signal(proc, signal.SIGCONT)
            _signal(proc, signal.SIGTERM)
        deadline = time.monotonic() + 90
        for proc in self.procs.values():
            try:
                proc.wait(max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _signal(proc: subprocess.Popen, sig: int) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)


def run_nemesis(
    lock_service: str,
    duration_s: float,
    seed: int = 0,
    work_dir: Path | None = None,
    on_tick: Callable[[float, NemesisReport], None] | None = None,
    s3: bool = False,
    table_type: str = "COPY_ON_WRITE",
) -> NemesisReport:
    """One nemesis run; with `s3` the table lives on a loopback S3 endpoint (a zookeeper or dynamodb lock);
    `table_type` MERGE_ON_READ: the writers' updates go to logs, which the compaction worker folds."""
    if s3 and lock_service == "file":
        raise ValueError("an s3:// table needs a zookeeper or dynamodb lock (the file lock refuses S3)")
    work = Path(tempfile.mkdtemp(prefix=f"tandem-nemesis-{lock_service}-", dir=work_dir))
    with ExitStack() as stack:
        base = stack.enter_context(chaos_s3.moto_place(work)).base("table") if s3 else str(work / "table")
        report = _run(lock_service, duration_s, seed, work, base, on_tick, table_type)
        if report.kept_dir and s3:
            chaos_s3.download_table(base, work / "table")  # the endpoint keeps objects in memory only
    return report


def _run(
    lock_service: str,
    duration_s: float,
    seed: int,
    work: Path,
    base: str,
    on_tick: Callable[[float, NemesisReport], None] | None,
    table_type: str,
) -> NemesisReport:
    rng = random.Random(seed)
    history, logs = work / "history", work / "logs"
    history.mkdir()
    logs.mkdir()
    report = NemesisReport(lock_service, seed, "s3" if base.startswith("s3://") else "local", table_type)
    service = _service(lock_service)
    service.start(work)
    table = Table.create(base, "nemesis", ["id"], ["part"], table_type=table_type)
    seed_rows = [{"id": k, "part": partition_of(k), "writer": "seed", "seq": -1} for k in HOT_KEYS]
    LocalWriter(table, coordinator=_config(service)).write(pa.Table.from_pylist(seed_rows), "insert")
    fleet = Fleet(base, service.uri(), history, logs)
    roles = ["writer-1", "writer-2", "writer-3", "worker-clean", "worker-compact"]
    started = time.monotonic()
    try:
        for role in roles:
            fleet.start(role)
        paused: dict[str, float] = {}
        while time.monotonic() - started < duration_s:
            _sleep(rng.uniform(0.5, 2.0))
            for role, until in list(paused.items()):
                if time.monotonic() >= until:
                    _signal(fleet.procs[role], signal.SIGCONT)
                    del paused[role]
            fleet.reap()
            choice = rng.random()
            role = rng.choice(roles)
            if choice < 0.35 and role not in paused:
                fleet.procs[role].kill()
                fleet.procs[role].wait()
                fleet.start(role)
                report.kills += 1
                report.faults.append(f"{time.monotonic() - started:6.1f}s SIGKILL {role}")
            elif choice < 0.7 and role not in paused:
                hold = rng.uniform(*PAUSE_S)
                _signal(fleet.procs[role], signal.SIGSTOP)
                paused[role] = time.monotonic() + hold
                report.pauses += 1
                report.faults.append(f"{time.monotonic() - started:6.1f}s SIGSTOP {role} for {hold:.1f}s")
            elif choice < 0.85:
                what = service.fault(rng)
                if what:
                    report.lock_service_faults += 1
                    report.faults.append(f"{time.monotonic() - started:6.1f}s {what}")
            if on_tick is not None:
                on_tick(time.monotonic() - started, report)
    finally:
        fleet.stop_all()
    report.process_crashes = len(fleet.crashes)
    report.faults += [f"process exit: {c}" for c in fleet.crashes]
    _recover(table, service)
    _check(table, history, report)
    service.stop()
    report.seconds = round(time.monotonic() - started, 1)
    if report.violations or report.process_crashes:
        report.kept_dir = str(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _config(service: LockService) -> CoordinatorConfig:
    return CoordinatorConfig(**{**SETTINGS, "lock_uri": service.uri()})


def _recover(table: Table, service: LockService) -> None:
    """Everyone is stopped: their heartbeats may be taken as expired; then `tandem recover`."""
    config = _config(service)
    expire_heartbeats(table, config.heartbeat_expiry_s)
    run_service(table.uri, recover_table, config)


def _completed_writes(table: Table) -> tuple[set[str], int]:
    """Completed write instants, active and archived; and the number of rollbacks."""
    timeline = table.timeline()
    done = {i.time for i in timeline.completed() if i.action in WRITE_ACTIONS}
    rollbacks = sum(1 for i in timeline.completed() if i.action == ROLLBACK)
    for bundle in timeline.archived_files:
        if not bundle.startswith(BUNDLE_PREFIX):
            continue
        for entry in read_bundle(table.storage.read_bytes(f"{timeline.meta_dir}/{ARCHIVED_FOLDER}/{bundle}")):
            if entry["state"] == "COMPLETED" and entry["action"] in WRITE_ACTIONS:
                done.add(entry["time"])
            if entry["state"] == "COMPLETED" and entry["action"] == ROLLBACK:
                rollbacks += 1
    return done, rollbacks


def _events(history: Path) -> list[dict]:
    events = []
    for path in sorted(history.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue  # a line torn by SIGKILL mid-write
    return events


def _check(table: Table, history: Path, report: NemesisReport) -> None:
    done, report.rollbacks = _completed_writes(table)
    attempts: dict[tuple[str, int], dict] = {}
    for event in _events(history):
        attempt = attempts.setdefault((event["writer"], event["seq"]), {"writer": event["writer"], "seq": event["seq"]})
        attempt.update({k: v for k, v in event.items() if k in ("keys", "instant", "token", "reason", "error")})
        attempt.setdefault("events", []).append(event["event"])
    tokens: dict[int, str] = {}
    committed = []
    for attempt in attempts.values():
        instant, events = attempt.get("instant"), attempt["events"]
        if "commit" in events:
            report.commits += 1
            if instant not in done:
                report.violations.append(
                    _violation("acknowledged-commit-lost", f"{instant} acknowledged, not completed")
                )
            if attempt["token"] in tokens:
                report.violations.append(
                    _violation(
                        "fencing-token-unique", f"token {attempt['token']} for {instant} and {tokens[attempt['token']]}"
                    )
                )
            tokens[attempt["token"]] = instant
        elif "abort" in events:
            if attempt.get("reason") == "conflict":
                report.aborts_conflict += 1
            else:
                report.aborts_other += 1
                reason = abort_reason(attempt.get("error", ""))
                report.abort_reasons[reason] = report.abort_reasons.get(reason, 0) + 1
            if instant in done:
                report.violations.append(_violation("aborted-write-completed", f"{instant} aborted, yet completed"))
        elif "attempt" in events:
            report.killed_mid_write += 1
        if instant in done and "keys" in attempt:
            committed.append(attempt)
    expected = {k: {"id": k, "part": partition_of(k), "writer": "seed", "seq": -1} for k in HOT_KEYS}
    for attempt in sorted(committed, key=lambda a: a["instant"]):
        for key in attempt["keys"]:
            expected[key] = {"id": key, "part": partition_of(key), "writer": attempt["writer"], "seq": attempt["seq"]}
    hudi_rs = not table.config.merge_on_read  # hudi-rs merges no precombine-less merge-on-read table
    report.violations += [v.to_dict() for v in check_table(table, "id", expected, hudi_rs)]


def abort_reason(error: str) -> str:
    """An error message with its instants, tokens and durations blanked, so like aborts count together."""
    return re.sub(r"\d+(\.\d+)?", "N", error.splitlines()[0] if error else "unknown")[:120]


def _violation(invariant: str, detail: str) -> dict:
    return {"invariant": invariant, "detail": detail, "files": []}
