"""Named crash points: every protocol step calls `crash_point(name)` after it.

With chaos off (no `TANDEM_CRASH_AT` in the environment) a call is one dict
lookup. With `TANDEM_CRASH_AT=name[:n]` the process dies with `os._exit` at the
n-th hit of that point, leaving storage exactly as a SIGKILL would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

CRASH_EXIT_CODE = 137

REGISTRY: dict[str, str] = {}
_hits: dict[str, int] = {}
_simulated: list[tuple[str, int]] = []


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


def _target() -> tuple[str, int] | None:
    if _simulated:
        return _simulated[-1]
    spec = os.environ.get("TANDEM_CRASH_AT")
    if not spec:
        return None
    name, _, nth = spec.partition(":")
    return name, int(nth or "1")


def crash_point(name: str) -> None:
    """Die here if chaos asked for it; otherwise do nothing."""
    if name not in REGISTRY:
        raise KeyError(f"crash point {name!r} is not registered")
    target = _target()
    if target is None or target[0] != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == target[1]:
        if _simulated:
            raise SimulatedCrash(name)
        os._exit(CRASH_EXIT_CODE)
