"""The file groups of a merge-on-read table that a pending compaction is merging, and its instant: a writer
extends those groups with logs of the slice the compaction will start (named for its instant), never of the
slice being compacted, so nothing written while the compaction runs is lost when it completes."""

from __future__ import annotations

from timeline.format import avro_metadata
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMPACTION, State


def pending_compactions(timeline: ActiveTimeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the instant of the pending compaction whose plan holds that group."""
    found: dict[tuple[str, str], str] = {}
    for instant in timeline.pending():
        if instant.action == COMPACTION:
            plan = timeline.avro(instant.with_state(State.REQUESTED))
            for op in avro_metadata.compaction_operations(plan):
                found[(op.partition, op.file_id)] = instant.time
    return found
