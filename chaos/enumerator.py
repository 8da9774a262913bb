"""Crash-state enumeration (ALICE's idea, FoundationDB's seeded replay), one forked child per state.

For a scenario: build its template table once; run its action once uncrashed
in a child that counts every storage mutation and every crash-point hit; then,
on a fresh copy of the template per state, run the action again in a child
that dies (`os._exit`) at
  * each named crash point it hits (each of the first MAX_HITS hits), and
  * after each storage mutation k, and after a torn version of each write.
The parent (which never ran the action) then lets the dead process's time pass
(its lock lease and heartbeat expire), recovers with `tandem recover` or the
next write (alternating, by state), and checks every invariant of DESIGN §8.
Children are forked, not spawned, so a state costs milliseconds, not an
interpreter start. With an `S3Place` the tables are `s3://` prefixes on that
endpoint under a DynamoDB lock (`chaos/s3.py`); torn states are left out there,
since a PutObject stores the whole object or nothing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from chaos import s3, storage_faults
from chaos.checker import Violation, check_indexes, check_listing, check_readers, check_table
from chaos.s3 import S3Place
from chaos.scenarios import KEY, SCENARIOS, Scenario, config, rows, run_service, use_s3_lock, write
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import recover_table
from timeline import crash_points
from timeline.format.instant import RESTORE, WRITE_ACTIONS
from timeline.query.reader import read_view
from timeline.table import HEARTBEAT_DIR, Table

MAX_HITS = 3  # crash at each of the first MAX_HITS hits of a point
NEXT_ROW = 999  # the row the "next write" recovery inserts


@dataclass(frozen=True)
class CrashState:
    """Where a child dies: `point:NAME:N`, `mutation:K` or `mutation:K:torn`."""

    kind: str
    target: str | int
    nth: int = 1
    torn: bool = False

    @property
    def label(self) -> str:
        if self.kind == "point":
            return f"point:{self.target}:{self.nth}"
        return f"mutation:{self.target}" + (":torn" if self.torn else "")

    @staticmethod
    def parse(label: str) -> CrashState:
        parts = label.split(":")
        if parts[0] == "point" and len(parts) == 3:
            return CrashState("point", parts[1], int(parts[2]))
        if parts[0] == "mutation" and len(parts) in (2, 3):
            return CrashState("mutation", int(parts[1]), torn=parts[2:] == ["torn"])
        raise ValueError(f"bad crash state {label!r} (point:NAME:N, mutation:K or mutation:K:torn)")


@dataclass
class StateResult:
    state: str
    recovery: str
    crashed: bool
    outcome: str  # "after" when the action's instant survived, else "before"
    violations: list[dict] = field(default_factory=list)
    mutation: str = ""  # the last mutation before it died (kind and path)


@dataclass
class ScenarioResult:
    scenario: str
    seed: int
    mutations: int = 0
    point_hits: dict[str, int] = field(default_factory=dict)
    states_explored: int = 0
    states_total: int = 0
    recoveries: int = 0
    seconds: float = 0.0
    violations: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Probe:
    mutations: list[tuple[str, str]]
    hits: dict[str, int]


@dataclass(frozen=True)
class Tables:
    """Where one exploration keeps its tables: folders in its work dir, or prefixes of an S3 bucket."""

    work: Path
    place: S3Place | None = None

    def base(self, name: str) -> str:
        return self.place.base(self.work.name, name) if self.place else str(self.work / name)

    def prepare(self, scenario: Scenario) -> str:
        """The scenario's template table, its dead writers' time passed.

        On S3 it is built in a local folder and uploaded (its file lock left behind): the preparation is
        not under test, and archival's 34 commits through the endpoint would cost most of a minute.
        """
        template = self.base("template")
        built = str(self.work / "template") if self.place else template
        scenario.prepare(built)
        let_time_pass(built)
        if self.place:
            s3.upload_table(Path(built), template)
            shutil.rmtree(built)
            let_time_pass(template)
        return template

    def copy(self, src: str, dst: str) -> None:
        if self.place:
            s3.copy_table(src, dst)
        else:
            shutil.copytree(src, dst)

    def remove(self, base: str) -> None:
        if self.place:
            s3.delete_table(base)
        else:
            shutil.rmtree(base, ignore_errors=True)

    def cleanup(self) -> None:
        """Remove every table of the exploration and its work dir."""
        if self.place:
            s3.delete_table(self.place.base(self.work.name))
        shutil.rmtree(self.work, ignore_errors=True)

    def keep(self, base: str) -> str:
        """A folder holding the table for inspection (S3 tables are downloaded: the endpoint may end with the run)."""
        if not self.place:
            return base
        folder = self.work / base.rsplit("/", 1)[1]
        s3.download_table(base, folder)
        return str(folder)


def _run_child(action: Callable[[], None], before_exit: Callable[[], None] | None = None) -> int:
    """Run `action` in a forked child; its exit status (137 = died at the crash state)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            s3.after_fork()
            action()
            if before_exit is not None:
                before_exit()
        except BaseException:  # the child reports and exits; it must never return into the caller
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def probe(scenario: Scenario, template: str, tables: Tables) -> Probe:
    """Count the action's mutations and crash-point hits in one uncrashed run."""
    base = tables.base("probe")
    tables.copy(template, base)
    out = tables.work / "probe.json"
    log = storage_faults.MutationLog()
    hits: dict[str, int] = {}

    def run() -> None:
        storage_faults.install(storage_faults.FaultPlan(), log)
        crash_points.observe(lambda name: hits.__setitem__(name, hits.get(name, 0) + 1))
        scenario.act(base)

    def report() -> None:
        out.write_text(json.dumps({"mutations": log.entries, "hits": hits}))

    status = _run_child(run, report)
    if status != 0:
        raise RuntimeError(f"scenario {scenario.name}: the uncrashed run failed (exit {status})")
    doc = json.loads(out.read_text())
    return Probe([tuple(m) for m in doc["mutations"]], doc["hits"])


