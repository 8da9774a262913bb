"""MDT-corruption schedules: a damaged metadata table must give the committed rows or a loud failure.

Each damages the newest (or an older) MDT log, or the MDT's `hoodie.properties`,
of a copy of one template table, then requires `tandem read` to return exactly
the committed rows (the `hudi` package, which never reads our MDT, is the
oracle) or fail, and `tandem write` to commit correctly or fail and change nothing. The template keeps
Tandem's previous MDT format, whose log files these schedules damage.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from chaos.checker import (
    Violation,
    Write,
    check_acknowledged,
    check_never_undone,
    check_nothing_pending,
    check_rows,
    check_serializable,
    hudi_rows,
)
from chaos.schedule_harness import (
    KEYS,
    LEASE_MS,
    TABLE_NAME,
    WAIT_MS,
    Run,
    ScheduleError,
    harness_error,
    last_line,
    side_by_side,
    writer_rows,
)
from timeline.mdt import layout
from timeline.query.reader import read_view
from timeline.table import Table

CORRUPTIONS = (
    "bit-flip-newest-log",
    "torn-newest-log",
    "delete-newest-log",
    "delete-older-log",
    "delete-mdt-properties",
)


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
    return done.returncode, last_line(done.stderr)


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
    Table.create(run.base, TABLE_NAME, ["id"], ["part"], hudi_format=False)
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
        update, result.write_said = run.write("W", writer_rows("W", KEYS[:2]))
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
        result.error = harness_error(err)
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

    return side_by_side(root, {c: c for c in corruptions}, one, jobs, on_result)
