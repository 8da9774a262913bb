"""Deterministic fault schedules against real `tandem` processes: lost locks and a corrupt metadata table.

The crash-state enumerator kills one process; the nemesis is random. Neither
reliably builds the state in which a lock is liveness and never safety: a holder
that lost its lock without knowing it. A lost-lock schedule builds exactly that
state at one crash point P:

  1. process A (a writer, `tandem recover` or `tandem clean`) runs with
     `TANDEM_PAUSE_AT=P` and stops itself there while it holds the lock;
  2. its lock lapses: the lease (file, DynamoDB) or ZooKeeper session runs out
     while A is frozen (`expiry`), or an operator frees it with
     `tandem lock release --force` (`force-release`); A's heartbeat expires too;
  3. writer B upserts the same keys (so the same file groups) to completion;
     under `disjoint` (the lease runs out) B upserts other keys, so no conflict
     check stands between a rolled-back A and its completion;
  4. A is resumed and finishes however it finishes; then recovery (`tandem recover`'s code);
  5. DESIGN §8 with the `hudi` package as a second reader, plus the history:
     every acknowledged (exit 0) write is completed, the rows are those of the
     acknowledged writes applied in instant order, and no unacknowledged write
     is visible (`chaos.checker.check_history`).

The MDT-corruption schedules damage the newest (or an older) MDT log, or the
MDT's `hoodie.properties`, then require `tandem read` to return exactly the
committed rows (the `hudi` package, which never reads our MDT, is the oracle)
or fail, and `tandem write` to commit correctly or fail and change nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from chaos.checker import (
    Violation,
    Write,
    check_acknowledged,
    check_history,
    check_never_undone,
    check_nothing_pending,
    check_rows,
    check_serializable,
    check_table,
    hudi_rows,
)
from chaos.enumerator import expire_heartbeats
from chaos.scenarios import run_service
from chaos.servers import MotoServer, ZooKeeperServer
from coordinator.config import CoordinatorConfig
from coordinator.protocol.heartbeat import is_expired
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import recover_table
from coordinator.write.writer import LocalWriter
from locks.base import LockProvider
from locks.config import open_lock
from timeline.crash_points import CRASH_EXIT_CODE
from timeline.errors import TandemError
from timeline.mdt import layout
from timeline.query.reader import read_view
from timeline.table import HEARTBEAT_DIR, Table

PROVIDERS = ("file", "zookeeper", "dynamodb")
VARIANTS = ("expiry", "force-release", "disjoint")
WRITER_POINTS = (
    "commit.begin.locked",
    "commit.begin.requested",
    "commit.begin.inflight",
    "commit.locked",
    "commit.finalize",
    "commit.mdt",
    "commit.complete",
)
ROLLBACK_POINTS = (
    "rollback.planned",
    "rollback.inflight",
    "rollback.files",
    "rollback.mdt",
    "rollback.mdt.mirror",
    "rollback.instant",
    "rollback.complete",
)
CLEAN_POINTS = ("clean.planned", "clean.mdt", "clean.complete")  # the clean's steps under the lock
COMPACTION_POINTS = (  # `tandem compact`: sealing, planning, publishing and completing, all under the lock
    "mdt.compaction.sealed",
    "mdt.compaction.planned",
    "mdt.compaction.inflight",
    "mdt.compaction.base",
    "mdt.compaction.complete",
)
POINTS = WRITER_POINTS + ROLLBACK_POINTS + CLEAN_POINTS + COMPACTION_POINTS
CONTRACT_EXITS = (0, 3, 4)  # done, aborted by a conflict, lock not had or lost: what a lost lock may end in
REPRESENTATIVE_POINTS = ("commit.begin.requested", "commit.locked", "commit.finalize", "commit.mdt")
CORRUPTIONS = (
    "bit-flip-newest-log",
    "torn-newest-log",
    "delete-newest-log",
    "delete-older-log",
    "delete-mdt-properties",
)

HEARTBEAT_MS = 500  # x 2 tolerable misses: a frozen process's heartbeat expires within 1 s
LEASE_MS = 1500  # `expiry`: the lease or ZooKeeper session A outlives while frozen
LONG_LEASE_MS = 30000  # `force-release`: outlasts the schedule, so only the operator frees the lock
WAIT_MS = 30000  # bound on any process's lock acquisition
DEADLINE_S = 90.0  # bound on every wait for a process or a condition
SETTINGS = {
    "hoodie.cleaner.policy.failed.writes": "LAZY",
    "hoodie.client.heartbeat.interval_in_ms": str(HEARTBEAT_MS),
    "hoodie.client.heartbeat.tolerable.misses": "2",
}
TABLE_NAME = "schedule"
KEYS = tuple(f"k{i}" for i in range(6))
OTHER_KEYS = tuple(f"k{i}" for i in range(6, 12))  # B's keys under `disjoint`: new file groups, no conflict
STATE_STOPPED = "T"
T = TypeVar("T")
R = TypeVar("R")


class ScheduleError(Exception):
    """The schedule could not be built as designed (a process never reached its point, a wait timed out)."""


@dataclass(frozen=True)
class Endpoints:
    """Where the lock services listen; one lock key per schedule keeps schedules apart."""

    zookeeper: str | None = None  # HOST:PORT
    dynamodb: str | None = None  # http://HOST:PORT

    def lock_uri(self, provider: str, lease_ms: int, key: str) -> str:
        if provider == "file":
            return f"file?lease_ms={lease_ms}&wait_time_ms={WAIT_MS}"
        if provider == "zookeeper" and self.zookeeper:
            return (
                f"zk://{self.zookeeper}/tandem-schedules?session_timeout_ms={lease_ms}"
                f"&lock_key={key}&wait_time_ms={WAIT_MS}"
            )
        if provider == "dynamodb" and self.dynamodb:
            return (
                f"dynamodb://tandem_schedules?region=us-east-1&endpoint={self.dynamodb}"
                f"&lease_ms={lease_ms}&lock_key={key}&wait_time_ms={WAIT_MS}"
            )
        raise ScheduleError(f"no {provider} endpoint to run against")


@contextmanager
def lock_services(providers: list[str], work: Path) -> Iterator[Endpoints]:
    """Start the servers the providers need on 127.0.0.1 (ZooKeeper, moto's DynamoDB) for one run."""
    zookeeper = ZooKeeperServer(work / "zookeeper") if "zookeeper" in providers else None
    moto = None
    try:
        if zookeeper is not None:
            zookeeper.start()
        if "dynamodb" in providers:
            for name, value in (("AWS_ACCESS_KEY_ID", "schedules"), ("AWS_SECRET_ACCESS_KEY", "schedules")):
                os.environ.setdefault(name, value)
            moto = MotoServer(work).start()
        yield Endpoints(zookeeper.hosts if zookeeper else None, moto.url if moto else None)
    finally:
        if moto is not None:
            moto.stop()
        if zookeeper is not None:
            zookeeper.stop()


@dataclass(frozen=True)
class Schedule:
    provider: str
    point: str
    variant: str

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.point}/{self.variant}"

    @property
    def lease_ms(self) -> int:
        return LONG_LEASE_MS if self.variant == "force-release" else LEASE_MS

    @property
    def b_keys(self) -> tuple[str, ...]:
        return OTHER_KEYS if self.variant == "disjoint" else KEYS

    @property
    def actor(self) -> str:
        """What process A is: a writer, `tandem recover` (of an orphan), `tandem clean` or `tandem compact`."""
        return {"commit": "writer", "rollback": "recover", "clean": "clean", "mdt": "compact"}[self.point.split(".")[0]]


