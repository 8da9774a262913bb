"""The block envelope of a Hudi log file (log format version 1), as Hudi 0.15 writes and reads it.

One block, all integers big-endian (Java's DataOutputStream):

    MAGIC "#HUDI#" (6) | block size: i64 | format version: i32 = 1 | block type: i32 | header map
    | content length: i64 | content | footer map | trailing length: i64 = block size + 6

`block size` counts everything after itself (version through trailing length); the trailing length counts the
block from its magic up to, not including, itself. A map is `count: i32` then per entry `key ordinal: i32,
value length: i32, UTF-8 value`. (HoodieLogFormatWriter.appendBlocks, HoodieLogBlock.getLogMetadataBytes.)

Hudi's own damage check (HoodieLogFileReader.isBlockCorrupted) is the envelope's only integrity check (no
checksum): the block size must stay inside the file, the trailing length must agree with it, and the next six
bytes must be MAGIC or the end of the file. A block failing it is a CORRUPT block spanning the bytes after its
magic up to the next MAGIC (or the end of the file), where reading resumes (createCorruptBlock,
scanForNextAvailableBlockOffset). A crash mid-write leaves such a block at the tail: torn, never data.

Where Java's reader throws instead (an unknown block type or header key, a map or content overrunning the
block, a format version other than 1, a file not starting with MAGIC) or looks away (1-5 stray bytes after the
last block, set high bits in the 64-bit block size, of which it keeps the low 32, a key twice in one map, a
value that is not UTF-8), this reader reports a corrupt block: it never returns such damage as data and never
stops early. Damage that leaves a well-formed block (a header value, the content, a block type or header key
turned into another valid one) is beyond the format; the block kinds refuse blocks missing what they need.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping
from dataclasses import dataclass

MAGIC = b"#HUDI#"
FORMAT_VERSION = 1
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_FIXED = 4 + 4 + 8 + 8  # version, type, content length, trailing length: the block size without maps and content
_INT32_MAX = 2**31 - 1


class HudiLogError(ValueError):
    """A log file or block that is damaged, torn, or not what Hudi writes."""


class BlockType(enum.IntEnum):
    """HoodieLogBlock.HoodieLogBlockType: the ordinal is what the file holds."""

    COMMAND_BLOCK = 0
    DELETE_BLOCK = 1
    CORRUPT_BLOCK = 2  # never written: what a reader makes of damaged bytes
    AVRO_DATA_BLOCK = 3
    HFILE_DATA_BLOCK = 4
    PARQUET_DATA_BLOCK = 5
    CDC_DATA_BLOCK = 6


class HeaderKey(enum.IntEnum):
    """HoodieLogBlock.HeaderMetadataType in Hudi 0.15 (footers use the same keys; 0.15 writes none)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6


@dataclass(frozen=True)
class LogBlock:
    """One block as read: `offset` is where its magic starts (0 for damage at the very start of a file) and
    `size` the bytes it spans. A corrupt block has kind CORRUPT_BLOCK, no header, the damaged bytes as
    `content`, and `reason`; `torn` when the file ends inside it."""

    kind: BlockType
    header: dict[str, str]
    footer: dict[str, str]
    content: bytes
    offset: int
    size: int
    corrupt: bool = False
    torn: bool = False
    reason: str = ""

    @property
    def end(self) -> int:
        return self.offset + self.size


def header_key(key: str | HeaderKey) -> HeaderKey:
    """A header key given by name or as a HeaderKey."""
    if isinstance(key, HeaderKey):
        return key
    try:
        return HeaderKey[key]
    except KeyError:
        raise ValueError(f"unknown log block header key {key!r}") from None


def _metadata_bytes(entries: Mapping[str | HeaderKey, str]) -> bytes:
    """A header or footer map, entries in the order given (Java iterates a HashMap: any order reads the same;
    a block read back and re-encoded keeps its bytes)."""
    parts = [_I32.pack(len(entries))]
    seen: set[HeaderKey] = set()
    for key, value in entries.items():
        ordinal = header_key(key)
        if ordinal in seen:
            raise ValueError(f"header {ordinal.name} given twice")
        if not isinstance(value, str):
            raise TypeError(f"header {ordinal.name} must be a str, not {type(value).__name__}")
        seen.add(ordinal)
        raw = value.encode()
        parts += [_I32.pack(ordinal), _I32.pack(len(raw)), raw]
    return b"".join(parts)


def encode_block(
    kind: BlockType,
    header: Mapping[str | HeaderKey, str],
    content: bytes = b"",
    footer: Mapping[str | HeaderKey, str] = {},
) -> bytes:
    """One whole block, byte for byte as HoodieLogFormatWriter appends it (header and footer entries in the
    order given); a log file is blocks back to back."""
    kind = BlockType(kind)
    if kind is BlockType.CORRUPT_BLOCK:
        raise ValueError("a CORRUPT_BLOCK is never written")
    header_bytes, footer_bytes = _metadata_bytes(header), _metadata_bytes(footer)
    block_size = _FIXED + len(header_bytes) + len(content) + len(footer_bytes)
    if block_size > _INT32_MAX:  # Java reads the size back as an int
        raise ValueError(f"a log block of {block_size} bytes is larger than Hudi can read")
    return b"".join(
        (
            MAGIC,
            _I64.pack(block_size),
            _I32.pack(FORMAT_VERSION),
            _I32.pack(kind),
            header_bytes,
            _I64.pack(len(content)),
            content,
            footer_bytes,
            _I64.pack(block_size + len(MAGIC)),
        )
    )


