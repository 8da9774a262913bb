"""Generated junk in `.hoodie/`, then the table's own services: only Tandem's decisions may delete data.

Each seed builds a small table (0, 1 or 2 partition fields, a history of upserts, deletes and an
overwrite) and lays random junk of the kinds DESIGN §8.8 names, none of it a decision Tandem made:
- marker folders of a fresh instant time, of a completed instant, or of a name that is no instant,
  whose markers name committed files, files of no instant and paths that are no data path;
- markers naming committed files in the folder of a pending instant whose writer is gone;
- rollback plans that target a completed instant, an absent one or a pending one, listing committed files;
- clean plans that name every file of the snapshot beside superseded ones;
- a pending instant of another action at the time of a completed one;
- metadata-table rollback plans that target completed deltacommits.
Then a random sequence of recoveries, upserts, cleans and metadata compactions, each checked after it:
the rows of the model (the acknowledged writes applied in order) are exactly what Tandem's reader and
the `hudi` package read, and the metadata table lists what storage holds. A step may refuse with an
error of the exit-code contract; it may not lose a committed row.
"""

from __future__ import annotations

import json
import random
import shutil
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from chaos.checker import Violation, check_listing, check_readers
from coordinator.config import CoordinatorConfig
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import clean, compact, recover_table
from coordinator.write.writer import LocalWriter
from timeline.errors import TandemError
from timeline.format import avro_metadata, outcome
from timeline.format.fs_view import list_base_files
from timeline.format.instant import CLEAN, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, ROLLBACK, Instant, State
from timeline.table import TEMP_DIR, Table

KEY = "id"
LAYOUTS = {"none": [], "one": ["part"], "two": ["part", "bucket"]}
JUNK_KINDS = (
    "stray-markers",
    "markers-in-pending",
    "rollback-plan",
    "clean-plan",
    "shadow-pending",
    "mdt-rollback-plan",
)
STEPS = ("recover", "upsert", "delete", "clean", "compact")
R = TypeVar("R")


@dataclass
class JunkResult:
    seed: int
    layout: str
    junk: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # steps that ended in an error of the contract
    violations: list[dict] = field(default_factory=list)
    kept_dir: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def settings() -> CoordinatorConfig:
    """LAZY like the default (a crafted pending instant has no heartbeat, so it is an orphan)."""
    return CoordinatorConfig(
        failed_writes_policy="LAZY",
        auto_archive=False,
        max_delta_commits=4,
        clean_policy="KEEP_LATEST_FILE_VERSIONS",
        file_versions_retained=1,
    )


class Model:
    """The acknowledged rows, key -> row, with Hudi's upsert and delete semantics under the simple index."""

    def __init__(self, layout: str, rng: random.Random) -> None:
        self.layout = layout
        self.rng = rng
        self.rows: dict[str, dict] = {}
        self.version = 0

    def batch(self, keys: list[int]) -> pa.Table:
        self.version += 1
        rows = [self.row(k) for k in keys]
        return pa.Table.from_pylist(rows, schema=self.schema())

    def row(self, key: int) -> dict:
        row = {KEY: f"k{key:03d}", "v": self.version}
        if self.layout != "none":
            row["part"] = f"p{key % 3}"
        if self.layout == "two":
            row["bucket"] = key % 2
        return row

    def schema(self) -> pa.Schema:
        fields = [pa.field(KEY, pa.string()), pa.field("v", pa.int64())]
        if self.layout != "none":
            fields.append(pa.field("part", pa.string()))
        if self.layout == "two":
            fields.append(pa.field("bucket", pa.int64()))
        return pa.schema(fields)

    def expected(self) -> dict[str, dict]:
        """Key -> row as the checker's readers give them."""
        return {k: {c: r.get(c) for c in self.schema().names} for k, r in self.rows.items()}

    def apply(self, data: pa.Table, operation: str) -> None:
        for row in data.to_pylist():
            if operation == "delete":
                self.rows.pop(row[KEY], None)
            else:
                self.rows[row[KEY]] = row


def write(table: Table, model: Model, keys: list[int], operation: str) -> None:
    data = model.batch(keys)
    LocalWriter(table, coordinator=settings()).write(data, operation)
    model.apply(data, operation)


