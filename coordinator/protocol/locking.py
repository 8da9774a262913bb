"""Holding a table's lock for one protected step, and opening it from the coordinator's settings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from coordinator.config import CoordinatorConfig
from locks.base import LockProvider
from locks.config import open_lock
from timeline.table import Table


def table_lock(table: Table, config: CoordinatorConfig) -> LockProvider:
    """The lock provider `config.lock_uri` names, for `table`, on a store that fences (or an allowed override)."""
    table.storage.require_fencing(config.lock_uri)
    return open_lock(config.lock_uri, table.uri, table.config.name)


@contextmanager
def held(lock: LockProvider, instant: str | None = None, timeout_s: float | None = None) -> Iterator[int]:
    """Acquire (bounded), yield the fencing token, always release."""
    token = lock.acquire(timeout_s, instant)
    try:
        yield token
    finally:
        lock.release()
