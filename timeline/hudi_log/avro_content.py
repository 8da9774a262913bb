"""Avro data-block content, version 3 (HoodieAvroDataBlock.serializeRecords / RecordIterator in Hudi 0.15),
the block kind of merge-on-read data tables:

    version: i32 = 3 | record count: i32 | per record: length: i32, Avro binary under the SCHEMA header

Records are plain Avro binary (no container, no compression), each under the block's writer schema.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable

import fastavro

from timeline.hudi_log.framing import HudiLogError

AVRO_BLOCK_VERSION = 3
_I32 = struct.Struct(">i")


def _parsed(schema: str):
    return fastavro.parse_schema(json.loads(schema))


def encode_avro_content(schema: str, records: Iterable[dict]) -> bytes:
    """The content of an Avro data block holding `records` under `schema` (JSON)."""
    parsed = _parsed(schema)
    parts: list[bytes] = []
    for record in records:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, record)
        parts += [_I32.pack(buffer.tell()), buffer.getvalue()]
    return _I32.pack(AVRO_BLOCK_VERSION) + _I32.pack(len(parts) // 2) + b"".join(parts)


def decode_avro_content(schema: str, content: bytes) -> list[dict]:
    """The records of an Avro data block's content; HudiLogError when it is not whole."""
    parsed = _parsed(schema)
    view = memoryview(content)

    def i32(at: int, what: str) -> int:
        if at + 4 > len(view):
            raise HudiLogError(f"Avro data block content ends inside its {what}")
        return _I32.unpack_from(view, at)[0]

    if (version := i32(0, "version")) != AVRO_BLOCK_VERSION:
        raise HudiLogError(f"Avro data block content version {version}, not {AVRO_BLOCK_VERSION}")
    count, pos, records = i32(4, "record count"), 8, []
    for _ in range(count):
        length = i32(pos, "record length")
        pos += 4
        if length < 0 or pos + length > len(view):
            raise HudiLogError("an Avro record runs past the end of its block")
        stream = io.BytesIO(view[pos : pos + length])
        try:
            records.append(fastavro.schemaless_reader(stream, parsed))
        except (EOFError, ValueError, IndexError, UnicodeDecodeError) as err:
            raise HudiLogError(f"Avro data block record is damaged: {err}") from None
        if stream.tell() != length:
            raise HudiLogError("an Avro record is shorter than its length")
        pos += length
    if pos != len(view):
        raise HudiLogError(f"{len(view) - pos} bytes after the last Avro record")
    return records