def build(base: str, layout: str, rng: random.Random) -> tuple[Table, Model]:
    """A table with history: several versions of some file groups, a delete, MDT deltacommits."""
    table = Table.create(base, "junk", [KEY], LAYOUTS[layout])
    model = Model(layout, rng)
    write(table, model, list(range(12)), "insert")
    for _ in range(rng.randint(2, 4)):
        write(table, model, rng.sample(range(16), rng.randint(1, 6)), "upsert")
    write(table, model, rng.sample(sorted(range(12)), 2), "delete")
    return table, model


def _committed_files(table: Table) -> list[str]:
    return sorted(f.path for f in list_base_files(table.storage))


def _fresh_time(table: Table) -> str:
    return table.new_instant_time(table.timeline())


def _marker(table: Table, time: str, path: str) -> None:
    table.storage.write_bytes(f"{TEMP_DIR}/{time}/{path}.marker.CREATE", b"")


def _paths_to_name(table: Table, rng: random.Random) -> list[str]:
    """Committed files (the ones that matter), a file of no instant, and paths that are no data path."""
    files = _committed_files(table)
    picked = rng.sample(files, min(len(files), rng.randint(1, 4)))
    return picked + ["ghost-0_0-0-0_20200101000000000.parquet", "not-a-hudi-file.parquet"]


def _stray_markers(table: Table, rng: random.Random) -> str:
    completed = [i.time for i in table.timeline().completed()]
    time = rng.choice([_fresh_time(table), rng.choice(completed), "junk-folder"])
    for path in _paths_to_name(table, rng):
        _marker(table, time, path)
    return f"stray-markers@{time}"


def _pending(table: Table, action: str, time: str | None = None) -> str:
    """A requested and inflight instant with no heartbeat: a writer that is gone."""
    time = time or _fresh_time(table)
    timeline = table.timeline()
    timeline.create_requested(Instant(time, action, State.REQUESTED))
    table.storage.write_bytes(f".hoodie/{Instant(time, action, State.INFLIGHT).file_name}", b"{}")
    return time


def _markers_in_pending(table: Table, rng: random.Random) -> str:
    time = _pending(table, COMMIT)
    for path in _paths_to_name(table, rng):
        _marker(table, time, path)
    return f"markers-in-pending@{time}"


def _rollback_plan(table: Table, rng: random.Random) -> str:
    timeline = table.timeline()
    completed = [i for i in timeline.completed() if i.action in (COMMIT, REPLACE_COMMIT)]
    choice = rng.choice(["completed", "absent", "pending"])
    if choice == "completed":  # the latest: its files are the live versions of the groups it wrote
        target = completed[-1]
        info = {"commitTime": target.time, "action": target.action}
        table.storage.discard(outcome.outcome_path(target.time))  # as another engine committed it: no decision
    elif choice == "absent":
        info = {"commitTime": _fresh_time(table), "action": COMMIT}
    else:
        info = {"commitTime": _pending(table, COMMIT), "action": COMMIT}
    by_partition: dict[str, list[str]] = {}
    for path in _paths_to_name(table, rng)[:-1]:  # the plan's paths are data paths
        by_partition.setdefault(path.rpartition("/")[0], []).append(path)
    requests = [
        {
            "partitionPath": partition,
            "fileId": None,
            "latestBaseInstant": info["commitTime"],
            "filesToBeDeleted": files,
            "logBlocksToBeDeleted": None,
        }
        for partition, files in sorted(by_partition.items())
    ]
    plan = {"instantToRollback": info, "RollbackRequests": requests, "version": 1}
    time = _fresh_time(table)
    table.timeline().create_requested(
        Instant(time, ROLLBACK, State.REQUESTED), avro_metadata.encode("HoodieRollbackPlan", plan)
    )
    return f"rollback-plan@{time}->{choice}"


def _clean_plan(table: Table, rng: random.Random) -> str:
    by_partition: dict[str, list[dict]] = {}
    for path in _committed_files(table):
        partition = path.rpartition("/")[0]
        by_partition.setdefault(partition, []).append({"filePath": path, "isBootstrapBaseFile": False})
    plan = {
        "earliestInstantToRetain": None,
        "policy": rng.choice(["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"]),
        "filesToBeDeletedPerPartition": None,
        "version": 2,
        "filePathsToBeDeletedPerPartition": by_partition,
        "partitionsToBeDeleted": None,
    }
    time = _fresh_time(table)
    table.timeline().create_requested(
        Instant(time, CLEAN, State.REQUESTED), avro_metadata.encode("HoodieCleanerPlan", plan)
    )
    return f"clean-plan@{time}"