def states_of(found: Probe, torn: bool = True) -> list[CrashState]:
    """Every crash state of a probed action; `torn` adds a torn version of each write."""
    states = [
        CrashState("point", name, n)
        for name, count in sorted(found.hits.items())
        for n in range(1, min(count, MAX_HITS) + 1)
    ]
    for k, (kind, _) in enumerate(found.mutations, start=1):
        states.append(CrashState("mutation", k))
        if torn and kind in storage_faults.WRITES:
            states.append(CrashState("mutation", k, torn=True))
    return states


def crash_in_child(scenario: Scenario, base: str, state: CrashState, died_after: Path) -> bool:
    """Run the action on `base` until it dies at `state`; False if it finished first."""

    def run() -> None:
        crash_points.reset_hits()
        plan = storage_faults.FaultPlan()
        if state.kind == "point":
            os.environ["TANDEM_CRASH_AT"] = f"{state.target}:{state.nth}"
        else:
            plan = storage_faults.FaultPlan(crash_after=int(state.target), torn=state.torn)
        storage_faults.install(plan, storage_faults.MutationLog(journal=died_after))
        scenario.act(base)

    status = _run_child(run)
    if status not in (0, crash_points.CRASH_EXIT_CODE):
        raise RuntimeError(f"{scenario.name} at {state.label}: the child failed with exit {status}")
    return status == crash_points.CRASH_EXIT_CODE


def let_time_pass(base: str) -> None:
    """The dead process's lease and heartbeats expire, as they would once it stays dead long enough."""
    table = Table.open(base)
    table_lock(table, config(base)).force_release()
    expire_heartbeats(table, config(base).heartbeat_expiry_s)


def expire_heartbeats(table: Table, expiry_s: float) -> None:
    """Age every heartbeat file past `expiry_s`: what a clock would do to writers that are gone."""
    if table.storage.is_s3:
        s3.expire_heartbeats(table.storage)
        return
    expired = time.time() - expiry_s - 10
    folder = Path(table.storage.full(HEARTBEAT_DIR))
    for beat in folder.glob("*") if folder.exists() else []:
        os.utime(beat, (expired, expired))


def table_rows(base: str) -> dict[str, dict]:
    table = Table.open(base)
    data = read_view(table, table.metadata_view() if table.metadata().exists() else table.storage_view())
    columns = [c for c in data.column_names if not c.startswith("_hoodie_")]
    return {str(r[KEY]): {c: r[c] for c in columns} for r in data.select(columns).to_pylist()}


def _write_instants(base: str) -> set[str]:
    timeline = Table.open(base).timeline()
    return {i.time for i in timeline.completed() if i.action in WRITE_ACTIONS}


def recover(base: str, mode: str) -> None:
    """`tandem recover`, or the next write (which recovers at begin and commit)."""
    if mode == "recover":
        run_service(base, recover_table)
    else:
        write(base, rows([NEXT_ROW], 0), "insert")


def next_row() -> dict[str, dict]:
    row = rows([NEXT_ROW], 0).to_pylist()[0]
    return {row[KEY]: row}


