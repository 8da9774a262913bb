"""Hudi 0.15's bootstrap index (RFC-12, `HFileBootstrapIndex`): which source file each skeleton stands for.

Two HFiles (docs/hudi-bootstrap-format.md §4), written as Java's `HBaseHFileBootstrapIndexWriter` writes them:
`.partitions` holds one cell per Hudi partition (`part=<p>`: a `HoodieBootstrapPartitionMetadata` mapping file
id -> `HoodieFileStatus`), `.fileids` one per skeleton (`part=<p>;fileid=<id>`: a
`HoodieBootstrapFilePartitionInfo`). Every value is an Avro object container of one record; each file's file
info carries `INDEX_INFO` (a `HoodieBootstrapIndexInfo` container). Java's data read path uses only
`.partitions`, but it takes the index as present only when both files exist.

For the same mappings the bytes equal Java's but for what Java itself leaves to chance: each Avro container's
random sync marker, `createdTimestamp`, and which of two file ids sharing a java.util.HashMap bin comes first in a
partition's map (Java's insertion order; ours is the order of the mappings given, so an index read and written
again keeps it). The file status fields a mapping does not carry are written as Hadoop's local file system
reports them (replication 1, 32 MB blocks, rw-r--r--); readers use only the uri, length and times.
"""

from __future__ import annotations

import io
import json
import os
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from timeline.errors import BadInputError, ConflictError, CorruptInstantError
from timeline.format import partition_path
from timeline.hfile import HFileError, HFileReader, write_hfile
from timeline.hfile.trailer import BOOTSTRAP_COMPARATOR
from timeline.hfile.writer import KEY_VALUE_VERSION, MAX_MEMSTORE_TS_KEY, RESERVED_PREFIX
from timeline.io.storage import Storage

INDEX_CLASS = "org.apache.hudi.common.bootstrap.index.hfile.HFileBootstrapIndex"
_FILE_NAME = "00000000-0000-0000-0000-000000000000-0_1-0-1_00000000000001.hfile"
PARTITIONS_FILE = f".hoodie/.aux/.bootstrap/.partitions/{_FILE_NAME}"
FILE_IDS_FILE = f".hoodie/.aux/.bootstrap/.fileids/{_FILE_NAME}"
# The trailer's comparator (HFileBootstrapIndex.HoodieKVComparator, a CellComparatorImpl: rows as unsigned bytes)
INDEX_INFO = b"INDEX_INFO"
BLOCK_SIZE = 64 * 1024  # HFileContextBuilder's default; uncompressed, as Java writes the index
# What Hadoop's local file system reports for every file, and what Tandem writes for any source
BLOCK_REPLICATION = 1
BLOCK_SIZE_REPORTED = 32 * 1024 * 1024
PERMISSION = ("READ_WRITE", "READ", "READ")  # rw-r--r-- as FsAction names
_INT64 = range(-(1 << 63), 1 << 63)

_NS = "org.apache.hudi.avro.model"
_STR = {"type": "string", "avro.java.string": "String"}


def _field(name: str, kind: Any) -> dict:
    return {"name": name, "type": ["null", kind], "default": None}


