"""The invariants of DESIGN §8, checked on a table after recovery.

Each check returns violations rather than raising, so a chaos run can report
every broken invariant of a crash state with the files involved.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pyarrow as pa

from coordinator.mdt import index_build
from coordinator.mdt.bootstrap import validate
from coordinator.protocol.clean import files_being_cleaned
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMPACTION, REPLACE_COMMIT, ROLLBACK, WRITE_ACTIONS
from timeline.format.savepoint_metadata import savepointed_names
from timeline.format.table_config import read_config
from timeline.mdt.hudi_layout import FILES
from timeline.query.reader import read_view
from timeline.table import Table


@dataclass
class Violation:
    invariant: str
    detail: str
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _rows(table: pa.Table, key: str) -> dict[str, dict]:
    data = [c for c in table.column_names if not c.startswith("_hoodie_")]
    return {str(r[key]): {c: r[c] for c in data} for r in table.select(data).to_pylist()}


def hudi_rows(base: str) -> pa.Table:
    """The table as the independent `hudi` package reads it."""
    import hudi

    batches = hudi.HudiTable(base).read()
    return pa.Table.from_batches(batches) if batches else pa.table({})


def initializing(table: Table) -> bool:
    """Whether the table records its metadata table (in Hudi's format) as being initialized: a crash state of
    an initialization, which readers treat as no metadata table and recovery (or the next write) finishes."""
    return FILES in read_config(table.storage).java_metadata_partitions_inflight


def without_metadata(table: Table) -> bool:
    """Whether readers list storage by design: the table neither has nor records a metadata table, or
    records one as being initialized."""
    table = Table.open(table.uri)  # the properties as they stand, not as the caller opened them
    return (not table.has_metadata_table() and not table.metadata().exists()) or initializing(table)


def check_readers(table: Table, key: str, expected: dict[str, dict] | None, use_hudi: bool) -> list[Violation]:
    """Invariant 1: every reader sees the same rows, and (if known) exactly the committed ones.

    A reader that fails (say, on a torn file it should never have opened) is a violation too.
    """
    out = []
    try:
        from_storage = _rows(read_view(table, table.storage_view()), key)
        from_mdt = from_storage if without_metadata(table) else _rows(read_view(table, table.metadata_view()), key)
    except Exception as err:
        return [Violation("1-readers-agree", f"a reader failed: {type(err).__name__}: {err}")]
    if from_mdt != from_storage:
        diff = sorted(k for k in set(from_mdt) | set(from_storage) if from_mdt.get(k) != from_storage.get(k))
        out.append(Violation("1-readers-agree", f"MDT-backed and storage-backed reads differ on keys {diff[:10]}"))
    if use_hudi:
        try:
            hudi = hudi_rows(table.uri)
        except Exception as err:
            return out + [Violation("1-readers-agree", f"the hudi package failed: {type(err).__name__}: {err}")]
        from_hudi = _rows(hudi, key) if hudi.num_rows else {}
        if from_hudi != from_mdt and not _hudi_rs_blind(table):
            diff = sorted(k for k in set(from_hudi) | set(from_mdt) if from_hudi.get(k) != from_mdt.get(k))
            out.append(Violation("1-readers-agree", f"the hudi package reads other rows; differing keys {diff[:10]}"))
    if expected is not None and from_mdt != expected:
        missing = sorted(set(expected) - set(from_mdt))
        extra = sorted(set(from_mdt) - set(expected))
        changed = sorted(k for k in set(expected) & set(from_mdt) if expected[k] != from_mdt[k])
        out.append(
            Violation(
                "1-committed-rows",
                f"missing {missing[:10]}, uncommitted visible {extra[:10]}, wrong values {changed[:10]}",
            )
        )
    return out


def _hudi_rs_blind(table: Table) -> bool:
    """hudi-rs 0.5's known limit on merge-on-read tables: it leaves out the logs of the slice a pending
    compaction starts (a stale answer; pinned by name in tests/coordinator/test_merge_on_read.py). Its rows are
    compared unless such logs exist (it is read in any case: a failure is a violation)."""
    if not table.config.merge_on_read:
        return False
    pending = {i.time for i in table.timeline().instants if i.action == COMPACTION and not i.is_completed}
    return bool(pending) and any(log.base_instant in pending for log in table.storage_view().logs)


def check_listing(table: Table, timeline: ActiveTimeline, mid_clean: bool = False) -> list[Violation]:
    """Invariant 2: MDT listing == storage listing filtered by the data timeline.

    `mid_clean` (a crashed process, before recovery): a pending clean deletes its
    files before it mirrors the deletions into the MDT, so the MDT may still list
    exactly those files; any other difference is still a violation.
    """
    if initializing(table):  # readers list storage until recovery builds it again; after recovery, a violation
        return [] if mid_clean else [Violation("2-mdt-equals-storage", "the metadata table is still being built")]
    if without_metadata(table):
        return []
    report = validate(table.metadata(), timeline)
    if report.errors == 0:
        return []
    being_cleaned = files_being_cleaned(timeline) if mid_clean else set()
    extra = [f"{p}/{f}".lstrip("/") for p, f, *_ in report.extra_in_metadata]
    files = [f"{p}/{f}".lstrip("/") for p, f, *_ in report.missing_in_metadata + report.size_mismatch]
    files += [path for path in extra if path not in being_cleaned]
    if not files:
        return []
    return [Violation("2-mdt-equals-storage", f"{len(files)} difference(s)", sorted(files)[:20])]


def check_indexes(table: Table, timeline: ActiveTimeline, crashed: bool = False) -> list[Violation]:
    """Invariant 7: every MDT index equals the one recomputed from the live files of completed instants.

    `crashed` (before recovery): a build that died may have left live files
    without records, which recovery indexes, and a clean that died may have deleted
    files whose records its MDT deltacommit had not tombstoned yet; a wrong record
    (or a stale one when no clean is pending) is still a violation.
    """
    out = []
    being_deleted = files_being_cleaned(timeline) if crashed else set()
    for report in index_build.validate(table.metadata(), timeline, being_deleted):
        if crashed:
            report.missing = []
        if being_deleted:  # a clean deletes files before it mirrors that into the MDT: their records wait
            report.stale = []
        if report.errors:
            files = report.missing + report.wrong + report.stale
            detail = f"{len(report.missing)} missing, {len(report.wrong)} wrong, {len(report.stale)} stale"
            out.append(Violation(f"7-{report.partition}-exact", detail, sorted(files)[:20]))
    return out


def check_nothing_pending(table: Table, timeline: ActiveTimeline) -> list[Violation]:
    """Invariant 3: no orphan in either table, no pending MDT compaction. A data table's pending compaction is
    no orphan: the next compaction run finishes it (readers never read its files meanwhile)."""
    out = []
    pending = [i for i in timeline.pending() if i.action != COMPACTION]
    if pending:
        out.append(Violation("3-no-orphans", f"pending data instants {[i.file_name for i in pending]}"))
    mdt = table.metadata()
    if mdt.exists():  # a pending data compaction's MDT deltacommit is finished with it
        compacting = {i.time for i in timeline.pending() if i.action == COMPACTION}
        pending = [i for i in mdt.timeline().pending() if i.time not in compacting]
        if pending:
            out.append(Violation("3-no-orphans", f"pending MDT instants {[i.file_name for i in pending]}"))
    return out


def check_serializable(timeline: ActiveTimeline) -> list[Violation]:
    """Invariant 4: per file group, each completed write built on the previous completed one.

    On a merge-on-read table a log extends a slice: it must name the group's latest completed base file (or
    the compaction that starts the next slice), and a compaction folds the slice of the latest base file.
    """
    out = []
    last: dict[tuple[str, str], str] = {}
    last_base: dict[tuple[str, str], str] = {}
    replaced: dict[tuple[str, str], str] = {}
    compactions = {i.time for i in timeline.instants if i.action == COMPACTION}
    for instant in timeline.completed():
        if instant.action not in WRITE_ACTIONS:
            continue
        meta = timeline.commit_metadata(instant)
        for stat in meta.write_stats():
            group = (stat.partition_path, stat.file_id)
            if group in replaced:
                out.append(
                    Violation("4-serializable", f"{instant.time} wrote {group} after {replaced[group]} replaced it")
                )
            previous = last.get(group)
            built_on = None if stat.prev_commit in ("null", "", None) else stat.prev_commit
            base = last_base.get(group)
            if stat.is_log:  # (a base written by an archived instant is not known here: nothing to compare)
                starts_next = built_on in compactions and (base is None or built_on > base)
                if base is not None and built_on != base and not starts_next:
                    out.append(
                        Violation(
                            "4-serializable",
                            f"{instant.time} logged to slice {built_on} of {group}, whose latest base is {base}",
                            [stat.path],
                        )
                    )
                last[group] = instant.time
                continue
            expected = base if instant.action == COMPACTION else previous
            if expected is not None and built_on != expected:
                out.append(
                    Violation(
                        "4-serializable",
                        f"{instant.time} rewrote file group {group} from {built_on}, not from the "
                        f"completed {expected}: neither saw the other",
                        [stat.path],
                    )
                )
            last[group] = last_base[group] = instant.time
        if instant.action == REPLACE_COMMIT:
            for partition, ids in (meta.partition_to_replace_file_ids or {}).items():
                replaced.update(dict.fromkeys(((partition, f) for f in ids), instant.time))
    return out


def check_never_undone(timeline: ActiveTimeline) -> list[Violation]:
    """Invariant 5: no completed rollback names an instant that is (still) completed."""
    done = timeline.completed_times()
    out = []
    for rollback in timeline.completed():
        if rollback.action != ROLLBACK:
            continue
        for target in timeline.avro(rollback).get("commitsRollback") or []:
            if target in done:
                out.append(
                    Violation("5-completed-never-rolled-back", f"{rollback.time} rolled back completed {target}")
                )
    return out


def check_savepoints_kept(table: Table, timeline: ActiveTimeline) -> list[Violation]:
    """Every file a completed savepoint names is still there (clean never takes it)."""
    names = savepointed_names(timeline)
    if not names:
        return []
    present = {f.name for f in table.storage_view(timeline=timeline).all_base_files_including_replaced()}
    present |= {log.name for log in table.storage_view(timeline=timeline).logs}
    gone = sorted(names - present)
    return [Violation("savepoint-files-kept", f"{len(gone)} savepointed file(s) gone", gone)] if gone else []


@dataclass(frozen=True)
class Write:
    """One write as its client saw it: the exit code, the instant it printed, the rows it sent."""

    writer: str
    exit_code: int
    instant: str | None
    rows: dict[str, dict]

    @property
    def acknowledged(self) -> bool:
        return self.exit_code == 0 and self.instant is not None


def acknowledged_rows(writes: list[Write]) -> dict[str, dict]:
    """Upserts of the acknowledged writes applied in instant order: per key, the greatest instant wins."""
    rows: dict[str, dict] = {}
    for write in sorted((w for w in writes if w.acknowledged), key=lambda w: w.instant):
        rows.update(write.rows)
    return rows


def _writer_of(key: str, row: dict | None, writes: list[Write]) -> Write | None:
    return next((w for w in writes if row is not None and w.rows.get(key) == row), None)


def _row_difference(key: str, actual: dict | None, expected: dict | None, writes: list[Write]) -> tuple[str, str]:
    """(invariant, what happened) for one key whose visible row is not the acknowledged history's."""
    wanted = _writer_of(key, expected, writes)
    should = f"{wanted.writer}'s ({wanted.instant})" if wanted else "none"
    if actual is None:
        return "lost-update", f"acknowledged rows missing, expected {should}"
    seen = _writer_of(key, actual, writes)
    if seen is None:
        return "lost-update", f"a row no writer sent is visible instead of {should}"
    if not seen.acknowledged:
        return "unacknowledged-visible", f"{seen.writer}'s rows are visible, but it exited {seen.exit_code}"
    return "lost-update", f"{seen.writer}'s rows ({seen.instant}) are visible instead of {should}, the greatest instant"