def explore_state(
    scenario: Scenario,
    template: str,
    tables: Tables,
    state: CrashState,
    index: int,
    expected: tuple[dict, dict],
    written_before: set[str],
    use_hudi: bool,
) -> StateResult:
    """One crash state: crash a copy of the template there, check readers, recover, check everything.

    `expected` is the rows before and after the action; `written_before` the template's completed writes.
    """
    base = tables.base(f"state-{index}")
    tables.copy(template, base)
    died_after = tables.work / f"state-{index}.mutation"
    crashed = crash_in_child(scenario, base, state, died_after)
    mode = "recover" if index % 2 == 0 else "next-write"
    result = StateResult(state.label, mode, crashed, "before")
    if died_after.exists():
        result.mutation = died_after.read_text()
    before, after = expected
    # Readers must never see half a commit, also before anyone recovers.
    completed_now = bool(_write_instants(base) - written_before) or _restore_planned(base)
    crashed_table = Table.open(base)
    early = check_readers(crashed_table, KEY, after if completed_now else before, use_hudi)
    timeline = crashed_table.timeline()
    early += check_listing(crashed_table, timeline, mid_clean=True)
    early += check_indexes(crashed_table, timeline, crashed=True) if crashed_table.metadata().exists() else []
    for violation in early:
        result.violations.append({**violation.to_dict(), "phase": "before recovery"})
    let_time_pass(base)
    try:
        recover(base, mode)
    except Exception as err:  # a recovery that fails is itself a violation
        failed = Violation("recovery-succeeds", f"{type(err).__name__}: {err}")
        result.violations.append({**failed.to_dict(), "phase": "recovery"})
        return result
    survived = bool(_write_instants(base) - written_before - _next_write_instants(base, mode)) or _restore_planned(base)
    result.outcome = "after" if survived or before == after else "before"
    rows_expected = dict(after if survived else before)
    if mode == "next-write":
        rows_expected.update(next_row())
    table = Table.open(base)
    result.violations += [
        {**v.to_dict(), "phase": "after recovery"} for v in check_table(table, KEY, rows_expected, use_hudi)
    ]
    if not result.violations:
        tables.remove(base)
    return result


def _restore_planned(base: str) -> bool:
    """A restore on the timeline (pending or done): once planned it reads as done and is finished, never undone."""
    return any(i.action == RESTORE for i in Table.open(base).timeline().instants)


def _next_write_instants(base: str, mode: str) -> set[str]:
    """The instant of the recovery's own write (the newest completed write), if it made one."""
    if mode != "next-write":
        return set()
    writes = _write_instants(base)
    return {max(writes)} if writes else set()


def explore(
    name: str,
    seed: int = 0,
    budget_s: float | None = None,
    sample: int | None = None,
    only: list[str] | None = None,
    use_hudi: bool = True,
    keep_dir: Path | None = None,
    on_state: Callable[[ScenarioResult, int], None] | None = None,
    place: S3Place | None = None,
) -> ScenarioResult:
    """Explore the crash states of one scenario (all, a seeded sample, or the labels in `only`).

    With `place` the tables live on that S3 endpoint, under its lock.
    """
    scenario = SCENARIOS[name]
    use_hudi = use_hudi and scenario.without_hudi_rs is None
    started = time.monotonic()
    result = ScenarioResult(name, seed)
    if place is not None:
        use_s3_lock(place.lock_uri)
    tables = Tables(Path(tempfile.mkdtemp(prefix=f"tandem-chaos-{name}-", dir=keep_dir)), place)
    template = tables.prepare(scenario)
    found = probe(scenario, template, tables)
    result.mutations = len(found.mutations)
    result.point_hits = found.hits
    before = table_rows(template)
    after = table_rows(tables.base("probe"))
    written_before = _write_instants(template)
    states = [CrashState.parse(label) for label in only] if only else states_of(found, torn=place is None)
    random.Random(seed).shuffle(states)
    if sample is not None:
        states = _sample(states, sample)
    result.states_total = len(states)
    for index, state in enumerate(states):
        if budget_s is not None and time.monotonic() - started > budget_s:
            break
        try:
            outcome = explore_state(scenario, template, tables, state, index, (before, after), written_before, use_hudi)
        except RuntimeError as err:
            result.errors.append(str(err))
            continue
        result.states_explored += 1
        result.recoveries += 1
        kept = tables.keep(tables.base(f"state-{index}")) if outcome.violations else ""
        for violation in outcome.violations:
            result.violations.append(
                {
                    "scenario": name,
                    "state": outcome.state,
                    "died_after": outcome.mutation,
                    "recovery": outcome.recovery,
                    **violation,
                    "replay": f"tandem chaos run --scenario {name} --seed {seed} --state {outcome.state}"
                    + (" --s3" if place else ""),
                    "table": kept,
                }
            )
        if on_state is not None:
            on_state(result, len(states))
    result.seconds = time.monotonic() - started
    if not result.violations and not result.errors:
        tables.cleanup()
    return result


def _sample(states: list[CrashState], size: int) -> list[CrashState]:
    """Every named crash point (first hit) first, then shuffled states up to `size` more."""
    first_hits = [s for s in states if s.kind == "point" and s.nth == 1]
    rest = [s for s in states if s not in first_hits]
    return first_hits + rest[:size]
