"""Delete-block content, version 3 (HoodieDeleteBlock.serializeV3 / deserialize in Hudi 0.14 and 0.15):

    version: i32 = 3 | length: i32 | Avro binary of HoodieDeleteRecordList

HoodieDeleteRecordList is `{deleteRecordList: array<HoodieDeleteRecord>}`; a delete record is a nullable
record key, a nullable partition path, and a nullable ordering value in one of Hudi's wrapper records
(HoodieAvroUtils.wrapValueIntoAvro picks the wrapper from the Java type: Integer -> IntWrapper, Long ->
LongWrapper, ...). The schema is the bundle's compiled HoodieDeleteRecordList.SCHEMA$ with the docs left out,
which the binary encoding does not carry.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

import fastavro

from timeline.hudi_log.framing import HudiLogError

DELETE_BLOCK_VERSION = 3
NAMESPACE = "org.apache.hudi.avro.model"
_STRING = {"type": "string", "avro.java.string": "String"}
WRAPPERS: dict[str, Any] = {  # union branches 1..11 of orderingVal, in the schema's order
    "BooleanWrapper": "boolean",
    "IntWrapper": "int",
    "LongWrapper": "long",
    "FloatWrapper": "float",
    "DoubleWrapper": "double",
    "BytesWrapper": "bytes",
    "StringWrapper": _STRING,
    "DateWrapper": "int",
    "DecimalWrapper": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
    "TimeMicrosWrapper": {"type": "long", "logicalType": "time-micros"},
    "TimestampMicrosWrapper": "long",
}
DELETE_RECORD_LIST_SCHEMA = {
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": NAMESPACE,
    "fields": [
        {
            "name": "deleteRecordList",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "HoodieDeleteRecord",
                    "fields": [
                        {"name": "recordKey", "type": ["null", _STRING], "default": None},
                        {"name": "partitionPath", "type": ["null", _STRING], "default": None},
                        {
                            "name": "orderingVal",
                            "type": [
                                "null",
                                *(
                                    {"type": "record", "name": name, "fields": [{"name": "value", "type": kind}]}
                                    for name, kind in WRAPPERS.items()
                                ),
                            ],
                            "default": None,
                        },
                    ],
                },
            },
        }
    ],
}
_PARSED = fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA)
_HEAD = struct.Struct(">ii")


@dataclass(frozen=True)
class DeleteRecord:
    """A key to delete; `ordering` is (wrapper name, value), e.g. ("LongWrapper", 7), or None."""

    record_key: str | None
    partition_path: str | None
    ordering: tuple[str, Any] | None = None


def _ordering_datum(ordering: tuple[str, Any] | None) -> tuple[str, dict] | None:
    if ordering is None:
        return None
    wrapper, value = ordering
    if wrapper not in WRAPPERS:
        raise ValueError(f"unknown ordering wrapper {wrapper!r}: one of {', '.join(WRAPPERS)}")
    return f"{NAMESPACE}.{wrapper}", {"value": value}


def encode_delete_content(records: list[DeleteRecord]) -> bytes:
    """The content of a delete block holding `records`, in their order."""
    datum = {
        "deleteRecordList": [
            {"recordKey": r.record_key, "partitionPath": r.partition_path, "orderingVal": _ordering_datum(r.ordering)}
            for r in records
        ]
    }
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, _PARSED, datum)
    avro = buffer.getvalue()
    return _HEAD.pack(DELETE_BLOCK_VERSION, len(avro)) + avro


def decode_delete_content(content: bytes) -> list[DeleteRecord]:
    """The records of a delete block's content; HudiLogError when it is not a whole version-3 list."""
    if len(content) < _HEAD.size:
        raise HudiLogError("delete block content is shorter than its version and length")
    version, length = _HEAD.unpack_from(content)
    if version != DELETE_BLOCK_VERSION:  # 1 and 2 are Java serialization, which only a JVM can read
        raise HudiLogError(f"delete block content version {version}, not {DELETE_BLOCK_VERSION}")
    if length != len(content) - _HEAD.size:
        raise HudiLogError(f"delete block says {length} Avro bytes, holds {len(content) - _HEAD.size}")
    stream = io.BytesIO(content[_HEAD.size :])
    try:
        datum = fastavro.schemaless_reader(stream, _PARSED, return_record_name=True)
    except (EOFError, ValueError, IndexError, UnicodeDecodeError) as err:
        raise HudiLogError(f"delete block content is not a HoodieDeleteRecordList: {err}") from None
    if stream.tell() != length:
        raise HudiLogError(f"{length - stream.tell()} bytes after the HoodieDeleteRecordList")
    return [
        DeleteRecord(item["recordKey"], item["partitionPath"], _ordering(item["orderingVal"]))
        for item in datum["deleteRecordList"]
    ]


def _ordering(value: tuple[str, dict] | None) -> tuple[str, Any] | None:
    if value is None:
        return None
    name, record = value
    return name.rpartition(".")[2], record["value"]
