"""Storage fault injection: count every mutation, die after the k-th, optionally torn.

`install` wraps the mutating methods of `Storage` (create, create-if-absent,
write, delete, discard, discard_all, rename) in the current process. A mutation counts once,
at the outermost call: locally `discard` is a `delete`, and counting both would
give one storage change two crash states. It is only ever called in a
forked child that the enumerator then lets die, so the wrapped class never
leaks into the process that recovers and checks. With `crash_after=k` the k-th
mutation is carried out (or, torn, only a prefix of its bytes reaches storage)
and the process ends with `os._exit`, as a power cut or SIGKILL would leave it.

A torn atomic write (create-if-absent, write-replace) can only leave its
temporary file: the final name appears whole or not at all. A torn streamed
write (data and MDT base files) leaves a prefix under the final name.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from timeline import crash_points
from timeline.crash_points import CRASH_EXIT_CODE
from timeline.io.storage import Storage

MUTATIONS = ("create_if_absent", "write_bytes", "delete", "discard", "discard_all", "delete_dir", "move", "open_output")
WRITES = ("create_if_absent", "write_bytes", "open_output")


@dataclass
class MutationLog:
    """Every mutation seen, in order: (kind, relative path).

    With `journal` set, each mutation is named in that file before it happens,
    so the process that outlives the crash can say what it died after.
    """

    entries: list[tuple[str, str]] = field(default_factory=list)
    journal: Path | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, rel: str) -> int:
        with self.lock:
            if self.journal is not None:
                self.journal.write_text(f"{kind} {rel}")
            self.entries.append((kind, rel))
            return len(self.entries)


@dataclass
class FaultPlan:
    crash_after: int | None = None  # die right after this mutation (1-based)
    torn: bool = False  # only a prefix of that mutation's bytes reaches storage


def _die() -> None:
    os._exit(CRASH_EXIT_CODE)


def _torn_prefix(data: bytes) -> bytes:
    return data[: len(data) // 2]


class _StreamedOutput(io.BytesIO):
    """Buffers a streamed write so the fault plan can decide what reaches storage on close."""

    def __init__(self, finish: Callable[[bytes], None]) -> None:
        super().__init__()
        self._finish = finish

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue()
            super().close()
            self._finish(data)


def install(plan: FaultPlan, log: MutationLog) -> None:
    """Wrap Storage's mutations in this process according to `plan`."""
    crash_points.keep_order()
    original = {name: getattr(Storage, name) for name in MUTATIONS}
    inside = threading.local()  # set while a wrapped mutation runs on this thread

    def outermost(name: str, wrapper: Callable) -> Callable:
        """`wrapper` for a call from outside, the plain method for one Storage makes from within a mutation."""

        def guarded(self: Storage, *args, **kwargs):
            if getattr(inside, "active", False):
                return original[name](self, *args, **kwargs)
            inside.active = True
            try:
                return wrapper(self, *args, **kwargs)
            finally:
                inside.active = False

        return guarded

    def count(kind: str, rel: str) -> bool:
        """Record one mutation; True when it is the one to crash after."""
        return log.record(kind, rel) == plan.crash_after

    def create_if_absent(self: Storage, rel: str, data, durable: bool = True) -> bool:
        data = data if isinstance(data, bytes) else b"".join(data)  # chunks: tear the whole
        last = count("create_if_absent", rel)
        if last and plan.torn:
            original["write_bytes"](self, f"{rel}.torn.tmp", _torn_prefix(data))
            _die()
        created = original["create_if_absent"](self, rel, data, durable)
        if last:
            _die()
        return created

    def write_bytes(self: Storage, rel: str, data: bytes) -> None:
        last = count("write_bytes", rel)
        original["write_bytes"](self, f"{rel}.torn.tmp" if last and plan.torn else rel, _maybe_torn(data, last))
        if last:
            _die()

    def _maybe_torn(data: bytes, last: bool) -> bytes:
        return _torn_prefix(data) if last and plan.torn else data

    def whole(kind: str, target: Callable[..., str] = lambda rel: rel) -> Callable:
        """A mutation that cannot tear (delete, delete_dir, move): it happens, then maybe the crash."""

        def wrapper(self: Storage, *args):
            last = count(kind, target(*args))
            result = original[kind](self, *args)
            if last:
                _die()
            return result

        return wrapper

    def open_output(self: Storage, rel: str):
        def finish(data: bytes) -> None:
            last = count("open_output", rel)
            with original["open_output"](self, rel) as out:
                out.write(_maybe_torn(data, last))
            if last:
                _die()

        return _StreamedOutput(finish)

    wrappers = {
        "create_if_absent": create_if_absent,
        "write_bytes": write_bytes,
        "delete": whole("delete"),
        "discard": whole("discard"),
        "discard_all": whole("discard_all", lambda rels: ", ".join(rels)),
        "delete_dir": whole("delete_dir"),
        "move": whole("move", lambda src, dst: f"{src} -> {dst}"),
        "open_output": open_output,
    }
    for name in MUTATIONS:
        setattr(Storage, name, outermost(name, wrappers[name]))
