"""The named steps of metadata-table writes, in either file format: the crash points the chaos suite stops at,
and the rules both formats' writers share (which instants may be undone, what a deltacommit's inflight holds)."""

from __future__ import annotations

import json

from timeline.crash_points import crash_point, register
from timeline.errors import FencedError, TandemError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import DELTA_COMMIT, Instant, State

DELTA_REQUESTED = register("mdt.deltacommit.requested", "MDT T.deltacommit.requested written")
DELTA_INFLIGHT = register("mdt.deltacommit.inflight", "MDT T.deltacommit.inflight written")
DELTA_LOG = register("mdt.deltacommit.log", "MDT log file of T written")
DELTA_COMPLETE = register("mdt.deltacommit.complete", "MDT T.deltacommit completed")
ROLLBACK_LOGS = register("mdt.rollback.logs", "rollback-command block naming the rolled-back instant appended")
ROLLBACK_INSTANT = register("mdt.rollback.instant", "MDT instant files of the rolled-back instant deleted")

SEALED = register("mdt.compaction.sealed", "old slice sealed, plan not yet written")
PLANNED = register("mdt.compaction.planned", "C.compaction.requested written")
STARTED = register("mdt.compaction.inflight", "C.compaction.inflight written")
BASE_WRITTEN = register("mdt.compaction.base", "base file of C written")
COMPLETED = register("mdt.compaction.complete", "C completed on the MDT timeline")
CLEAN_PLANNED = register("mdt.clean.planned", "MDT clean plan written")
CLEAN_DELETED = register("mdt.clean.deleted", "old MDT slices deleted")


def undoable(data_timeline: ActiveTimeline, time: str) -> bool:
    """Whether the MDT may roll back `time`: never a completed (or archived) data instant's records."""
    return not data_timeline.is_completed_or_archived(time)


def encode_footprint(touched: set[tuple[str, str]]) -> bytes:
    """A deltacommit's inflight content: the data file groups its instant touches, for writers that come later."""
    return json.dumps({"touched": sorted([p, f] for p, f in touched)}).encode()


class CompactionDeferred(TandemError):
    """A planned log holds a block of an instant that is neither committed nor rolled back yet."""


def schedule_blockers(mdt_timeline: ActiveTimeline, data_timeline: ActiveTimeline) -> list[str]:
    """Instants that forbid scheduling a compaction: pending data instants with an MDT deltacommit, pending
    MDT writes (a plan must not leave out, or take in, a write that is still deciding)."""
    blocked = [i.time for i in data_timeline.pending() if mdt_timeline.find(i.time) is not None]
    blocked += [i.time for i in mdt_timeline.pending() if i.action == DELTA_COMMIT]
    return sorted(set(blocked))


def begin_deltacommit(timeline: ActiveTimeline, time: str, footprint: set[tuple[str, str]] | None) -> Instant:
    """`time.deltacommit` requested (unless a retry finds it) and inflight with the data instant's footprint;
    FencedError when another process completed it already."""
    existing = timeline.find(time)
    if existing is not None and existing.is_completed:
        raise FencedError(f"metadata deltacommit {time} is already completed: another process completed it")
    instant = Instant(time, DELTA_COMMIT, State.REQUESTED)
    if existing is None:
        timeline.create_requested(instant)
        crash_point(DELTA_REQUESTED)
    timeline.transition_to_inflight(instant, encode_footprint(footprint or set()))
    crash_point(DELTA_INFLIGHT)
    return instant
