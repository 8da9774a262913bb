"""Metadata-table records of the `files` partition and the seed's payload merge.

One record per data partition (key = partition path, `.` when not partitioned)
mapping file name -> {size, isDeleted}, plus `__all_partitions__` listing the
partitions. Merge: union of files, a tombstone removes, size = max.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from timeline.errors import CorruptInstantError
from timeline.format import partition_path
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.file_names import group_by_partition, split_path

ALL_PARTITIONS = "__all_partitions__"
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
NON_PARTITIONED = "."

RECORD_SCHEMA = {
    "type": "record",
    "name": "HoodieMetadataRecord",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "key", "type": "string"},
        {"name": "type", "type": "int"},
        {
            "name": "filesystemMetadata",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "record",
                        "name": "HoodieMetadataFileInfo",
                        "fields": [
                            {"name": "size", "type": "long"},
                            {"name": "isDeleted", "type": "boolean"},
                        ],
                    },
                },
            ],
            "default": None,
        },
    ],
}


def partition_key(partition: str) -> str:
    partition_path.canonical(partition, "metadata table record")
    return partition or NON_PARTITIONED


def data_partition(key: str) -> str:
    """The data partition a record key names; a key that is no canonical partition path is a corrupt record."""
    if key == NON_PARTITIONED:
        return ""
    return partition_path.canonical(key, "metadata table record key", CorruptInstantError)


def file_list(partition: str, added: dict[str, int], deleted: list[str] = ()) -> dict:
    files = {name: {"size": size, "isDeleted": False} for name, size in added.items()}
    files.update({name: {"size": 0, "isDeleted": True} for name in deleted})
    return {"key": partition_key(partition), "type": TYPE_FILE_LIST, "filesystemMetadata": files}


def partition_list(added: list[str], deleted: list[str] = ()) -> dict:
    files = {partition_key(p): {"size": 0, "isDeleted": False} for p in added}
    files.update({partition_key(p): {"size": 0, "isDeleted": True} for p in deleted})
    return {"key": ALL_PARTITIONS, "type": TYPE_PARTITION_LIST, "filesystemMetadata": files}


def merge(older: dict | None, newer: dict) -> dict:
    """Combine two records of one key, `newer` applied on top of `older`.

    Tombstones are kept in the result (an older base may still list the file);
    `live_files` drops them, and compaction writes only live files.
    """
    if older is None:
        return newer
    combined = dict(older.get("filesystemMetadata") or {})
    for name, info in (newer.get("filesystemMetadata") or {}).items():
        previous = combined.get(name)
        if info["isDeleted"] or previous is None or previous["isDeleted"]:
            combined[name] = info
        else:
            combined[name] = {"size": max(previous["size"], info["size"]), "isDeleted": False}
    return {"key": newer["key"], "type": newer["type"], "filesystemMetadata": combined}


def live_files(record: dict | None) -> dict[str, int]:
    """File (or partition) name -> size, tombstones removed."""
    if record is None:
        return {}
    return {n: i["size"] for n, i in (record.get("filesystemMetadata") or {}).items() if not i["isDeleted"]}


def compacted(record: dict) -> dict:
    """The record as a compaction writes it: tombstones dropped."""
    live = {n: {"size": s, "isDeleted": False} for n, s in live_files(record).items()}
    return {"key": record["key"], "type": record["type"], "filesystemMetadata": live}


def _by_partition(paths_and_sizes: list[tuple[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for path, size in paths_and_sizes:
        partition, name = split_path(path)
        out.setdefault(partition, {})[name] = size
    return out


def from_commit(metadata: CommitMetadata, known_partitions: AbstractSet[str]) -> list[dict]:
    """Files a commit or replacecommit added; partitions it created."""
    added = _by_partition([(s.path, s.file_size_in_bytes) for s in metadata.write_stats() if s.path])
    records = [file_list(p, files) for p, files in sorted(added.items())]
    new = sorted(set(added) - known_partitions)
    if new:
        records.append(partition_list(new))
    return records


def from_changed_paths(added: dict[str, int], deleted: list[str]) -> list[dict]:
    """Records of files an action added (path -> size) and deleted (paths relative to the base)."""
    if not added:
        return from_deleted_paths(deleted)
    new = {
        p: {split_path(x)[1]: size for x, size in added.items() if split_path(x)[0] == p}
        for p in {split_path(x)[0] for x in added}
    }
    gone = group_by_partition(deleted)
    return [
        file_list(p, new.get(p, {}), sorted(split_path(x)[1] for x in gone.get(p, [])))
        for p in sorted(set(new) | set(gone))
    ]


def from_deleted_paths(paths: list[str], deleted_partitions: list[str] = ()) -> list[dict]:
    """Tombstones for files a clean or rollback deleted (paths relative to the base)."""
    removed = group_by_partition(paths)
    records = [file_list(p, {}, sorted(split_path(x)[1] for x in group)) for p, group in sorted(removed.items())]
    if deleted_partitions:
        records.append(partition_list([], list(deleted_partitions)))
    return records
