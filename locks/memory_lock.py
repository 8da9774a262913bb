"""In-process lock for threads of one process, shared by name."""

from __future__ import annotations

import threading

from locks.base import LockProvider, OwnerInfo, RetryPolicy

_registry_guard = threading.Lock()
_registry: dict[str, _Slot] = {}


class _Slot:
    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.counter = 0
        self.holder: tuple[object, OwnerInfo] | None = None


class MemoryLock(LockProvider):
    name = "memory"

    def __init__(self, key: str, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry)
        with _registry_guard:
            self.slot = _registry.setdefault(key, _Slot())

    def try_acquire(self) -> int | None:
        with self.slot.guard:
            if self.slot.holder is not None:
                return None
            self.slot.counter += 1
            owner = OwnerInfo(instant=self.instant, token=self.slot.counter)
            self.slot.holder = (self, owner)
            return self.slot.counter

    def release(self) -> None:
        with self.slot.guard:
            if self.slot.holder is not None and self.slot.holder[0] is self:
                self.slot.holder = None
        self.token = None

    def owner(self) -> OwnerInfo | None:
        holder = self.slot.holder
        return holder[1] if holder else None

    def force_release(self) -> None:
        with self.slot.guard:
            if self.slot.holder is not None:
                self.slot.holder[0].lost.set()
            self.slot.holder = None
