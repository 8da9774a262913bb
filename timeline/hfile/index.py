"""Block indexes (HBase HFileBlockIndex): the root level in the load-on-open section, and for large files the
leaf and intermediate levels below it.

Root entry: `offset (i64) | on-disk size (i32) | key length (Hadoop vint) | key`; a multi-level root ends with
16 bytes of mid-key metadata. Leaf and intermediate blocks: `count (i32) | count + 1 entry offsets (i32) |
entries`, each `offset (i64) | on-disk size (i32) | key`. `IndexWriter` decides when levels appear exactly as
HBase's BlockIndexWriter does, so a file has the same shape whichever writer made it.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from timeline.hfile.cell import read_vint, write_vint
from timeline.hfile.errors import HFileError

MAX_CHUNK_SIZE = 128 * 1024  # hfile.index.block.max.size
MIN_INDEX_ENTRIES = 16  # hfile.index.block.min.entries
MID_KEY_METADATA_SIZE = 16  # offset, on-disk size, entry within the leaf block
MAX_LEVELS = 16
_ENTRY = struct.Struct(">qi")
_INT = struct.Struct(">i")
_MID_KEY = struct.Struct(">qii")


@dataclass
class Entry:
    key: bytes
    offset: int
    size: int


def decode_root(data: bytes | memoryview, count: int, mid_key: bool) -> list[Entry]:
    """Exactly `count` entries filling the block (plus the mid-key metadata of a multi-level index)."""
    entries, at = [], 0
    for _ in range(count):
        if at + _ENTRY.size > len(data):
            raise HFileError("a root index block is shorter than its entry count")
        offset, size = _ENTRY.unpack_from(data, at)
        length, at = read_vint(data, at + _ENTRY.size)
        if length < 0 or at + length > len(data):
            raise HFileError("a root index key runs past its block")
        entries.append(Entry(bytes(data[at : at + length]), offset, size))
        at += length
    if len(data) - at != (MID_KEY_METADATA_SIZE if mid_key else 0):
        raise HFileError("a root index block's size does not match its entry count")
    return entries


def encode_root(entries: list[Entry]) -> bytes:
    return b"".join(_ENTRY.pack(e.offset, e.size) + write_vint(len(e.key)) + e.key for e in entries)


def decode_non_root(data: bytes | memoryview) -> list[Entry]:
    """A leaf or intermediate index block: the secondary offsets must tile the entries exactly."""
    if len(data) < _INT.size:
        raise HFileError("an index block is too short")
    (count,) = _INT.unpack_from(data)
    start = _INT.size * (count + 2)
    if count <= 0 or start > len(data):
        raise HFileError(f"an index block claims {count} entries")
    marks = struct.unpack_from(f">{count + 1}i", data, _INT.size)
    if marks[0] != 0 or start + marks[-1] != len(data):
        raise HFileError("an index block's secondary index does not cover its entries")
    entries = []
    for begin, end in itertools.pairwise(marks):
        if end - begin < _ENTRY.size:
            raise HFileError("an index block's secondary index is out of order")
        offset, size = _ENTRY.unpack_from(data, start + begin)
        entries.append(Entry(bytes(data[start + begin + _ENTRY.size : start + end]), offset, size))
    return entries


@dataclass
class Chunk:
    """HFileBlockIndex.BlockIndexChunk: entries with their root- and non-root-format sizes."""

    entries: list[Entry] = field(default_factory=list)
    sub_entries: list[int] = field(default_factory=list)  # data blocks indexed up to each entry (mid key)
    root_size: int = 0
    non_root_entries_size: int = 0

    def add(self, entry: Entry, sub_entries: int | None = None) -> None:
        self.entries.append(entry)
        if sub_entries is not None:
            self.sub_entries.append(sub_entries)
        self.root_size += _ENTRY.size + len(write_vint(len(entry.key))) + len(entry.key)
        self.non_root_entries_size += _ENTRY.size + len(entry.key)

    @property
    def non_root_size(self) -> int:
        return _INT.size * (len(self.entries) + 2) + self.non_root_entries_size

    def encode_non_root(self) -> bytes:
        marks, at = [], 0
        for entry in self.entries:
            marks.append(at)
            at += _ENTRY.size + len(entry.key)
        head = struct.pack(f">{len(marks) + 2}i", len(self.entries), *marks, at)
        return head + b"".join(_ENTRY.pack(e.offset, e.size) + e.key for e in self.entries)

    def mid_key_metadata(self) -> bytes:
        """BlockIndexChunk.getMidKeyMetadata: where the middle data block's index entry sits among the leaves."""
        mid = (self.sub_entries[-1] - 1) // 2
        at = bisect.bisect_right(self.sub_entries, mid)
        before = self.sub_entries[at - 1] if at else 0
        return _MID_KEY.pack(self.entries[at].offset, self.entries[at].size, mid - before)