class _Cursor:
    """Reads big-endian fields inside [pos, end): a field running past `end` is damage, not a short read."""

    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise HudiLogError(f"{what} runs past the end of its block")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def i32(self, what: str) -> int:
        return _I32.unpack(self.take(4, what))[0]

    def i64(self, what: str) -> int:
        return _I64.unpack(self.take(8, what))[0]

    def metadata(self, what: str) -> dict[str, str]:
        count = self.i32(f"{what} entry count")
        if count < 0:
            raise HudiLogError(f"negative {what} entry count {count}")
        entries: dict[str, str] = {}
        for _ in range(count):
            ordinal = self.i32(f"{what} key")
            if ordinal not in HeaderKey._value2member_map_:
                raise HudiLogError(f"unknown {what} key ordinal {ordinal}")
            name = HeaderKey(ordinal).name
            if name in entries:  # written from a Java Map: never twice
                raise HudiLogError(f"{what} {name} given twice")
            raw = self.take(self.i32(f"{what} value length"), f"{what} value")
            try:
                entries[name] = raw.decode()
            except UnicodeDecodeError:
                raise HudiLogError(f"{what} {name} is not UTF-8") from None
        return entries


def _envelope_damage(data: bytes, start: int) -> tuple[str | None, int]:
    """Hudi's own check of the block whose magic ends at `start`: (why it is corrupt or None, its end)."""
    if len(data) - start < 8:
        return "the file ends inside the block size", len(data)
    block_size = _I64.unpack(data[start : start + 8])[0]  # Java keeps the low 32 bits; they must be all of it
    body = start + 8
    if block_size < _FIXED or body + block_size > len(data):
        return f"a block of {block_size} bytes runs past the end of the file", len(data)
    end = body + block_size
    trailing = _I64.unpack(data[end - 8 : end])[0]
    if trailing - len(MAGIC) != block_size:
        return f"block size {block_size} does not match the trailing length {trailing}", end
    if len(data) - end >= len(MAGIC) and data[end : end + len(MAGIC)] != MAGIC:
        return "no magic right after the block", end
    return None, end


def _parse(data: bytes, offset: int, end: int) -> LogBlock:
    """The fields of an envelope that passed Hudi's check; anything inconsistent raises HudiLogError."""
    cursor = _Cursor(data, offset + len(MAGIC) + 8, end - 8)
    version = cursor.i32("format version")
    if version != FORMAT_VERSION:
        raise HudiLogError(f"log format version {version}, not {FORMAT_VERSION}")
    kind = cursor.i32("block type")
    if kind not in BlockType._value2member_map_ or kind == BlockType.CORRUPT_BLOCK:
        raise HudiLogError(f"unknown block type {kind}")
    header = cursor.metadata("header")
    content = cursor.take(cursor.i64("content length"), "content")
    footer = cursor.metadata("footer")
    if cursor.pos != cursor.end:
        raise HudiLogError(f"{cursor.end - cursor.pos} unaccounted bytes before the trailing length")
    return LogBlock(BlockType(kind), header, footer, content, offset, end - offset)


def _corrupt(data: bytes, offset: int, content_start: int, reason: str) -> LogBlock:
    """The damaged bytes from `content_start` up to the next MAGIC or the end of the file (Hudi's resync)."""
    resume = data.find(MAGIC, content_start)
    end = len(data) if resume < 0 else resume
    torn = end == len(data)
    content = data[content_start:end]
    return LogBlock(BlockType.CORRUPT_BLOCK, {}, {}, content, offset, end - offset, True, torn, reason)


def read_blocks(data: bytes) -> list[LogBlock]:
    """Every block of a log file in order, damaged stretches as corrupt blocks; together they cover `data`."""
    data = bytes(data)
    blocks: list[LogBlock] = []
    pos = 0
    if data and not data.startswith(MAGIC):
        blocks.append(_corrupt(data, 0, 0, "the file does not start with MAGIC"))
        pos = blocks[-1].end
    while pos < len(data):
        if len(data) - pos < len(MAGIC):  # Java stops here silently: EOF while reading the next magic
            blocks.append(_corrupt(data, pos, pos, "the file ends inside a block's magic"))
            break
        start = pos + len(MAGIC)
        reason, end = _envelope_damage(data, start)
        if reason is None:
            try:
                blocks.append(_parse(data, pos, end))
            except HudiLogError as err:  # Java throws here; the verified envelope still bounds the block
                content = data[start:end]
                blocks.append(LogBlock(BlockType.CORRUPT_BLOCK, {}, {}, content, pos, end - pos, True, False, str(err)))
            pos = end
        else:
            blocks.append(_corrupt(data, pos, start, reason))
            pos = blocks[-1].end
    return blocks


def read_intact(data: bytes, expected_size: int | None = None) -> list[LogBlock]:
    """The blocks of a log file that must be whole: one or more blocks, none damaged, and (given the size the
    commit recorded for it) exactly that long, since a write torn at a block boundary looks intact otherwise.
    Raises HudiLogError naming the first damage."""
    if expected_size is not None and len(data) != expected_size:
        raise HudiLogError(f"log file is {len(data)} bytes, its commit recorded {expected_size}")
    if not data:
        raise HudiLogError("empty log file")
    blocks = read_blocks(data)
    for block in blocks:
        if block.corrupt:
            raise HudiLogError(f"corrupt log block at offset {block.offset}: {block.reason}")
    return blocks
