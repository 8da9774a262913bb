"""The I/O thread pool a write reads, merges and writes its files on.

Parquet decoding and encoding and fsync release the GIL, so an upsert touching many file groups is not
paced by one file after another; the pools live per process because starting threads per write costs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, ThreadPoolExecutor, wait
from typing import TypeVar

from timeline import crash_points

# The files of one write are read, merged and written this many at a time: parquet decoding and encoding
# and fsync release the GIL, so an upsert touching many file groups is not paced by one file after another.
# On object storage each file is a request whose latency the threads overlap; locally the Python around
# each file holds the GIL, and past two threads a core they only contend (an upsert rewriting 96 files on
# 2 cores: 265 ms on 8 threads, 230 ms on 4).
IO_THREADS = 8
LOCAL_IO_THREADS = min(IO_THREADS, 2 * (os.cpu_count() or 1))
T = TypeVar("T")
R = TypeVar("R")


def each(work: Callable[[T], R], items: list[T] | range, threads: int = IO_THREADS) -> list[R]:
    """`work` over `items`, results in order; on a pool of `threads` threads when there is more than one.

    Every item is finished (or failed) before this returns or raises, so an undo
    after a failure sees every marker and file the write made; an interrupt of the
    caller (Ctrl-C) cancels the items not started and waits for the running ones.
    A simulated crash in any item wins over an error in another (a killed process
    is not undone). Under armed chaos the items run one after another
    (`crash_points.in_order`). `work` must not call `each` itself: the pool is
    shared, and a task waiting on the pool could wait forever.
    """
    if len(items) < 2 or crash_points.in_order():
        return [work(item) for item in items]
    batch = _Batch()
    futures = []
    try:
        for item in items:
            futures.append(io_pool(threads).submit(batch.run, work, item))
        wait(futures)
    except BaseException:
        batch.stop()
        raise
    errors = [future.exception() for future in futures]
    crash = next((e for e in errors if e is not None and not isinstance(e, Exception)), None)
    if crash is not None:
        raise crash
    return [future.result() for future in futures]


class _Batch:
    """The items of one `each`: once stopped, an item not yet started never starts, and `stop` returns
    only when none is running (an interrupt can land between a submit and its bookkeeping)."""

    def __init__(self) -> None:
        self.stopped = False
        self.running = 0
        self.changed = threading.Condition()

    def run(self, work: Callable[[T], R], item: T) -> R:
        with self.changed:
            if self.stopped:
                raise CancelledError
            self.running += 1
        try:
            return work(item)
        finally:
            with self.changed:
                self.running -= 1
                self.changed.notify_all()

    def stop(self) -> None:
        """Stop the batch and wait for its running items, whatever interrupts arrive meanwhile."""
        with self.changed:
            self.stopped = True
            while self.running:
                try:
                    self.changed.wait()
                except BaseException:
                    continue


_pools: dict[int, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()


def io_pool(threads: int = IO_THREADS) -> ThreadPoolExecutor:
    """One pool per width per process: starting threads per write costs about a millisecond each."""
    with _pool_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(threads, thread_name_prefix="tandem-io")
        return pool


def _forget_pool() -> None:
    """A forked child has none of its parent's threads: it starts its own pools."""
    global _pools, _pool_lock
    _pools, _pool_lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)
