"""Clean and rollback plans and metadata: Avro containers with Hudi's schemas."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import fastavro

from timeline.errors import CorruptInstantError
from timeline.format import partition_path
from timeline.format.instant import KNOWN_ACTIONS, validate_instant_time

_NS = "org.apache.hudi.avro.model"

_INSTANT_INFO = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "namespace": _NS,
    "fields": [{"name": "commitTime", "type": "string"}, {"name": "action", "type": "string"}],
}

CLEANER_PLAN = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": _NS,
    "fields": [
        {
            "name": "earliestInstantToRetain",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "HoodieActionInstant",
                    "fields": [
                        {"name": "timestamp", "type": "string"},
                        {"name": "action", "type": "string"},
                        {"name": "state", "type": "string"},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "policy", "type": "string"},
        {
            "name": "filesToBeDeletedPerPartition",
            "type": ["null", {"type": "map", "values": {"type": "array", "items": "string"}}],
            "default": None,
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "filePathsToBeDeletedPerPartition",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "HoodieCleanFileInfo",
                            "fields": [
                                {"name": "filePath", "type": ["null", "string"], "default": None},
                                {"name": "isBootstrapBaseFile", "type": ["null", "boolean"], "default": None},
                            ],
                        },
                    },
                },
            ],
            "default": None,
        },
        {"name": "partitionsToBeDeleted", "type": ["null", {"type": "array", "items": "string"}], "default": None},
    ],
}

_CLEAN_PARTITION = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "policy", "type": "string"},
        {"name": "deletePathPatterns", "type": {"type": "array", "items": "string"}},
        {"name": "successDeleteFiles", "type": {"type": "array", "items": "string"}},
        {"name": "failedDeleteFiles", "type": {"type": "array", "items": "string"}},
        {"name": "isPartitionDeleted", "type": ["null", "boolean"], "default": None},
    ],
}

CLEAN_METADATA = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "policy", "type": "string", "default": ""},
        {"name": "startCleanTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": "string"},
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _CLEAN_PARTITION}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "bootstrapPartitionMetadata",
            "type": ["null", {"type": "map", "values": "HoodieCleanPartitionMetadata"}],
            "default": None,
        },
    ],
}

ROLLBACK_PLAN = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": _NS,
    "fields": [
        {"name": "instantToRollback", "type": ["null", _INSTANT_INFO], "default": None},
        {
            "name": "RollbackRequests",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieRollbackRequest",
                        "fields": [
                            {"name": "partitionPath", "type": "string"},
                            {"name": "fileId", "type": ["null", "string"], "default": None},
                            {"name": "latestBaseInstant", "type": ["null", "string"], "default": None},
                            {"name": "filesToBeDeleted", "type": {"type": "array", "items": "string"}, "default": []},
                            {
                                "name": "logBlocksToBeDeleted",
                                "type": ["null", {"type": "map", "values": "long"}],
                                "default": None,
                            },
                        ],
                    },
                },
            ],
            "default": None,
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

ROLLBACK_METADATA = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "startRollbackTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": {"type": "array", "items": "string"}},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": "string"},
                        {"name": "successDeleteFiles", "type": {"type": "array", "items": "string"}},
                        {"name": "failedDeleteFiles", "type": {"type": "array", "items": "string"}},
                        {
                            "name": "rollbackLogFiles",
                            "type": ["null", {"type": "map", "values": "long"}],
                            "default": None,
                        },
                        {
                            "name": "writtenLogFiles",
                            "type": ["null", {"type": "map", "values": "long"}],
                            "default": None,
                        },
                    ],
                },
            },
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "instantsRollback", "type": {"type": "array", "items": _INSTANT_INFO}, "default": []},
    ],
}

_PARSED = {
    name: fastavro.parse_schema(schema)
    for name, schema in {
        "HoodieCleanerPlan": CLEANER_PLAN,
        "HoodieCleanMetadata": CLEAN_METADATA,
        "HoodieRollbackPlan": ROLLBACK_PLAN,
        "HoodieRollbackMetadata": ROLLBACK_METADATA,
    }.items()
}


def encode(schema_name: str, record: dict[str, Any]) -> bytes:
    """One record in an Avro object container, as Hudi's `TimelineMetadataUtils` writes."""
    buf = io.BytesIO()
    fastavro.writer(buf, _PARSED[schema_name], [record])
    return buf.getvalue()


def decode(data: bytes, source: str) -> dict[str, Any]:
    """The single record of an Avro container, checked; a bad file is a CorruptInstantError.

    Instant times, actions, partition paths and file paths in plans and metadata
    are checked here, before any of them is used to name a file.
    """
    try:
        reader = fastavro.reader(io.BytesIO(data))
        records = list(reader)
    except Exception as err:  # fastavro raises many types for garbage input
        raise CorruptInstantError(f"{source} is not a readable Avro file: {err}") from err
    if len(records) != 1:
        raise CorruptInstantError(f"{source} holds {len(records)} records, expected 1")
    schema = reader.writer_schema
    name = str(schema.get("name", "")) if isinstance(schema, dict) else ""
    check = _CHECKS.get(name.rpartition(".")[2])
    if check is not None:
        check(_Checker(source), records[0])
    return records[0]


