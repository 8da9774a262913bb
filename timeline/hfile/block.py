"""HFile v3 blocks: the 33-byte header, CRC32C chunk checksums, and GZ / no compression.

On disk a block is `header | data | checksums` (HBase `HFileBlock`): the header says how big the compressed
and uncompressed data are, and the checksums are one big-endian CRC per `bytes_per_checksum` bytes of
header + compressed data (HBase `ChecksumUtil`), so every byte of a block is covered by some checksum.
"""

from __future__ import annotations

import struct
import zlib

import google_crc32c

from timeline.hfile.errors import HFileError

HEADER = struct.Struct(">8siiqBii")
HEADER_SIZE = HEADER.size  # 33: magic, on-disk size, uncompressed size, previous offset, checksum fields
BYTES_PER_CHECKSUM = 16 * 1024  # HFile.DEFAULT_BYTES_PER_CHECKSUM
NO_CHECKSUM = 0  # ChecksumType codes
CRC32 = 1
CRC32C = 2

DATA = b"DATABLK*"
LEAF_INDEX = b"IDXLEAF2"
META = b"METABLKc"
INTERMEDIATE_INDEX = b"IDXINTE2"
ROOT_INDEX = b"IDXROOT2"
FILE_INFO = b"FILEINF2"

GZ = 1  # Compression.Algorithm ordinals, as the trailer stores them
NONE = 2
CODECS = {"gz": GZ, "none": NONE}

# java.util.zip.GZIPOutputStream's fixed header (JDK 16+ writes OS = 255, "unknown"), which HBase's GZ codec
# copies; the deflate level is Deflater.DEFAULT_COMPRESSION.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_GZIP_TRAILER = struct.Struct("<II")
_CRC = struct.Struct(">I")


def compress(payload: bytes, codec: int) -> bytes:
    if codec == NONE:
        return payload
    deflater = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(payload) + deflater.flush()
    return _GZIP_HEADER + body + _GZIP_TRAILER.pack(zlib.crc32(payload), len(payload) & 0xFFFFFFFF)


def decompress(body: memoryview, codec: int, size: int) -> bytes | memoryview:
    """The block's data, exactly `size` bytes; GZ data must be one whole gzip member whose CRC32 matches."""
    if codec == NONE:
        if len(body) != size:
            raise HFileError(f"uncompressed block holds {len(body)} bytes, its header says {size}")
        return body
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, size + 1)
    except zlib.error as err:
        raise HFileError(f"gzip block does not inflate: {err}") from err
    if not inflater.eof or inflater.unused_data or inflater.unconsumed_tail or len(data) != size:
        raise HFileError(f"gzip block inflates to {len(data)} bytes (header says {size}) or has trailing bytes")
    return data


def _checksums(covered: bytes | memoryview, bytes_per_checksum: int, kind: int) -> bytes:
    crc = google_crc32c.value if kind == CRC32C else zlib.crc32
    return b"".join(
        _CRC.pack(crc(bytes(covered[at : at + bytes_per_checksum])))
        for at in range(0, len(covered), bytes_per_checksum)
    )


def encode_block(magic: bytes, payload: bytes, prev_offset: int, codec: int) -> bytes:
    """One block as HBase writes it: header, compressed payload, CRC32C chunk checksums."""
    body = compress(payload, codec)
    data_size = HEADER_SIZE + len(body)
    checksum_size = 4 * -(-data_size // BYTES_PER_CHECKSUM)
    header = HEADER.pack(
        magic, len(body) + checksum_size, len(payload), prev_offset, CRC32C, BYTES_PER_CHECKSUM, data_size
    )
    covered = header + body
    return covered + _checksums(covered, BYTES_PER_CHECKSUM, CRC32C)


def read_block(
    buf: memoryview, offset: int, magic: bytes, codec: int, size: int | None = None, checksummed: bool = True
) -> tuple[bytes | memoryview, int]:
    """Verify the block at `offset` (magic, sizes, every checksum) and return (uncompressed data, on-disk size).

    `size` is the on-disk size an index entry promised; it must match the header's. Only a file that is not
    `checksummed` (Hudi 1.x's own writer: checksum type NULL, zero checksum bytes) may have blocks without
    checksums; there GZ data is still checked by its gzip CRC32."""
    data_size, uncompressed, total = check_block(buf, offset, magic, size, checksummed)
    return decompress(buf[offset + HEADER_SIZE : offset + data_size], codec, uncompressed), total


def check_block(
    buf: memoryview, offset: int, magic: bytes, size: int | None = None, checksummed: bool = True
) -> tuple[int, int, int]:
    """Verify the block at `offset` without inflating it (magic, sizes, every checksum): (data size,
    uncompressed size, on-disk size). The checksums cover the compressed bytes, so this is all a checksummed
    block's integrity needs."""
    if offset < 0 or offset + HEADER_SIZE > len(buf):
        raise HFileError(f"block at {offset} lies outside the file ({len(buf)} bytes)")
    found, on_disk, uncompressed, _prev, kind, per_checksum, data_size = HEADER.unpack_from(buf, offset)
    if found != magic:
        raise HFileError(f"block at {offset} has magic {found!r}, expected {magic!r}")
    allowed = (CRC32, CRC32C) if checksummed else (NO_CHECKSUM,)
    if kind not in allowed or per_checksum <= 0 or data_size < HEADER_SIZE or uncompressed < 0:
        raise HFileError(f"block at {offset} has a bad header (checksum type {kind}, chunk {per_checksum})")
    total = HEADER_SIZE + on_disk
    if on_disk != data_size - HEADER_SIZE + 4 * -(-data_size // per_checksum):
        raise HFileError(f"block at {offset}: on-disk size {on_disk} does not fit its data size {data_size}")
    if offset + total > len(buf) or (size is not None and size != total):
        raise HFileError(f"block at {offset} is {total} bytes on disk; the index or file end says otherwise")
    stored = buf[offset + data_size : offset + total]
    expected = _checksums(buf[offset : offset + data_size], per_checksum, kind) if kind else bytes(len(stored))
    if expected != stored:
        raise HFileError(f"checksum mismatch in the {magic.decode()} block at {offset}")
    return data_size, uncompressed, total
