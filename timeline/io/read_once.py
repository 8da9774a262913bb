"""One step of a commit reads each listing once: a memo of reads, dropped by any write below them.

A commit's begin (orphan rollback, the MDT health check, the choice of T) and its
pre-commit checks (conflicts, health) each read the data timeline, the MDT
timeline, the MDT's slices and whether the MDT exists, several times over: on S3
each is a request. Inside `reuse_reads()` the first read is kept and served again,
until this thread writes anything at or below the folder it came from. That is
what one read at the first moment would have seen, so nothing decided here relies
on more than before: every decision is still fenced by a create-if-absent on
storage, and the post-claim conflict check runs outside any scope, on a fresh read.
A deletion judged against a listing made after the memo (recovery's stray-marker
sweep) reads past it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
_local = threading.local()


@contextmanager
def reuse_reads() -> Iterator[None]:
    """Keep reads for the duration of the block (nested blocks share the outer one's memo)."""
    if getattr(_local, "memo", None) is not None:
        yield
        return
    _local.memo = {}
    try:
        yield
    finally:
        _local.memo = None


def remembered(root: str, what: str, read: Callable[[], T]) -> T:
    """`read()`, or inside a scope the value it gave for (`root`, `what`) since the last write below `root`."""
    memo = getattr(_local, "memo", None)
    if memo is None:
        return read()
    key = (root, what)
    if key not in memo:
        memo[key] = read()
    return memo[key]


def recall(root: str, what: str) -> tuple[bool, object]:
    """(True, value) when the scope holds a read of (`root`, `what`); (False, None) otherwise."""
    memo = getattr(_local, "memo", None)
    if memo is None or (root, what) not in memo:
        return False, None
    return True, memo[(root, what)]


def offer(root: str, what: str, value: object) -> None:
    """Inside a scope, keep `value` as what a read of (`root`, `what`) gives: one listing answered it."""
    memo = getattr(_local, "memo", None)
    if memo is not None:
        memo[(root, what)] = value


def forget(path: str) -> None:
    """A write to `path` (a full storage path): drop every read of a folder that holds it, and every read
    below it (a folder deleted whole)."""
    memo = getattr(_local, "memo", None)
    if memo:
        for key in [k for k in memo if _related(path, k[0])]:
            del memo[key]


def _related(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/") or root.startswith(path + "/")
