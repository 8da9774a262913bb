"""Read an HFile (HBase 2.4 / Hudi layout) from memory, checking every byte it uses.

Checked: the trailer (magic, version, protobuf that re-encodes to the same bytes, zero padding, known
comparator, no encryption); the load-on-open section laid out as HBase writes it (root index, meta index, file
info, then the trailer, at the offsets the trailer gives); every block read (magic, header sizes against the
index entry pointing at it, each CRC32C chunk, GZ data inflating to the stated size with its gzip CRC32).
Hudi 1.x's own writer marks its files minor version 0 and writes no checksums: only in such a file may a
block's checksum type be NULL (its checksum bytes must then be zero).

Unchecked, because no answer depends on them: the trailer's uncompressed sizes and, with a multi-level index,
its first/last data block offsets. `len()` is the trailer's entry count, confirmed against the cells the first
time it is asked, so a damaged count raises HFileError instead of being returned.
"""

from __future__ import annotations

import bisect
import struct
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from timeline.hfile import block
from timeline.hfile.cell import CELL_HEAD, HUDI_KEY_TAIL, KEY_OVERHEAD, index_row, read_vint
from timeline.hfile.errors import HFileError
from timeline.hfile.index import MAX_LEVELS, Entry, decode_non_root, decode_root
from timeline.hfile.trailer import TRAILER_SIZE, decode_file_info, decode_trailer

MINOR_VERSION_WITH_CHECKSUM = 1  # HBase's: from here on every block carries checksums
CACHED_BLOCKS = 8  # parsed data blocks kept per reader, for runs of lookups that land in the same block
_VLONG_MULTI_BYTE = range(0x80, 0x90)  # first bytes of a Hadoop vlong longer than one byte


@dataclass
class _Level:
    """One index block: its entries and their rows, for binary search."""

    entries: list[Entry]
    rows: list[bytes]


@dataclass
class _Block:
    """One parsed data block: rows in order, and where each value lies in `data`."""

    data: bytes
    rows: list[bytes]
    starts: list[int]
    ends: list[int]

    def value(self, i: int) -> bytes:
        return self.data[self.starts[i] : self.ends[i]]


def _level(entries: list[Entry]) -> _Level:
    return _Level(entries, [index_row(entry.key) for entry in entries])