def plan(providers: list[str], points: list[str], variants: list[str]) -> list[Schedule]:
    return [Schedule(p, point, v) for p in providers for point in points for v in variants]


@dataclass
class ScheduleResult:
    provider: str
    point: str
    variant: str
    a_exit: int | None = None
    b_exit: int | None = None
    recover_exit: int | None = None
    a_said: str = ""  # A's last stderr line
    b_said: str = ""
    seconds: float = 0.0
    violations: list[dict] = field(default_factory=list)
    error: str | None = None
    kept_dir: str | None = None

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.point}/{self.variant}"

    def to_dict(self) -> dict:
        return asdict(self)


def _rows(writer: str, keys: tuple[str, ...] = KEYS) -> dict[str, dict]:
    """The rows a writer sends: its name is the value, so a visible row names whose write it is."""
    return {k: {"id": k, "part": f"p{int(k[1:]) % 2}", "v": writer} for k in keys}


def _arrow(rows: dict[str, dict]) -> pa.Table:
    return pa.Table.from_pylist(
        list(rows.values()), pa.schema([("id", pa.string()), ("part", pa.string()), ("v", pa.string())])
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _stopped(proc: subprocess.Popen) -> bool:
    """True once the process stopped itself (SIGSTOP): state T in /proc/<pid>/stat."""
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] == STATE_STOPPED


