"""The one lock interface every provider implements, and the retry loop they share.

A lock is liveness, not safety (DESIGN §7): a lease can expire under a paused
holder. Providers therefore hand out strictly increasing fencing tokens and
raise a lost-lock signal that the coordinator checks before each protected write.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from tenacity import (
    RetryError,
    Retrying,
    retry_if_result,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from locks.lease_renewal import LeaseRenewer, Renew
from timeline.errors import LockError

_DIGEST = re.compile(r"(digest(?:=|%3D))([^:&\s'\"%]*)(:|%3A)([^&\s'\"]*)", re.IGNORECASE)
_USERINFO = re.compile(r"(://|%3A%2F%2F)([^/@\s'\"?&#:%]*)(:|%3A)([^/@\s'\"?&#]*)(@|%40)", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with the password of `digest=user:password` and of `scheme://user:password@host` as `***`.

    Lock URIs carry secrets; every error line and log that may show one goes through here.
    """
    return _USERINFO.sub(r"\1\2\3***\5", _DIGEST.sub(r"\1\2\3***", text))


class LockServiceUnreachable(LockError):
    """The lock service did not answer; acquisition retries it like contention, within the same bound."""


def connection_cause(err: BaseException) -> str:
    """A short cause for a failed connection ("connection refused", "timed out"), else the error itself."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [err]
    while pending:
        current = pending.pop()
        if current is None or current in seen:
            continue
        seen.append(current)
        text = str(current).lower()
        if isinstance(current, ConnectionRefusedError) or "connection refused" in text:
            return "connection refused"
        kwargs = getattr(current, "kwargs", None)
        nested = kwargs.get("error") if isinstance(kwargs, dict) else None
        pending += [current.__cause__, current.__context__, nested if isinstance(nested, BaseException) else None]
    if any(isinstance(e, TimeoutError) or "timed out" in str(e).lower() for e in seen):
        return "timed out"
    return redact(f"{type(err).__name__}: {err}")


def probe(host: str, port: int, timeout_s: float) -> str | None:
    """Why a TCP connection to host:port fails (within `timeout_s`), or None when it opens."""
    try:
        with socket.create_connection((host, port), timeout=max(timeout_s, 0.01)):
            return None
    except OSError as err:
        return connection_cause(err)


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter, bounded in total time and attempts."""

    wait_time_s: float = 60.0
    num_retries: int = 10_000
    initial_backoff_s: float = 0.005
    max_backoff_s: float = 0.25


@dataclass
class OwnerInfo:
    """Who holds a lock, for diagnostics (`tandem lock status`)."""

    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    instant: str | None = None
    acquired_at: float = field(default_factory=time.time)
    token: int = 0

    def to_json(self) -> str:
        """Sorted keys, built directly: `asdict` deep-copies, a cost paid on every lock acquisition."""
        return json.dumps(
            {
                "acquired_at": self.acquired_at,
                "host": self.host,
                "instant": self.instant,
                "pid": self.pid,
                "token": self.token,
            }
        )

    @staticmethod
    def from_json(text: str | bytes) -> OwnerInfo:
        doc = json.loads(text)
        return OwnerInfo(**{k: doc[k] for k in ("host", "pid", "instant", "acquired_at", "token") if k in doc})