_VERSION = {"name": "version", "type": ["int", "null"], "default": 1}
_PATH = {"type": "record", "name": "HoodiePath", "fields": [_VERSION, _field("uri", _STR)]}
_PERMISSION = {
    "type": "record",
    "name": "HoodieFSPermission",
    "fields": [_VERSION, *(_field(f"{who}Action", _STR) for who in ("user", "group", "other"))]
    + [_field("stickyBit", "boolean")],
}
_FILE_STATUS = {
    "type": "record",
    "name": "HoodieFileStatus",
    "fields": [
        _VERSION,
        _field("path", _PATH),
        _field("length", "long"),
        _field("isDir", "boolean"),
        _field("blockReplication", "int"),
        _field("blockSize", "long"),
        _field("modificationTime", "long"),
        _field("accessTime", "long"),
        _field("permission", _PERMISSION),
        _field("owner", _STR),
        _field("group", _STR),
        _field("symlink", "HoodiePath"),
    ],
}
# The generated SCHEMA$ of each value's class, field for field: Java's container headers hold this text.
_SCHEMAS = {
    "HoodieBootstrapIndexInfo": [
        _VERSION,
        _field("bootstrapBasePath", _STR),
        _field("createdTimestamp", "long"),
        _field("numKeys", "int"),
    ],
    "HoodieBootstrapPartitionMetadata": [
        _VERSION,
        _field("bootstrapPartitionPath", _STR),
        _field("partitionPath", _STR),
        _field("fileIdToBootstrapFile", {"type": "map", "values": _FILE_STATUS, "avro.java.string": "String"}),
    ],
    "HoodieBootstrapFilePartitionInfo": [
        _VERSION,
        _field("bootstrapPartitionPath", _STR),
        _field("bootstrapFileStatus", _FILE_STATUS),
        _field("partitionPath", _STR),
    ],
}
_SCHEMA_JSON = {
    name: json.dumps({"type": "record", "name": name, "namespace": _NS, "fields": fields}, separators=(",", ":"))
    for name, fields in _SCHEMAS.items()
}
_PARSED = {name: fastavro.parse_schema(json.loads(text)) for name, text in _SCHEMA_JSON.items()}
_AVRO_MAGIC = b"Obj\x01"


@dataclass(frozen=True)
class SourceMapping:
    """One skeleton's source file: the Hudi file group (`partition`, `file_id`) and the `HoodieFileStatus`
    fields a reader needs (uri, exact length: Spark reads [0, length)). `owner`/`group` keep what Java recorded,
    so that an index read and written again says the same."""

    partition: str
    file_id: str
    source_partition: str
    uri: str
    length: int
    modification_time: int
    owner: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class BootstrapIndex:
    """A table's bootstrap index: `mappings` in the `.partitions` file's order (which `write_index` keeps)."""

    base_path: str
    mappings: dict[tuple[str, str], SourceMapping]

    def source(self, partition: str, file_id: str) -> SourceMapping | None:
        return self.mappings.get((partition, file_id))


def write_index(
    storage: Storage, bootstrap_base_path: str, mappings: Sequence[SourceMapping], now_ms: int | None = None
) -> list[str]:
    """Write both index files (relative paths returned). An existing index is Java's "Previous version of
    bootstrap index exists": refused (ConflictError), as is a half-written one, which `drop_index` clears."""
    partitions, file_ids = _encode(bootstrap_base_path, mappings, int(time.time() * 1000) if now_ms is None else now_ms)
    paths = [PARTITIONS_FILE, FILE_IDS_FILE]
    found = [path for path in paths if storage.exists(path)]
    if found:
        raise ConflictError(f"{storage.uri(found[0])}: the table already has a bootstrap index")
    _discard_checksums(storage)
    folders = [path.rpartition("/")[0] for path in paths]
    storage.create_dirs(folders)  # durable, parents included: the commit that follows relies on the index
    if not storage.create_if_absent(PARTITIONS_FILE, partitions):
        raise ConflictError(f"{storage.uri(PARTITIONS_FILE)}: another writer is writing the bootstrap index")
    if not storage.create_if_absent(FILE_IDS_FILE, file_ids):
        storage.discard(PARTITIONS_FILE)  # this call's own file: no half index is left behind
        raise ConflictError(f"{storage.uri(FILE_IDS_FILE)}: another writer is writing the bootstrap index")
    storage.sync_dirs(folders)
    return paths