# Writes one block (type magic, payload) at the end of the file and returns (offset, on-disk size).
WriteBlock = Callable[[bytes, bytes], tuple[int, int]]


class IndexWriter:
    """HFileBlockIndex.BlockIndexWriter for the data index: leaf blocks written inline among the data blocks once
    a leaf chunk reaches `max_chunk_size`, intermediate levels above them when the root would be too big."""

    def __init__(self, max_chunk_size: int = MAX_CHUNK_SIZE) -> None:
        self.max_chunk_size = max_chunk_size
        self.root = Chunk()
        self.leaf: Chunk | None = Chunk()
        self.levels = 1
        self.data_blocks = 0
        self.uncompressed_size = 0  # every index block's uncompressed data, as the trailer reports it

    def add(self, key: bytes, offset: int, size: int) -> None:
        self.leaf.add(Entry(key, offset, size))
        self.data_blocks += 1

    def should_write_leaf(self, closing: bool) -> bool:
        if not self.leaf.entries:
            return False
        if closing and not self.root.entries:  # everything fits one level: the leaf chunk becomes the root
            self.root, self.leaf = self.leaf, None
            return False
        return closing or self.leaf.non_root_size >= self.max_chunk_size

    def write_leaf(self, write: WriteBlock, magic: bytes) -> int:
        """Write the current leaf chunk as a block; returns its uncompressed data size, for the trailer."""
        payload = self.leaf.encode_non_root()
        first_key = self.leaf.entries[0].key
        self.leaf = Chunk()
        offset, size = write(magic, payload)
        self.uncompressed_size += len(payload)
        self.levels = max(self.levels, 2)
        self.root.add(Entry(first_key, offset, size), self.data_blocks)
        return len(payload)

    def write_index(self, write: WriteBlock, intermediate_magic: bytes, root_magic: bytes) -> int:
        """Intermediate levels (if the root is too big), then the root; returns the root block's offset."""
        mid_key = self.root.mid_key_metadata() if self.levels > 1 else b""
        while (
            self.leaf is not None
            and self.root.root_size > self.max_chunk_size
            and len(self.root.entries) > MIN_INDEX_ENTRIES
            and self.levels < MAX_LEVELS
        ):
            self.root = self._intermediate_level(write, intermediate_magic)
            self.levels += 1
        payload = encode_root(self.root.entries) + mid_key
        offset, _ = write(root_magic, payload)
        self.uncompressed_size += len(payload)
        return offset

    def _intermediate_level(self, write: WriteBlock, magic: bytes) -> Chunk:
        parent, chunk = Chunk(), Chunk()
        for i, entry in enumerate(self.root.entries):
            chunk.add(entry)
            if i >= MIN_INDEX_ENTRIES and chunk.root_size >= self.max_chunk_size:
                self._write_intermediate(write, magic, chunk, parent)
                chunk = Chunk()
        if chunk.entries:
            self._write_intermediate(write, magic, chunk, parent)
        return parent

    def _write_intermediate(self, write: WriteBlock, magic: bytes, chunk: Chunk, parent: Chunk) -> None:
        payload = chunk.encode_non_root()
        offset, size = write(magic, payload)
        self.uncompressed_size += len(payload)
        parent.add(Entry(chunk.entries[0].key, offset, size))
