"""Work on a stream's next items on a thread of its own while the caller handles the current one.

A streamed insert decodes its input, computes keys and partition paths and splits
the rows on this thread while the caller encodes and writes files: both halves are
Arrow and numpy kernels that release the GIL, so on two cores they overlap.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
_ITEM, _END, _ERROR = "item", "end", "error"


def prefetched(source: Iterable[T], work: Callable[[T], R], depth: int = 2) -> Iterator[R]:
    """`work(item)` for each item of `source`, computed up to `depth` items ahead on a producer thread.

    An error in `source` or `work` is raised to the caller in its place in the stream.
    When the caller stops early (an error of its own, an interrupt), the producer
    finishes the item in hand, produces no more, and is joined before this returns.
    """
    results: queue.Queue[tuple[str, object]] = queue.Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in source:
                if stop.is_set():
                    break
                results.put((_ITEM, work(item)))
            results.put((_END, None))
        except BaseException as err:  # handed to the caller, who raises it
            results.put((_ERROR, err))

    producer = threading.Thread(target=produce, name="tandem-prefetch", daemon=True)
    producer.start()
    done = False
    try:
        while True:
            kind, value = results.get()
            if kind == _END:
                done = True
                return
            if kind == _ERROR:
                done = True
                raise value
            yield value
    finally:
        stop.set()
        while not done:  # make room until the producer says it is done
            done = results.get()[0] != _ITEM
        producer.join()
