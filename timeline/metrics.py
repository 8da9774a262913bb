"""Metrics of the metadata table, as the seed names them, in one process-wide registry."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

INITIALIZE = "initialize"
SYNC = "sync"
VALIDATE_ERRORS = "validate.errors"
LOOKUP_PARTITIONS = "lookup.partitions"
LOOKUP_FILES = "lookup.files"
SCAN = "scan"
TAGGING_FILES_SKIPPED = "tagging.files_skipped"


class Registry:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.counts: dict[str, int] = defaultdict(int)
        self.durations_ms: dict[str, float] = defaultdict(float)

    def incr(self, name: str, n: int = 1) -> None:
        with self._guard:
            self.counts[name] += n

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Count one `name` operation and add its duration to `name.duration`."""
        started = time.perf_counter()
        try:
            yield
        finally:
            with self._guard:
                self.counts[f"{name}.count"] += 1
                self.durations_ms[f"{name}.duration_ms"] += (time.perf_counter() - started) * 1000

    def snapshot(self) -> dict[str, float]:
        with self._guard:
            return {**self.counts, **{k: round(v, 3) for k, v in self.durations_ms.items()}}

    def reset(self) -> None:
        with self._guard:
            self.counts.clear()
            self.durations_ms.clear()


METRICS = Registry()
