"""One data instant through begin / write / commit (DESIGN §2), the one write path.

begin and commit run under the table's lock; writing does not. Every step is a
named crash point. Markers are created before the files they name, so whatever
a crash leaves behind can be found and removed. Used as a context manager it
commits on a clean exit and aborts on an exception:

    with Transaction(table, operation="UPSERT") as txn:
        txn.create_marker(path); write the file; txn.metadata.add(stat)
"""

from __future__ import annotations

import logging

from chaos.crash_points import crash_point, register
from coordinator import conflicts, markers
from coordinator.archival import archive
from coordinator.config import CoordinatorConfig
from coordinator.heartbeat import Heartbeat, is_expired
from coordinator.locking import held, table_lock
from coordinator.recovery import roll_back_orphans
from locks.base import LockProvider
from timeline.active_timeline import ActiveTimeline
from timeline.commit_metadata import CommitMetadata
from timeline.errors import LockError, TandemError
from timeline.instant import COMMIT, Instant, State
from timeline.mdt import records as mdt_records
from timeline.mdt.maintenance import housekeeping
from timeline.mdt.reader import MetadataReader
from timeline.table import Table

BEGIN_LOCKED = register("commit.begin.locked", "lock taken for begin, orphans handled")
BEGIN_REQUESTED = register("commit.begin.requested", "T.<action>.requested written")
BEGIN_INFLIGHT = register("commit.begin.inflight", "T inflight written; writing may start")
WRITE_MARKER = register("commit.write.marker", "a marker written, its file not yet")
WRITE_FILE = register("commit.write.file", "a data file written")
COMMIT_LOCKED = register("commit.locked", "lock taken for commit, checks passed")
COMMIT_FINALIZED = register("commit.finalize", "files not in the write stats deleted")
COMMIT_MIRRORED = register("commit.mdt", "MDT deltacommit T completed, data instant not yet")
COMMIT_COMPLETED = register("commit.complete", "T completed on the data timeline")
COMMIT_RELEASED = register("commit.released", "lock released, heartbeat stopped")
COMMIT_CLEANED = register("commit.cleanup", "markers of T deleted")

TOKEN_KEY = "tandem.lock.token"
LOG = logging.getLogger(__name__)


