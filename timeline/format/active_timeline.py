"""The active timeline in `.hoodie/`: load, query, and move instants between states."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from functools import cached_property

from timeline.errors import CorruptInstantError, DamagedInstantWarning, FencedError, TandemError
from timeline.format import avro_metadata, outcome
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.instant import (
    COMMIT,
    COMPACTION,
    REPLACE_COMMIT,
    RESTORE,
    ROLLBACK,
    WRITE_ACTIONS,
    Instant,
    State,
    is_instant_time,
    parse_instant_file,
)
from timeline.io.lru import LruCache
from timeline.io.storage import Storage

ARCHIVED_FOLDER = "archived"
BUNDLE_PREFIX = "tandem.archive."  # Tandem's archive bundles: `tandem.archive.<first>_<last>.jsonl`
MDT_SUFFIX = "/.hoodie/metadata"  # a storage rooted here holds the MDT, whose timeline has no decision records
CACHED_INSTANT_BYTES = 16 << 20
_READS: LruCache[tuple[str, int, int], bytes] = LruCache(max_bytes=CACHED_INSTANT_BYTES, size=lambda _, data: len(data))


def _cached_read(storage: Storage, path: str, listed: tuple[int, int]) -> bytes:
    """Immutable timeline files, keyed by path and the size and time the listing gave: a commit reads the
    same completed instants at begin, in its view and at commit, a request each on S3. Without a listed time
    the size alone cannot name the content: read it."""
    if not listed[1]:
        return storage.read_bytes(path)
    key = (storage.full(path), *listed)
    found = _READS.get(key)
    if found is not None:
        return found
    data = storage.read_bytes(path)
    _READS.put(key, data)
    return data


@dataclass
class ActiveTimeline:
    """Instants of one table, each in its latest state, ordered by time."""

    storage: Storage
    meta_dir: str
    instants: list[Instant]
    listed: dict[str, tuple[int, int]] = field(default_factory=dict)  # file name -> (size, mtime ns) as listed
    restored_away: list[Instant] = field(default_factory=list)  # files of instants a completed restore removed

    @staticmethod
    def load(storage: Storage, meta_dir: str = ".hoodie") -> ActiveTimeline:
        return ActiveTimeline.from_listing(storage, meta_dir, storage.list_dir(meta_dir, sizes=False))

    @staticmethod
    def from_listing(storage: Storage, meta_dir: str, infos: list) -> ActiveTimeline:
        """The timeline of a listing of `meta_dir` (its other entries are ignored)."""
        latest: dict[tuple[str, str], Instant] = {}
        listed: dict[str, tuple[int, int]] = {}
        rank = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}
        for info in infos:
            instant = parse_instant_file(info.base_name)
            if instant is None:
                continue
            if info.mtime_ns:  # locally not listed: a local read costs what a stat for the cache key would
                listed[info.base_name] = (int(info.size or 0), int(info.mtime_ns))
            current = latest.get((instant.time, instant.action))
            if current is None or rank[instant.state] > rank[current.state]:
                latest[(instant.time, instant.action)] = instant
        merged = _merge_compaction_commits(latest)  # one instant per (time, action): that key is their order
        timeline = ActiveTimeline(storage, meta_dir, sorted(merged, key=lambda i: (i.time, i.action)), listed)
        removed = timeline._restored_times()
        if removed:
            timeline.restored_away = [i for i in timeline.instants if i.action in WRITE_ACTIONS and i.time in removed]
            timeline.instants = [i for i in timeline.instants if i not in timeline.restored_away]
        return timeline

    def restoring_to(self) -> str | None:
        """The savepoint a pending restore restores to: readers read the table as of it until the restore
        completes (the state it leaves), never a table half restored. None when no restore is pending."""
        from timeline.format.restore_metadata import decode_plan

        pending = [i for i in self.pending() if i.action == RESTORE]
        if not pending:
            return None
        requested = pending[-1].with_state(State.REQUESTED)
        return decode_plan(self.read(requested), self.storage.uri(self.path(requested)))[0]

    def _restored_times(self) -> set[str]:
        """Instants completed restores removed: gone for good. A writer that lost its lock after its commit
        decision may still write its completed file once a restore removed its instant; that file counts for
        nothing (recovery deletes it). Evidence: the restore's plan and its completed metadata both name the
        instant, after the plan's savepoint and before the restore; an unreadable pair is reported and fences
        nothing."""
        from timeline.format.restore_metadata import decode_plan, removed_times

        removed: set[str] = set()
        for instant in self.instants:
            if instant.action != RESTORE or not instant.is_completed:
                continue
            requested = instant.with_state(State.REQUESTED)
            try:
                savepoint, planned = decode_plan(self.read(requested), self.path(requested))
                recorded = removed_times(self.read(instant), self.path(instant))
            except (CorruptInstantError, FileNotFoundError) as err:
                warnings.warn(f"restore {instant.time} unreadable: {err}", DamagedInstantWarning, stacklevel=4)
                continue
            removed.update(t for t, _ in planned if savepoint < t < instant.time and t in recorded)
        return removed

    def reload(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, self.meta_dir)

    def path(self, instant: Instant) -> str:
        return f"{self.meta_dir}/{instant.file_name}"

    # queries -----------------------------------------------------------------
    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.is_completed]

    def pending(self) -> list[Instant]:
        return [i for i in self.instants if not i.is_completed]

    def completed_writes(self) -> list[Instant]:
        return [i for i in self.instants if i.is_completed and i.action in WRITE_ACTIONS]

    @cached_property
    def _archived_listing(self) -> dict[str, tuple[int, int]]:
        """Files of the archived timeline -> (size, mtime ns) as listed; listed only when a question needs them."""
        infos = self.storage.list_dir(f"{self.meta_dir}/{ARCHIVED_FOLDER}")
        return {i.base_name: (int(i.size or 0), int(i.mtime_ns or 0)) for i in infos}

    @cached_property
    def archived_files(self) -> list[str]:
        return sorted(self._archived_listing)

    @cached_property
    def _completed_times(self) -> frozenset[str]:
        # A loaded timeline is never mutated (reload() returns a new one), so this is computed once.
        return frozenset(i.time for i in self.instants if i.is_completed)

    def completed_times(self) -> frozenset[str]:
        return self._completed_times

    def find(self, time: str) -> Instant | None:
        for instant in self.instants:
            if instant.time == time:
                return instant
        return None

    def last_time(self) -> str:
        return self.instants[-1].time if self.instants else ""

    def earliest_time(self) -> str:
        return self.instants[0].time if self.instants else ""

    @cached_property
    def _earliest_write_time(self) -> str:
        return next((i.time for i in self.instants if i.action in WRITE_ACTIONS), self.earliest_time())

    def earliest_write_time(self) -> str:
        """Where the active timeline of writes starts: a write older than this was archived.

        Hudi's `isBeforeTimelineStarts` on the commits timeline: Java's archival takes
        cleans and rollbacks by their own counts, so an old rollback may stay
        active after newer commits were archived; the earliest instant of any
        action would then hide the archived commits' files. With no write
        active, the earliest instant of any action. Asked once per listed file: computed once.
        """
        return self._earliest_write_time

    @cached_property
    def _undone_times(self) -> frozenset[str]:
        """Instants a rollback on this timeline undid or plans to undo; read only when an older file asks.

        A damaged rollback file fails the read (CorruptInstantError names it):
        without it nobody can say whose files it undid.
        """
        undone = set()
        for instant in self.instants:
            if instant.action == RESTORE:  # a restore's plan names every instant it removes
                plan = avro_metadata.decode(self.read(instant.with_state(State.REQUESTED)), self.path(instant))
                undone.update(i.get("commitTime") for i in plan.get("instantsToRollback") or [])
            if instant.action != ROLLBACK:
                continue
            if instant.is_completed:
                undone.update(self.avro(instant).get("commitsRollback") or [])
            else:
                undone.add(self.rollback_target(instant).get("commitTime"))
        return frozenset(undone | self._rolled_back_by_decision())

    def _rolled_back_by_decision(self) -> set[str]:
        """Older instants whose rollback decision stands (`outcome`): they never committed, even once the
        rollback instant that removed them is archived. A writer paused past that rollback (and its archival)
        can still land a file afterwards, which would otherwise pass for an archived commit's. Archival drops
        commit decisions and keeps rollback ones, so this is one listing and a read of the few old records.

        A record that vanishes while it is read (archival forgetting a commit decision) or is not an instant's
        is passed over; a damaged one is reported and passed over (it proves nothing). A rollback record for
        an instant an archive bundle holds completed is stray (claimed by a process that thought it pending
        after the commit's own decision was forgotten) and is ignored: the bundle is the evidence.
        """
        if self.storage.base_uri.endswith(MDT_SUFFIX) or not self.instants:
            return set()
        earliest = self.earliest_write_time()
        found = set()
        for entry in self.storage.list_dir(outcome.OUTCOME_DIR):
            time = entry.base_name
            if not is_instant_time(time) or time >= earliest or time in self.completed_times():
                continue
            path = outcome.outcome_path(time)
            try:
                data = _cached_read(self.storage, path, (int(entry.size or 0), int(entry.mtime_ns or 0)))
                decided = outcome.decode(data, self.storage.uri(path))
            except FileNotFoundError:
                continue
            except CorruptInstantError as err:
                warnings.warn(f"{err}; not used", DamagedInstantWarning, stacklevel=2)
                continue
            if decided.is_rollback and not self.archived_completed(time):
                found.add(time)
        return found

    def archived_completed(self, time: str) -> bool:
        """True if one of this timeline's archive bundles holds `time` completed (bundles are named by their
        range, so only those whose range covers `time` are read)."""
        if self.instants and time >= self.earliest_time():
            return False
        for name in self.archived_files:
            first, _, last = name.removeprefix(BUNDLE_PREFIX).removesuffix(".jsonl").partition("_")
            if not name.startswith(BUNDLE_PREFIX) or not first <= time <= last:
                continue
            path = f"{self.meta_dir}/{ARCHIVED_FOLDER}/{name}"
            data = _cached_read(self.storage, path, self._archived_listing[name])  # a bundle never changes
            if any(e["time"] == time and e["state"] == State.COMPLETED.value for e in read_bundle(data)):
                return True
        return False

    def rollback_target(self, rollback: Instant) -> dict:
        """The instant rollback `rollback` undoes (`{"commitTime", "action"}`), as its plan names it: the one
        reader of that, for the data table and the MDT."""
        return self.avro(rollback.with_state(State.REQUESTED)).get("instantToRollback") or {}

    def undone_times(self) -> frozenset[str]:
        return self._undone_times

    def is_completed_or_archived(self, time: str) -> bool:
        """True if `time` is completed here, or older than the active timeline of writes (archived) and not
        undone by a rollback still on it (a writer paused past its rollback may land a file afterwards)."""
        if time in self.completed_times():
            return True
        if not self.instants or time >= self.earliest_write_time() or not self.archived_files:
            return False
        return time not in self.undone_times()

    # content -------------------------------------------------------------------
    def read(self, instant: Instant) -> bytes:
        """An instant file's bytes; a completed instant, a compaction or restore plan (written once by a
        create-if-absent, never changed) once per process while listings show it unchanged."""
        path = self.path(instant)
        listed = self.listed.get(instant.file_name)
        if listed is None or not listed[1] or not (instant.is_completed or instant.action in (COMPACTION, RESTORE)):
            return self.storage.read_bytes(path)
        return _cached_read(self.storage, path, listed)

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        source = self.storage.uri(self.path(instant))
        return CommitMetadata.from_json_bytes(self.read(instant), source)

    def commit_metadata_if_sound(self, instant: Instant) -> CommitMetadata | None:
        """For reads that can do without one instant's metadata (the schema): a damaged one is named
        in a warning and skipped, so one bad file does not make the whole table unreadable."""
        try:
            return self.commit_metadata(instant)
        except CorruptInstantError as err:
            message = f"instant {instant.time} skipped ({err}); `tandem metadata validate` lists it"
            warnings.warn(message, DamagedInstantWarning, stacklevel=3)
            return None

    def damaged_instants(self) -> list[str]:
        """Completed write instants whose commit metadata is unreadable or impossible, each with why."""
        found = []
        for instant in self.completed_writes():
            try:
                self.commit_metadata(instant)
            except CorruptInstantError as err:
                found.append(f"{instant.time} ({instant.action}): {err}")
        return found

    def avro(self, instant: Instant) -> dict:
        return avro_metadata.decode(self.read(instant), self.storage.uri(self.path(instant)))

    def replaced_by(self, as_of: str | None = None) -> dict[tuple[str, str], str]:
        """(partition, fileId) -> the completed replacecommit (up to `as_of`) that replaced it."""
        replaced: dict[tuple[str, str], str] = {}
        for instant in self.completed():
            if instant.action != REPLACE_COMMIT or (as_of and instant.time > as_of):
                continue
            for partition, ids in (self.commit_metadata(instant).partition_to_replace_file_ids or {}).items():
                replaced.update(dict.fromkeys(((partition, fid) for fid in ids), instant.time))
        return replaced

    def replaced_file_ids(self, as_of: str | None = None) -> set[tuple[str, str]]:
        return set(self.replaced_by(as_of))

    def latest_schema(self) -> str | None:
        """Avro schema JSON of the data from the latest completed write that has one."""
        for instant in reversed(self.completed_writes()):
            metadata = self.commit_metadata_if_sound(instant)
            if metadata is not None and metadata.schema:
                return metadata.schema
        return None

    # transitions ------------------------------------------------------------------
    def create_requested(self, instant: Instant, data: bytes = b"") -> Instant:
        requested = instant.with_state(State.REQUESTED)
        if not self.storage.create_if_absent(self.path(requested), data, durable=bool(data)):
            raise FencedError(f"instant {requested.file_name} already exists: another process created it")
        return requested

    def transition_to_inflight(self, instant: Instant, data: bytes = b"") -> Instant:
        inflight = instant.with_state(State.INFLIGHT)
        self.storage.write_bytes(self.path(inflight), data)
        return inflight

    def complete(self, instant: Instant, data: bytes) -> Instant:
        """Create the completed file atomically; refuse if it already exists.

        Returns once the completion survives a power loss (its folder flushed): a
        caller may report the instant done. Whatever the instant depends on must
        be durable before this call (`Storage.sync_file`, `Storage.sync_dirs`).
        """
        done = instant.with_state(State.COMPLETED)
        if not self.storage.create_if_absent(self.path(done), data):
            raise FencedError(f"instant {done.file_name} is already completed: another process completed it")
        self.storage.sync_dirs([self.meta_dir])
        return done

    def complete_decided(self, instant: Instant, payload: bytes) -> Instant:
        """Create `instant`'s completed file for a commit decision; a roll-forward may have done it already."""
        done = instant.with_state(State.COMPLETED)
        try:
            return self.complete(instant, payload)
        except TandemError:
            if self.storage.exists(self.path(done)):
                return done
            raise

    def delete_instant_files(self, time: str, action: str) -> None:
        """Remove every state file of one instant, the completed file first.

        A crash part-way leaves the instant pending (never completed without
        its history), so the next recovery finishes the job.
        """
        for state in (State.COMPLETED, State.INFLIGHT, State.REQUESTED):
            self.storage.discard(self.path(Instant(time, action, state)))


def _merge_compaction_commits(latest: dict[tuple[str, str], Instant]) -> list[Instant]:
    """`T.compaction.*` plus `T.commit` is one compaction instant, completed."""
    out: dict[tuple[str, str], Instant] = dict(latest)
    for (time, action), instant in latest.items():
        if action == COMMIT and (time, COMPACTION) in latest:
            out.pop((time, COMMIT))
            out[(time, COMPACTION)] = Instant(time, COMPACTION, instant.state)
    return list(out.values())


def read_bundle(data: bytes) -> list[dict]:
    """The entries of one archive bundle: each state file of its instants, base64 content and all."""
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]
