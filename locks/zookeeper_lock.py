"""ZooKeeper (kazoo): kazoo's Lock recipe, pipelined, with Curator's node names, at BASE_PATH/lock_key.

SUSPENDED pauses protected writes until RECONNECTED (bounded by the session
timeout); LOST means the session and its ephemeral lock node are gone, so the
transaction must abort. The fencing token is the lock node's sequence number,
which ZooKeeper increases monotonically under the parent.
"""

from __future__ import annotations

import threading
import time

from locks.base import LockProvider, LockServiceUnreachable, OwnerInfo, RetryPolicy, connection_cause, probe
from timeline.errors import LockError

RECONNECT_MAX_DELAY_S = 1.0


class ZookeeperLock(LockProvider):
    name = "zookeeper"

    def __init__(
        self,
        hosts: str,
        base_path: str,
        lock_key: str,
        session_timeout_s: float = 10.0,
        connection_timeout_s: float = 5.0,
        digest: tuple[str, str] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(retry)
        from kazoo.client import KazooClient
        from kazoo.security import make_digest_acl

        from locks.zookeeper_recipe import PipelinedLock

        self.hosts = hosts
        self.path = f"{base_path.rstrip('/')}/{lock_key}"
        self.connection_timeout_s = connection_timeout_s
        self.session_timeout_s = session_timeout_s
        self.attempt_wait_s = 0.5
        # Reconnect attempts back off to at most RECONNECT_MAX_DELAY_S apart (kazoo's default grows to an hour):
        # a holder whose server restarts must find it back well within its session timeout.
        retry = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": RECONNECT_MAX_DELAY_S}
        kwargs: dict = {"hosts": hosts, "timeout": session_timeout_s, "connection_retry": retry}
        if digest:
            user, password = digest
            kwargs["auth_data"] = [("digest", f"{user}:{password}")]
            kwargs["default_acl"] = [make_digest_acl(user, password, all=True)]
        self.client = KazooClient(**kwargs)
        self.connected = threading.Event()
        self.suspended_at = 0.0
        self.client.add_listener(self._on_state)
        self._lock = PipelinedLock(self.client, self.path)
        self._started = False

    def _on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.CONNECTED:
            self.connected.set()
        elif state == KazooState.SUSPENDED:
            self.suspended_at = time.monotonic()
            self.connected.clear()
        elif state == KazooState.LOST:
            self.connected.clear()
            if self.token is not None:
                self.lost.set()

    def _ensure_started(self) -> None:
        """Connect within what is left of the acquisition's bound; failing that, say why.

        A plain TCP probe first: when no server accepts a connection the attempt
        fails at once with the socket's reason, instead of kazoo waiting out its timeout.
        """
        if self._started:
            return
        where = f"cannot reach the zookeeper lock service at {self.hosts}"
        refused = self._refusal()
        if refused is not None:
            raise LockServiceUnreachable(f"{where}: {refused}")
        try:
            self.client.start(timeout=self.remaining_s(self.connection_timeout_s))
        except Exception as err:
            raise LockServiceUnreachable(f"{where}: {connection_cause(err)}") from err
        self._started = True
        self.client.ensure_path(self.path)

    def _refusal(self) -> str | None:
        """Why no host accepts a TCP connection (one reason for all), or None when one does."""
        causes = set()
        for host_port in self.hosts.split(","):
            host, _, port = host_port.rpartition(":")
            cause = probe(host.strip("[]"), int(port), self.remaining_s(self.connection_timeout_s))
            if cause is None:
                return None
            causes.add(cause)
        return " / ".join(sorted(causes))

    def try_acquire(self) -> int | None:
        """The recipe's create and listing in one round trip (delete on release).

        The path was ensured at connect; a create that finds it gone makes it anew.
        The token is the node's sequence number, so nothing is written after the create.
        """
        from kazoo.exceptions import NoNodeError

        self._ensure_started()
        try:
            # Wait briefly on a watch rather than polling: contenders queue fairly.
            holder = OwnerInfo(instant=self.instant).to_json().encode()
            wait_s, answer_s = self.remaining_s(self.attempt_wait_s), self.remaining_s(self.connection_timeout_s)
            if not self._lock.acquire(holder, wait_s=max(wait_s, 0.01), answer_s=answer_s):
                return None
        except NoNodeError:
            self.client.ensure_path(self.path)
            return None
        return int(self._lock.node[-10:])

    def check(self) -> None:
        """While SUSPENDED, wait for RECONNECTED; past the session timeout, or LOST, abort.

        A server that is down expires nobody, so the client cannot learn of expiry
        from it: after a session timeout without a connection, another client may
        hold the lock, and this holder must consider it lost.
        """
        super().check()
        if not self.connected.is_set():
            remaining = self.suspended_at + self.session_timeout_s - time.monotonic()
            if not self.connected.wait(max(remaining, 0)):
                self.lost.set()
                raise LockError("zookeeper connection suspended for longer than the session timeout: lock lost")
        super().check()

    def release(self) -> None:
        if self.token is not None and self.lost.is_set():
            self._lock.abandon()  # a lost session cannot be asked now: the next acquire looks for the node
        elif self.token is not None:
            self._lock.release(answer_s=self.connection_timeout_s, settle_s=self.session_timeout_s)
        self.token = None

    def _holder_node(self) -> str | None:
        """The first contender, ours, kazoo's or Curator's (a Java Hudi writer's)."""
        from locks.zookeeper_recipe import CONTENDER

        children = [(m.group(1), c) for c in self.client.get_children(self.path) if (m := CONTENDER.search(c))]
        return min(children)[1] if children else None

    def owner(self) -> OwnerInfo | None:
        self._ensure_started()
        node = self._holder_node()
        if node is None:
            return None
        data, _ = self.client.get(f"{self.path}/{node}")
        try:
            holder = OwnerInfo.from_json(data)
        except (ValueError, TypeError):  # not ours: Curator writes the client's IP address
            holder = OwnerInfo(host=data.decode(errors="replace") or "?", pid=0)
        holder.token = int(node[-10:])
        return holder

    def force_release(self) -> None:
        self._ensure_started()
        node = self._holder_node()
        if node is not None:
            self.client.delete(f"{self.path}/{node}")

    def close(self) -> None:
        self.release()
        if self._started:
            self.client.stop()
            self.client.close()
            self._started = False
        super().close()
