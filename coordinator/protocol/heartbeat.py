"""Writer heartbeats: `.hoodie/.heartbeat/<instant>` rewritten every interval (Hudi's scheme).

Under the LAZY failed-writes policy a pending instant is an orphan only when its
heartbeat is older than interval x tolerable misses; a missing heartbeat file
counts as expired (every writer starts its heartbeat under the lock in begin,
before anyone else can see its instant). The file names its writer (host, pid
and the process's start time), so a writer known dead on this host is an
orphan at once, without waiting for the expiry.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time

from coordinator.config import CoordinatorConfig
from timeline.io.storage import Storage
from timeline.table import HEARTBEAT_DIR


def heartbeat_path(instant: str) -> str:
    return f"{HEARTBEAT_DIR}/{instant}"


def last_beat(storage: Storage, instant: str) -> float | None:
    """Epoch seconds of the instant's last heartbeat, or None if it has none."""
    return storage.mtime(heartbeat_path(instant))


def _process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (tells a reused pid apart), None where /proc has no answer."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _identity() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _process_start(os.getpid())}


def writer_is_gone(storage: Storage, instant: str) -> bool:
    """True only when the heartbeat names a process on this host that no longer runs."""
    try:
        owner = json.loads(storage.read_bytes(heartbeat_path(instant)))
    except (FileNotFoundError, ValueError):
        return False
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname() or not owner.get("pid"):
        return False
    start = _process_start(int(owner["pid"]))
    return start is None or (owner.get("start") is not None and start != owner["start"])


def is_expired(storage: Storage, instant: str, expiry_s: float, now: float | None = None) -> bool:
    beat = last_beat(storage, instant)
    return beat is None or (now if now is not None else time.time()) - beat > expiry_s


class Heartbeat:
    """Keeps one instant's heartbeat fresh from a daemon thread until stopped."""

    def __init__(self, storage: Storage, instant: str, interval_s: float, expiry_s: float) -> None:
        self.storage = storage
        self.instant = instant
        self.interval_s = interval_s
        self.expiry_s = expiry_s
        self.last_success = 0.0  # monotonic time of the last successful write
        self._owner = _identity()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def from_config(storage: Storage, instant: str, config: CoordinatorConfig) -> Heartbeat:
        return Heartbeat(storage, instant, config.heartbeat_interval_ms / 1000, config.heartbeat_expiry_s)

    def beat(self) -> None:
        sent = time.monotonic()
        beat = {"ms": int(time.time() * 1000), **self._owner}
        self.storage.write_bytes(heartbeat_path(self.instant), json.dumps(beat).encode())
        self.last_success = sent

    def start(self) -> None:
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"tandem-heartbeat-{self.instant}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except OSError:
                continue  # storage hiccup: the next beat may succeed; `is_alive` decides

    def is_alive(self) -> bool:
        """False once our own last beat is older than the expiry: others may roll us back."""
        return time.monotonic() - self.last_success <= self.expiry_s

    def stop(self, delete: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if delete:
            self.storage.discard(heartbeat_path(self.instant))
