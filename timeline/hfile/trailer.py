"""The fixed 4096-byte HFile v3 trailer and the file info map, both protobuf (HBase's HFile.proto).

The message classes are built at import from a FileDescriptorProto in a private pool: no generated code.
Trailer layout (FixedFileTrailer): magic `TRABLK"$` | varint length | FileTrailerProto | zero padding |
version int (minor << 24 | major). File info block data (HFileInfo.write): `PBUF` | varint length | FileInfoProto.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from timeline.hfile.errors import HFileError

try:
    from google.protobuf.message_factory import GetMessageClass
except ImportError:  # protobuf < 4.22
    from google.protobuf.message_factory import MessageFactory

    def GetMessageClass(descriptor):
        return MessageFactory().GetPrototype(descriptor)


TRAILER_SIZE = 4096  # FixedFileTrailer.getTrailerSize for major version 3
TRAILER_MAGIC = b'TRABLK"$'
MAJOR_VERSION = 3
MINOR_VERSION = 3  # HFileReaderImpl.MAX_MINOR_VERSION, what HBase 2.4 writes
PB_MAGIC = b"PBUF"
COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"  # what Hudi 0.15 and 1.x write
# The bootstrap index's (RFC-12): a CellComparatorImpl under Hudi's name
BOOTSTRAP_COMPARATOR = "org.apache.hudi.common.bootstrap.index.HFileBootstrapIndex$HoodieKVComparator"
# Comparators that order rows as unsigned bytes, as this reader's binary search assumes.
KNOWN_COMPARATORS = frozenset(
    {
        COMPARATOR,
        BOOTSTRAP_COMPARATOR,
        "org.apache.hadoop.hbase.KeyValue$KVComparator",  # HBase's own, under its HBase 1 name
        "org.apache.hadoop.hbase.CellComparatorImpl",
    }
)
_VERSION = struct.Struct(">I")
_UINT64 = 1 << 64

_U64, _U32, _STRING, _BYTES, _MESSAGE = (
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
)
_TRAILER_FIELDS = (
    ("file_info_offset", _U64),
    ("load_on_open_data_offset", _U64),
    ("uncompressed_data_index_size", _U64),
    ("total_uncompressed_bytes", _U64),
    ("data_index_count", _U32),
    ("meta_index_count", _U32),
    ("entry_count", _U64),
    ("num_data_index_levels", _U32),
    ("first_data_block_offset", _U64),
    ("last_data_block_offset", _U64),
    ("comparator_class_name", _STRING),
    ("compression_codec", _U32),
    ("encryption_key", _BYTES),
)


def _message_classes():
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    required = descriptor_pb2.FieldDescriptorProto.LABEL_REQUIRED
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    file = descriptor_pb2.FileDescriptorProto(name="tandem/hbase_hfile.proto", package="hbase.pb", syntax="proto2")
    trailer = file.message_type.add(name="FileTrailerProto")
    for number, (name, kind) in enumerate(_TRAILER_FIELDS, start=1):
        trailer.field.add(name=name, number=number, label=optional, type=kind)
    pair = file.message_type.add(name="BytesBytesPair")
    pair.field.add(name="first", number=1, label=required, type=_BYTES)
    pair.field.add(name="second", number=2, label=required, type=_BYTES)
    info = file.message_type.add(name="FileInfoProto")
    info.field.add(name="map_entry", number=1, label=repeated, type=_MESSAGE, type_name=".hbase.pb.BytesBytesPair")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (
        GetMessageClass(pool.FindMessageTypeByName(f"hbase.pb.{name}"))
        for name in ("FileTrailerProto", "FileInfoProto")
    )


TrailerProto, FileInfoProto = _message_classes()


# Fields a reader cannot do without; Hudi 1.x's own writer leaves total_uncompressed_bytes out.
REQUIRED = frozenset(
    {
        "file_info_offset",
        "load_on_open_data_offset",
        "data_index_count",
        "meta_index_count",
        "entry_count",
        "num_data_index_levels",
        "compression_codec",
    }
)


@dataclass(frozen=True)
class Trailer:
    """The trailer fields; offsets HBase leaves unset (-1, e.g. no data block) are negative here, and optional
    fields a writer left out are None. `uncompressed_data_index_size` means the index's size to HBase but the
    data's to Hudi 1.x's writer, so no reader should rely on it."""

    file_info_offset: int
    load_on_open_data_offset: int
    uncompressed_data_index_size: int | None
    total_uncompressed_bytes: int | None
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int | None
    last_data_block_offset: int | None
    comparator_class_name: str | None
    compression_codec: int
    minor_version: int = MINOR_VERSION  # 0 from Hudi 1.x's writer, whose blocks carry no checksums


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(buf: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    for end in range(at, min(len(buf), at + 10)):
        value |= (buf[end] & 0x7F) << shift
        if buf[end] < 0x80:
            return value, end + 1
        shift += 7
    raise HFileError("a protobuf length prefix runs past its bytes")


def _delimited(message) -> bytes:
    body = message.SerializeToString()
    return _varint(len(body)) + body


def _parse_delimited(cls, buf: bytes, at: int, what: str):
    """(message, end): a varint length then exactly that message, re-encoded identically (no unknown fields)."""
    length, start = _read_varint(buf, at)
    body = buf[start : start + length]
    if len(body) != length:
        raise HFileError(f"the {what} runs past its bytes")
    try:
        message = cls.FromString(body)
    except DecodeError as err:
        raise HFileError(f"the {what} is not valid protobuf: {err}") from err
    message.DiscardUnknownFields()
    if message.SerializeToString() != body:
        raise HFileError(f"the {what} holds fields or encodings HBase does not write")
    return message, start + length


def encode_trailer(trailer: Trailer) -> bytes:
    fields = {name: getattr(trailer, name) for name, _ in _TRAILER_FIELDS[:-1]}
    message = TrailerProto(
        **{name: value % _UINT64 if isinstance(value, int) else value for name, value in fields.items()}
    )
    body = TRAILER_MAGIC + _delimited(message)
    padding = TRAILER_SIZE - _VERSION.size - len(body)
    if padding < 0:
        raise ValueError("the trailer does not fit in 4096 bytes")
    return body + bytes(padding) + _VERSION.pack(trailer.minor_version << 24 | MAJOR_VERSION)


def decode_trailer(raw: bytes) -> Trailer:
    """The trailer from the file's last 4096 bytes: magic, major version 3, the fields reads need, zero padding."""
    if len(raw) != TRAILER_SIZE or raw[:8] != TRAILER_MAGIC:
        raise HFileError("no HFile trailer: the file is truncated or not an HFile")
    (version,) = _VERSION.unpack_from(raw, TRAILER_SIZE - 4)
    if version & 0xFFFFFF != MAJOR_VERSION or version >> 24 > MINOR_VERSION:
        raise HFileError(f"HFile version {version & 0xFFFFFF}.{version >> 24} is not 3.0-3.3")
    message, end = _parse_delimited(TrailerProto, raw, len(TRAILER_MAGIC), "trailer")
    if any(raw[end : TRAILER_SIZE - 4]):
        raise HFileError("the trailer's padding is not zero")
    if message.HasField("encryption_key"):
        raise HFileError("encrypted HFiles are not supported")
    values = {}
    for name, kind in _TRAILER_FIELDS[:-1]:
        if not message.HasField(name):
            if name in REQUIRED:
                raise HFileError(f"the trailer has no {name}")
            values[name] = None
            continue
        value = getattr(message, name)
        values[name] = value - _UINT64 if kind == _U64 and value >= 1 << 63 else value
    if values["comparator_class_name"] not in KNOWN_COMPARATORS | {None}:
        raise HFileError(f"unknown key comparator {values['comparator_class_name']!r}")
    return Trailer(**values, minor_version=version >> 24)


def encode_file_info(info: Mapping[bytes, bytes]) -> bytes:
    """HFileInfo.write: the map sorted by unsigned key bytes (a TreeMap over Bytes.BYTES_COMPARATOR)."""
    message = FileInfoProto()
    for key in sorted(info):
        message.map_entry.add(first=key, second=info[key])
    return PB_MAGIC + _delimited(message)


def decode_file_info(data: bytes) -> dict[bytes, bytes]:
    if data[:4] != PB_MAGIC:
        raise HFileError("the file info block does not start with PBUF")
    message, end = _parse_delimited(FileInfoProto, data, 4, "file info")
    if end != len(data):
        raise HFileError("the file info block has bytes after its map")
    info = {entry.first: entry.second for entry in message.map_entry}
    if len(info) != len(message.map_entry):
        raise HFileError("the file info repeats a key")
    return info