def read_index(storage: Storage, whole: bool = True) -> BootstrapIndex | None:
    """The index, or None when neither file exists. Anything else is checked, since a reader would otherwise
    join a skeleton to the wrong data: one file without the other, damage (block checksums, and each file must
    be exactly what Java's writer makes of its cells), files that disagree. Readers take `whole=False`, as
    Java's do: the `.partitions` file, the `.fileids` file only required to exist (it is ten times larger)."""
    if not whole:
        try:
            data = storage.read_bytes(PARTITIONS_FILE)
        except FileNotFoundError:
            data = None
        if data is not None and storage.exists(FILE_IDS_FILE):
            return BootstrapIndex(*_read_partitions(data, storage.uri(PARTITIONS_FILE))[::-1])
    raw = {}
    for path in (PARTITIONS_FILE, FILE_IDS_FILE):
        try:
            raw[path] = storage.read_bytes(path)
        except FileNotFoundError:
            pass
    if not raw:
        return None
    if len(raw) == 1:
        (present,) = raw
        missing = FILE_IDS_FILE if present == PARTITIONS_FILE else PARTITIONS_FILE
        raise CorruptInstantError(f"{storage.uri(missing)} is missing: the bootstrap index is half written or dropped")
    where = {path: storage.uri(path) for path in raw}
    by_partition, base_path = _read_partitions(raw[PARTITIONS_FILE], where[PARTITIONS_FILE])
    by_file_id, file_ids_base = _read_file_ids(raw[FILE_IDS_FILE], where[FILE_IDS_FILE])
    if file_ids_base != base_path:
        raise CorruptInstantError(
            f"{where[FILE_IDS_FILE]}: bootstrapBasePath {file_ids_base!r}, {where[PARTITIONS_FILE]} says {base_path!r}"
        )
    if by_partition.keys() != by_file_id.keys():
        key = min(by_partition.keys() ^ by_file_id.keys())
        side = FILE_IDS_FILE if key in by_partition else PARTITIONS_FILE
        raise CorruptInstantError(f"{where[side]}: no entry for file group {key[0]!r}/{key[1]}, the other file has")
    for key, mapping in by_partition.items():
        if by_file_id[key] != mapping:
            raise CorruptInstantError(
                f"{where[FILE_IDS_FILE]}: file group {key[0]!r}/{key[1]} maps to {by_file_id[key]}, "
                f"{where[PARTITIONS_FILE]} to {mapping}"
            )
    return BootstrapIndex(base_path, by_partition)


def drop_index(storage: Storage) -> None:
    """Delete both files (Hudi's `dropIndex`, when instant 00000000000001 is rolled back); absent ones are fine."""
    _discard_checksums(storage)
    storage.discard(FILE_IDS_FILE)
    storage.discard(PARTITIONS_FILE)


def _discard_checksums(storage: Storage) -> None:
    """Hadoop's local checksum sidecars (`.<name>.crc`) of Java's index files: Java verifies a file against one,
    so a sidecar left beside a file written again would fail its next open."""
    if not storage.is_s3:
        for path in (PARTITIONS_FILE, FILE_IDS_FILE):
            folder, _, name = path.rpartition("/")
            storage.discard(f"{folder}/.{name}.crc")


# -- writing


def _encode(base_path: str, mappings: Sequence[SourceMapping], now_ms: int) -> tuple[bytes, bytes]:
    """(.partitions, .fileids) bytes, after checking `mappings` (BadInputError)."""
    if not isinstance(base_path, str) or not base_path:
        raise BadInputError("the bootstrap index needs the bootstrap base path")
    if now_ms not in _INT64:
        raise BadInputError(f"bootstrap index creation time {now_ms} is not a long")
    groups: dict[str, list[SourceMapping]] = {}
    seen: set[tuple[str, str]] = set()
    for mapping in mappings:
        _check_mapping(mapping, seen)
        group = groups.setdefault(mapping.partition, [])
        if group and group[0].source_partition != mapping.source_partition:
            raise BadInputError(
                f"bootstrap index: partition {mapping.partition!r} has sources in {group[0].source_partition!r} "
                f"and {mapping.source_partition!r}; Hudi records one source folder per partition"
            )
        group.append(mapping)
    partition_cells = []
    for partition, group in groups.items():
        order = _java_hash_map_order([m.file_id for m in group])
        record = {
            "version": None,  # Java's writer builds its records unset: null, not the schema's default
            "bootstrapPartitionPath": group[0].source_partition,
            "partitionPath": partition,
            "fileIdToBootstrapFile": {group[i].file_id: _file_status(group[i]) for i in order},
        }
        partition_cells.append((_partition_key(partition), _container("HoodieBootstrapPartitionMetadata", record)))
    file_id_cells = [
        (
            _file_id_key(m.partition, m.file_id),
            _container(
                "HoodieBootstrapFilePartitionInfo",
                {
                    "version": None,
                    "bootstrapPartitionPath": m.source_partition,
                    "bootstrapFileStatus": _file_status(m),
                    "partitionPath": m.partition,
                },
            ),
        )
        for group in groups.values()
        for m in group
    ]
    return tuple(  # type: ignore[return-value]
        _hfile(sorted(cells), {INDEX_INFO: _index_info(base_path, now_ms, len(cells))})
        for cells in (partition_cells, file_id_cells)
    )


