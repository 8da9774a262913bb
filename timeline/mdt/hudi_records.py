"""`HoodieMetadataRecord`s of the `files`, `column_stats` and `bloom_filters` partitions, as Hudi 0.15 builds,
encodes and stores them (HoodieMetadataPayload, HoodieTableMetadataUtil).

A record is a dict in fastavro's shape of `hudi_schema.RECORD_SCHEMA`, all six fields present; the builders
take plain values and `files_of` / `column_stats_of` / `bloom_filter_of` give them back. `encode`/`decode`
are the bare record (`HoodieAvroUtils.avroToBytes`); `encode_cell`/`decode_cell` are an HFile cell's value,
in base files and log blocks alike: the record under `STORED_SCHEMA` with its `key` emptied, since the cell's
key holds it (HoodieAvroHFileWriter, HoodieHFileDataBlock), and `_hoodie_file_name` set in base files only.
A decoded record keeps its map order, so it re-encodes to the bytes it came from.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from timeline.errors import CorruptInstantError
from timeline.format.meta_fields import FILE_NAME, META_COLUMNS
from timeline.mdt import hudi_keys
from timeline.mdt.hudi_schema import parsed_record_schema, parsed_stored_schema
from timeline.mdt.hudi_values import Wrapped, from_avro, to_avro

# HoodieMetadataPayload.METADATA_TYPE_*: the `type` field, one per kind of record
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
TYPE_COLUMN_STATS = 3
TYPE_BLOOM_FILTER = 4
TYPE_RECORD_INDEX = 5

FILES_FIELD = "filesystemMetadata"
BLOOM_FIELD = "BloomFilterMetadata"
STATS_FIELD = "ColumnStatsMetadata"
RECORD_INDEX_FIELD = "recordIndexMetadata"
_RECORD_FIELDS = ("key", "type", FILES_FIELD, BLOOM_FIELD, STATS_FIELD, RECORD_INDEX_FIELD)


def _record(key: str, type_: int, **fields: Any) -> dict[str, Any]:
    record = {"key": key, "type": type_, FILES_FIELD: None, BLOOM_FIELD: None, STATS_FIELD: None}
    record.update(fields)
    record[RECORD_INDEX_FIELD] = None
    return record


# -- files


@dataclass(frozen=True)
class FileInfo:
    """HoodieMetadataFileInfo: a file's size, or a tombstone (size 0, is_deleted)."""

    size: int
    is_deleted: bool


def _file_info(info: FileInfo) -> dict[str, Any]:
    return {"size": info.size, "isDeleted": info.is_deleted}


def partition_list_record(
    partitions: Iterable[str], is_deleted: bool = False, deleted: Iterable[str] = ()
) -> dict[str, Any]:
    """`createPartitionListRecord`: every partition (by identifier) at size 0, all added or all deleted. Each
    commit writes one with the partitions it touched. `deleted`: partitions removed in the same record."""
    files = {hudi_keys.partition_identifier(p): _file_info(FileInfo(0, is_deleted)) for p in partitions}
    files.update({hudi_keys.partition_identifier(p): _file_info(FileInfo(0, True)) for p in deleted})
    return _record(hudi_keys.ALL_PARTITIONS, TYPE_PARTITION_LIST, **{FILES_FIELD: files})


def file_list_record(partition: str, added: Mapping[str, int], deleted: Iterable[str] = ()) -> dict[str, Any]:
    """`createPartitionFilesRecord`: files added with their sizes (which must be positive), then tombstones
    for the deleted ones (a name in both ends up a tombstone)."""
    files = {}
    for name, size in added.items():
        if size <= 0:
            raise ValueError(f"file {name!r} added with size {size}: Hudi lists no empty files")
        files[name] = _file_info(FileInfo(size, False))
    files.update({name: _file_info(FileInfo(0, True)) for name in deleted})
    return _record(hudi_keys.files_key(partition), TYPE_FILE_LIST, **{FILES_FIELD: files})


def files_of(record: Mapping[str, Any]) -> dict[str, FileInfo]:
    """The file (or partition) entries of a `files` record, tombstones included, in stored order."""
    entries = record[FILES_FIELD] or {}
    return {name: FileInfo(info["size"], info["isDeleted"]) for name, info in entries.items()}


# -- column_stats


@dataclass(frozen=True)
class ColumnStats:
    """HoodieMetadataColumnStats of one column of one base file; bounds are `hudi_values.wrap`ped."""

    file_name: str | None
    column_name: str | None
    min_value: Wrapped | None
    max_value: Wrapped | None
    value_count: int | None
    null_count: int | None
    total_size: int | None
    total_uncompressed_size: int | None
    is_deleted: bool = False


def stats_to_avro(stats: ColumnStats) -> dict[str, Any]:
    return {
        "fileName": stats.file_name,
        "columnName": stats.column_name,
        "minValue": to_avro(stats.min_value),
        "maxValue": to_avro(stats.max_value),
        "valueCount": stats.value_count,
        "nullCount": stats.null_count,
        "totalSize": stats.total_size,
        "totalUncompressedSize": stats.total_uncompressed_size,
        "isDeleted": stats.is_deleted,
    }


def column_stats_record(partition: str, stats: ColumnStats) -> dict[str, Any]:
    """`createColumnStatsRecords` for one column of one file of `partition`."""
    key = hudi_keys.column_stats_key(partition, stats.file_name, stats.column_name)
    return _record(key, TYPE_COLUMN_STATS, **{STATS_FIELD: stats_to_avro(stats)})