class Transaction:
    """Begin, record markers, then commit (or abort) one instant of `table`."""

    def __init__(
        self,
        table: Table,
        action: str = COMMIT,
        operation: str = "UPSERT",
        config: CoordinatorConfig | None = None,
        lock: LockProvider | None = None,
    ) -> None:
        self.table = table
        self.action = action
        self.operation = operation
        self.config = config or CoordinatorConfig()
        self._own_lock = lock is None
        self.lock = lock or table_lock(table, self.config)
        self.instant: Instant | None = None
        self.metadata = CommitMetadata(operation_type=operation)
        self.seen: frozenset[str] = frozenset()
        self.begin_timeline: ActiveTimeline | None = None  # the data timeline as begin left it (T inflight)
        self.heartbeat: Heartbeat | None = None
        # Partitions the writer already saw; they never disappear, so the commit
        # need not read the MDT to learn which of its partitions are new.
        self.known_partitions: set[str] | None = None
        self.undone = False  # set once T was removed from both tables (a lost conflict check)

    @property
    def time(self) -> str:
        if self.instant is None:
            raise TandemError("transaction has not begun")
        return self.instant.time

    # begin -----------------------------------------------------------------------------
    def begin(self) -> str:
        """Under the lock: handle orphans, pick T above both timelines, requested, heartbeat, inflight."""
        try:
            return self._begin()
        except BaseException:
            self._stop_heartbeat()
            self.close()
            raise

    def _begin(self) -> str:
        with held(self.lock) as token:
            timeline = roll_back_orphans(self.table, self.config).timeline
            crash_point(BEGIN_LOCKED)
            self.seen = timeline.completed_times()
            time = self.table.new_instant_time(timeline)
            instant = Instant(time, self.action, State.REQUESTED)
            self.lock.check()
            timeline.create_requested(instant)
            crash_point(BEGIN_REQUESTED)
            self.heartbeat = Heartbeat.from_config(self.table.storage, time, self.config)
            self.heartbeat.start()
            inflight_doc = CommitMetadata(operation_type=self.operation, extra_metadata={TOKEN_KEY: str(token)})
            self.instant = timeline.transition_to_inflight(instant, inflight_doc.to_json_bytes())
            crash_point(BEGIN_INFLIGHT)
            self.begin_timeline = timeline
        return time

    # write -----------------------------------------------------------------------------
    def create_marker(self, path: str, kind: str = "CREATE") -> None:
        """Record that `path` (relative to the base) is about to be written."""
        markers.create_marker(self.table.storage, self.time, path, kind)
        crash_point(WRITE_MARKER)

    def marked_files(self) -> list[str]:
        return markers.marked_files(self.table.storage, self.time)

    # commit ----------------------------------------------------------------------------
    def finalize(self, metadata: CommitMetadata) -> None:
        """Delete files under markers that the write stats do not name (retried tasks)."""
        keep = {s.path for s in metadata.write_stats()}
        for path in self.marked_files():
            if path not in keep:
                self.table.storage.delete(path)
        crash_point(COMMIT_FINALIZED)

    def _check_still_ours(self, timeline: ActiveTimeline) -> None:
        current = timeline.find(self.time)
        if current is None or current.state != State.INFLIGHT:
            raise TandemError(f"instant {self.time} is no longer inflight: another process rolled it back")
        expiry = self.config.heartbeat_expiry_s
        if not self.heartbeat.is_alive() or is_expired(self.table.storage, self.time, expiry):
            raise TandemError(f"instant {self.time}: heartbeat expired (older than {expiry:g}s); aborting")

    def commit(self, metadata: CommitMetadata | None = None) -> Instant:
        """Under the lock: checks, conflict check, finalize, MDT first, then complete T."""
        metadata = metadata or self.metadata
        try:
            with held(self.lock, self.time) as token:
                timeline = self.table.timeline()
                try:
                    self._check_still_ours(timeline)
                    conflicts.check(timeline, self.time, metadata, self.seen)
                except TandemError:
                    self._undo()
                    raise
                crash_point(COMMIT_LOCKED)
                self.finalize(metadata)
                metadata.extra_metadata[TOKEN_KEY] = str(token)
                self.lock.check()
                self.mirror_to_metadata(metadata, timeline)
                crash_point(COMMIT_MIRRORED)
                self.lock.check()
                done = timeline.complete(self.instant, metadata.to_json_bytes())
                self.instant = done
                crash_point(COMMIT_COMPLETED)
                self._archive_if_due(timeline)
        finally:
            self._stop_heartbeat()
        crash_point(COMMIT_RELEASED)
        self.table.storage.delete_dir(markers.marker_dir(self.time))
        crash_point(COMMIT_CLEANED)
        self.close()
        return done

    def _archive_if_due(self, timeline: ActiveTimeline) -> None:
        """Archival is housekeeping after T completed: it never turns a committed write into a failure.

        With the lock lost (a lease that ran out) it is left to the next commit; so is a
        run that meets a file another archiver moved first.
        """
        if not self.config.auto_archive or len(timeline.completed()) < self.config.archive_max_commits:
            return
        try:
            self.lock.check()
            archive(self.table, self.config.archive_min_commits, self.config.archive_max_commits)
        except (LockError, FileNotFoundError) as err:
            LOG.warning("archival after %s left to the next commit: %s", self.time, err)

    def mirror_to_metadata(self, metadata: CommitMetadata, timeline: ActiveTimeline) -> None:
        """Metadata first: MDT housekeeping, then MDT deltacommit T, before T completes."""
        mdt = self.table.metadata()
        if not mdt.exists():
            return
        done = housekeeping(mdt, timeline, self.config.max_delta_commits, keep=self.time)
        known = self.known_partitions
        if known is None:
            known = set(MetadataReader(mdt, timeline).all_partitions())
        mdt.apply(self.time, mdt_records.from_commit(metadata, known), done.mdt_timeline)

    # abort -----------------------------------------------------------------------------
    def _undo(self) -> None:
        """Remove everything T wrote, in both tables (caller holds the lock); never a completed T."""
        timeline = self.table.timeline()
        current = timeline.find(self.time)
        if current is not None and current.is_completed:
            return
        # What this process wrote, too: a rollback by another process (this one was
        # paused past its heartbeat) deletes the markers, then a file may still land.
        written = {s.path for s in self.metadata.write_stats()}
        for path in sorted(set(self.marked_files()) | written):
            self.table.storage.delete(path)
        mdt = self.table.metadata()
        if mdt.exists() and mdt.timeline().find(self.time) is not None:
            mdt.rollback(self.time, timeline)
        self.table.storage.delete_dir(markers.marker_dir(self.time))
        timeline.delete_instant_files(self.time, self.action)
        self.undone = True

    def abort(self) -> None:
        """Undo a write that failed in this process, under the lock when it can be had.

        If the lock cannot be had, the instant is left to recovery: its heartbeat
        stops, so under LAZY it expires and the next writer rolls it back.
        """
        if self.instant is None or self.instant.is_completed or self.undone:
            self._stop_heartbeat()
            self.close()
            return
        try:
            with held(self.lock, self.time):
                self._undo()
        except LockError:
            pass
        finally:
            self._stop_heartbeat()
            self.close()

    def _stop_heartbeat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None

    def close(self) -> None:
        if self._own_lock:
            self.lock.close()

    # context manager -----------------------------------------------------------------
    def __enter__(self) -> Transaction:
        self.begin()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is None:
            try:
                self.commit()
            except Exception:
                self.abort()
                raise
        elif issubclass(exc_type, Exception):
            self.abort()
        else:  # a simulated crash: the process is "gone", so its heartbeat stops and its files stay
            if self.heartbeat is not None:
                self.heartbeat.stop(delete=False)
                self.heartbeat = None
            self.close()
