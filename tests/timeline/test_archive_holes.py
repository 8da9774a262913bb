"""An old clean left on the active timeline after newer commits were archived.

Java's archival takes cleans and rollbacks by their own counts, so a Java writer leaves such holes (seen in
tests/interop/test_java_services.py: a Java rollback stayed active while Tandem's commits after it were archived, and
Tandem then read one row of six). Whether a file's instant is archived is judged, as Hudi's
`isBeforeTimelineStarts` does, against the earliest *write* on the active timeline. The oracle is a model of
the acknowledged upserts; every read path must equal it.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.protocol.archival import archive_data, archive_metadata
from coordinator.protocol.recovery import recover
from coordinator.protocol.rollback import rollback
from coordinator.protocol.transaction import Transaction
from coordinator.services.steps import clean
from coordinator.write.writer import LocalWriter
from timeline.errors import DamagedInstantWarning, FencedError
from timeline.format import outcome
from timeline.format.instant import CLEAN, COMMIT, Instant, State
from timeline.mdt.health import MetadataFallbackWarning
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table

RETAIN_LITTLE = CoordinatorConfig(  # archival by hand only, down to two commits, the MDT compacted every commit
    lock_uri="memory",
    commits_retained=1,
    archive_min_commits=2,
    archive_max_commits=3,
    max_delta_commits=1,
    auto_archive=False,
)


def _upsert(writer: LocalWriter, model: dict, rng: random.Random, step: int, keys: list[int] | None = None) -> None:
    keys = keys or rng.sample(range(12), rng.randint(1, 5))
    rows = [{"id": k, "part": "p9" if k >= 100 else f"p{k % 2}", "v": step} for k in keys]
    writer.write(pa.Table.from_pylist(rows), "upsert")
    model.update({r["id"]: step for r in rows})


def _rows(table: Table, **kwargs) -> dict:
    with warnings.catch_warnings():  # the MDT may be unhealthy now: its fallback to storage is a read path too
        warnings.simplefilter("ignore", MetadataFallbackWarning)
        return {r["id"]: r["v"] for r in read_plan(plan_scan(table, None, **kwargs)).to_pylist()}


@pytest.mark.parametrize("seed", range(5))
def test_an_old_clean_left_active_hides_no_archived_commit(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"], precombine_field=None)
    config = RETAIN_LITTLE
    writer = LocalWriter(table, coordinator=config)
    model: dict = {}
    for step in range(rng.randint(3, 5)):  # the same keys: the first file versions are cleanable
        _upsert(writer, model, rng, step, keys=[0, 1])
    assert clean(table, config) is not None, "nothing to clean: the history is too short"
    (old_clean,) = [i for i in table.timeline().completed() if i.action == CLEAN]
    kept = {s: (Path(table.uri) / ".hoodie" / old_clean.with_state(s).file_name).read_bytes() for s in State}
    _upsert(writer, model, rng, 9, keys=[100, 101])  # a file group no later commit touches, archived below
    for step in range(10, 10 + rng.randint(4, 7)):
        _upsert(writer, model, rng, step)
        if rng.random() < 0.3:
            clean(table, config)

    archived = archive_data(table, config.archive_min_commits, config.archive_max_commits)
    archive_metadata(table, config.archive_min_commits)
    assert old_clean.time in archived and any(t > old_clean.time for t in archived), archived
    for state, data in kept.items():  # as Java's archival would have left it
        (Path(table.uri) / ".hoodie" / old_clean.with_state(state).file_name).write_bytes(data)
    timeline = Table.open(table.uri).timeline()
    assert timeline.earliest_time() == old_clean.time

    reopened = Table.open(table.uri)
    for source in ("auto", "storage"):
        assert _rows(reopened, source=source) == model, source
        assert _rows(reopened, since="2000-01-01", source=source) == model, source  # incremental, whole history
        since_clean = {k: v for k, v in model.items() if v >= 9}  # what the commits after the clean wrote
        assert _rows(reopened, since=old_clean.time, source=source) == since_clean, source


def _three_commits(tmp_path: Path, seed: int) -> tuple[Table, LocalWriter, dict, random.Random]:
    """A table with three upserts of the same keys (archival by hand only), its writer, the model, the rng."""
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"], precombine_field=None)
    writer = LocalWriter(table, coordinator=RETAIN_LITTLE)
    model: dict = {}
    rng = random.Random(seed)
    for step in range(3):
        _upsert(writer, model, rng, step, keys=[0, 1])
    return table, writer, model, rng


def test_a_rolled_back_instant_stays_undone_while_its_rollback_is_active(tmp_path: Path) -> None:
    """A write rolled back, every write before it archived, its rollback still active (Java keeps rollbacks by
    count): a file a paused writer lands afterwards under the undone instant is not read as archived-completed."""
    table, writer, model, rng = _three_commits(tmp_path, seed=7)
    config = RETAIN_LITTLE
    undone = table.new_instant_time(table.timeline())  # a writer that began, wrote nothing yet, and is gone
    table.timeline().create_requested(Instant(undone, COMMIT, State.REQUESTED))
    table.storage.write_bytes(f".hoodie/{Instant(undone, COMMIT, State.INFLIGHT).file_name}", b"{}")
    rollback = recover(table, config).rolled_back[undone]
    for step in range(10, 14):
        _upsert(writer, model, rng, step, keys=[2, 3])
    rollback_files = {
        p.name: p.read_bytes() for p in (Path(table.uri) / ".hoodie").iterdir() if p.name.split(".")[0] == rollback
    }
    archived = archive_data(table, 2, 3)
    assert rollback_files and rollback in archived and max(archived) > rollback, archived
    for name, data in rollback_files.items():
        (Path(table.uri) / ".hoodie" / name).write_bytes(data)
    timeline = Table.open(table.uri).timeline()
    assert timeline.earliest_write_time() > undone and undone in timeline.undone_times()

    # the paused writer lands its file now, named by its undone instant
    some = next((Path(table.uri) / "p0").glob("*.parquet"))
    zombie = some.with_name(f"{'9' * 8}-0000-0000-0000-000000000000-0_0-0-0_{undone}.parquet")
    zombie.write_bytes(some.read_bytes())
    reopened = Table.open(table.uri)
    assert not reopened.timeline().is_completed_or_archived(undone)
    for source in ("auto", "storage"):
        assert _rows(reopened, source=source) == model, source


def test_a_rolled_back_instant_stays_undone_after_its_rollback_is_archived(tmp_path: Path) -> None:
    """Seen in the DynamoDB nemesis: a writer paused past its rollback, and past that rollback's archival, lands
    a file. The standing rollback decision still says the instant never committed: no reader reads the file,
    and the writer, told at commit that it was rolled back, deletes it (it had refused: "completed or
    archived")."""
    table, writer, model, rng = _three_commits(tmp_path, seed=11)
    config = RETAIN_LITTLE
    paused = Transaction(table, config=config)
    undone = paused.begin().time
    rolled_back_by = rollback(table, Instant(undone, COMMIT, State.INFLIGHT))  # another process, lease lapsed
    for step in range(10, 14):
        _upsert(writer, model, rng, step, keys=[2, 3])
    archived = archive_data(table, 2, 3)
    assert rolled_back_by in archived and max(archived) > rolled_back_by, archived
    timeline = Table.open(table.uri).timeline()
    assert timeline.earliest_write_time() > undone and timeline.find(rolled_back_by) is None

    some = next((Path(table.uri) / "p0").glob("*.parquet"))  # the paused writer wakes and lands its file
    zombie = f"p0/{'9' * 8}-0000-0000-0000-000000000000-0_0-0-0_{undone}.parquet"
    paused.create_marker(zombie)
    (Path(table.uri) / zombie).write_bytes(some.read_bytes())
    reopened = Table.open(table.uri)
    assert not reopened.timeline().is_completed_or_archived(undone)
    for source in ("auto", "storage"):
        assert _rows(reopened, source=source) == model, source

    with pytest.raises(FencedError, match="no longer inflight"):
        paused.commit()
    assert not (Path(table.uri) / zombie).exists()


def test_a_stray_rollback_record_or_junk_beside_the_decisions_never_hides_an_archived_commit(tmp_path: Path) -> None:
    """A recovery that thought a write pending, paused, and claimed its rollback after the write committed and
    was archived (its commit decision forgotten) leaves a rollback record for a commit: the archive bundle
    holding the commit wins. Junk among the records (a non-instant name, a temp file a crash left, a damaged
    record) is passed over; a damaged one is reported."""
    table, writer, model, rng = _three_commits(tmp_path, seed=5)
    first = table.timeline().completed_writes()[0].time
    for step in range(10, 14):
        _upsert(writer, model, rng, step, keys=[2, 3])
    assert first in archive_data(table, 2, 3)
    assert outcome.read(table.storage, first) is None  # archival forgot the commit decision
    assert outcome.claim(table.storage, first, outcome.ROLLBACK).mine  # the stray claim lands
    folder = Path(table.uri) / outcome.OUTCOME_DIR
    (folder / ".DS_Store").write_bytes(b"\x00junk")
    (folder / f"{first}.{'0' * 32}.tmp").write_bytes(b"")
    (folder / "20000101000000000").write_bytes(b"not a decision\n")
    reopened = Table.open(table.uri)
    with pytest.warns(DamagedInstantWarning, match="20000101000000000"):
        assert reopened.timeline().is_completed_or_archived(first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DamagedInstantWarning)  # asserted above
        for source in ("auto", "storage"):
            assert _rows(Table.open(table.uri), source=source) == model, source