def _check_mapping(mapping: SourceMapping, seen: set[tuple[str, str]]) -> None:
    where = f"bootstrap index: file group {mapping.partition!r}/{mapping.file_id!r}"
    partition_path.canonical(mapping.partition, where)
    found = _file_id_problem(mapping.file_id)
    if found:
        raise BadInputError(f"{where}: file id {found}")
    if not isinstance(mapping.source_partition, str):
        raise BadInputError(f"{where}: source partition {mapping.source_partition!r} is not a string")
    if not isinstance(mapping.uri, str) or not mapping.uri:
        raise BadInputError(f"{where}: source uri {mapping.uri!r} is not a path")
    if not isinstance(mapping.length, int) or mapping.length < 0 or mapping.length not in _INT64:
        raise BadInputError(f"{where}: source length {mapping.length!r} is not a file size")
    if not isinstance(mapping.modification_time, int) or mapping.modification_time not in _INT64:
        raise BadInputError(f"{where}: modification time {mapping.modification_time!r} is not a long")
    for name in ("owner", "group"):
        if getattr(mapping, name) is not None and not isinstance(getattr(mapping, name), str):
            raise BadInputError(f"{where}: {name} {getattr(mapping, name)!r} is not a string")
    key = (mapping.partition, mapping.file_id)
    if key in seen:
        raise BadInputError(f"{where}: mapped twice")
    seen.add(key)


def _file_id_problem(file_id: Any) -> str | None:
    """Why `file_id` cannot name a skeleton (Hudi takes a base file's id as its name up to the first `_`; a `;`
    would make `.fileids` keys ambiguous), or None."""
    if not isinstance(file_id, str) or not file_id:
        return f"{file_id!r} is empty or not a string"
    if any(c in file_id for c in "/_;"):
        return f"{file_id!r} contains '/', '_' or ';'"
    return partition_path.name_problem(file_id, "file id")


def _file_status(m: SourceMapping) -> dict:
    """HadoopFSUtils.fromFileStatus of the source file, as Hadoop's local file system reports it."""
    user, group, other = PERMISSION
    return {
        "version": None,
        "path": {"version": 1, "uri": m.uri},
        "length": m.length,
        "isDir": False,
        "blockReplication": BLOCK_REPLICATION,
        "blockSize": BLOCK_SIZE_REPORTED,
        "modificationTime": m.modification_time,
        "accessTime": m.modification_time,  # sic: Hudi copies the modification time
        "permission": {
            "version": 1,
            "userAction": user,
            "groupAction": group,
            "otherAction": other,
            "stickyBit": False,
        },
        "owner": m.owner,
        "group": m.group,
        "symlink": None,
    }


def _index_info(base_path: str, now_ms: int, keys: int) -> bytes:
    record = {"version": 1, "bootstrapBasePath": base_path, "createdTimestamp": now_ms, "numKeys": keys}
    return _container("HoodieBootstrapIndexInfo", record)


