"""A savepoint's `HoodieSavepointMetadata` (`<S>.savepoint`, Hudi 0.15; docs/hudi-savepoint-restore-format.md
§1-2): the file names of each file group's latest slice at S, which no clean deletes while it stands."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from timeline.errors import CorruptInstantError
from timeline.format import partition_path
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import SAVEPOINT

_STR = {"type": "string", "avro.java.string": "String"}
SCHEMA = {
    "type": "record",
    "name": "HoodieSavepointMetadata",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "savepointedBy", "type": _STR},
        {"name": "savepointedAt", "type": "long"},
        {"name": "comments", "type": _STR},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieSavepointPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": _STR},
                        {"name": "savepointDataFile", "type": {"type": "array", "items": _STR}},
                    ],
                },
                "avro.java.string": "String",
            },
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}
_PARSED = fastavro.parse_schema(SCHEMA)


@dataclass(frozen=True)
class Savepoint:
    """One completed savepoint: the instant it keeps, who made it and when (epoch ms), and the file names of
    every partition's latest slices at that instant."""

    time: str
    by: str
    at_ms: int
    comments: str
    files: dict[str, list[str]]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for names in self.files.values() for name in names)


def encode(by: str, at_ms: int, comments: str, files: Mapping[str, Sequence[str]]) -> bytes:
    """The `<S>.savepoint` file: one record in an Avro object container, as Hudi writes it."""
    record = {
        "savepointedBy": by,
        "savepointedAt": at_ms,
        "comments": comments,
        "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": list(n)} for p, n in files.items()},
        "version": 1,
    }
    buf = io.BytesIO()
    fastavro.writer(buf, _PARSED, [record])
    return buf.getvalue()


def decode(time: str, data: bytes, source: str) -> Savepoint:
    """A savepoint file read back and checked: a partition or file name that could not be one is damage."""
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as err:  # fastavro raises many types for garbage input
        raise CorruptInstantError(f"{source} is not a readable Avro file: {err}") from err
    if len(records) != 1 or not isinstance(records[0].get("partitionMetadata"), dict):
        raise CorruptInstantError(f"{source} is not one HoodieSavepointMetadata record")
    record: dict[str, Any] = records[0]
    files: dict[str, list[str]] = {}
    for key, entry in record["partitionMetadata"].items():
        partition = partition_path.canonical(key, f"{source}: partitionMetadata", CorruptInstantError)
        names = entry.get("savepointDataFile") or []
        for name in names:
            problem = partition_path.name_problem(name) if isinstance(name, str) else "is not a name"
            if problem is not None or "/" in name:
                raise CorruptInstantError(f"{source}: savepointDataFile {partition_path.shown(str(name))} {problem}")
        files[partition] = list(names)
    return Savepoint(time, record.get("savepointedBy") or "", record.get("savepointedAt") or 0,
                     record.get("comments") or "", files)  # fmt: skip


def savepoints(timeline: ActiveTimeline) -> list[Savepoint]:
    """Every completed savepoint on the timeline (Java's and Tandem's), oldest first."""
    done = [i for i in timeline.completed() if i.action == SAVEPOINT]
    return [decode(i.time, timeline.read(i), timeline.storage.uri(timeline.path(i))) for i in done]


def savepointed_names(timeline: ActiveTimeline) -> frozenset[str]:
    """The file names some savepoint keeps (Hudi's cleaner matches slices by bare name)."""
    return frozenset(name for savepoint in savepoints(timeline) for name in savepoint.names)
