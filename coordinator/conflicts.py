"""Optimistic concurrency (DESIGN §2 step 3.3): does T touch a file group someone else changed?

Checked under the lock at commit. T conflicts with every write instant that
completed after T began and touched the same (partition, fileId), and with
every pending clean plan that deletes the version of a file group T built on
(the base file T merged into; a clean never deletes a group's latest version
otherwise, so anything wider would abort writers for nothing).
"""

from __future__ import annotations

from timeline import avro_metadata
from timeline.active_timeline import ActiveTimeline
from timeline.commit_metadata import CommitMetadata
from timeline.errors import ConflictError
from timeline.file_names import parse_base_file
from timeline.instant import CLEAN, REPLACE_COMMIT, WRITE_ACTIONS, Instant, State


def completed_since(timeline: ActiveTimeline, seen: frozenset[str], own: str) -> list[Instant]:
    """Write instants completed after a transaction whose begin saw `seen` as completed."""
    return [i for i in timeline.completed() if i.action in WRITE_ACTIONS and i.time not in seen and i.time != own]


def _clean_versions(timeline: ActiveTimeline, clean: Instant) -> set[tuple[str, str, str]]:
    """(partition, fileId, instant) of every file version a clean plan deletes."""
    plan = timeline.avro(clean.with_state(State.REQUESTED))
    versions = set()
    for partition, paths in avro_metadata.planned_deletions(plan).items():
        for path in paths:
            base = parse_base_file(partition, path.rpartition("/")[2], 0)
            if base is not None:
                versions.add((partition, base.file_id, base.instant))
    return versions


def check(timeline: ActiveTimeline, own: str, metadata: CommitMetadata, seen: frozenset[str]) -> None:
    """Raise ConflictError naming the instant and file group T collides with."""
    mine = metadata.touched_file_groups()
    if not mine:
        return
    for other in completed_since(timeline, seen, own):
        overlap = mine & timeline.commit_metadata(other).touched_file_groups()
        if overlap:
            partition, file_id = sorted(overlap)[0]
            kind = "replaced" if other.action == REPLACE_COMMIT else "wrote"
            raise ConflictError(
                f"instant {own} conflicts with {other.time}, which {kind} file group {file_id} "
                f"in partition {partition!r} after {own} began"
            )
    built_on = {(s.partition_path, s.file_id, s.prev_commit) for s in metadata.write_stats() if s.prev_commit != "null"}
    for clean in timeline.pending():
        if clean.action != CLEAN:
            continue
        overlap = built_on & _clean_versions(timeline, clean)
        if overlap:
            partition, file_id, _ = sorted(overlap)[0]
            raise ConflictError(
                f"instant {own} conflicts with pending clean {clean.time} of file group {file_id} "
                f"in partition {partition!r}"
            )