class _Checker:
    """Field checks that name the file and the field of the first bad value."""

    def __init__(self, source: str) -> None:
        self.source = source

    def instant(self, value: Any, field: str, optional: bool = False) -> None:
        if not (optional and value in (None, "")):
            validate_instant_time(value, f"{self.source}: {field}")

    def action(self, value: Any, field: str) -> None:
        if value not in KNOWN_ACTIONS:
            raise CorruptInstantError(f"{self.source}: {field}: {value!r} is not a timeline action")

    def instant_info(self, info: dict | None, field: str) -> None:
        if info is not None:
            self.instant(info.get("commitTime"), f"{field}.commitTime")
            self.action(info.get("action"), f"{field}.action")

    def partition(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise CorruptInstantError(f"{self.source}: {field}: {value!r} is not a partition path")
        return partition_path.canonical(value, f"{self.source}: {field}", CorruptInstantError)

    def file(self, path: Any, field: str, partition: str | None = None) -> None:
        """A file path relative to the base (its partition `partition` when given), or a URI as Hudi writes."""
        where = f"{self.source}: {field}"
        if not isinstance(path, str):
            raise CorruptInstantError(f"{where}: {path!r} is not a file path")
        if urlparse(path).scheme or path.startswith("/"):  # Hudi's writers record absolute paths
            found = next(filter(None, map(partition_path.name_problem, filter(None, path.split("/")))), None)
            if found is not None:
                raise CorruptInstantError(f"{where}: {partition_path.shown(path)} {found}")
            return
        owner, _ = partition_path.split_file_path(path, where, CorruptInstantError)
        if partition is not None and "/" in path and owner != partition:
            raise CorruptInstantError(f"{where}: {partition_path.shown(path)} is not in partition {partition!r}")


def _check_rollback_plan(check: _Checker, plan: dict) -> None:
    check.instant_info(plan.get("instantToRollback"), "instantToRollback")
    for i, request in enumerate(plan.get("RollbackRequests") or []):
        field = f"RollbackRequests[{i}]"
        partition = check.partition(request.get("partitionPath"), f"{field}.partitionPath")
        check.instant(request.get("latestBaseInstant"), f"{field}.latestBaseInstant", optional=True)
        for path in request.get("filesToBeDeleted") or []:
            check.file(path, f"{field}.filesToBeDeleted", partition)
        for path in request.get("logBlocksToBeDeleted") or {}:
            check.file(path, f"{field}.logBlocksToBeDeleted", partition)


def _check_rollback_metadata(check: _Checker, metadata: dict) -> None:
    check.instant(metadata.get("startRollbackTime"), "startRollbackTime")
    for time in metadata.get("commitsRollback") or []:
        check.instant(time, "commitsRollback")
    for info in metadata.get("instantsRollback") or []:
        check.instant_info(info, "instantsRollback")
    for key, partition in (metadata.get("partitionMetadata") or {}).items():
        field = f"partitionMetadata[{partition_path.shown(key)}]"
        check.partition(key, field)
        check.partition(partition.get("partitionPath"), f"{field}.partitionPath")
        for name in ("successDeleteFiles", "failedDeleteFiles"):
            for path in partition.get(name) or []:
                check.file(path, f"{field}.{name}")


def _check_cleaner_plan(check: _Checker, plan: dict) -> None:
    retain = plan.get("earliestInstantToRetain")
    if retain is not None:
        check.instant(retain.get("timestamp"), "earliestInstantToRetain.timestamp")
        check.action(retain.get("action"), "earliestInstantToRetain.action")
    for key, names in (plan.get("filesToBeDeletedPerPartition") or {}).items():
        field = f"filesToBeDeletedPerPartition[{partition_path.shown(key)}]"
        check.partition(key, field)
        for name in names:
            check.file(name, field, key)
    for key, infos in (plan.get("filePathsToBeDeletedPerPartition") or {}).items():
        field = f"filePathsToBeDeletedPerPartition[{partition_path.shown(key)}]"
        check.partition(key, field)
        for info in infos:
            check.file(info.get("filePath"), f"{field}.filePath", key)
    for key in plan.get("partitionsToBeDeleted") or []:
        check.partition(key, "partitionsToBeDeleted")


def _check_clean_metadata(check: _Checker, metadata: dict) -> None:
    check.instant(metadata.get("startCleanTime"), "startCleanTime")
    check.instant(metadata.get("earliestCommitToRetain"), "earliestCommitToRetain", optional=True)
    check.instant(metadata.get("lastCompletedCommitTimestamp"), "lastCompletedCommitTimestamp", optional=True)
    for group in ("partitionMetadata", "bootstrapPartitionMetadata"):
        for key, partition in (metadata.get(group) or {}).items():
            field = f"{group}[{partition_path.shown(key)}]"
            check.partition(key, field)
            check.partition(partition.get("partitionPath"), f"{field}.partitionPath")
            for name in ("deletePathPatterns", "successDeleteFiles", "failedDeleteFiles"):
                for path in partition.get(name) or []:
                    check.file(path, f"{field}.{name}")


_CHECKS: dict[str, Callable[[_Checker, dict], None]] = {
    "HoodieRollbackPlan": _check_rollback_plan,
    "HoodieRollbackMetadata": _check_rollback_metadata,
    "HoodieCleanerPlan": _check_cleaner_plan,
    "HoodieCleanMetadata": _check_clean_metadata,
}


def planned_deletions(plan: dict[str, Any]) -> dict[str, list[str]]:
    """Partition -> file paths a HoodieCleanerPlan deletes (the plan's map may be null)."""
    return {p: [i["filePath"] for i in infos] for p, infos in (plan["filePathsToBeDeletedPerPartition"] or {}).items()}
