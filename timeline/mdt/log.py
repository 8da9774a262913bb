"""Metadata-table log blocks: self-describing, length-prefixed, CRC32-checked.

Layout of one block:
    MAGIC (8 bytes) | u32 header length | header JSON | payload | u32 CRC32(header length .. payload)
The header names the instant, the block type, the record count and the payload
length. A block that is torn (the file ends inside it) or corrupt (bad lengths,
bad JSON, CRC mismatch) is reported and skipped; the reader resynchronises on
the next MAGIC, so one bad block never hides the good ones after it.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from dataclasses import dataclass, field

import fastavro

from timeline.index.bloom import BLOOM_SCHEMA
from timeline.index.column_stats import COLUMN_STATS_SCHEMA
from timeline.mdt.records import RECORD_SCHEMA

MAGIC = b"#TNDMLB#"
DATA = "data"
DELETE = "delete"
ROLLBACK_COMMAND = "rollback_command"
SEAL = "seal"
BLOCK_TYPES = {DATA, DELETE, ROLLBACK_COMMAND, SEAL}
FILES = "files"
COLUMN_STATS = "column_stats"
BLOOM_FILTERS = "bloom_filters"
INDEX_PARTITIONS = (COLUMN_STATS, BLOOM_FILTERS)
PARTITION_ATTRIBUTE = "partition"
_SCHEMAS = {
    FILES: fastavro.parse_schema(RECORD_SCHEMA),
    COLUMN_STATS: fastavro.parse_schema(COLUMN_STATS_SCHEMA),
    BLOOM_FILTERS: fastavro.parse_schema(BLOOM_SCHEMA),
}
_U32 = struct.Struct(">I")
MAX_HEADER = 1 << 20


@dataclass
class LogBlock:
    instant: str
    block_type: str
    records: list[dict] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class DecodedLog:
    blocks: list[LogBlock]
    corrupt: list[str]


def block_partition(block: LogBlock) -> str:
    """The MDT partition a data block's records belong to (`files` unless the block names another)."""
    return block.attributes.get(PARTITION_ATTRIBUTE, FILES)


def rolled_back_targets(blocks: list[LogBlock]) -> set[str]:
    """Instants named by rollback-command blocks: their data blocks never count."""
    return {b.attributes["target"] for b in blocks if b.block_type == ROLLBACK_COMMAND and "target" in b.attributes}


def _payload(block: LogBlock) -> memoryview | bytes:
    if block.block_type == DATA:
        buf = io.BytesIO()
        fastavro.writer(buf, _SCHEMAS[block_partition(block)], block.records)
        return buf.getbuffer()  # no copy: the block's bytes are joined once, below
    return json.dumps(block.records).encode()


def encode_block(block: LogBlock) -> bytes:
    if block.block_type not in BLOCK_TYPES:
        raise ValueError(f"unknown log block type {block.block_type!r}")
    payload = _payload(block)
    header = json.dumps(
        {
            "instant": block.instant,
            "type": block.block_type,
            "records": len(block.records),
            "payload_length": len(payload),
            "attributes": block.attributes,
        },
        sort_keys=True,
    ).encode()
    length = _U32.pack(len(header))
    crc = zlib.crc32(payload, zlib.crc32(header, zlib.crc32(length)))
    return b"".join([MAGIC, length, header, payload, _U32.pack(crc)])


def encode_log(blocks: list[LogBlock]) -> bytes:
    return b"".join(encode_block(b) for b in blocks)


def _decode_one(data: bytes, pos: int) -> tuple[LogBlock, int]:
    """Decode the block at `pos` (just after MAGIC); ValueError if torn or corrupt."""
    if pos + 4 > len(data):
        raise ValueError("torn block: header length missing")
    (header_len,) = _U32.unpack_from(data, pos)
    if header_len > MAX_HEADER or pos + 4 + header_len > len(data):
        raise ValueError("torn or corrupt block: header length out of range")
    header = json.loads(data[pos + 4 : pos + 4 + header_len])
    payload_len = int(header["payload_length"])
    end = pos + 4 + header_len + payload_len
    if payload_len < 0 or end + 4 > len(data):
        raise ValueError("torn block: payload or checksum missing")
    (crc,) = _U32.unpack_from(data, end)
    if zlib.crc32(data[pos:end]) != crc:
        raise ValueError("corrupt block: CRC32 mismatch")
    payload = data[pos + 4 + header_len : end]
    if header["type"] == DATA:
        records = list(fastavro.reader(io.BytesIO(payload)))
    else:
        records = json.loads(payload)
    if len(records) != int(header["records"]):
        raise ValueError("corrupt block: record count mismatch")
    block = LogBlock(header["instant"], header["type"], records, dict(header.get("attributes") or {}))
    return block, end + 4


def decode_log(data: bytes, source: str = "log file") -> DecodedLog:
    """Every intact block of a log file, and a description of each bad one."""
    blocks: list[LogBlock] = []
    corrupt: list[str] = []
    pos = data.find(MAGIC)
    if pos > 0:
        corrupt.append(f"{source}: {pos} byte(s) of garbage before the first block")
    while pos != -1:
        start = pos + len(MAGIC)
        try:
            block, pos = _decode_one(data, start)
            blocks.append(block)
            if pos < len(data) and not data.startswith(MAGIC, pos):
                corrupt.append(f"{source}: garbage after the block at byte {start - len(MAGIC)}")
                pos = data.find(MAGIC, pos)
            elif pos >= len(data):
                pos = -1
        except Exception as err:  # garbage can fail JSON, Avro or struct decoding in many ways
            corrupt.append(f"{source}: block at byte {start - len(MAGIC)} skipped ({err})")
            pos = data.find(MAGIC, start)
    return DecodedLog(blocks, corrupt)
