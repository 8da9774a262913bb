"""A separate process for lock tests: acquire N times, update a shared counter under the lock.

Usage: python -m tests.lock_worker LOCK_URI TABLE_BASE N COUNTER_FILE LOG_FILE [HOLD_S]
With N=0 it acquires once, prints READY with its token, and holds until killed.
"""

from __future__ import annotations

import sys
import time

from locks.config import open_lock
from timeline.errors import LockError


def main() -> None:
    uri, base, n, counter_file, log_file = sys.argv[1:6]
    hold = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    lock = open_lock(uri, base, "locktest")
    if int(n) == 0:
        token = lock.acquire(timeout_s=60)
        print(f"READY {token}", flush=True)
        while True:
            time.sleep(1)
    done = 0
    while done < int(n):
        token = lock.acquire(timeout_s=120)
        try:
            lock.check()  # the contract: check before every protected write
        except LockError:
            lock.release()
            continue
        with open(counter_file) as handle:
            value = int(handle.read() or 0)
        with open(counter_file, "w") as handle:
            handle.write(str(value + 1))
        with open(log_file, "a") as handle:
            handle.write(f"{token}\n")
        done += 1
        if hold:
            time.sleep(hold)
        lock.release()
    lock.close()


if __name__ == "__main__":
    main()
