"""Clean and rollback plans and metadata: Avro containers with Hudi's schemas."""

from __future__ import annotations

import io
from typing import Any

import fastavro

from timeline.errors import CorruptInstantError

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
    """The single record of an Avro container; a bad file is a CorruptInstantError."""
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as err:  # fastavro raises many types for garbage input
        raise CorruptInstantError(f"{source} is not a readable Avro file: {err}") from err
    if len(records) != 1:
        raise CorruptInstantError(f"{source} holds {len(records)} records, expected 1")
    return records[0]


def planned_deletions(plan: dict[str, Any]) -> dict[str, list[str]]:
    """Partition -> file paths a HoodieCleanerPlan deletes (the plan's map may be null)."""
    return {p: [i["filePath"] for i in infos] for p, infos in (plan["filePathsToBeDeletedPerPartition"] or {}).items()}
