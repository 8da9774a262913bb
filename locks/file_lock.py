"""The embedded default: a lock file under `.hoodie/`, for processes sharing a POSIX file system.

The lock file is created with create-if-absent and holds the owner and a lease
deadline that a heartbeat thread pushes forward. A lock whose lease passed is
stale: a contender renames it away (only one rename of the same file can win)
and then creates its own. The fencing counter sits beside it; every bump reads
and rewrites it under an OS file lock (`flock`, which the kernel drops when its
process dies; a contender that finds it held gives its lock file back and tries
again), because the lock file alone does not keep bumps apart: a holder
paused between reading the counter and writing it back loses its lease, and
without the guard would write an old value over its successors' and a token
would be handed out twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Callable

from locks.base import LockProvider, OwnerInfo, RetryPolicy
from timeline.errors import BadInputError
from timeline.io.storage import Storage

LOCK_DIR = ".hoodie/.tandem-lock"


class FileLock(LockProvider):
    name = "file"

    def __init__(self, table_base: str, lease_s: float = 60.0, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry)
        storage = Storage(table_base)
        if storage.is_s3:
            raise BadInputError("the file lock needs a POSIX file system; use zk:// or dynamodb:// for s3:// tables")
        self.dir = storage.full(LOCK_DIR)
        self.path = os.path.join(self.dir, "lock")
        self.fence_path = os.path.join(self.dir, "fence")
        self.fence_guard_path = os.path.join(self.dir, "fence.guard")
        self.lease_s = lease_s
        self.holder_id = uuid.uuid4().hex

    def _read(self, path: str | None = None) -> dict | None:
        try:
            with open(path or self.path, encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None
        except ValueError:
            # An unreadable lock file cannot be renewed by anyone: treat it as expired.
            return {"holder_id": "", "expires_at": 0}

    def _doc(self, owner: OwnerInfo) -> dict:
        expires = time.time() + self.lease_s
        return {"holder_id": self.holder_id, "expires_at": expires, "owner": json.loads(owner.to_json())}

    def _write_new(self, doc: dict) -> bool:
        # Not fsynced: after a machine crash every lease has passed anyway; the
        # fencing counter (which must never go back) is the durable part.
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(doc, handle)
        try:
            os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def _remove_if(self, should_remove: Callable[[dict], bool]) -> bool:
        """Move the lock file aside, then delete it only if it is the one we meant.

        Renaming is atomic, so of several processes removing the same file only
        one succeeds; a file renewed or retaken in between is put back.
        """
        aside = f"{self.path}.{uuid.uuid4().hex}.aside"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        moved = self._read(aside) or {}
        removed = should_remove(moved)
        if not removed:
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
        os.unlink(aside)
        return removed

    def _break_if_stale(self) -> None:
        current = self._read()
        if current is not None and current.get("expires_at", 0) <= time.time():
            self._remove_if(lambda doc: doc.get("expires_at", 0) <= time.time())

    def try_acquire(self) -> int | None:
        os.makedirs(self.dir, exist_ok=True)
        self._break_if_stale()
        owner = OwnerInfo(instant=self.instant)
        sent_at = time.monotonic()
        if not self._write_new(self._doc(owner)):
            return None
        self.valid_until = self.lease_deadline(sent_at, self.lease_s)
        # The lock file names no token until its first renewal: `owner()` reads the
        # fence instead, saving a rewrite per acquire.
        try:
            token = self._next_token()
        except BaseException:
            self._give_back()
            raise
        if token is None:  # a holder paused inside its bump holds the counter: try again later
            self._give_back()
            return None
        owner.token = token
        self.start_heartbeat(self.lease_s, lambda: self._rewrite(self._doc(owner)))
        return token

    def _fence(self) -> int:
        try:
            with open(self.fence_path, encoding="utf-8") as handle:
                return int(handle.read().strip() or 0)
        except FileNotFoundError:
            return 0

    def _give_back(self) -> None:
        """Remove the lock file this holder just created (no token was handed out with it)."""
        self._remove_if(lambda doc: doc.get("holder_id") == self.holder_id)
        self.valid_until = None

    def _next_token(self) -> int | None:
        """The counter bumped under its guard; None when another process holds the guard. Opened read-only:
        `flock` needs no write access, so holders running as other users share one guard."""
        guard = os.open(self.fence_guard_path, os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            try:  # released when the file closes or its process dies
                fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            token = self._fence() + 1
            self._store_fence(token)
            return token
        finally:
            os.close(guard)

    def _store_fence(self, token: int) -> None:
        tmp = f"{self.fence_path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(str(token))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.fence_path)
        directory = os.open(self.dir, os.O_RDONLY)
        try:  # the counter must never go back, even after a machine crash
            os.fsync(directory)
        finally:
            os.close(directory)

    def _rewrite(self, doc: dict) -> bool:
        """Renew in place only while the file is still ours; False means the lock was lost."""
        current = self._read()
        if current is None or current.get("holder_id") != self.holder_id:
            return False
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(doc, handle)
        os.replace(tmp, self.path)
        return True

    def release(self) -> None:
        self.stop_heartbeat()
        if self.token is None:
            return
        self._remove_if(lambda doc: doc.get("holder_id") == self.holder_id)
        self.token = None
        self.valid_until = None

    def owner(self) -> OwnerInfo | None:
        current = self._read()
        if current is None or current.get("expires_at", 0) <= time.time() or "owner" not in current:
            return None
        owner = OwnerInfo.from_json(json.dumps(current["owner"]))
        if not owner.token:
            owner.token = self._fence()
        return owner

    def force_release(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
