"""Named crash points: every protocol step calls `crash_point(name)` after it.

It lives at the bottom of production (below locks and coordinator) so that the protocol modules can name
their steps without importing chaos, which sits on top of them: chaos and the tests drive it from above
(`simulate`, `observe`, `keep_order`, the environment variables below).

With chaos off (no `TANDEM_CRASH_AT` in the environment) a call is one dict
lookup. With `TANDEM_CRASH_AT=name[:n]` the process dies with `os._exit` at the
n-th hit of that point, leaving storage exactly as a SIGKILL would. With
`TANDEM_PAUSE_AT=name[:n]` it stops itself there (SIGSTOP) instead, so a test
or nemesis can act while it is frozen mid-protocol and then SIGCONT it.
With `TANDEM_CRASH_ONCE=FILE` as well, only the first process to get there dies
(it creates FILE first): a Spark task dies once and its retry goes through.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

CRASH_EXIT_CODE = 137

REGISTRY: dict[str, str] = {}
_hits: dict[str, int] = {}
_hits_lock = threading.Lock()  # a writer hits points on several threads; each n-th hit is counted once
_simulated: list[tuple[str, int]] = []
_observer: Callable[[str], None] | None = None


class SimulatedCrash(BaseException):
    """Raised instead of dying, for in-process simulation. Like a kill, it skips
    every `except Exception` cleanup path; only recovery may repair after it."""


def register(name: str, doc: str) -> str:
    """Declare a crash point; a point used without registration is a bug."""
    REGISTRY[name] = doc
    return name


@contextmanager
def simulate(name: str, nth: int = 1) -> Iterator[None]:
    """Within the block, the n-th hit of `name` raises SimulatedCrash."""
    if name not in REGISTRY:
        raise KeyError(f"crash point {name!r} is not registered")
    _simulated.append((name, nth))
    _hits.pop(name, None)
    try:
        yield
    finally:
        _simulated.remove((name, nth))
        _hits.pop(name, None)


_in_order = False  # set by chaos.storage_faults: its mutation count must name the same step every run


def keep_order() -> None:
    """Have this process's writers take their steps one after another (see `in_order`)."""
    global _in_order
    _in_order = True


def in_order() -> bool:
    """Whether chaos is armed in this process: a crash or pause at the n-th hit of a point, an observer
    counting hits, or counted storage mutations. A writer then writes its files one after another, so
    that "the n-th hit" and "after mutation k" name the same step in every run and a replay reproduces it."""
    return (
        _in_order
        or bool(_simulated)
        or _observer is not None
        or bool(os.environ.get("TANDEM_CRASH_AT") or os.environ.get("TANDEM_PAUSE_AT"))
    )


def observe(callback: Callable[[str], None] | None) -> None:
    """Have every hit of every point reported to `callback` (the enumerator counts them)."""
    global _observer
    _observer = callback


def reset_hits() -> None:
    """Forget hit counts (a forked child starts counting afresh)."""
    _hits.clear()


def _from_env(variable: str) -> tuple[str, int] | None:
    spec = os.environ.get(variable)
    if not spec:
        return None
    name, _, nth = spec.partition(":")
    return name, int(nth or "1")


def _hit(name: str, target: tuple[str, int] | None) -> bool:
    """Count a hit of `name`; True when it is the target's n-th."""
    if target is None or target[0] != name:
        return False
    with _hits_lock:
        _hits[name] = _hits.get(name, 0) + 1
        return _hits[name] == target[1]


def _first_to_crash() -> bool:
    """True unless `TANDEM_CRASH_ONCE` names a file some process already created."""
    once = os.environ.get("TANDEM_CRASH_ONCE")
    if not once:
        return True
    try:
        os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def crash_point(name: str) -> None:
    """Die (or freeze) here if chaos asked for it; otherwise do nothing."""
    if name not in REGISTRY:
        raise KeyError(f"crash point {name!r} is not registered")
    if _observer is not None:
        _observer(name)
    if _simulated:
        if _hit(name, _simulated[-1]):
            raise SimulatedCrash(name)
        return
    if _hit(name, _from_env("TANDEM_CRASH_AT")) and _first_to_crash():
        os._exit(CRASH_EXIT_CODE)
    if _hit(name, _from_env("TANDEM_PAUSE_AT")):
        os.kill(os.getpid(), signal.SIGSTOP)