def _container(name: str, record: dict) -> bytes:
    """TimelineMetadataUtils.serializeAvroMetadata: an object container of one record, as Java's DataFileWriter
    frames it (only `avro.schema` in the header: Java writes no `avro.codec` for the null codec)."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, _PARSED[name], record)
    data = body.getvalue()
    schema = _SCHEMA_JSON[name].encode()
    sync = os.urandom(16)  # Java's is random too
    meta = _avro_long(1) + _avro_bytes(b"avro.schema") + _avro_bytes(schema) + _avro_long(0)
    return _AVRO_MAGIC + meta + sync + _avro_long(1) + _avro_bytes(data) + sync


def _avro_long(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _avro_bytes(value: bytes) -> bytes:
    return _avro_long(len(value)) + value


def _java_hash_map_order(keys: Sequence[str]) -> list[int]:
    """Positions of `keys` in the order a java.util.HashMap they were put into in this order iterates them (by
    bin, then insertion: resizing keeps a bin's order); Avro writes a map in that order. Bins Java turns into
    trees (9+ keys in one bin of a 64+ table) may order otherwise: the map means the same either way."""
    capacity = 16
    while len(keys) > capacity * 3 // 4 and capacity < 1 << 30:
        capacity *= 2

    def bin_of(key: str) -> int:
        code = 0
        for (unit,) in struct.iter_unpack(">H", key.encode("utf-16-be", "surrogatepass")):
            code = (31 * code + unit) & 0xFFFFFFFF
        return (code ^ code >> 16) & (capacity - 1)

    return sorted(range(len(keys)), key=lambda i: bin_of(keys[i]))


def _partition_key(partition: str) -> bytes:
    return f"part={partition}".encode()


def _file_id_key(partition: str, file_id: str) -> bytes:
    return f"part={partition};fileid={file_id}".encode()


def _hfile(cells: list[tuple[bytes, bytes]], info: Mapping[bytes, bytes]) -> bytes:
    """The HFile HBase writes for these cells (keys in unsigned byte order, the only order an HFile may hold)."""
    return write_hfile(cells, info, block_size=BLOCK_SIZE, compression="none", comparator=BOOTSTRAP_COMPARATOR)


# -- reading


def _cells(data: bytes, where: str) -> tuple[list[tuple[bytes, bytes]], dict]:
    """The cells and INDEX_INFO record of one index file, checked whole: every block's checksum, then the bytes
    against what Java's writer makes of those cells (which also covers the trailer fields no block checksum
    does: a flipped byte there leaves a file no writer makes)."""
    try:
        reader = HFileReader(data)
        reader.verify()
        cells = list(reader.items())
        len(reader)  # the trailer's entry count against the cells
    except HFileError as err:
        raise CorruptInstantError(f"{where}: not a readable bootstrap index HFile: {err}") from err
    user_info = {
        key: value
        for key, value in reader.file_info.items()
        if not key.startswith(RESERVED_PREFIX) and key not in (MAX_MEMSTORE_TS_KEY, KEY_VALUE_VERSION)
    }
    if INDEX_INFO not in user_info:
        raise CorruptInstantError(f"{where}: no INDEX_INFO in the file info")
    try:
        canonical = _hfile(cells, user_info)
    except ValueError as err:  # keys out of order or repeated
        raise CorruptInstantError(f"{where}: {err}") from err
    if canonical != data:
        raise CorruptInstantError(f"{where}: the file is not laid out as Hudi writes one for its cells (damaged)")
    info = _decode(user_info[INDEX_INFO], "HoodieBootstrapIndexInfo", f"{where}: INDEX_INFO")
    if not isinstance(info["bootstrapBasePath"], str) or not info["bootstrapBasePath"]:
        raise CorruptInstantError(f"{where}: INDEX_INFO has no bootstrapBasePath")
    if info["numKeys"] != len(cells):
        raise CorruptInstantError(f"{where}: INDEX_INFO counts {info['numKeys']} keys, the file holds {len(cells)}")
    return cells, info


def _decode(value: bytes, name: str, where: str) -> dict:
    """The one record of an Avro container whose schema resolves to `name`'s."""
    try:
        reader = fastavro.reader(io.BytesIO(value), reader_schema=_PARSED[name])
        records = list(reader)
    except Exception as err:  # fastavro raises many types for damaged input
        raise CorruptInstantError(f"{where}: not a {name} Avro container: {err}") from err
    if len(records) != 1:
        raise CorruptInstantError(f"{where}: {len(records)} records, expected one {name}")
    return records[0]