def _poll(predicate: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise ScheduleError(f"timed out after {deadline_s:g}s waiting for {what}")


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
        return _as_write(writer, rows, done.returncode, done.stdout), _last_line(done.stderr)

    def setup_write(self, writer: str, operation: str, keys: tuple[str, ...] = KEYS) -> Write:
        """A write of the table's history, in this process, on the schedule's own lock service."""
        rows = _rows(writer, keys)
        table = Table.open(self.base)
        lock = table_lock(table, self.config)
        try:
            result = LocalWriter(table, coordinator=self.config, lock=lock).write(_arrow(rows), operation)
        finally:
            lock.close()
        return Write(writer, 0, result.instant, rows)

    def orphan_write(self, writer: str) -> Write:
        """A writer killed after its MDT deltacommit; then time passes: its lock and heartbeat expire."""
        rows = _rows(writer)
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


def _as_write(writer: str, rows: dict[str, dict], code: int, stdout: str) -> Write:
    """What the client learned: exit 0 with the instant `--json` printed is an acknowledged write."""
    try:
        instant = json.loads(stdout)["instant"] if code == 0 else None
    except (ValueError, KeyError):
        instant = None
    return Write(writer, code, instant, rows)


def _heartbeats_expired(run: Run) -> bool:
    table = Table.open(run.base)
    expiry = run.config.heartbeat_expiry_s
    return all(is_expired(table.storage, beat.base_name, expiry) for beat in table.storage.list_dir(HEARTBEAT_DIR))


def _is_free(provider: LockProvider) -> bool:
    """No holder; a holder that vanishes while it is being read (its session just expired) is asked again."""
    try:
        return provider.owner() is None
    except Exception:
        return False


def _let_lock_lapse(run: Run, variant: str) -> None:
    """Free A's lock behind its back: wait out its lease or session, or force-release it."""
    if variant == "force-release":
        done = run.run(["lock", "release", run.base, "--lock", run.lock_uri, "--force"])
        if done.returncode != 0:
            raise ScheduleError(f"tandem lock release --force exited {done.returncode}: {_last_line(done.stderr)}")
    else:
        table = Table.open(run.base)
        provider = open_lock(run.lock_uri, table.uri, table.config.name)
        try:
            _poll(lambda: _is_free(provider), "the frozen holder's lease or session to expire")
        finally:
            provider.close()
    _poll(lambda: _heartbeats_expired(run), "the frozen process's heartbeat to expire")


def _prepare(run: Run, schedule: Schedule) -> list[Write]:
    """The table's history before A: an insert; two upserts for a clean; an orphan for a rollback."""
    Table.create(run.base, TABLE_NAME, ["id"], ["part"])
    history = [run.setup_write("seed", "insert")]
    if schedule.actor in ("clean", "compact"):
        history += [run.setup_write("u1", "upsert"), run.setup_write("u2", "upsert")]
    if schedule.actor == "recover":
        history.append(run.orphan_write("orphan"))
    return history


def _start_a(run: Run, schedule: Schedule) -> subprocess.Popen:
    if schedule.actor == "writer":
        args = run.write_args("A", _rows("A"))
    elif schedule.actor == "recover":
        args = ["recover", run.base, *run.coordinator_args()]
    elif schedule.actor == "compact":
        args = ["compact", run.base, *run.coordinator_args()]
    else:
        args = ["clean", run.base, "--policy", "KEEP_LATEST_FILE_VERSIONS", "--retained", "1", *run.coordinator_args()]
    return run.start(args, pause_at=schedule.point)


def _wait_until_stopped(proc: subprocess.Popen, point: str) -> None:
    def stopped_or_gone() -> bool:
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise ScheduleError(f"A exited {proc.returncode} before reaching {point}: {_last_line(err)}")
        return _stopped(proc)

    _poll(stopped_or_gone, f"A to stop at {point}")


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGCONT)
    try:
        out, err = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired as timeout:
        raise ScheduleError(f"A did not finish within {DEADLINE_S:g}s of being resumed") from timeout
    return proc.returncode, out, err


