"""Write an HFile the way Hudi 0.15 does through HBase 2.4's HFileWriterImpl (`HoodieAvroHFileWriter`).

Same block boundaries (a block closes once its cells reach `block_size`), same index keys (HBase's shortest
midpoint rows), same multi-level index, file info and trailer, so the bytes equal Java's for the same input.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

from timeline.hfile import block
from timeline.hfile.cell import KEY_OVERHEAD, cell_key, encode_cell, index_key
from timeline.hfile.index import MAX_CHUNK_SIZE, Entry, IndexWriter, encode_root
from timeline.hfile.trailer import COMPARATOR, TRAILER_SIZE, Trailer, encode_file_info, encode_trailer

# File info keys HBase sets itself (HFileInfo, HFileWriterImpl); callers may not set them.
LASTKEY = b"hfile.LASTKEY"
AVG_KEY_LEN = b"hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = b"hfile.AVG_VALUE_LEN"
CREATE_TIME_KEY = b"hfile.CREATE_TIME_TS"
MAX_MEMSTORE_TS_KEY = b"MAX_MEMSTORE_TS_KEY"
KEY_VALUE_VERSION = b"KEY_VALUE_VERSION"
RESERVED_PREFIX = b"hfile."
KEY_VALUE_VER_WITH_MEMSTORE = 1


class _File:
    """The growing file and HBase's per-block-type "previous block" offsets."""

    def __init__(self, codec: int) -> None:
        self.codec = codec
        self.out = bytearray()
        self.previous: dict[bytes, int] = {}
        self.uncompressed_bytes = 0  # FixedFileTrailer.totalUncompressedBytes

    def write(self, magic: bytes, payload: bytes) -> tuple[int, int]:
        offset = len(self.out)
        self.out += block.encode_block(magic, payload, self.previous.get(magic, -1), self.codec)
        self.previous[magic] = offset
        return offset, len(self.out) - offset


def write_hfile(
    cells: Iterable[tuple[bytes, bytes]],
    file_info: Mapping[bytes, bytes] = {},  # noqa: B006 - read only
    *,
    block_size: int = 64 * 1024,
    compression: str = "gz",
    meta_blocks: Mapping[bytes, bytes] = {},  # noqa: B006 - read only
    index_chunk_size: int = MAX_CHUNK_SIZE,
    comparator: str = COMPARATOR,
) -> bytes:
    """The whole HFile for `cells` (keys strictly increasing as unsigned bytes, else ValueError).

    `file_info` is the user part of the file info map (Hudi's `schema`, `minRecordKey`, ...); `meta_blocks` are
    named meta blocks (Hudi's `bloomFilter`); `index_chunk_size` is HBase's hfile.index.block.max.size; `comparator`
    the name the trailer gives the row order (unsigned bytes, whatever the name)."""
    if compression not in block.CODECS:
        raise ValueError(f"compression must be one of {sorted(block.CODECS)}, got {compression!r}")
    reserved = {MAX_MEMSTORE_TS_KEY, KEY_VALUE_VERSION}
    if any(key.startswith(RESERVED_PREFIX) or key in reserved for key in file_info):
        raise ValueError("file info keys starting with hfile., MAX_MEMSTORE_TS_KEY and KEY_VALUE_VERSION are HBase's")
    file = _File(block.CODECS[compression])
    index = IndexWriter(index_chunk_size)
    data = bytearray()
    first_row = last_row = previous_block_row = None
    first_data_offset = last_data_offset = -1
    entries = key_bytes = value_bytes = 0

    def finish_data_block() -> None:
        nonlocal first_data_offset, last_data_offset
        offset, size = file.write(block.DATA, bytes(data))
        first_data_offset = offset if first_data_offset < 0 else first_data_offset
        last_data_offset = offset
        index.add(index_key(previous_block_row, first_row), offset, size)
        file.uncompressed_bytes += block.HEADER_SIZE + len(data)
        data.clear()

    def write_leaves(closing: bool) -> None:
        while index.should_write_leaf(closing):
            file.uncompressed_bytes += block.HEADER_SIZE + index.write_leaf(file.write, block.LEAF_INDEX)

    for row, value in cells:
        if last_row is not None and row <= last_row:
            raise ValueError(f"HFile keys must be strictly increasing: {row!r} after {last_row!r}")
        if len(data) >= block_size:  # HFileWriterImpl.checkBlockBoundary, before each cell
            finish_data_block()
            write_leaves(False)
            previous_block_row = last_row
        if not data:
            first_row = row
        data += encode_cell(row, value)
        last_row = row
        entries += 1
        key_bytes += len(row) + KEY_OVERHEAD
        value_bytes += len(value)
    if data:
        finish_data_block()
    write_leaves(True)

    meta_index = []
    for name in sorted(meta_blocks):
        offset, size = file.write(block.META, meta_blocks[name])
        file.uncompressed_bytes += block.HEADER_SIZE + len(meta_blocks[name])
        meta_index.append(Entry(name, offset, size))

    root_offset = index.write_index(file.write, block.INTERMEDIATE_INDEX, block.ROOT_INDEX)
    meta_payload = encode_root(meta_index)
    file.write(block.ROOT_INDEX, meta_payload)
    file.uncompressed_bytes += block.HEADER_SIZE + len(meta_payload)

    info = {
        **file_info,
        MAX_MEMSTORE_TS_KEY: struct.pack(">q", 0),
        KEY_VALUE_VERSION: struct.pack(">i", KEY_VALUE_VER_WITH_MEMSTORE),
        AVG_KEY_LEN: struct.pack(">i", key_bytes // entries if entries else 0),
        CREATE_TIME_KEY: struct.pack(">q", 0),  # Hudi leaves HFileContext's create time unset
        AVG_VALUE_LEN: struct.pack(">i", value_bytes // entries if entries else 0),
    }
    if last_row is not None:
        info[LASTKEY] = cell_key(last_row)
    info_payload = encode_file_info(info)
    info_offset, _ = file.write(block.FILE_INFO, info_payload)
    file.uncompressed_bytes += block.HEADER_SIZE + len(info_payload)

    trailer = Trailer(
        file_info_offset=info_offset,
        load_on_open_data_offset=root_offset,
        uncompressed_data_index_size=index.uncompressed_size,
        total_uncompressed_bytes=file.uncompressed_bytes + TRAILER_SIZE,
        data_index_count=len(index.root.entries),
        meta_index_count=len(meta_index),
        entry_count=entries,
        num_data_index_levels=index.levels,
        first_data_block_offset=first_data_offset,
        last_data_block_offset=last_data_offset,
        comparator_class_name=comparator,
        compression_codec=file.codec,
    )
    return bytes(file.out + encode_trailer(trailer))
