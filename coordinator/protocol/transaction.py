"""One data instant through begin / write / commit (DESIGN §2), the one write path.

begin and commit run under the table's lock; writing does not. Every step is a
named crash point. Markers are created before the files they name, so whatever
a crash leaves behind can be found and removed. Used as a context manager it
commits on a clean exit and aborts on an exception:

    with Transaction(table, operation="UPSERT") as txn:
        txn.create_marker(path); write the file; txn.metadata.add(stat)

A writer that knows more hands it over in one frozen `WriteOutcome` (`txn.commit(outcome)` inside the block);
`begin()` returns a frozen `Begun`: what it read and decided under the lock, which the commit checks against.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass

from coordinator.config import CoordinatorConfig
from coordinator.mdt import deltacommit, index_build
from coordinator.mdt.bootstrap import finish_interrupted_initialization, initialize, migrate, needs_migration
from coordinator.mdt.maintenance import housekeeping
from coordinator.protocol import compaction_plan, conflicts, markers, provenance, rollback
from coordinator.protocol.archival import archive
from coordinator.protocol.heartbeat import Heartbeat, is_expired
from coordinator.protocol.locking import held, table_lock
from coordinator.protocol.recovery import roll_back_orphans
from locks.base import LockProvider
from timeline.crash_points import crash_point, register
from timeline.errors import BadInputError, ConflictError, FencedError, LockError, TandemError
from timeline.format import outcome
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.instant import COMMIT, WRITE_ACTIONS, Instant, State
from timeline.format.source_file import (
    BOOTSTRAP_INSTANTS,
    COPIES_FOLLOW,
    FULL_BOOTSTRAP_INSTANT,
    METADATA_BOOTSTRAP_INSTANT,
)
from timeline.format.table_config import read_config
from timeline.io.read_once import reuse_reads
from timeline.mdt import indexes as mdt_indexes
from timeline.mdt import records as mdt_records
from timeline.mdt.log import BLOOM_FILTERS, COLUMN_STATS
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
COMMIT_DECIDED = register("commit.decided", "commit decision on T claimed, T.commit not yet written")
COMMIT_COMPLETED = register("commit.complete", "T completed on the data timeline")
COMMIT_RELEASED = register("commit.released", "lock released, heartbeat stopped")
COMMIT_CLEANED = register("commit.cleanup", "markers of T deleted")

TOKEN_KEY = "tandem.lock.token"
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Begun:
    """What begin read and decided under the lock; the commit's conflict check is taken against it."""

    instant: Instant  # T, inflight
    token: int  # the lock's fencing token at begin
    seen: frozenset[str]  # instants completed at begin
    watched: frozenset[str]  # write instants pending at begin
    timeline: ActiveTimeline  # the data timeline as begin left it (T inflight)

    @property
    def time(self) -> str:
        return self.instant.time


@dataclass(frozen=True)
class WriteOutcome:
    """What a writer hands to the commit, once, when its files are written."""

    metadata: CommitMetadata  # the write stats (and schema) T completes with
    # Partitions the writer saw listed; they never disappear, so the commit need not read the MDT to learn
    # which of its partitions are new. None: ask the MDT.
    known_partitions: frozenset[str] | None = None
    # Every file was written by this process through `create_marker` (not by Spark's executors): the markers
    # are then known without listing them.
    marked_here: bool = False


