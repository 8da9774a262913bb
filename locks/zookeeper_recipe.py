"""kazoo's Lock recipe with its create and its listing sent together.

kazoo creates the contender node, waits for the answer, then lists the
parent. ZooKeeper answers one session's requests in the order they were sent,
so a listing sent right behind the create already holds the new node: an
uncontended acquire takes one round trip instead of two.

The node names are Curator's (`_c_<uuid>-lock-<sequence>`, what Apache Hudi's
ZookeeperBasedLockProvider creates through Curator's InterProcessMutex, which
orders the children by the text after their last `lock-`), so a Java Hudi
writer and this recipe queue as one. Contenders are the children ending in
`lock-`, `__lock__` or `__rlock__` and a sequence number, ordered by it: nodes of
kazoo's own Lock and of releases before this one are still waited for. Those
see this recipe's nodes only with `extra_lock_patterns=["-lock-"]`.

Every answer is awaited for a bounded time (kazoo queues a request sent while
it reconnects until the connection is back), and a node whose create or
delete went unanswered is looked for and deleted, so it cannot block the queue.
"""

from __future__ import annotations

import re
import threading
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, KazooException, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult

NODE_NAME = "-lock-"  # Curator's protected name: `_c_` + UUID + `-` + InterProcessMutex's `lock-`
CONTENDER = re.compile(r"(?:lock-|__lock__|__rlock__)(-?\d{10})$")
UNANSWERED = (KazooException, KazooTimeoutError)
GONE_WITH_SESSION = (SessionExpiredError, ConnectionClosedError)  # an ephemeral node goes with its session
RESEND_BACKOFF_S = 0.05


def predecessor(node: str, children: list[str]) -> str | None:
    """The contender just before `node` in sequence order, or None when `node` is first."""
    sequence = CONTENDER.search(node).group(1)
    ahead = [(m.group(1), child) for child in children if (m := CONTENDER.search(child)) and m.group(1) < sequence]
    return max(ahead)[1] if ahead else None


class PipelinedLock:
    """One contender for the lock at `path`; `node` names its znode while it holds it."""

    def __init__(self, client: KazooClient, path: str) -> None:
        self.client = client
        self.path = path
        self.node: str | None = None
        self._unsure: str | None = None  # a node (or name prefix) a request that got no answer may have left

    def acquire(self, data: bytes, wait_s: float, answer_s: float) -> bool:
        """Queue for the lock, `data` naming the holder: wait at most `wait_s` for the holders ahead, and the
        attempt ends within `max(wait_s, answer_s)` whatever the connection does. One that gives up leaves
        the queue.

        Raises NoNodeError when the parent path is gone (the caller re-makes it).
        """
        started = time.monotonic()
        until = started + max(wait_s, answer_s)
        self._leave_unsure(until)
        prefix = f"_c_{uuid.uuid4()}{NODE_NAME}"
        self._unsure = prefix
        created = self.client.create_async(f"{self.path}/{prefix}", data, ephemeral=True, sequence=True)
        listed = self.client.get_children_async(self.path)
        try:
            node = _answer(created, until)[len(self.path) + 1 :]
        except NoNodeError:
            self._unsure = None  # no parent: nothing was made
            raise
        except BaseException:
            self._leave_unsure(until, best_effort=True)
            raise
        self._unsure = None
        self.node = node
        try:
            children = _answer(listed, until)
            while node in children:
                ahead = predecessor(node, children)
                if ahead is None:
                    return True
                if not self._wait_gone(f"{self.path}/{ahead}", started + wait_s, until):
                    break
                children = _answer(self.client.get_children_async(self.path), until)
        except BaseException:
            self._leave(until, settle_by=0)
            raise
        self._leave(until, settle_by=0)
        return False

    def _wait_gone(self, path: str, deadline: float, until: float) -> bool:
        """Wait on a watch until `path` is deleted; False when the deadline passes first.

        A read, not `exists`: a watch set on a missing node would wait for its creation,
        and sequential names never come back.
        """
        gone = threading.Event()
        try:
            _answer(self.client.get_async(path, watch=lambda _event: gone.set()), until)
        except NoNodeError:
            return True
        return gone.wait(max(deadline - time.monotonic(), 0))

    def release(self, answer_s: float, settle_s: float) -> None:
        """Leave the queue; a delete whose answer is lost is sent again until `settle_s` has passed,
        each answer awaited at most `answer_s`."""
        now = time.monotonic()
        self._leave(now + answer_s, settle_by=now + settle_s, answer_s=answer_s)

    def abandon(self) -> None:
        """Forget the held node without a request; the next acquire deletes it if it outlived its session."""
        self._unsure, self.node = self.node or self._unsure, None

    def _leave(self, until: float, settle_by: float, answer_s: float = 0.0) -> None:
        node, self.node = self.node, None
        if node is None:
            return
        while True:
            try:
                _answer(self.client.delete_async(f"{self.path}/{node}"), until)
                return
            except (NoNodeError, *GONE_WITH_SESSION):
                return
            except UNANSWERED:
                if time.monotonic() >= settle_by:
                    self._unsure = node
                    return
                time.sleep(RESEND_BACKOFF_S)  # an answer that fails at once must not make this a hot loop
                until = min(time.monotonic() + answer_s, settle_by)

    def _leave_unsure(self, until: float, best_effort: bool = False) -> None:
        """Delete a node an unanswered create or delete may have left, so it cannot block the queue."""
        if self._unsure is None:
            return
        try:
            for child in _answer(self.client.get_children_async(self.path), until):
                if child.startswith(self._unsure):
                    try:
                        _answer(self.client.delete_async(f"{self.path}/{child}"), until)
                    except NoNodeError:
                        pass
        except (NoNodeError, *GONE_WITH_SESSION):
            pass
        except UNANSWERED:
            if best_effort:
                return  # still unsure: the next acquire looks again
            raise
        self._unsure = None


def _answer(result: IAsyncResult, until: float):
    """A request's answer, waited for until `until` (monotonic) at the latest."""
    try:
        return result.get(timeout=max(until - time.monotonic(), 0.01))
    except KazooTimeoutError as err:
        raise KazooTimeoutError("timed out waiting for the answer of ZooKeeper") from err