def column_stats_tombstone(partition: str, file_name: str, column: str) -> dict[str, Any]:
    """What Hudi writes for a column of a deleted file: `HoodieColumnRangeMetadata.stub` (no bounds, every
    count -1) with is_deleted."""
    stub = ColumnStats(file_name, column, None, None, -1, -1, -1, -1, is_deleted=True)
    return column_stats_record(partition, stub)


def column_stats_of(record: Mapping[str, Any]) -> ColumnStats:
    stats = record[STATS_FIELD]
    return ColumnStats(
        stats["fileName"],
        stats["columnName"],
        from_avro(stats["minValue"]),
        from_avro(stats["maxValue"]),
        stats["valueCount"],
        stats["nullCount"],
        stats["totalSize"],
        stats["totalUncompressedSize"],
        stats["isDeleted"],
    )


# -- bloom_filters


@dataclass(frozen=True)
class BloomFilter:
    """HoodieMetadataBloomFilter: the filter's type code (e.g. DYNAMIC_V0), the instant that wrote the record,
    the filter's serialized bytes (opaque here) and the tombstone flag."""

    type: str
    timestamp: str
    bloom_filter: bytes
    is_deleted: bool


def _bloom_record(partition: str, file_name: str, bloom: BloomFilter) -> dict[str, Any]:
    if "/" in file_name:
        raise ValueError(f"bloom filter of {file_name!r}: a base file's name, not a path")
    fields = {"type": bloom.type, "timestamp": bloom.timestamp, "bloomFilter": bloom.bloom_filter}
    fields["isDeleted"] = bloom.is_deleted
    return _record(hudi_keys.bloom_filter_key(partition, file_name), TYPE_BLOOM_FILTER, **{BLOOM_FIELD: fields})


def bloom_filter_record(partition: str, file_name: str, instant: str, filter_type: str, data: bytes) -> dict:
    """`createBloomFilterMetadataRecord` for a base file written at `instant`; `data` is the filter's
    `serializeToString()` as UTF-8 bytes."""
    return _bloom_record(partition, file_name, BloomFilter(filter_type, instant, bytes(data), False))


def bloom_filter_tombstone(partition: str, file_name: str, instant: str) -> dict[str, Any]:
    """A deleted file's bloom filter record, as a clean at `instant` writes it: empty type and bytes."""
    return _bloom_record(partition, file_name, BloomFilter("", instant, b"", True))


def bloom_filter_of(record: Mapping[str, Any]) -> BloomFilter:
    bloom = record[BLOOM_FIELD]
    return BloomFilter(bloom["type"], bloom["timestamp"], bloom["bloomFilter"], bloom["isDeleted"])


# -- bytes

_META_SCHEMA = {
    "type": "record",
    "name": "MetaFields",
    "fields": [{"name": name, "type": ["null", "string"]} for name in META_COLUMNS],
}


def _write(schema: dict, record: Mapping[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def _read(schema: dict, data: bytes, what: str) -> dict[str, Any]:
    source = io.BytesIO(data)
    try:
        record = fastavro.schemaless_reader(
            source, schema, None, return_record_name=True, return_record_name_override=True
        )
    except (EOFError, ValueError, IndexError, UnicodeDecodeError) as err:
        raise CorruptInstantError(f"{what}: not a HoodieMetadataRecord ({err})") from err
    if source.tell() != len(data):
        raise CorruptInstantError(f"{what}: {len(data) - source.tell()} bytes past the end of the record")
    return record


def encode(record: Mapping[str, Any]) -> bytes:
    """The record alone, as `HoodieAvroUtils.avroToBytes` encodes it."""
    return _write(parsed_record_schema(), record)


def decode(data: bytes) -> dict[str, Any]:
    return _read(parsed_record_schema(), data, "metadata table record")


def encode_cell(record: Mapping[str, Any], file_name: str | None = None) -> bytes:
    """An HFile cell's value: meta fields null but `_hoodie_file_name` (the base file's own name in a base
    file, None in a log block), then the record with an empty `key`."""
    stored = dict.fromkeys(META_COLUMNS)
    stored[FILE_NAME] = file_name
    stored.update(record)
    stored["key"] = ""
    return _write(parsed_stored_schema(), stored)


def cell_prefix(file_name: str | None) -> bytes:
    """The bytes every `encode_cell(record, file_name)` starts with: the meta fields (Avro unions of null and
    string, in schema order), null but for `_hoodie_file_name`."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _META_SCHEMA, dict.fromkeys(META_COLUMNS[:-1]) | {FILE_NAME: file_name})
    return out.getvalue()


def renamed_cell(value: bytes, old_prefix: bytes, new_prefix: bytes) -> bytes | None:
    """A cell encoded with `old_prefix` (`cell_prefix` of one base file's name) re-headed for another base file
    with the same record: what encoding its decoded record again would give. None for a cell that does not
    start so (a writer that fills other meta fields): it must then be decoded and encoded."""
    return new_prefix + value[len(old_prefix) :] if value.startswith(old_prefix) else None


def decode_cell(key: str, value: bytes) -> dict[str, Any]:
    """The record of an HFile cell: the cell's key restored where the stored one is empty, as
    `HoodieAvroHFileReaderImplBase.deserialize` does; the meta fields dropped."""
    stored = _read(parsed_stored_schema(), value, f"metadata table cell {key!r}")
    record = {name: stored[name] for name in _RECORD_FIELDS}
    if not record["key"]:
        record["key"] = key
    return record
