"""Lost-lock schedules: a lock holder frozen past its lease while another writer commits, on real processes.

The crash-state enumerator kills one process; the nemesis is random. Neither
reliably builds the state in which a lock is liveness and never safety: a holder
that lost its lock without knowing it. A lost-lock schedule builds exactly that
state at one crash point P:

  1. process A (a writer, `tandem recover`, `tandem clean`, `tandem compact` or `tandem restore`) runs with
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
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from chaos.checker import Violation, Write, check_history, check_table
from chaos.schedule_harness import (
    DEADLINE_S,
    KEYS,
    LEASE_MS,
    TABLE_NAME,
    WAIT_MS,
    Run,
    ScheduleError,
    as_write,
    harness_error,
    last_line,
    side_by_side,
    writer_rows,
)
from chaos.servers import MotoServer, ZooKeeperServer
from coordinator.protocol.heartbeat import is_expired
from locks.base import LockProvider
from locks.config import open_lock
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
DATA_COMPACTION_POINTS = (  # a merge-on-read table's compaction: planned and completed under the lock, written outside
    "compaction.data.planned",
    "compaction.data.base",
    "compaction.data.mdt",
    "compaction.data.complete",
)
RESTORE_POINTS = (  # `tandem restore`: all of it under the lock
    "restore.planned",
    "restore.inflight",
    "restore.commands",
    "restore.mdt",
    "restore.instant",
    "restore.complete",
)
POINTS = WRITER_POINTS + ROLLBACK_POINTS + CLEAN_POINTS + COMPACTION_POINTS + DATA_COMPACTION_POINTS + RESTORE_POINTS
COPY_ON_WRITE, MERGE_ON_READ = "COPY_ON_WRITE", "MERGE_ON_READ"
TABLE_TYPES = (COPY_ON_WRITE, MERGE_ON_READ)
CONTRACT_EXITS = (0, 3, 4)  # done, aborted by a conflict, lock not had or lost: what a lost lock may end in
REPRESENTATIVE_POINTS = ("commit.begin.requested", "commit.locked", "commit.finalize", "commit.mdt")
LONG_LEASE_MS = 30000  # `force-release`: outlasts the schedule, so only the operator frees the lock
OTHER_KEYS = tuple(f"k{i}" for i in range(6, 12))  # B's keys under `disjoint`: new file groups, no conflict
STATE_STOPPED = "T"


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
    table_type: str = COPY_ON_WRITE

    @property
    def label(self) -> str:
        on = "/mor" if self.table_type == MERGE_ON_READ else ""
        return f"{self.provider}/{self.point}/{self.variant}{on}"

    @property
    def lease_ms(self) -> int:
        return LONG_LEASE_MS if self.variant == "force-release" else LEASE_MS

    @property
    def b_keys(self) -> tuple[str, ...]:
        return OTHER_KEYS if self.variant == "disjoint" else KEYS

    @property
    def actor(self) -> str:
        """What process A is: a writer, `tandem recover` (of an orphan), `tandem clean` or `tandem compact`."""
        kinds = {"commit": "writer", "rollback": "recover", "clean": "clean", "mdt": "compact", "compaction": "compact",
                 "restore": "restore"}  # fmt: skip
        return kinds[self.point.split(".")[0]]


def plan(
    providers: list[str], points: list[str], variants: list[str], table_types: tuple[str, ...] = (COPY_ON_WRITE,)
) -> list[Schedule]:
    """Every combination; a data compaction's points, and a restore's command blocks, only on merge-on-read
    tables (the only ones they happen on)."""
    return [
        Schedule(p, point, v, kind)
        for kind in table_types
        for p in providers
        for point in points
        if kind == MERGE_ON_READ or (point not in DATA_COMPACTION_POINTS and point != "restore.commands")
        for v in variants
    ]


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
    table_type: str = COPY_ON_WRITE

    @property
    def label(self) -> str:
        return Schedule(self.provider, self.point, self.variant, self.table_type).label

    def to_dict(self) -> dict:
        return asdict(self)


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
            raise ScheduleError(f"tandem lock release --force exited {done.returncode}: {last_line(done.stderr)}")
    else:
        table = Table.open(run.base)
        provider = open_lock(run.lock_uri, table.uri, table.config.name)
        try:
            _poll(lambda: _is_free(provider), "the frozen holder's lease or session to expire")
        finally:
            provider.close()
    _poll(lambda: _heartbeats_expired(run), "the frozen process's heartbeat to expire")


def _prepare(run: Run, schedule: Schedule) -> list[Write]:
    """The table's history before A (the writes a reader must see once A is done): an insert; two upserts for
    a clean or a compaction (on a merge-on-read table, logs); an orphan for a rollback; for a restore, the
    insert savepointed and an upsert after it (which the restore removes)."""
    Table.create(run.base, TABLE_NAME, ["id"], ["part"], table_type=schedule.table_type)
    history = [run.setup_write("seed", "insert")]
    if schedule.actor in ("clean", "compact"):
        history += [run.setup_write("u1", "upsert"), run.setup_write("u2", "upsert")]
    if schedule.actor == "recover":
        history.append(run.orphan_write("orphan"))
    if schedule.actor == "restore":
        done = run.run(
            ["savepoint", "create", run.base, "--instant", history[0].instant or "", *run.coordinator_args()]
        )
        if done.returncode != 0:
            raise ScheduleError(f"tandem savepoint create exited {done.returncode}: {last_line(done.stderr)}")
        run.setup_write("u1", "upsert")  # removed by the restore: not in the history a reader must see
    return history


def _start_a(run: Run, schedule: Schedule) -> subprocess.Popen:
    if schedule.actor == "writer":
        args = run.write_args("A", writer_rows("A"))
    elif schedule.actor == "recover":
        args = ["recover", run.base, *run.coordinator_args()]
    elif schedule.actor == "compact":
        args = ["compact", run.base, *run.coordinator_args()]
    elif schedule.actor == "restore":
        saved = Table.open(run.base).timeline().completed_writes()[0].time
        args = ["restore", run.base, "--to", saved, *run.coordinator_args()]
    else:
        args = ["clean", run.base, "--policy", "KEEP_LATEST_FILE_VERSIONS", "--retained", "1", *run.coordinator_args()]
    return run.start(args, pause_at=schedule.point)


def _wait_until_stopped(proc: subprocess.Popen, point: str) -> None:
    def stopped_or_gone() -> bool:
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise ScheduleError(f"A exited {proc.returncode} before reaching {point}: {last_line(err)}")
        return _stopped(proc)

    _poll(stopped_or_gone, f"A to stop at {point}")


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGCONT)
    try:
        out, err = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired as timeout:
        raise ScheduleError(f"A did not finish within {DEADLINE_S:g}s of being resumed") from timeout
    return proc.returncode, out, err


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.communicate()


def run_schedule(schedule: Schedule, endpoints: Endpoints, work: Path, use_hudi: bool = True) -> ScheduleResult:
    """Build the schedule in `work` (a fresh folder), then recover and check; violations, never exceptions."""
    started = time.monotonic()
    result = ScheduleResult(schedule.provider, schedule.point, schedule.variant, table_type=schedule.table_type)
    a = None
    try:
        run = Run(work, endpoints.lock_uri(schedule.provider, schedule.lease_ms, f"s{uuid.uuid4().hex[:12]}"))
        history = _prepare(run, schedule)
        a = _start_a(run, schedule)
        _wait_until_stopped(a, schedule.point)
        _let_lock_lapse(run, schedule.variant)
        b, result.b_said = run.write("B", writer_rows("B", schedule.b_keys))
        result.b_exit = b.exit_code
        result.a_exit, a_out, a_err = _finish(a)
        result.a_said = last_line(a_err)
        exits = check_exit_class("A", result.a_exit, a_err) + check_exit_class("B", b.exit_code, result.b_said)
        history.append(b)
        if schedule.actor == "writer":
            history.append(as_write("A", writer_rows("A"), result.a_exit, a_out))
        result.recover_exit, recover_said = run.recover()
        violations = exits
        if result.recover_exit != 0:
            violations.append(Violation("3-recovery-failed", recover_said))
        table = Table.open(run.base)
        hudi_rs = use_hudi and schedule.table_type == COPY_ON_WRITE  # hudi-rs merges no precombine-less MOR table
        violations += check_table(table, "id", None, hudi_rs) + check_history(table, history)
        result.violations = [v.to_dict() for v in violations]
    except Exception as err:  # a schedule that cannot be built is reported, and the others still run
        result.error = harness_error(err)
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
    return side_by_side(root, named, lambda s, folder: run_schedule(s, endpoints, folder, use_hudi), jobs, on_result)
