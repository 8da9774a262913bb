"""A restore's plan and metadata (`<R>.restore.requested` / `<R>.restore`, Hudi 0.15's `HoodieRestorePlan` v2
and `HoodieRestoreMetadata`; docs/hudi-savepoint-restore-format.md §1, §5), and what readers take from a pending
one: the savepoint it restores to, the snapshot they read until it completes."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import fastavro

from timeline.errors import CorruptInstantError
from timeline.format.avro_metadata import ROLLBACK_METADATA
from timeline.format.instant import KNOWN_ACTIONS, Instant, validate_timeline_time

_NS = "org.apache.hudi.avro.model"
_STR = {"type": "string", "avro.java.string": "String"}
_INSTANT_INFO = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "namespace": _NS,
    "fields": [{"name": "commitTime", "type": _STR}, {"name": "action", "type": _STR}],
}
PLAN_SCHEMA = {
    "type": "record",
    "name": "HoodieRestorePlan",
    "namespace": _NS,
    "fields": [
        {"name": "instantsToRollback", "type": {"type": "array", "items": _INSTANT_INFO}, "default": []},
        {"name": "version", "type": ["int", "null"], "default": 2},
        {"name": "savepointToRestoreTimestamp", "type": ["null", _STR], "default": None},
    ],
}
METADATA_SCHEMA = {
    "type": "record",
    "name": "HoodieRestoreMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "startRestoreTime", "type": _STR},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "instantsToRollback", "type": {"type": "array", "items": _STR}},
        {
            "name": "hoodieRestoreMetadata",
            "type": {"type": "map", "values": {"type": "array", "items": ["null", ROLLBACK_METADATA]}},
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "restoreInstantInfo", "type": {"type": "array", "items": f"{_NS}.HoodieInstantInfo"}, "default": []},
    ],
}
_PLAN = fastavro.parse_schema(PLAN_SCHEMA)
_METADATA = fastavro.parse_schema(METADATA_SCHEMA)


def encode_plan(savepoint: str, victims: Sequence[Instant]) -> bytes:
    """The plan: the instants after the savepoint to roll back, newest first."""
    record = {
        "instantsToRollback": [{"commitTime": i.time, "action": i.timeline_action} for i in victims],
        "version": 2,
        "savepointToRestoreTimestamp": savepoint,
    }
    return _container(_PLAN, record)


def decode_plan(data: bytes, source: str) -> tuple[str, list[tuple[str, str]]]:
    """(the savepoint restored to, [(time, action)] to roll back newest first), checked."""
    record = _single(data, source)
    savepoint = validate_timeline_time(record.get("savepointToRestoreTimestamp"), f"{source}: savepoint")
    victims = []
    for info in record.get("instantsToRollback") or []:
        if not isinstance(info, dict):
            raise CorruptInstantError(f"{source}: {info!r} in instantsToRollback is not an instant")
        time = validate_timeline_time(info.get("commitTime"), f"{source}: instantsToRollback")
        if info.get("action") not in KNOWN_ACTIONS or time <= savepoint:
            raise CorruptInstantError(f"{source}: {info!r} is not an instant after savepoint {savepoint}")
        victims.append((time, info["action"]))
    return savepoint, victims


def encode_metadata(restore: str, millis: int, rolled_back: Sequence[tuple[Instant, dict]]) -> bytes:
    """`<R>.restore`: each instant rolled back with its `HoodieRollbackMetadata`, in plan order."""
    record = {
        "startRestoreTime": restore,
        "timeTakenInMillis": millis,
        "instantsToRollback": [i.time for i, _ in rolled_back],
        "hoodieRestoreMetadata": {i.time: [metadata] for i, metadata in rolled_back},
        "version": 1,
        "restoreInstantInfo": [{"commitTime": i.time, "action": i.timeline_action} for i, _ in rolled_back],
    }
    return _container(_METADATA, record)


def removed_times(data: bytes, source: str) -> set[str]:
    """The instants a completed restore's metadata says it removed, checked."""
    record = _single(data, source)
    listed = record.get("instantsToRollback")
    if not isinstance(listed, list):
        raise CorruptInstantError(f"{source}: instantsToRollback is not a list")
    return {validate_timeline_time(t, f"{source}: instantsToRollback") for t in listed}


def _container(schema: Any, record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [record])
    return buf.getvalue()


def _single(data: bytes, source: str) -> dict:
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as err:  # fastavro raises many types for garbage input
        raise CorruptInstantError(f"{source} is not a readable Avro file: {err}") from err
    if len(records) != 1 or not isinstance(records[0], dict):
        raise CorruptInstantError(f"{source} holds {len(records)} records, expected 1")
    return records[0]
