"""Deliberately broken variants of the coordinator, to prove the checker can fail.

`tandem chaos run --break NAME` applies one before exploring; a correct checker
must then report violations. Nothing outside the chaos suite ever imports this.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.mdt import steps
from coordinator.protocol import provenance
from coordinator.protocol.transaction import Transaction
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.fs_view import FileSystemView
from timeline.format.instant import State
from timeline.mdt import health
from timeline.mdt import indexes as mdt_indexes
from timeline.mdt.log import DATA, FILES, block_partition
from timeline.mdt.reader import MetadataReader


def data_before_metadata() -> None:
    """Complete T on the data timeline first, then apply it to the MDT (the order DESIGN §2 forbids)."""
    mirror = Transaction.mirror_to_metadata
    complete = ActiveTimeline.complete

    def complete_data_first(self: Transaction, metadata, timeline: ActiveTimeline) -> None:
        self.instant = complete(timeline, self.instant, metadata.to_json_bytes())
        mirror(self, metadata, timeline)

    def complete_once(self: ActiveTimeline, instant, data: bytes):
        if instant.state == State.COMPLETED:
            return instant
        return complete(self, instant, data)

    Transaction.mirror_to_metadata = complete_data_first
    ActiveTimeline.complete = complete_once


class _EverythingCompleted:
    """A timeline that calls every instant completed."""

    def __init__(self, timeline: ActiveTimeline) -> None:
        self._timeline = timeline

    def __getattr__(self, name: str):
        return getattr(self._timeline, name)

    def is_completed_or_archived(self, time: str) -> bool:
        return True


def no_completed_instant_filter() -> None:
    """Readers take every MDT log block and every file, whether its instant completed or not."""
    MetadataReader.is_valid = lambda self, time: True
    MetadataReader._filter_by_data_timeline = lambda self, listing, instants: listing
    view_init = FileSystemView.__init__
    FileSystemView.__init__ = lambda self, files, timeline, as_of=None, logs=(): view_init(
        self, files, _EverythingCompleted(timeline), as_of, logs
    )


def clean_keeps_index_records() -> None:
    """Clean and rollback write no index tombstones: records of deleted files stay in the indexes."""
    mdt_indexes.tombstones = lambda paths, indexes: {}


def index_records_of_orphans() -> None:
    """Index records count whatever their instant: a crashed writer's records become visible."""
    counts = MetadataReader.counts

    def counts_orphans(self: MetadataReader, block, partition: str, rolled_back: set[str]) -> bool:
        if partition == FILES:
            return counts(self, block, partition, rolled_back)
        return block.block_type == DATA and block_partition(block) == partition

    MetadataReader.counts = counts_orphans


def undo_any_marked_file() -> None:
    """Undoing an instant deletes whatever its markers or plan name, committed files included."""
    provenance.undoable = lambda timeline, time, paths: sorted(set(paths))


def rollback_completed_target() -> None:
    """A rollback plan is carried out even when its target completed."""
    provenance.is_committed = lambda timeline, time: False


def clean_any_planned_file() -> None:
    """A clean deletes every file its plan names, the latest versions included."""
    provenance.cleanable = lambda view, timeline, paths, earliest: sorted(set(paths))


def mdt_rollback_of_completed() -> None:
    """The MDT rolls back the records of completed data instants when a plan asks."""
    steps.undoable = lambda data_timeline, time: True


def base_checksums_ignored() -> None:
    """MDT base files are used without checking them against their compaction's checksums."""
    health._checksum_problems = lambda mdt_timeline, base, sizes: []


BROKEN: dict[str, Callable[[], None]] = {
    "data-before-metadata": data_before_metadata,
    "no-completed-instant-filter": no_completed_instant_filter,
    "clean-keeps-index-records": clean_keeps_index_records,
    "index-records-of-orphans": index_records_of_orphans,
    "undo-any-marked-file": undo_any_marked_file,
    "rollback-completed-target": rollback_completed_target,
    "clean-any-planned-file": clean_any_planned_file,
    "mdt-rollback-of-completed": mdt_rollback_of_completed,
    "base-checksums-ignored": base_checksums_ignored,
}
