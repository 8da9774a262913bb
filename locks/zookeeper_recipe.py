"""kazoo's Lock recipe with its create and its listing sent together.

kazoo creates the contender node, waits for the answer, then lists the
parent. ZooKeeper answers one session's requests in the order they were sent,
so a listing sent right behind the create already holds the new node: an
uncontended acquire takes one round trip instead of two. The node names are
kazoo's (`<uuid>__lock__<sequence>`), so this recipe and kazoo's own queue as
one: a process on an older release still excludes this one.
"""

from __future__ import annotations

import re
import threading
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

NODE_NAME = "__lock__"
CONTENDER = re.compile(r"(?:__lock__|__rlock__)(-?\d{10})$")


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
        self._unsure: str | None = None

    def acquire(self, data: bytes, timeout_s: float) -> bool:
        """Queue for the lock for at most `timeout_s`, `data` naming the holder; one that gives up leaves the queue.

        Raises NoNodeError when the parent path is gone (the caller re-makes it).
        """
        self._leave_unsure()
        prefix = uuid.uuid4().hex + NODE_NAME
        self._unsure = prefix  # a create whose answer is lost may still have made the node
        created = self.client.create_async(f"{self.path}/{prefix}", data, ephemeral=True, sequence=True)
        listed = self.client.get_children_async(self.path)
        node = created.get()[len(self.path) + 1 :]
        self._unsure = None
        self.node = node
        deadline = time.monotonic() + timeout_s
        try:
            children = listed.get()
            while node in children:
                ahead = predecessor(node, children)
                if ahead is None:
                    return True
                if not self._wait_gone(f"{self.path}/{ahead}", deadline):
                    break
                children = self.client.get_children(self.path)
        except BaseException:
            self.release()
            raise
        self.release()
        return False

    def _wait_gone(self, path: str, deadline: float) -> bool:
        """Wait on a watch until `path` is deleted; False when the deadline passes first."""
        gone = threading.Event()
        if self.client.exists(path, watch=lambda _event: gone.set()) is None:
            return True
        return gone.wait(max(deadline - time.monotonic(), 0))

    def release(self) -> None:
        """Delete this contender's node; one whose delete fails is looked for before the next create."""
        node, self.node = self.node, None
        if node is None:
            return
        try:
            self.client.delete(f"{self.path}/{node}")
        except NoNodeError:
            pass
        except KazooException:
            self._unsure = node

    def abandon(self) -> None:
        """Forget the held node without a request; the next acquire deletes it if it outlived its session."""
        self._unsure, self.node = self.node or self._unsure, None

    def _leave_unsure(self) -> None:
        """Delete a node a failed create or release may have left, so it cannot block the queue."""
        if self._unsure is None:
            return
        for child in self.client.get_children(self.path):
            if child.startswith(self._unsure):
                try:
                    self.client.delete(f"{self.path}/{child}")
                except NoNodeError:
                    pass
        self._unsure = None
