"""Record keys of Hudi 0.15's metadata table, and the file group a key lands in.

- `files`: the partition path itself (`.` for the non-partitioned table's empty path), plus one record
  under `__all_partitions__` listing the partitions (HoodieTableMetadata, HoodieTableMetadataUtil).
- `column_stats`: ColumnIndexID + PartitionIndexID + FileIndexID, each the standard Base64 (padded) of a
  hash of the name's UTF-8 bytes (HoodieMetadataPayload.getColumnStatsIndexKey).
- `bloom_filters`: PartitionIndexID + FileIndexID (HoodieMetadataPayload.getBloomFilterIndexKey).

Column and partition IDs are XXH64 with seed 0xdabadaba, 8 bytes big-endian (HashID.hash, BITS_64); the
seed is a Java int handed to a long parameter, so it is sign-extended to 0xffffffffdabadaba. File IDs are
the 16-byte MD5 (BITS_128). The partition in a key is the same identifier as in `files` (`.` for "").
"""

from __future__ import annotations

import base64
import hashlib

import xxhash

ALL_PARTITIONS = "__all_partitions__"  # HoodieTableMetadata.RECORDKEY_PARTITION_LIST
NON_PARTITIONED = "."  # HoodieTableMetadata.NON_PARTITIONED_NAME, for EMPTY_PARTITION_NAME ""
_XXH64_SEED = 0xFFFF_FFFF_DABA_DABA  # HashID.HASH_SEED, the int 0xdabadaba, sign-extended to a long


def partition_identifier(partition: str) -> str:
    """`HoodieTableMetadataUtil.getPartitionIdentifier`: the name a data partition goes by in every MDT
    partition."""
    return NON_PARTITIONED if partition == "" else partition


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def column_index_id(column: str) -> str:
    """`ColumnIndexID(column).asBase64EncodedString()`."""
    return _b64(xxhash.xxh64_digest(column.encode("utf-8"), seed=_XXH64_SEED))


def partition_index_id(partition_id: str) -> str:
    """`PartitionIndexID(partition_id).asBase64EncodedString()`; callers pass the partition identifier."""
    return _b64(xxhash.xxh64_digest(partition_id.encode("utf-8"), seed=_XXH64_SEED))


def file_index_id(file_name: str) -> str:
    """`FileIndexID(file_name).asBase64EncodedString()`."""
    return _b64(hashlib.md5(file_name.encode("utf-8"), usedforsecurity=False).digest())


def files_key(partition: str) -> str:
    """The `files` record of a data partition's file list."""
    return partition_identifier(partition)


def column_stats_key(partition: str, file_name: str, column: str) -> str:
    return column_index_id(column) + partition_index_id(partition_identifier(partition)) + file_index_id(file_name)


def bloom_filter_key(partition: str, file_name: str) -> str:
    return partition_index_id(partition_identifier(partition)) + file_index_id(file_name)


def file_group_index(record_key: str, file_group_count: int) -> int:
    """`HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex`: Java's String.hashCode over UTF-16 code units,
    in 32-bit overflow, then `Math.abs(Math.abs(h) % n)`."""
    h = 0
    data = record_key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    if h & 0x80000000:
        h -= 1 << 32
    # Math.abs(Integer.MIN_VALUE) stays negative; the outer abs of Java's remainder gives 2**31 % n all the same
    return abs(h) % file_group_count
