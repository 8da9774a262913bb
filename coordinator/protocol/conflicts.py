"""Optimistic concurrency (DESIGN §2 step 3.3): does T touch a file group someone else changed?

Checked under the lock at commit, and once more on a fresh read right after T
claimed its MDT log version (the storage-side linearization point: a writer
that claimed an earlier version had written its footprint before, so this read
sees it). T conflicts with every write instant that completed after T began
and touched the same (partition, fileId); with every *prepared* instant (its
MDT deltacommit exists, its data instant is not completed and not decided as a
rollback) that touches one of T's file groups; with an instant that completed
after T began but was archived since (its evidence is gone: abort rather than
complete blind); with every pending compaction whose plan folds a slice T wrote
to (a merge-on-read write on a view from before the plan: its log would land in
a superseded slice); and with every pending clean plan that deletes the version of
a file group T built on (a clean never deletes a group's latest version
otherwise, so anything wider would abort writers for nothing).
"""

from __future__ import annotations

import json

from timeline.errors import ConflictError
from timeline.format import avro_metadata, outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.file_names import parse_base_file
from timeline.format.instant import CLEAN, COMPACTION, REPLACE_COMMIT, WRITE_ACTIONS, Instant, State
from timeline.mdt.table import MetadataTable

WATCHED_KEY = "tandem.begin.pending"  # extraMetadata: write instants pending at T's begin


def encode_watched(watched: frozenset[str]) -> str:
    return ",".join(sorted(watched))


def watched_of(metadata: CommitMetadata) -> list[str] | None:
    """What a write recorded as watched at its begin; None if it did not record it."""
    if WATCHED_KEY not in metadata.extra_metadata:
        return None
    return [t for t in str(metadata.extra_metadata[WATCHED_KEY]).split(",") if t]


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


def _prepared(
    timeline: ActiveTimeline, own: str, mdt: MetadataTable, mdt_timeline: ActiveTimeline
) -> list[tuple[str, set[tuple[str, str]] | None]]:
    """Pending write instants with an MDT deltacommit and no rollback decision, with their footprints."""
    found = []
    for other in timeline.pending():
        if other.action not in WRITE_ACTIONS or other.time == own or mdt_timeline.find(other.time) is None:
            continue
        decided = outcome.read(timeline.storage, other.time)
        if decided is not None and decided.is_rollback:
            continue
        found.append((other.time, mdt.footprint(other.time, mdt_timeline)))
    return found


def _field_names(schema: str | None) -> set[str]:
    try:
        return {f["name"] for f in json.loads(schema)["fields"]} if schema else set()
    except (ValueError, KeyError, TypeError):
        return set()


def _check_schema(since: list[Instant], timeline: ActiveTimeline, own: str, metadata: CommitMetadata) -> None:
    """A commit since T began added columns T's schema lacks: T would record a schema that drops them."""
    mine = _field_names(metadata.schema)
    if not mine:
        return
    for other in since:
        added = _field_names(timeline.commit_metadata(other).schema) - mine
        if added:
            raise ConflictError(
                f"instant {own} conflicts with {other.time}, which changed the table schema "
                f"(added {', '.join(sorted(added))}) after {own} began"
            )


def _touched_against(metadata: CommitMetadata, other: Instant) -> set[tuple[str, str]]:
    """T's file groups that can collide with `other`: against a compaction C, not the groups T extended with
    logs of the slice C starts (written after C was planned, merged over C's base file once it completes)."""
    mine = metadata.touched_file_groups()
    if other.action != COMPACTION:
        return mine
    extended = {
        (s.partition_path, s.file_id) for s in metadata.write_stats() if s.is_log and s.prev_commit == other.time
    }
    return mine - extended


def _planned(timeline: ActiveTimeline, compaction: Instant) -> list[avro_metadata.CompactionOperation]:
    return avro_metadata.compaction_operations(timeline.avro(compaction.with_state(State.REQUESTED)))


def check(
    timeline: ActiveTimeline,
    own: str,
    metadata: CommitMetadata,
    seen: frozenset[str],
    mdt: MetadataTable | None = None,
    watched: frozenset[str] = frozenset(),
) -> None:
    """Raise ConflictError naming the instant and file group T collides with.

    `watched`: write instants that were pending when T began (they may complete after it).
    """
    since = completed_since(timeline, seen, own)
    _check_schema(since, timeline, own, metadata)
    mine = metadata.touched_file_groups()
    if not mine:
        return
    for other in since:
        overlap = _touched_against(metadata, other) & timeline.commit_metadata(other).touched_file_groups()
        if overlap:
            partition, file_id = sorted(overlap)[0]
            kind = "replaced" if other.action == REPLACE_COMMIT else "wrote"
            raise ConflictError(
                f"instant {own} conflicts with {other.time}, which {kind} file group {file_id} "
                f"in partition {partition!r} after {own} began"
            )
    mdt_timeline = mdt.timeline_if_exists() if mdt is not None else None
    if mdt is not None and mdt_timeline is not None:
        for other, footprint in _prepared(timeline, own, mdt, mdt_timeline):
            found = timeline.find(other)
            if found is not None and found.action == COMPACTION:  # its plan is its footprint, whatever the MDT holds
                footprint = {(op.partition, op.file_id) for op in _planned(timeline, found)}
            if footprint is None or footprint & (_touched_against(metadata, found) if found else mine):
                raise ConflictError(
                    f"instant {own} conflicts with {other}, which is being committed on the same file groups"
                )
    for other in sorted(watched):
        if timeline.find(other) is None and timeline.is_completed_or_archived(other):
            decided = outcome.read(timeline.storage, other)
            if decided is None or decided.is_commit:
                raise ConflictError(
                    f"instant {own} cannot be checked against {other}: it completed after {own} began "
                    "and has been archived since; retry the write"
                )
    for compaction in timeline.pending():
        if compaction.action != COMPACTION:
            continue
        planned = {(op.partition, op.file_id) for op in _planned(timeline, compaction)}
        overlap = planned & _touched_against(metadata, compaction)
        if overlap:
            partition, file_id = sorted(overlap)[0]
            raise ConflictError(
                f"instant {own} conflicts with pending compaction {compaction.time} of file group {file_id} in "
                f"partition {partition!r}: it wrote to the slice the compaction folds"
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