def _harness_error(err: Exception) -> str:
    return str(err) if isinstance(err, ScheduleError) else f"{type(err).__name__}: {err}"


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.communicate()


def run_schedule(schedule: Schedule, endpoints: Endpoints, work: Path, use_hudi: bool = True) -> ScheduleResult:
    """Build the schedule in `work` (a fresh folder), then recover and check; violations, never exceptions."""
    started = time.monotonic()
    result = ScheduleResult(schedule.provider, schedule.point, schedule.variant)
    a = None
    try:
        run = Run(work, endpoints.lock_uri(schedule.provider, schedule.lease_ms, f"s{uuid.uuid4().hex[:12]}"))
        history = _prepare(run, schedule)
        a = _start_a(run, schedule)
        _wait_until_stopped(a, schedule.point)
        _let_lock_lapse(run, schedule.variant)
        b, result.b_said = run.write("B", _rows("B", schedule.b_keys))
        result.b_exit = b.exit_code
        result.a_exit, a_out, a_err = _finish(a)
        result.a_said = _last_line(a_err)
        exits = check_exit_class("A", result.a_exit, a_err) + check_exit_class("B", b.exit_code, result.b_said)
        history.append(b)
        if schedule.actor == "writer":
            history.append(_as_write("A", _rows("A"), result.a_exit, a_out))
        result.recover_exit, recover_said = run.recover()
        violations = exits
        if result.recover_exit != 0:
            violations.append(Violation("3-recovery-failed", recover_said))
        table = Table.open(run.base)
        violations += check_table(table, "id", None, use_hudi) + check_history(table, history)
        result.violations = [v.to_dict() for v in violations]
    except Exception as err:  # a schedule that cannot be built is reported, and the others still run
        result.error = _harness_error(err)
    finally:
        _stop(a)
    result.seconds = round(time.monotonic() - started, 2)
    return result


def check_exit_class(who: str, code: int | None, stderr: str) -> list[Violation]:
    """A process whose lock lapsed ends in an exit of the contract (0, 3, 4) with one `error:` line."""
    if code == 0:
        return []
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    if code not in CONTRACT_EXITS or len(errors) != 1 or "Traceback" in stderr:
        return [Violation("5-exit-codes", f"{who} exited {code}: {(lines or [''])[-1][:200]}")]
    return []