def check_acknowledged(timeline: ActiveTimeline, writes: list[Write]) -> list[Violation]:
    """A client that saw exit 0 owns its instant: it must be completed (or archived)."""
    return [
        Violation("acknowledged-commit-lost", f"{w.writer} exited 0 with {w.instant}, which is not completed")
        for w in writes
        if w.acknowledged and not timeline.is_completed_or_archived(w.instant)
    ]


def check_rows(actual: dict[str, dict], writes: list[Write], reader: str = "") -> list[Violation]:
    """The rows a reader returned are the acknowledged writes' in instant order, one violation per kind of difference.

    An acknowledged write's rows stay visible unless an acknowledged write with a
    greater instant replaced them; rows of a write that did not exit 0 never are.
    """
    expected = acknowledged_rows(writes)
    differences: dict[tuple[str, str], list[str]] = {}
    for k in sorted(set(expected) | set(actual)):
        if actual.get(k) != expected.get(k):
            differences.setdefault(_row_difference(k, actual.get(k), expected.get(k), writes), []).append(k)
    prefix = f"{reader}: " if reader else ""
    return [Violation(kind, f"{prefix}{what}: keys {keys[:10]}") for (kind, what), keys in differences.items()]


def check_history(table: Table, writes: list[Write], key: str = "id") -> list[Violation]:
    """Acknowledged writes survive, in instant order, and unacknowledged ones are invisible, to our reader."""
    out = check_acknowledged(table.timeline(), writes)
    try:
        actual = _rows(read_view(table, table.view()), key)
    except Exception as err:
        return out + [Violation("1-readers-agree", f"a reader failed: {type(err).__name__}: {err}")]
    return out + check_rows(actual, writes)


def check_table(
    table: Table, key: str = "id", expected: dict[str, dict] | None = None, use_hudi: bool = True
) -> list[Violation]:
    """Every invariant of DESIGN §8 on `table` (after recovery)."""
    timeline = table.timeline()
    out = check_nothing_pending(table, timeline)
    out += check_never_undone(timeline)
    out += check_savepoints_kept(table, timeline)
    out += check_serializable(timeline)
    if table.metadata().exists():
        out += check_listing(table, timeline)
        out += check_indexes(table, timeline)
        out += check_readers(table, key, expected, use_hudi)
    return out
