"""One data instant through begin / write / commit (DESIGN §2).

Every step is a named crash point. Markers are created before the files they
name, so whatever a crash leaves behind can be found and removed.
"""

from __future__ import annotations

from chaos.crash_points import crash_point, register
from coordinator import markers
from coordinator.recovery import roll_back_orphans
from timeline.active_timeline import ActiveTimeline
from timeline.commit_metadata import CommitMetadata
from timeline.errors import TandemError
from timeline.instant import COMMIT, Instant, State
from timeline.mdt import records as mdt_records
from timeline.mdt.maintenance import housekeeping
from timeline.mdt.reader import MetadataReader
from timeline.table import Table

BEGIN_REQUESTED = register("commit.begin.requested", "T.<action>.requested written")
BEGIN_INFLIGHT = register("commit.begin.inflight", "T inflight written; writing may start")
WRITE_MARKER = register("commit.write.marker", "a marker written, its file not yet")
WRITE_FILE = register("commit.write.file", "a data file written")
COMMIT_FINALIZED = register("commit.finalize", "files not in the write stats deleted")
COMMIT_COMPLETED = register("commit.complete", "T completed on the data timeline")
COMMIT_CLEANED = register("commit.cleanup", "markers of T deleted")


class Transaction:
    """Begin, record markers, then commit (or abort) one instant of `table`."""

    def __init__(self, table: Table, action: str = COMMIT, operation: str = "UPSERT") -> None:
        self.table = table
        self.action = action
        self.operation = operation
        self.instant: Instant | None = None

    @property
    def time(self) -> str:
        if self.instant is None:
            raise TandemError("transaction has not begun")
        return self.instant.time

    def begin(self) -> str:
        roll_back_orphans(self.table)  # EAGER: a single writer owns every pending write instant
        timeline = self.table.timeline()
        time = self.table.new_instant_time(timeline)
        instant = Instant(time, self.action, State.REQUESTED)
        timeline.create_requested(instant)
        crash_point(BEGIN_REQUESTED)
        inflight_doc = CommitMetadata(operation_type=self.operation)
        self.instant = timeline.transition_to_inflight(instant, inflight_doc.to_json_bytes())
        crash_point(BEGIN_INFLIGHT)
        return time

    def create_marker(self, path: str, kind: str = "CREATE") -> None:
        """Record that `path` (relative to the base) is about to be written."""
        markers.create_marker(self.table.storage, self.time, path, kind)
        crash_point(WRITE_MARKER)

    def marked_files(self) -> list[str]:
        return markers.marked_files(self.table.storage, self.time)

    def finalize(self, metadata: CommitMetadata) -> None:
        """Delete files under markers that the write stats do not name (retried tasks)."""
        keep = {s.path for s in metadata.write_stats()}
        for path in self.marked_files():
            if path not in keep:
                self.table.storage.delete(path)
        crash_point(COMMIT_FINALIZED)

    def commit(self, metadata: CommitMetadata) -> Instant:
        timeline = self.table.timeline()
        current = timeline.find(self.time)
        if current is None or current.state != State.INFLIGHT:
            raise TandemError(f"instant {self.time} is no longer inflight; it was rolled back")
        self.finalize(metadata)
        self.mirror_to_metadata(metadata, timeline)
        done = timeline.complete(self.instant, metadata.to_json_bytes())
        crash_point(COMMIT_COMPLETED)
        self.table.storage.delete_dir(markers.marker_dir(self.time))
        crash_point(COMMIT_CLEANED)
        self.instant = done
        return done

    def mirror_to_metadata(self, metadata: CommitMetadata, timeline: ActiveTimeline) -> None:
        """Metadata first: MDT housekeeping, then MDT deltacommit T, before T completes."""
        mdt = self.table.metadata()
        if not mdt.exists():
            return
        housekeeping(mdt, timeline, self.table.max_delta_commits, keep=self.time)
        known = set(MetadataReader(mdt, timeline).all_partitions())
        mdt.apply(self.time, mdt_records.from_commit(metadata, known))

    def abort(self) -> None:
        """Undo a write that failed in this process: its files, markers, then instant files."""
        if self.instant is None or self.instant.is_completed:
            return
        for path in self.marked_files():
            self.table.storage.delete(path)
        self.table.storage.delete_dir(markers.marker_dir(self.time))
        self.table.timeline().delete_instant_files(self.time, self.action)