class LockProvider(ABC):
    """Acquire with a bound, release, fencing token, held/lost state, owner info."""

    name = "lock"

    def __init__(self, retry: RetryPolicy | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.lost = threading.Event()
        self.token: int | None = None
        self.instant: str | None = None
        # For lease-based providers: monotonic time after which the lease may have
        # passed. Counted from when the acquiring or renewing request was SENT.
        self.valid_until: float | None = None
        self.deadline: float | None = None  # monotonic end of the running acquisition's bound
        self.last_error: Exception | None = None  # why the last attempt failed, if it raised
        self._lease_s = 0.0
        self._renewer = LeaseRenewer(self.name, self._renewed, self.lost.set)

    @abstractmethod
    def try_acquire(self) -> int | None:
        """One attempt: the new fencing token, or None if someone else holds the lock."""

    @abstractmethod
    def release(self) -> None:
        """Release if still ours; never frees a lock another holder has since taken."""

    @abstractmethod
    def owner(self) -> OwnerInfo | None:
        """The current holder, or None if the lock is free."""

    @abstractmethod
    def force_release(self) -> None:
        """Free a stuck lock whoever holds it (operator action)."""

    def close(self) -> None:
        """Release client resources (sessions, threads)."""
        self._renewer.close()

    def is_held(self) -> bool:
        if self.valid_until is not None and time.monotonic() >= self.valid_until:
            return False
        return self.token is not None and not self.lost.is_set()

    @staticmethod
    def lease_deadline(sent_at: float, lease_s: float) -> float:
        """When a lease granted by a request sent at `sent_at` may be gone (with a safety margin)."""
        return sent_at + lease_s - max(0.1 * lease_s, 0.05)

    def start_heartbeat(self, lease_s: float, renew: Renew) -> None:
        """Renew the lease every lease/3 on the provider's renewal thread.

        `renew` returns True when renewed (the deadline moves on from the send
        time), False when the lock is no longer ours (lost), None when the
        service could not be reached (try again; the deadline decides).
        """
        self._renewer.start(lease_s, renew)
        self._lease_s = lease_s

    def _renewed(self, sent_at: float) -> None:
        self.valid_until = self.lease_deadline(sent_at, self._lease_s)

    def stop_heartbeat(self) -> None:
        self._renewer.stop()

    def check(self) -> None:
        """Raise if the lock was lost: called before every protected write."""
        if self.token is None:
            raise LockError(f"{self.name} lock is not held")
        if self.valid_until is not None and time.monotonic() >= self.valid_until:
            self.lost.set()
        if self.lost.is_set():
            raise LockError(f"{self.name} lock was lost (lease expired or session ended)")

    def remaining_s(self, default: float) -> float:
        """How long a blocking call may take: `default`, cut to what is left of a running acquisition."""
        if self.deadline is None:
            return default
        return max(min(default, self.deadline - time.monotonic()), 0.0)

    def acquire(self, timeout_s: float | None = None, instant: str | None = None) -> int:
        """Retry `try_acquire` with backoff until `timeout_s` (or the policy's bound).

        No attempt starts after the bound, and providers cut their blocking calls
        to what is left of it, so an unreachable service gives up on time.
        """
        bound = self.retry.wait_time_s if timeout_s is None else timeout_s
        self.instant = instant
        self.last_error = None
        attempts = Retrying(
            retry=retry_if_result(lambda token: token is None),
            wait=wait_random_exponential(multiplier=self.retry.initial_backoff_s, max=self.retry.max_backoff_s),
            stop=stop_before_delay(bound) | stop_after_attempt(self.retry.num_retries + 1),
            reraise=True,
        )
        self.deadline = time.monotonic() + bound
        try:
            token = attempts(self._attempt)
        except RetryError as err:
            failed = self.last_error
            why = f": {self.describe_failure(failed)}" if failed is not None else self._describe_holder()
            raise LockError(redact(f"could not acquire the {self.name} lock within {bound:g}s{why}")) from err
        finally:
            self.deadline = None
        self.lost.clear()
        self.token = token
        return token

    def _attempt(self) -> int | None:
        try:
            token = self.try_acquire()
        except LockServiceUnreachable as err:
            self.last_error = err
            return None
        except LockError:
            raise
        except Exception as err:
            # An unreachable lock service is retried like contention, within the same bound.
            self.last_error = err
            return None
        self.last_error = None
        return token

    def describe_failure(self, err: Exception) -> str:
        """Why the last attempt failed, for the error line (never with a secret in it)."""
        if isinstance(err, LockServiceUnreachable):
            return str(err)
        return f"the {self.name} lock service failed: {connection_cause(err)}"

    def _describe_holder(self) -> str:
        try:
            holder = self.owner()
        except Exception:  # diagnostics must not hide the real error
            return ""
        if holder is None:
            return ""
        return f" (held by pid {holder.pid} on {holder.host}, token {holder.token})"

    def __enter__(self) -> LockProvider:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