def run_schedules(
    schedules: list[Schedule],
    endpoints: Endpoints,
    work: Path | None = None,
    use_hudi: bool = True,
    on_result: Callable[[ScheduleResult], None] | None = None,
    jobs: int = 1,
) -> list[ScheduleResult]:
    """Every schedule, each on a table and lock key of its own, `jobs` at a time."""
    root = Path(tempfile.mkdtemp(prefix="tandem-schedules-", dir=work))
    named = {f"{n:03d}-{s.label.replace('/', '-')}": s for n, s in enumerate(schedules)}
    return _side_by_side(root, named, lambda s, folder: run_schedule(s, endpoints, folder, use_hudi), jobs, on_result)


def _side_by_side(
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


# MDT corruption -------------------------------------------------------------------------


@dataclass
class CorruptionResult:
    corruption: str
    damaged: str = ""  # the MDT file damaged, relative to the table
    read_exit: int | None = None
    read_said: str = ""
    write_exit: int | None = None
    write_said: str = ""
    recover_exit: int | None = None
    reread_exit: int | None = None
    seconds: float = 0.0
    violations: list[dict] = field(default_factory=list)
    error: str | None = None
    kept_dir: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _mdt_logs(table: Table) -> list[str]:
    """The MDT's log files (seal markers excluded), oldest first, as paths relative to the table."""
    mdt = table.metadata()
    logs = []
    for base_instant, piece in sorted(mdt.slices().items()):
        for version in sorted(piece.logs):
            if not mdt.is_seal(base_instant, version):
                logs.append(f"{layout.MDT_DIR}/{layout.log_path(base_instant, version)}")
    return logs


def corrupt(base: str, corruption: str) -> str:
    """Damage the MDT of the table at `base` one way; returns the file damaged (relative to the table)."""
    table = Table.open(base)
    logs = _mdt_logs(table)
    if len(logs) < 2 and corruption != "delete-mdt-properties":
        raise ScheduleError(f"the template has {len(logs)} MDT log(s); {corruption} needs at least 2")
    target = {
        "bit-flip-newest-log": logs[-1] if logs else "",
        "torn-newest-log": logs[-1] if logs else "",
        "delete-newest-log": logs[-1] if logs else "",
        "delete-older-log": logs[-2] if len(logs) > 1 else "",
        "delete-mdt-properties": layout.MDT_PROPERTIES,
    }[corruption]
    path = Path(table.storage.full(target))
    data = path.read_bytes()
    if corruption == "bit-flip-newest-log":
        path.write_bytes(data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0x10]) + data[len(data) // 2 + 1 :])
    elif corruption == "torn-newest-log":
        path.write_bytes(data[: len(data) // 2])
    else:
        path.unlink()
    return target


def _data_rows(rows: pa.Table) -> dict[str, dict]:
    columns = [c for c in rows.column_names if not c.startswith("_hoodie_")]
    return {str(r["id"]): {c: r[c] for c in columns} for r in rows.select(columns).to_pylist()} if rows.num_rows else {}


def _rows_differ(label: str, actual: dict[str, dict], expected: dict[str, dict]) -> Violation | None:
    if actual == expected:
        return None
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    wrong = sorted(k for k in set(expected) & set(actual) if expected[k] != actual[k])
    return Violation(label, f"missing {missing[:10]}, not committed {extra[:10]}, stale or wrong values {wrong[:10]}")


def _oracle(base: str, use_hudi: bool) -> dict[str, dict]:
    """The rows as a reader that never opens our MDT sees them: the hudi package (else a storage listing)."""
    if use_hudi:
        return _data_rows(hudi_rows(base))
    table = Table.open(base)
    return _data_rows(read_view(table, table.storage_view()))


def _tandem_read(run: Run, name: str, use_hudi: bool, out: list[Violation]) -> tuple[int, str]:
    """`tandem read`: exactly the oracle's rows, or a non-zero exit; exit 0 with other rows is a violation."""
    output = run.work / f"{name}.parquet"
    done = run.run(["read", run.base, "--output", str(output)])
    if done.returncode == 0:
        wrong = _rows_differ(f"{name}-wrong-rows", _data_rows(pq.read_table(output)), _oracle(run.base, use_hudi))
        if wrong is not None:
            wrong.detail = f"tandem read exited 0 with other rows than a reader without the MDT: {wrong.detail}"
            out.append(wrong)
    return done.returncode, _last_line(done.stderr)


def _data_state(base: str, use_hudi: bool) -> tuple[frozenset[str], dict[str, dict]]:
    """What a client can see without our MDT: the completed data instants and the oracle's rows."""
    return Table.open(base).timeline().completed_times(), _oracle(base, use_hudi)


def _check_data(run: Run, history: list[Write], use_hudi: bool) -> list[Violation]:
    """DESIGN §8 on what does not depend on the damaged MDT: the history as storage and hudi read it, inv. 4, 5."""
    table = Table.open(run.base)
    timeline = table.timeline()
    out = check_acknowledged(timeline, history) + check_serializable(timeline) + check_never_undone(timeline)
    out += check_rows(_data_rows(read_view(table, table.storage_view())), history, "storage listing")
    if use_hudi:
        out += check_rows(_data_rows(hudi_rows(run.base)), history, "hudi package")
    return out


def _build_template(run: Run) -> list[Write]:
    """An insert, then an upsert of each partition: the newest version of p0's group is named only by
    the older log (u1's), that of p1's only by the newest (u2's), so losing either log hides committed rows."""
    Table.create(run.base, TABLE_NAME, ["id"], ["part"])
    return [
        run.setup_write("seed", "insert"),
        run.setup_write("u1", "upsert", KEYS[0::2]),
        run.setup_write("u2", "upsert", KEYS[1::2]),
    ]


def run_corruption(
    corruption: str, template: str, history: list[Write], work: Path, use_hudi: bool = True
) -> CorruptionResult:
    """Damage a copy of the template's MDT; then read, upsert, recover, read again, and check."""
    started = time.monotonic()
    result = CorruptionResult(corruption)
    run = Run(work, f"file?lease_ms={LEASE_MS}&wait_time_ms={WAIT_MS}")
    shutil.copytree(template, run.base)
    history = list(history)
    try:
        result.damaged = corrupt(run.base, corruption)
        violations: list[Violation] = []
        result.read_exit, result.read_said = _tandem_read(run, "read", use_hudi, violations)
        before = _data_state(run.base, use_hudi)
        update, result.write_said = run.write("W", _rows("W", KEYS[:2]))
        result.write_exit = update.exit_code
        history.append(update)
        if update.exit_code != 0 and _data_state(run.base, use_hudi) != before:
            detail = f"tandem write exited {update.exit_code} yet changed the completed instants or the rows"
            violations.append(Violation("failed-write-changed-table", detail))
        result.recover_exit, _ = run.recover()
        result.reread_exit, _ = _tandem_read(run, "reread", use_hudi, violations)
        violations += _check_data(run, history, use_hudi)
        if result.recover_exit == 0:
            table = Table.open(run.base)
            violations += check_nothing_pending(table, table.timeline())
        result.violations = [v.to_dict() for v in violations]
    except Exception as err:  # reported like a lost-lock schedule's
        result.error = _harness_error(err)
    result.seconds = round(time.monotonic() - started, 2)
    return result


def run_corruptions(
    corruptions: list[str],
    work: Path | None = None,
    use_hudi: bool = True,
    on_result: Callable[[CorruptionResult], None] | None = None,
    jobs: int = 1,
) -> list[CorruptionResult]:
    """One template (an insert, two upserts), then each corruption on a copy of it, `jobs` at a time."""
    root = Path(tempfile.mkdtemp(prefix="tandem-mdt-corruption-", dir=work))
    template = Run(root / "template", f"file?lease_ms={LEASE_MS}")
    template.work.mkdir()
    history = _build_template(template)

    def one(corruption: str, folder: Path) -> CorruptionResult:
        return run_corruption(corruption, template.base, history, folder, use_hudi)

    return _side_by_side(root, {c: c for c in corruptions}, one, jobs, on_result)
