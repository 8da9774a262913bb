"""HBase KeyValue keys as Hudi writes them, and the Hadoop variable-length integers HFiles use.

A Hudi cell's key is `row length (u16) | row | family length 0 | timestamp (i64, LATEST) | type Put`: the record
key is the row; family and qualifier are empty (HBase `KeyValue`, built by Hudi's `new KeyValue(key, null, null,
value)`). In a data block each cell is `key length (i32) | value length (i32) | key | value | memstore ts (vlong)`.
"""

from __future__ import annotations

import struct

from timeline.hfile.errors import HFileError

LATEST_TIMESTAMP = (1 << 63) - 1  # HConstants.LATEST_TIMESTAMP
PUT = 4  # KeyValue.Type.Put
MAXIMUM = 255  # KeyValue.Type.Maximum: HBase's "first on row" index keys
MAX_ROW = (1 << 15) - 1  # KeyValue rows are at most Short.MAX_VALUE bytes
KEY_OVERHEAD = 12  # row length, family length, timestamp, type
CELL_HEAD = struct.Struct(">iiH")  # key length, value length, row length
_TAIL = struct.Struct(">BqB")  # family length, timestamp, type
HUDI_KEY_TAIL = _TAIL.pack(0, LATEST_TIMESTAMP, PUT)  # what follows the row in every key Hudi writes


def cell_key(row: bytes, kind: int = PUT) -> bytes:
    """The KeyValue key of `row` (a data cell, or with `kind=MAXIMUM` a first-on-row index key)."""
    if len(row) > MAX_ROW:
        raise ValueError(f"an HFile key is at most {MAX_ROW} bytes, got {len(row)}")
    return struct.pack(">H", len(row)) + row + _TAIL.pack(0, LATEST_TIMESTAMP, kind)


def encode_cell(row: bytes, value: bytes) -> bytes:
    """One data-block cell with its memstore timestamp 0 (one byte), as HBase writes with MVCC included."""
    key = cell_key(row)
    return struct.pack(">ii", len(key), len(value)) + key + value + b"\x00"


def row_of(key: bytes | memoryview) -> bytes:
    """The row of a KeyValue key; only Hudi's shape (empty family and qualifier) is accepted."""
    if len(key) < KEY_OVERHEAD:
        raise HFileError(f"a KeyValue key of {len(key)} bytes is too short")
    (row_length,) = struct.unpack_from(">H", key)
    if row_length + KEY_OVERHEAD != len(key) or key[2 + row_length] != 0:
        raise HFileError("a KeyValue key whose row, family or qualifier is not Hudi's")
    return bytes(key[2 : 2 + row_length])


def index_row(key: bytes | memoryview) -> bytes:
    """The row of a block index key: a KeyValue key (HBase), or just `row length | row` (Hudi 1.x's writer)."""
    if len(key) >= 2 and struct.unpack_from(">H", key)[0] + 2 == len(key):
        return bytes(key[2:])
    return row_of(key)


def midpoint_row(left: bytes, right: bytes) -> bytes:
    """The short row HBase indexes a data block by: after `left` (the previous block's last row), at most `right`
    (this block's first row). HFileWriterImpl.getMinimumMidpointArray, signed-byte arithmetic included."""
    common = 0
    shortest = min(len(left), len(right))
    while common < shortest and left[common] == right[common]:
        common += 1
    if common < shortest:
        byte = left[common]
        signed = byte - 256 if byte > 127 else byte
        if byte < 0xFF and signed + 1 < right[common]:
            return left[:common] + bytes([(signed + 1) & 0xFF])
    return right[: common + 1]


def index_key(previous_row: bytes | None, row: bytes) -> bytes:
    """A data block's index key: its first cell's key for the first block, else a first-on-row midpoint."""
    if previous_row is None:
        return cell_key(row)
    return cell_key(midpoint_row(previous_row, row), MAXIMUM)


def write_vint(value: int) -> bytes:
    """Hadoop WritableUtils.writeVLong."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    marker = -112
    if value < 0:
        value ^= -1
        marker = -120
    length = (value.bit_length() + 7) // 8
    return struct.pack(">b", marker - length) + value.to_bytes(length, "big")


def read_vint(buf: bytes | memoryview, at: int) -> tuple[int, int]:
    """Hadoop WritableUtils.readVLong: (value, offset after it)."""
    if at >= len(buf):
        raise HFileError("a variable-length integer runs past its block")
    first = buf[at] - 256 if buf[at] > 127 else buf[at]
    if first >= -112:
        return first, at + 1
    end = at + (-119 - first if first < -120 else -111 - first)  # WritableUtils.decodeVIntSize counts the marker
    if end > len(buf):
        raise HFileError("a variable-length integer runs past its block")
    value = int.from_bytes(buf[at + 1 : end], "big")
    return (value ^ -1 if first < -120 else value), end