def _shadow_pending(table: Table, rng: random.Random) -> str:
    target = rng.choice([i for i in table.timeline().completed() if i.action == COMMIT])
    _pending(table, REPLACE_COMMIT, target.time)
    return f"shadow-pending@{target.time}"


def _mdt_rollback_plan(table: Table, rng: random.Random) -> str:
    mdt = table.metadata()
    deltas = [i for i in mdt.timeline().completed() if i.action == DELTA_COMMIT]
    target = rng.choice(deltas)
    plan = {
        "instantToRollback": {"commitTime": target.time, "action": DELTA_COMMIT},
        "RollbackRequests": [],
        "version": 1,
    }
    time = _fresh_time(table)
    mdt.timeline().create_requested(
        Instant(time, ROLLBACK, State.REQUESTED), avro_metadata.encode("HoodieRollbackPlan", plan)
    )
    return f"mdt-rollback-plan@{time}->{target.time}"


JUNK = {
    "stray-markers": _stray_markers,
    "markers-in-pending": _markers_in_pending,
    "rollback-plan": _rollback_plan,
    "clean-plan": _clean_plan,
    "shadow-pending": _shadow_pending,
    "mdt-rollback-plan": _mdt_rollback_plan,
}


def _step(table: Table, model: Model, step: str, rng: random.Random) -> None:
    config = settings()
    if step in ("upsert", "delete"):
        write(table, model, rng.sample(range(16), rng.randint(1, 5)), step)
        return
    lock = table_lock(table, config)
    try:
        if step == "recover":
            recover_table(table, config, lock)
        elif step == "clean":
            clean(table, config, lock)
        else:
            compact(table, config, lock, force=True)
    finally:
        lock.close()


def check(table: Table, model: Model, use_hudi: bool) -> list[Violation]:
    """Every committed row readable by both readers; the MDT lists what storage holds."""
    table = Table.open(table.uri)
    return check_readers(table, KEY, model.expected(), use_hudi) + check_listing(table, table.timeline())


def run_seed(seed: int, work: Path, use_hudi: bool = True, steps: int = 5) -> JunkResult:
    """One generated table, its junk and its steps; violations, never exceptions."""
    rng = random.Random(seed)
    layout = rng.choice(sorted(LAYOUTS))
    result = JunkResult(seed, layout)
    base = work / f"seed-{seed}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # refused deletes are reported; here the checks judge
        table, model = build(str(base), layout, rng)
        for kind in rng.sample(JUNK_KINDS, rng.randint(1, len(JUNK_KINDS))):
            result.junk.append(JUNK[kind](table, rng))
        for step in ["recover", *rng.choices(STEPS, k=steps - 1)]:
            result.steps.append(step)
            try:
                _step(Table.open(str(base)), model, step, rng)
            except TandemError as err:
                result.refused.append(f"{step}: exit {err.exit_code}: {err}")
            except Exception as err:  # outside the exit-code contract: exit 1 with a bare message
                result.violations.append(asdict(Violation("5-exit-codes", f"{step}: {type(err).__name__}: {err}")))
                break
            found = check(table, model, use_hudi)
            if found:
                result.violations += [{**asdict(v), "step": step} for v in found]
                break
    keep_if_violated(result, base)
    return result


def run_seeds(
    run: Callable[[int, Path, bool], R], seeds: list[int], work: Path, use_hudi: bool = True, on_result=None
) -> list[R]:
    """`run` (this module's `run_seed` or another generated scenario's) for each seed, reporting each result."""
    results = []
    for seed in seeds:
        results.append(run(seed, work, use_hudi))
        if on_result is not None:
            on_result(results[-1])
    return results


def summary(results: list) -> str:
    """One JSON line per seed with a violation (for reports and test failures)."""
    return "\n".join(json.dumps(r.to_dict()) for r in results if r.violations)


def keep_if_violated(result: JunkResult, base: Path) -> None:
    """A table with a violation is kept for replay; the others are removed."""
    if result.violations:
        result.kept_dir = str(base)
    else:
        shutil.rmtree(base, ignore_errors=True)
