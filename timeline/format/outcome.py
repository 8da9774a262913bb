"""The decision on one data instant — commit or roll back — claimed once on storage.

The lock only keeps writers out of each other's way; it can be lost under a
paused process. Safety comes from this record: a writer claims `commit` (with
its full commit metadata) immediately before it completes T, and whoever rolls
T back claims `rollback` before it deletes anything of T. Both create the same
object with create-if-absent, so exactly one decision stands, whatever the
locks believed. A `commit` decision whose `T.commit` a crash left unwritten is
rolled forward from the metadata it carries.

File: `.hoodie/.tandem-outcome/<T>` = one JSON header line, then the payload.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass

from timeline.errors import CorruptInstantError
from timeline.io.storage import Storage

OUTCOME_DIR = ".hoodie/.tandem-outcome"
COMMIT = "commit"
ROLLBACK = "rollback"
DECISIONS = (COMMIT, ROLLBACK)


@dataclass(frozen=True)
class Outcome:
    decision: str
    payload: bytes = b""
    mine: bool = False  # True when this call's claim is the one that stands

    @property
    def is_commit(self) -> bool:
        return self.decision == COMMIT

    @property
    def is_rollback(self) -> bool:
        return self.decision == ROLLBACK


def outcome_path(time: str) -> str:
    return f"{OUTCOME_DIR}/{time}"


def _encode(decision: str, payload: bytes) -> bytes:
    header = {"decision": decision, "host": socket.gethostname(), "pid": os.getpid()}
    return json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def decode(data: bytes, source: str) -> Outcome:
    """A decision record's content; `source` names it in the error when it is damaged."""
    head, _, payload = data.partition(b"\n")
    try:
        decision = json.loads(head)["decision"]
    except (ValueError, KeyError, TypeError) as err:
        raise CorruptInstantError(f"{source}: unreadable outcome record ({err})") from err
    if decision not in DECISIONS:
        raise CorruptInstantError(f"{source}: unknown decision {decision!r}")
    return Outcome(decision, payload)


def read(storage: Storage, time: str) -> Outcome | None:
    """The decision on `time`, or None while it is undecided."""
    try:
        data = storage.read_bytes(outcome_path(time))
    except FileNotFoundError:
        return None
    return decode(data, storage.uri(outcome_path(time)))


def claim(storage: Storage, time: str, decision: str, payload: bytes = b"") -> Outcome:
    """Claim `decision` for `time`; returns the decision that stands (ours, or the earlier one)."""
    if storage.create_if_absent(outcome_path(time), _encode(decision, payload)):
        return Outcome(decision, payload, mine=True)
    existing = read(storage, time)
    if existing is None:  # removed between our attempt and the read: only archival does that, for a commit
        raise CorruptInstantError(f"outcome of {time} vanished while it was being claimed")
    return existing


def forget(storage: Storage, time: str) -> None:
    """Drop a commit decision once its instant is archived (rollback decisions are kept for zombies)."""
    found = read(storage, time)
    if found is not None and found.is_commit:
        storage.discard(outcome_path(time))