def _key_text(key: bytes, where: str) -> str:
    try:
        return key.decode()
    except UnicodeDecodeError as err:
        raise CorruptInstantError(f"{where}: key {key!r} is not UTF-8") from err


def _partition_of(record: dict, key: bytes, where: str) -> tuple[str, str]:
    """(partition, source partition) of a value, its partition canonical."""
    partition, source = record["partitionPath"], record["bootstrapPartitionPath"]
    if not isinstance(partition, str) or not isinstance(source, str):
        raise CorruptInstantError(f"{where}: key {_key_text(key, where)!r} has no partitionPath or source partition")
    partition_path.canonical(partition, where, CorruptInstantError)
    return partition, source


def _mapping(partition: str, file_id: str, source: str, status: Any, where: str) -> SourceMapping:
    """A mapping from a HoodieFileStatus; Java unboxes path.uri, length, blockReplication, blockSize and
    modificationTime (FileStatusUtils.toStoragePathInfo), so each must be set."""
    found = _file_id_problem(file_id)
    if found:
        raise CorruptInstantError(f"{where}: file id {found}")
    if not isinstance(status, dict):
        raise CorruptInstantError(f"{where}: file group {partition!r}/{file_id} has no file status")
    uri = (status["path"] or {}).get("uri")
    required = (uri, status["length"], status["blockReplication"], status["blockSize"], status["modificationTime"])
    if any(value is None for value in required) or not uri or status["length"] < 0:
        raise CorruptInstantError(f"{where}: file group {partition!r}/{file_id}: incomplete source file status")
    return SourceMapping(
        partition, file_id, source, uri, status["length"], status["modificationTime"], status["owner"], status["group"]
    )


def _read_partitions(data: bytes, where: str) -> tuple[dict[tuple[str, str], SourceMapping], str]:
    cells, info = _cells(data, where)
    out: dict[tuple[str, str], SourceMapping] = {}
    for key, value in cells:
        record = _decode(value, "HoodieBootstrapPartitionMetadata", f"{where}: {_key_text(key, where)!r}")
        partition, source = _partition_of(record, key, where)
        if key != _partition_key(partition):
            raise CorruptInstantError(f"{where}: key {_key_text(key, where)!r} holds partition {partition!r}")
        files = record["fileIdToBootstrapFile"]
        if not files:
            raise CorruptInstantError(f"{where}: partition {partition!r} maps no file")
        for file_id, status in files.items():
            out[partition, file_id] = _mapping(partition, file_id, source, status, where)
    return out, info["bootstrapBasePath"]


def _read_file_ids(data: bytes, where: str) -> tuple[dict[tuple[str, str], SourceMapping], str]:
    cells, info = _cells(data, where)
    out: dict[tuple[str, str], SourceMapping] = {}
    for key, value in cells:
        text = _key_text(key, where)
        record = _decode(value, "HoodieBootstrapFilePartitionInfo", f"{where}: {text!r}")
        partition, source = _partition_of(record, key, where)
        prefix = f"part={partition};fileid="
        if not text.startswith(prefix):
            raise CorruptInstantError(f"{where}: key {text!r} holds partition {partition!r}")
        file_id = text[len(prefix) :]
        out[partition, file_id] = _mapping(partition, file_id, source, record["bootstrapFileStatus"], where)
    return out, info["bootstrapBasePath"]
