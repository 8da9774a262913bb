"""MDT housekeeping before every deltacommit (DESIGN §2 step 5), under the lock."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.mdt import compaction, deltacommit, index_build
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import DELTA_COMMIT, INDEXING
from timeline.mdt.slice_records import is_mdt_only_instant
from timeline.mdt.table import MetadataTable


@dataclass
class Housekeeping:
    rolled_back: list[str] = field(default_factory=list)
    compacted: list[str] = field(default_factory=list)
    cleaned_files: int = 0
    indexed: str | None = None  # the indexing instant that finished the work of a failed index build
    mdt_timeline: ActiveTimeline | None = None  # the MDT timeline as housekeeping left it, if unchanged since


def failed_writes(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    keep: str | None = None,
    mdt_timeline: ActiveTimeline | None = None,
) -> list[str]:
    """MDT deltacommits whose data instant is neither completed, pending nor archived (its writer failed).

    Older than the data timeline's earliest instant means archived, so completed (DESIGN §3, §6). Newer
    than its latest instant means this view is older than that instant, so nothing can be said of it. The
    MDT's own delta commits (a partition's initialization, `<T>010`) mirror no data instant and are never
    failed writes. The rollback itself is fenced by the instant's outcome record (`MetadataTable.rollback`).
    """
    alive = {i.time for i in data_timeline.instants}
    earliest, latest = data_timeline.earliest_time(), data_timeline.last_time()
    return sorted(
        i.time
        for i in (mdt_timeline or mdt.timeline()).instants
        if i.action == DELTA_COMMIT
        and i.time not in alive
        and i.time != keep
        and earliest <= i.time <= latest
        and not is_mdt_only_instant(i.time)
    )


def roll_back_failed_writes(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    keep: str | None = None,
    mdt_timeline: ActiveTimeline | None = None,
) -> list[str]:
    """Roll back every failed MDT write (see `failed_writes`); returns the instants rolled back."""
    return [
        t for t in failed_writes(mdt, data_timeline, keep, mdt_timeline) if deltacommit.rollback(mdt, t, data_timeline)
    ]


def failed_index_builds(mdt_timeline: ActiveTimeline) -> list[str]:
    """Pending indexing instants: a build runs wholly under the lock, so one seen pending under it died.

    (A builder that only believed it held the lock loses its commit decision to the rollback.)
    """
    return sorted(i.time for i in mdt_timeline.pending() if i.action == INDEXING)


def housekeeping(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    max_delta_commits: int = compaction.DEFAULT_MAX_DELTA_COMMITS,
    inline_compaction: bool = True,
    keep: str | None = None,
    mdt_timeline: ActiveTimeline | None = None,
) -> Housekeeping:
    """Roll back failed MDT writes, finish pending MDT rollbacks and cleans, retry compactions, schedule one if due.

    `mdt_timeline`: the caller's fresh read of it, if it has one."""
    done = Housekeeping()
    mdt_timeline = mdt_timeline or mdt.timeline()
    done.rolled_back = roll_back_failed_writes(mdt, data_timeline, keep, mdt_timeline)
    failed_builds = index_build.finish_failed_builds(mdt, data_timeline, failed_index_builds(mdt_timeline))
    if failed_builds:
        done.rolled_back += failed_builds
        done.indexed = index_build.catch_up(mdt, data_timeline)
    finished = deltacommit.finish_rollbacks(mdt, mdt_timeline, data_timeline) + compaction.resume_cleans(
        mdt, mdt_timeline
    )
    if finished or done.rolled_back:
        mdt_timeline = mdt.timeline()
    done.compacted += compaction.run_pending(mdt, data_timeline, mdt_timeline)
    if done.compacted:
        mdt_timeline = mdt.timeline()
    if compaction.deltacommits_since_last_compaction(mdt_timeline) >= max_delta_commits:
        scheduled = compaction.schedule(mdt, data_timeline)
        if scheduled and inline_compaction:
            try:
                compaction.execute(mdt, data_timeline, scheduled)
            except compaction.CompactionDeferred:
                return done
            done.compacted.append(scheduled)
            done.cleaned_files = len(compaction.clean(mdt, data_timeline))
        return done
    done.mdt_timeline = mdt_timeline
    return done