class HFileReader:
    """Point lookups, prefix scans and full scans over one HFile held in memory."""

    def __init__(self, data: bytes | memoryview) -> None:
        buf = memoryview(data).cast("B")
        if len(buf) < TRAILER_SIZE:
            raise HFileError(f"{len(buf)} bytes cannot hold an HFile trailer")
        trailer = decode_trailer(bytes(buf[-TRAILER_SIZE:]))
        if trailer.compression_codec not in (block.GZ, block.NONE):
            raise HFileError(f"compression codec {trailer.compression_codec} is not GZ or NONE")
        if not 1 <= trailer.num_data_index_levels <= MAX_LEVELS:
            raise HFileError(f"{trailer.num_data_index_levels} data index levels")
        self._buf, self._codec, self._levels = buf, trailer.compression_codec, trailer.num_data_index_levels
        self._checksummed = trailer.minor_version >= MINOR_VERSION_WITH_CHECKSUM
        root_data, root_size = self._read_block(trailer.load_on_open_data_offset, block.ROOT_INDEX)
        meta_at = trailer.load_on_open_data_offset + root_size
        meta_data, meta_size = self._read_block(meta_at, block.ROOT_INDEX)
        if meta_at + meta_size != trailer.file_info_offset:
            raise HFileError("the file info block is not where the trailer says")
        info_data, info_size = self._read_block(trailer.file_info_offset, block.FILE_INFO)
        if trailer.file_info_offset + info_size != len(buf) - TRAILER_SIZE:
            raise HFileError("bytes between the file info block and the trailer")
        root = decode_root(root_data, trailer.data_index_count, mid_key=self._levels > 1)
        if (
            self._levels == 1
            and root
            and (
                trailer.first_data_block_offset not in (None, root[0].offset)
                or trailer.last_data_block_offset not in (None, root[-1].offset)
            )
        ):
            raise HFileError("the trailer's first or last data block is not the root index's")
        self._root = _level(root)
        self._meta = {entry.key: entry for entry in decode_root(meta_data, trailer.meta_index_count, mid_key=False)}
        self.file_info: dict[bytes, bytes] = decode_file_info(bytes(info_data))
        if b"hfile.MAX_TAGS_LEN" in self.file_info:
            raise HFileError("cells with tags are not Hudi's")
        version = self.file_info.get(b"KEY_VALUE_VERSION", b"\x00\x00\x00\x00")
        if len(version) != 4:
            raise HFileError("KEY_VALUE_VERSION is not an int")
        self._mvcc = struct.unpack(">i", version)[0] == 1
        self._entry_count = trailer.entry_count
        self._count_checked = False
        self._index_blocks: dict[int, _Level] = {}
        self._blocks: OrderedDict[int, _Block] = OrderedDict()

    def __len__(self) -> int:
        """The trailer's entry count (checked against the cells on first use: one pass over the data blocks)."""
        if not self._count_checked:
            self._check_count(sum(len(self._block(entry).rows) for entry in self._data_blocks(None)))
        return self._entry_count

    def get(self, key: bytes) -> bytes | None:
        """The value stored under `key`, or None; reads at most one data block (plus uncached lower index blocks)."""
        entry = self._find(key)
        if entry is None:
            return None
        found = self._block(entry)
        i = bisect.bisect_left(found.rows, key)
        return found.value(i) if i < len(found.rows) and found.rows[i] == key else None

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every cell whose key starts with `prefix`, in key order."""
        for entry in self._data_blocks(prefix):
            found = self._block(entry)
            for i in range(bisect.bisect_left(found.rows, prefix), len(found.rows)):
                if not found.rows[i].startswith(prefix):
                    return
                yield found.rows[i], found.value(i)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every cell in key order. A complete pass confirms the trailer's entry count, or leaves it for `len()`
        to refuse: the cells are what the checksummed blocks hold, and nothing else depends on the count."""
        count = 0
        for entry in self._data_blocks(None):
            found = self._block(entry)
            for i, row in enumerate(found.rows):
                yield row, found.value(i)
            count += len(found.rows)
        self._count_checked = count == self._entry_count

    def verify(self) -> None:
        """Check every data and meta block's bytes (HFileError where one is damaged) without parsing cells: a
        checksummed file's CRC32C chunks cover the compressed bytes, so nothing is inflated; a file without
        checksums (Hudi 1.x) is read whole, its gzip CRC32s and cells being all there is to check."""
        if not self._checksummed:
            for _ in self.items():
                pass
            return
        for entry in self._data_blocks(None):
            block.check_block(self._buf, entry.offset, block.DATA, entry.size)
        for entry in self._meta.values():
            block.check_block(self._buf, entry.offset, block.META, entry.size)

    def meta_block(self, name: bytes) -> bytes | None:
        """A named meta block's bytes (Hudi keeps its bloom filter under b"bloomFilter"), or None."""
        entry = self._meta.get(name)
        if entry is None:
            return None
        return bytes(self._read_block(entry.offset, block.META, entry.size)[0])

    def _read_block(self, offset: int, magic: bytes, size: int | None = None) -> tuple[bytes | memoryview, int]:
        return block.read_block(self._buf, offset, magic, self._codec, size, self._checksummed)

    def _check_count(self, count: int) -> None:
        if count != self._entry_count:
            raise HFileError(f"the trailer counts {self._entry_count} cells, the data blocks hold {count}")
        self._count_checked = True

    def _child(self, entry: Entry, depth: int) -> _Level:
        """The index block at `depth` (2 = below the root) that `entry` points to; the deepest are leaves."""
        level = self._index_blocks.get(entry.offset)
        if level is None:
            magic = block.LEAF_INDEX if depth == self._levels else block.INTERMEDIATE_INDEX
            data, _ = self._read_block(entry.offset, magic, entry.size)
            level = self._index_blocks[entry.offset] = _level(decode_non_root(data))
        return level

    def _find(self, key: bytes) -> Entry | None:
        """The data block whose key range holds `key`: the last index entry at or before it, level by level."""
        level = self._root
        for depth in range(1, self._levels + 1):
            i = bisect.bisect_right(level.rows, key) - 1
            if i < 0:
                return None
            if depth == self._levels:
                return level.entries[i]
            level = self._child(level.entries[i], depth + 1)
        return None

    def _data_blocks(self, start: bytes | None) -> Iterator[Entry]:
        """Data block entries in file order, from the block that would hold `start` (None: the first)."""
        path, level = [], self._root
        for depth in range(1, self._levels + 1):
            i = 0 if start is None else max(bisect.bisect_right(level.rows, start) - 1, 0)
            path.append([level, i])
            if depth == self._levels or i >= len(level.entries):
                break
            level = self._child(level.entries[i], depth + 1)
        while path:
            level, i = path[-1]
            if i >= len(level.entries):
                path.pop()
                if path:
                    path[-1][1] += 1
            elif len(path) == self._levels:
                yield level.entries[i]
                path[-1][1] += 1
            else:
                path.append([self._child(level.entries[i], len(path) + 1), 0])

    def _block(self, entry: Entry) -> _Block:
        found = self._blocks.get(entry.offset)
        if found is not None:
            self._blocks.move_to_end(entry.offset)
            return found
        data, _ = self._read_block(entry.offset, block.DATA, entry.size)
        found = self._blocks[entry.offset] = _parse_cells(bytes(data), self._mvcc)
        if len(self._blocks) > CACHED_BLOCKS:
            self._blocks.popitem(last=False)
        return found


def _parse_cells(data: bytes, mvcc: bool) -> _Block:
    """Split a data block into cells; each must be a Hudi cell (empty column, latest timestamp, Put), in order."""
    rows: list[bytes] = []
    starts: list[int] = []
    ends: list[int] = []
    at, size, previous = 0, len(data), b""
    unpack = CELL_HEAD.unpack_from
    try:
        while at < size:
            key_length, value_length, row_length = unpack(data, at)
            row_end = at + 10 + row_length
            key_end = at + 8 + key_length
            value_end = key_end + value_length
            if key_length != row_length + KEY_OVERHEAD or value_length < 0 or value_end > size:
                raise HFileError(f"a cell at {at} of a data block has inconsistent lengths")
            if data[row_end:key_end] != HUDI_KEY_TAIL:
                raise HFileError("a cell that is not a Hudi Put with an empty column")
            row = data[at + 10 : row_end]
            if row < previous:
                raise HFileError("cells out of key order in a data block")
            rows.append(row)
            starts.append(key_end)
            ends.append(value_end)
            previous = row
            at = value_end
            if mvcc:
                at = read_vint(data, at)[1] if data[at] in _VLONG_MULTI_BYTE else at + 1
    except (struct.error, IndexError) as err:
        raise HFileError("a data block ends inside a cell") from err
    if at != size or not rows:
        raise HFileError("a data block's cells do not fill it exactly")
    return _Block(data, rows, starts, ends)
