"""The one process-wide cache shape: least recently used first out, bounded by entries and/or bytes.

Every cache here holds what cannot change under its key (an immutable file named by its path and the size and
time it was listed with, a completed instant's schema), so none needs invalidation; a bound is all they need.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A thread-safe map that drops its least recently used entries past `max_entries`, or past `max_bytes` as
    `size(key, value)` counts them (the newest entry always stays, however large)."""

    def __init__(
        self,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        size: Callable[[K, V], int] | None = None,
    ) -> None:
        if (max_bytes is None) != (size is None):
            raise ValueError("a byte bound needs a size function, and a size function a byte bound")
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._size = size
        self._bytes = 0

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def __contains__(self, key: K) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def put(self, key: K, value: V) -> None:
        """Keep `value` as the newest entry under `key`, replacing what was there."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None and self._size is not None:
                self._bytes -= self._size(key, old)
            self._entries[key] = value
            if self._size is not None:
                self._bytes += self._size(key, value)
            self._evict()

    def _evict(self) -> None:
        while len(self._entries) > 1 and (
            (self._max_entries is not None and len(self._entries) > self._max_entries)
            or (self._max_bytes is not None and self._bytes > self._max_bytes)
        ):
            old_key, old_value = self._entries.popitem(last=False)
            if self._size is not None:
                self._bytes -= self._size(old_key, old_value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