class Transaction:
    """Begin, record markers, then commit (or abort) one instant of `table`."""

    def __init__(
        self,
        table: Table,
        action: str = COMMIT,
        operation: str = "UPSERT",
        config: CoordinatorConfig | None = None,
        lock: LockProvider | None = None,
        instant_time: str | None = None,
    ) -> None:
        self.table = table
        self.instant_time = instant_time  # a fixed T (Hudi's bootstrap instants), above both timelines or refused
        self.action = action
        self.operation = operation
        self.config = config or CoordinatorConfig()
        self._own_lock = lock is None
        self.lock = lock or table_lock(table, self.config)
        self.instant: Instant | None = None
        self.metadata = CommitMetadata(operation_type=operation)  # the context-manager form's outcome
        self.begun: Begun | None = None
        self.heartbeat: Heartbeat | None = None
        self.undone = False  # set once T was removed from both tables (a lost conflict check)
        self._outcome: WriteOutcome | None = None  # handed over by commit()
        self._markers: dict[str, str] = {}  # data file -> its marker, as created here

    @property
    def time(self) -> str:
        if self.instant is None:
            raise TandemError("transaction has not begun")
        return self.instant.time

    # begin -----------------------------------------------------------------------------
    def begin(self) -> Begun:
        """Under the lock: handle orphans, pick T above both timelines, requested, heartbeat, inflight."""
        try:
            return self._begin()
        except BaseException:
            self._stop_heartbeat()
            self.close()
            raise

    def _begin(self) -> Begun:
        with held(self.lock) as token:
            with reuse_reads():  # each timeline and listing read once until something is written
                timeline = roll_back_orphans(self.table, self.config).timeline
                if self.instant_time not in BOOTSTRAP_INSTANTS:
                    _refuse_during_bootstrap(timeline)
                self._build_metadata_table_if_missing(timeline)
                self.table.config = self.table.check_writable(timeline)
                self._apply_index_settings(timeline)
                crash_point(BEGIN_LOCKED)
                seen = timeline.completed_times()
                watched = frozenset(i.time for i in timeline.pending() if i.action in WRITE_ACTIONS)
                time = self._instant_time(timeline)
            instant = Instant(time, self.action, State.REQUESTED)
            self.lock.check()
            timeline.create_requested(instant)
            crash_point(BEGIN_REQUESTED)
            self.heartbeat = Heartbeat.from_config(self.table.storage, time, self.config)
            self.heartbeat.start()
            extra = {TOKEN_KEY: str(token), conflicts.WATCHED_KEY: conflicts.encode_watched(watched)}
            inflight_doc = CommitMetadata(operation_type=self.operation, extra_metadata=extra)
            self.instant = timeline.transition_to_inflight(instant, inflight_doc.to_json_bytes())
            crash_point(BEGIN_INFLIGHT)
            self.begun = Begun(self.instant, token, seen, watched, timeline)
        self.table.storage.sync_dirs([timeline.meta_dir])  # T.requested, T.inflight; off the lock, once
        return self.begun

    def _instant_time(self, timeline: ActiveTimeline) -> str:
        """T: a new time above both timelines, or the fixed one asked for when it is above them."""
        if self.instant_time is None:
            return self.table.new_instant_time(timeline)
        mdt = self.table.metadata()
        newest = max(timeline.last_time(), mdt.timeline().last_time() if mdt.exists() else "")
        if newest >= self.instant_time or timeline.archived_files:
            raise BadInputError(
                f"instant {self.instant_time} must come first on {self.table.uri}'s timeline, which already "
                f"reaches {newest or 'its archive'}"
            )
        return self.instant_time

    def _build_metadata_table_if_missing(self, timeline: ActiveTimeline) -> None:
        """As Hudi's writer does with `hoodie.metadata.enable`: the MDT's log chain is the commit's fence. What
        a crash left half built in Hudi's format (the whole MDT, or an index partition) is built again first,
        and an MDT in Tandem's previous format the table did not ask to keep is rebuilt in Hudi's.

        Only when nothing is pending (the listing must be final); otherwise a later write builds it.
        """
        mdt = self.table.metadata()
        name = self.table.config.name
        if finish_interrupted_initialization(mdt, name, timeline) is not None:
            self.table.config = read_config(self.table.storage)
        if not self.config.metadata_enabled or timeline.pending():
            return
        if needs_migration(mdt, self.table.config):
            migrate(mdt, name, timeline)
        elif not (self.table.has_metadata_table() or mdt.exists()):
            LOG.info("building the metadata table of %s before the first write", self.table.uri)
            initialize(mdt, name, timeline, hudi_format=not self.table.config.keeps_tandem_format)
        else:
            return
        self.table.config = read_config(self.table.storage)

    def _apply_index_settings(self, timeline: ActiveTimeline) -> None:
        """Hudi's `hoodie.metadata.index.*.enable` set on this writer: build or drop the index first.

        A build needs no pending instant (their files would miss records); with
        one pending, the index is left for a later write, and this write keeps
        what the table has.
        """
        wanted = {COLUMN_STATS: self.config.column_stats_enabled, BLOOM_FILTERS: self.config.bloom_filter_enabled}
        kept = set(self.table.config.metadata_indexes)
        turn_on = [p for p, on in wanted.items() if on is True and p not in kept]
        turn_off = [p for p, on in wanted.items() if on is False and p in kept]
        mdt = self.table.metadata()
        if not (turn_on or turn_off) or not mdt.exists():
            return
        if turn_off:
            index_build.drop(mdt, turn_off)
        if turn_on and timeline.pending():
            LOG.warning("%s: instants pending, building %s is left to a later write", self.table.uri, turn_on)
        elif turn_on:
            index_build.build(mdt, timeline, turn_on)
        self.table.config = read_config(self.table.storage)

    # write -----------------------------------------------------------------------------
    def create_marker(self, path: str, kind: str = "CREATE") -> None:
        """Record that `path` (relative to the base) is about to be written."""
        markers.create_marker(self.table.storage, self.time, path, kind)
        self._markers[path] = markers.marker_path(self.time, path, kind)
        crash_point(WRITE_MARKER)

    def _marked_here(self) -> bool:
        return self._outcome is not None and self._outcome.marked_here

    def marked_files(self) -> list[str]:
        if self._marked_here():
            return sorted(self._markers)
        return markers.marked_files(self.table.storage, self.time)

    def _remove_markers(self) -> None:
        """The marker folder; on S3, when every marker was made here, one batched delete of them (no listing)."""
        if self._marked_here() and self.table.storage.is_s3:
            self.table.storage.discard_all(list(self._markers.values()))
        else:
            self.table.storage.delete_dir(markers.marker_dir(self.time))

    # commit ----------------------------------------------------------------------------
    def finalize(self, metadata: CommitMetadata, timeline: ActiveTimeline) -> None:
        """Delete files under markers that the write stats do not name (retried tasks), if T wrote them."""
        keep = {s.path for s in metadata.write_stats()}
        marked = self.marked_files()
        for path in provenance.undoable(timeline, self.time, [p for p in marked if p not in keep]):
            self.table.storage.discard(path)
        for path in provenance.orphan_logs(self.table.storage, self.time, marked, keep):
            self.table.storage.discard(path)
        crash_point(COMMIT_FINALIZED)

    def _check_still_ours(self, timeline: ActiveTimeline) -> None:
        current = timeline.find(self.time)
        if current is None or current.state != State.INFLIGHT:
            raise FencedError(f"instant {self.time} is no longer inflight: another process rolled it back")
        expiry = self.config.heartbeat_expiry_s
        if not self.heartbeat.is_alive() or is_expired(self.table.storage, self.time, expiry):
            raise FencedError(f"instant {self.time}: heartbeat expired (older than {expiry:g}s); aborting")

    def commit(self, written: WriteOutcome | None = None) -> Instant:
        """Under the lock: checks, conflict check, finalize, MDT first, then the decision and T completed.

        `written` is the writer's outcome (the context-manager form's `txn.metadata` if none). The lock keeps
        writers apart; what makes the commit safe when it was lost is storage: the MDT log version T claims
        orders it against every other writer, the conflict check is repeated on a fresh read after that claim,
        and the commit decision is claimed with create-if-absent before T.commit.
        """
        if self._outcome is not None:
            raise TandemError(f"instant {self.time} was already handed to commit")
        self._outcome = written or WriteOutcome(self.metadata)
        metadata = self._outcome.metadata
        try:
            with held(self.lock, self.time) as token:
                with reuse_reads():  # one read of each timeline for the checks before the MDT claim
                    timeline = self.table.timeline()
                    try:
                        self._check_still_ours(timeline)
                        self._check_conflicts(timeline, metadata)
                        self.table.check_writable(timeline)
                    except TandemError:
                        self._undo()
                        raise
                crash_point(COMMIT_LOCKED)
                self.finalize(metadata, timeline)
                metadata.extra_metadata[TOKEN_KEY] = str(token)
                metadata.extra_metadata[conflicts.WATCHED_KEY] = conflicts.encode_watched(self.begun.watched)
                self.lock.check()
                self.mirror_to_metadata(metadata, timeline)
                crash_point(COMMIT_MIRRORED)
                try:
                    self._check_conflicts(self.table.timeline(), metadata)
                except ConflictError:
                    self._undo()
                    raise
                self.lock.check()
                done = self._decide_and_complete(timeline, metadata)
                crash_point(COMMIT_COMPLETED)
                self._archive_if_due(timeline)
                self._schedule_compaction_if_due()
        finally:
            self._stop_heartbeat()
        crash_point(COMMIT_RELEASED)
        self._remove_markers()
        crash_point(COMMIT_CLEANED)
        self.close()
        return done

    def _check_conflicts(self, timeline: ActiveTimeline, metadata: CommitMetadata) -> None:
        """The conflict check; an instant file that vanishes while it reads (archived by a process that held the
        lock this writer lost) is a conflict too: nothing is committed."""
        begun = self.begun
        try:
            conflicts.check(timeline, self.time, metadata, begun.seen, self.table.metadata(), begun.watched)
        except FileNotFoundError as err:
            raise ConflictError(
                f"instant {self.time}: the timeline changed while its conflicts were checked ({err}); "
                "nothing was committed"
            ) from err

    def _make_durable(self, metadata: CommitMetadata) -> None:
        """Flush, once each, the partition folders T's files went to, before the decision.

        The files themselves were flushed as they were written, T's requested and
        inflight entries at the end of begin, and the MDT deltacommit flushed its
        own folders. A commit decision can be rolled forward by another process
        without this writer, so the decision comes after.
        """
        self.table.storage.sync_dirs({posixpath.dirname(stat.path) for stat in metadata.write_stats()})

    def _decide_and_complete(self, timeline: ActiveTimeline, metadata: CommitMetadata) -> Instant:
        """Claim the commit decision, then create T.commit; a rollback decision that stands aborts."""
        self._make_durable(metadata)
        payload = metadata.to_json_bytes()
        decided = outcome.claim(self.table.storage, self.time, outcome.COMMIT, payload)
        crash_point(COMMIT_DECIDED)
        if not decided.is_commit:
            raise ConflictError(
                f"instant {self.time} was rolled back by another process while this writer held no valid lock; "
                "nothing was committed"
            )
        self.instant = timeline.complete_decided(self.instant, decided.payload)
        return self.instant

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

    def _schedule_compaction_if_due(self) -> None:
        """Hudi's `hoodie.compact.schedule.inline` on a merge-on-read table: plan the next compaction when one is
        due, for a worker to execute; like archival, never a failure of the committed write."""
        if not (self.table.config.merge_on_read and self.config.schedule_compaction):
            return
        try:
            self.lock.check()
            compaction_plan.schedule(self.table, self.config.compaction_delta_commits)
        except (LockError, FileNotFoundError) as err:
            LOG.warning("compaction planning after %s left to the next commit: %s", self.time, err)

    def mirror_to_metadata(self, metadata: CommitMetadata, timeline: ActiveTimeline) -> None:
        """Metadata first: MDT housekeeping, then MDT deltacommit T (with T's footprint), before T completes."""
        mdt = self.table.metadata()
        mdt_timeline = mdt.timeline_if_exists()
        if mdt_timeline is None:
            return
        done = housekeeping(mdt, timeline, self.config.max_delta_commits, keep=self.time, mdt_timeline=mdt_timeline)
        known = self._outcome.known_partitions if self._outcome is not None else None
        if known is None:
            known = frozenset(MetadataReader(mdt, timeline).all_partitions())
        records = mdt_records.from_commit(metadata, known)
        kept = self.table.config.metadata_indexes + self.table.config.java_metadata_partitions
        index_records = mdt_indexes.from_write_stats(metadata.write_stats(), kept)
        deltacommit.apply(mdt, self.time, records, done.mdt_timeline, metadata.touched_file_groups(), index_records)

    # abort -----------------------------------------------------------------------------
    def _undo(self) -> None:
        """Remove everything T wrote, in both tables; never a T whose commit decision stands.

        The rollback decision is claimed first, so a concurrent committer of T (this
        process cannot be one, but a roll-forward can) and this undo never both win.
        """
        timeline = self.table.timeline()
        decided = outcome.claim(self.table.storage, self.time, outcome.ROLLBACK)
        if decided.is_commit:
            self.instant = timeline.complete_decided(self.instant, decided.payload)
            return
        # What this process marked and wrote, too: a rollback by another process (this one was paused past its
        # heartbeat) deletes the markers, then a file may still land.
        metadata = self._outcome.metadata if self._outcome is not None else self.metadata
        ours = set(self._markers) | {s.path for s in metadata.write_stats()}
        written = set(self.marked_files()) | ours
        # Logs stay: the rollback protocol appends command blocks after them (under a rollback instant). It finds
        # nothing to do when T is gone from the timeline: another process rolled T back before these files landed,
        # so this writer deletes its base files itself and rolls its late logs back on its own.
        logs = provenance.logs_written_by(self.table.storage, self.time, written)
        if not logs or rollback.rollback(self.table, self.instant) is None:
            for path in provenance.undoable(self.table.timeline(), self.time, written):
                self.table.storage.discard(path)
            rollback.drop_bootstrap_index(self.table, self.time)
            if logs:
                rollback.rollback_late_logs(self.table, self.instant, logs)
        mdt = self.table.metadata()
        if mdt.exists():
            deltacommit.rollback(mdt, self.time, timeline)
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
            # No lock: still decide, on storage, that T will never commit, so no
            # writer waits on it; recovery removes its files later.
            outcome.claim(self.table.storage, self.time, outcome.ROLLBACK)
        finally:
            self._stop_heartbeat()
            self.close()

    def _rolled_back_by_another(self) -> bool:
        """Before our own abort: did another process decide T's rollback (and remove files under us)?"""
        if self.instant is None or self.undone:
            return False
        decided = outcome.read(self.table.storage, self.time)
        return decided is not None and decided.is_rollback

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
        if exc_type is None and self._outcome is not None:  # handed to commit inside the block
            if not self.instant.is_completed:  # it failed and the caller went on: undo it all the same
                self.abort()
            return
        if exc_type is None:
            try:
                self.commit()
            except Exception:
                self.abort()
                raise
        elif issubclass(exc_type, Exception):
            if self._outcome is not None:  # the commit itself failed: undo, and let its own error through
                self.abort()
                return
            by_another = not issubclass(exc_type, TandemError) and self._rolled_back_by_another()
            self.abort()
            if by_another:
                raise ConflictError(
                    f"instant {self.time} was rolled back by another process while it was writing ({exc}); "
                    "nothing was committed"
                ) from exc
        else:  # a simulated crash: the process is "gone", so its heartbeat stops and its files stay
            if self.heartbeat is not None:
                self.heartbeat.stop(delete=False)
                self.heartbeat = None
            self.close()


def _refuse_during_bootstrap(timeline: ActiveTimeline) -> None:
    """No write begins while a bootstrap is unfinished (RFC-12's instants are fixed times below every other, so
    one landing after a write would order before it): an instant 01 or 02 pending, or 01 completed with the
    full-record instant 02 still to come."""
    pending = [i.time for i in timeline.pending() if i.time in BOOTSTRAP_INSTANTS]
    first = timeline.find(METADATA_BOOTSTRAP_INSTANT)
    copies_follow = (
        first is not None
        and first.is_completed
        and FULL_BOOTSTRAP_INSTANT not in timeline.completed_times()
        and timeline.commit_metadata(first).extra_metadata.get(COPIES_FOLLOW) == "true"
    )
    if pending or copies_follow:
        raise ConflictError(
            "the table's bootstrap is not finished: no write begins until it is (run the bootstrap again to finish "
            "it, or `tandem recover` once its writer is gone)"
        )
