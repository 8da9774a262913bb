"""One long-lived daemon thread per lock provider that renews the current lease.

Starting a thread on every acquire costs more than the lock file itself on a
small commit, so the thread stays and idles between holds. `stop` returns only
once no renewal is running, so a renewal can never rewrite a released lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Renew = Callable[[], bool | None]


class LeaseRenewer:
    """Calls `renew` every lease/3 while a lease is held; reports the outcome through callbacks."""

    def __init__(self, name: str, on_renewed: Callable[[float], None], on_lost: Callable[[], None]) -> None:
        self._name = name
        self._on_renewed = on_renewed  # gets the monotonic send time of the renewing request
        self._on_lost = on_lost
        self._state = threading.Condition()
        self._running = threading.Lock()  # held for the duration of one renewal
        self._renew: Renew | None = None
        self._lease_s = 0.0
        self._generation = 0
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self, lease_s: float, renew: Renew) -> None:
        with self._state:
            self._renew, self._lease_s = renew, lease_s
            self._generation += 1
            if self._thread is None:
                name = f"tandem-{self._name}-lock-renewal"
                self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
                self._thread.start()
            self._state.notify_all()

    def stop(self) -> None:
        with self._state:
            self._renew = None
            self._generation += 1
            self._state.notify_all()
        with self._running:  # wait out a renewal already under way
            pass

    def close(self) -> None:
        with self._state:
            self._closed = True
        self.stop()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while True:
            with self._state:
                while self._renew is None and not self._closed:
                    self._state.wait()
                if self._closed:
                    return
                generation = self._generation
                self._state.wait(self._lease_s / 3)
                if self._closed:
                    return
                if self._generation != generation or self._renew is None:
                    continue  # released or re-acquired meanwhile: start the wait over
                renew = self._renew
                self._running.acquire()
            try:
                sent_at = time.monotonic()
                renewed = renew()
                if renewed is False:
                    self._on_lost()
                    with self._state:
                        if self._generation == generation:
                            self._renew = None
                elif renewed:
                    self._on_renewed(sent_at)
            finally:
                self._running.release()
