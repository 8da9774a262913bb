"""Instant times and instants of a Hudi timeline (layout version 1)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from functools import lru_cache

from timeline.errors import BadInputError, CorruptInstantError

INSTANT_FORMAT = "%Y%m%d%H%M%S%f"
INSTANT_LENGTH = 17


class State(str, Enum):
    REQUESTED = "REQUESTED"
    INFLIGHT = "INFLIGHT"
    COMPLETED = "COMPLETED"


COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
CLEAN = "clean"
ROLLBACK = "rollback"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
SAVEPOINT = "savepoint"
RESTORE = "restore"
INDEXING = "indexing"
KNOWN_ACTIONS = {
    COMMIT,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    CLEAN,
    ROLLBACK,
    COMPACTION,
    LOG_COMPACTION,
    SAVEPOINT,
    RESTORE,
    INDEXING,
}
WRITE_ACTIONS = {COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION}
TABLE_SERVICE_ACTIONS = {CLEAN, ROLLBACK, COMPACTION, LOG_COMPACTION, RESTORE, INDEXING}

_TIME_RE = re.compile(r"[0-9]{14}(?:[0-9]{3})?")  # ASCII digits only: `\d` also matches other scripts' digits
# a metadata table's own actions append 3-digit suffixes to a data instant: `<T>001` (compaction), `<T>011`
# (a partition's initialization), `<T>011001` (the compaction after it)
TIMELINE_TIME_PATTERN = r"[0-9]{14,17}(?:[0-9]{3}){0,2}"
_FILE_RE = re.compile(rf"^({TIMELINE_TIME_PATTERN})\.([a-z]+)(?:\.(requested|inflight))?$")


@dataclass(frozen=True, order=True)
class Instant:
    """One action at one time in one state; ordered by time, then action."""

    time: str
    action: str
    state: State

    @property
    def is_completed(self) -> bool:
        return self.state == State.COMPLETED

    @property
    def timeline_action(self) -> str:
        """The action as Hudi's timeline loads it: a completed compaction is a commit."""
        return COMMIT if self.action == COMPACTION and self.is_completed else self.action

    @property
    def file_name(self) -> str:
        """The file this instant is stored in, as Hudi 0.14 names it."""
        if self.state == State.COMPLETED:
            return f"{self.time}.{self.timeline_action}"
        if self.state == State.REQUESTED:
            return f"{self.time}.{self.action}.requested"
        if self.action == COMMIT:
            return f"{self.time}.inflight"
        return f"{self.time}.{self.action}.inflight"

    def with_state(self, state: State) -> Instant:
        return Instant(self.time, self.action, state)


@lru_cache(maxsize=1 << 16)
def parse_instant_file(name: str) -> Instant | None:
    """The instant a `.hoodie/` file name stands for, or None for other files.

    Cached: every timeline load parses the same names again, and Instants are immutable.
    """
    m = _FILE_RE.match(name)
    if not m:
        return None
    time, action, suffix = m.groups()
    if action == "inflight" and suffix is None:
        return Instant(time, COMMIT, State.INFLIGHT)
    if action not in KNOWN_ACTIONS:
        return None
    if suffix == "requested":
        return Instant(time, action, State.REQUESTED)
    if suffix == "inflight":
        return Instant(time, action, State.INFLIGHT)
    return Instant(time, action, State.COMPLETED)


def is_instant_time(text: str) -> bool:
    return bool(_TIME_RE.fullmatch(text))


# Hudi's NOT_PARSABLE_TIMESTAMPS: the init instant and the two bootstrap instants (RFC-12), times all the same
NOT_PARSABLE_TIMES = frozenset({"00000000000000", "00000000000001", "00000000000002"})
_QUERY_FORMATS = {  # Hudi's `as.of.instant` and incremental bounds (HoodieSqlCommonUtils.formatQueryInstant)
    10: "%Y-%m-%d",
    19: "%Y-%m-%d %H:%M:%S",
    23: "%Y-%m-%d %H:%M:%S.%f",
}


def query_instant(text: str, where: str) -> str:
    """A time in any of Hudi's query formats as an instant time to compare with (string order, as Hudi does).

    `yyyyMMddHHmmss[SSS]` stays as given; `yyyy-MM-dd HH:mm:ss[.SSS]` and `yyyy-MM-dd` (midnight) become
    `yyyyMMddHHmmssSSS`, in UTC, the timeline time zone of every table Tandem writes.
    """
    shape = _QUERY_FORMATS.get(len(text))
    try:
        if text in NOT_PARSABLE_TIMES:
            return text
        if is_instant_time(text):
            parse_instant_time(text)  # a real date and time, not just digits
            return text
        if shape is None:
            raise ValueError(text)
        return datetime.strptime(text, shape).strftime(INSTANT_FORMAT)[:INSTANT_LENGTH]
    except ValueError as err:
        raise BadInputError(
            f"{where}: {text!r} is not a time (yyyyMMddHHmmss[SSS], yyyy-MM-dd HH:mm:ss[.SSS] or yyyy-MM-dd)"
        ) from err


def validate_instant_time(value: object, where: str) -> str:
    """`value` if it is an instant time (17 digits, or Hudi's legacy 14), else CorruptInstantError.

    Instant times read from files become parts of paths (`T.commit`, `.temp/T`,
    `.heartbeat/T`); anything else there could name another file.
    """
    if isinstance(value, str) and is_instant_time(value):
        return value
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
    raise CorruptInstantError(f"{where}: {shown} is not an instant time (yyyyMMddHHmmssSSS)")


_TIMELINE_TIME_RE = re.compile(TIMELINE_TIME_PATTERN)


def validate_timeline_time(value: object, where: str) -> str:
    """`value` if it is the time of an instant on some timeline: an instant time, or a metadata table's
    instant time with Hudi's suffixes (`<T>001`, `<T>011001`); else CorruptInstantError."""
    if isinstance(value, str) and _TIMELINE_TIME_RE.fullmatch(value):
        return value
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
    raise CorruptInstantError(f"{where}: {shown} is not an instant time (yyyyMMddHHmmssSSS, maybe suffixed)")


def format_instant_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(INSTANT_FORMAT)[:INSTANT_LENGTH]


def parse_instant_time(text: str) -> datetime:
    """Parse `yyyyMMddHHmmss[SSS]` as UTC; raises ValueError on anything else."""
    if not is_instant_time(text):
        raise ValueError(f"{text!r} is not an instant time (yyyyMMddHHmmssSSS)")
    padded = text if len(text) == INSTANT_LENGTH else text + "000"
    return datetime.strptime(padded + "000", INSTANT_FORMAT).replace(tzinfo=timezone.utc)


class InstantClock:
    """Hands out instant times strictly greater than any seen, even within 1 ms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = ""

    def next_after(self, *floors: str) -> str:
        """A new instant time > every `floor` and > every time handed out before."""
        with self._lock:
            candidate = format_instant_time(datetime.now(timezone.utc))
            highest = max((f for f in (*floors, self._last) if f), default="")
            if candidate <= highest:
                # a metadata table's suffixed time (`<T>001`) belongs to T's millisecond
                padded = highest[:INSTANT_LENGTH] if len(highest) >= INSTANT_LENGTH else highest + "000"
                after = parse_instant_time(padded) + timedelta(milliseconds=1)
                candidate = format_instant_time(after)
            self._last = candidate
            return candidate


CLOCK = InstantClock()
