"""Clean, rollback and compaction plans and metadata: Avro containers with Hudi's schemas."""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlparse

import fastavro

from timeline.errors import CorruptInstantError
from timeline.format import partition_path
from timeline.format.instant import KNOWN_ACTIONS, TIMELINE_TIME_PATTERN, validate_timeline_time

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
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}], "default": None},
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
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}], "default": None},
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

_COMPACTION_OPERATION = {
    "type": "record",
    "name": "HoodieCompactionOperation",
    "namespace": _NS,
    "fields": [
        {"name": "baseInstantTime", "type": ["null", "string"]},
        {"name": "deltaFilePaths", "type": ["null", {"type": "array", "items": "string"}], "default": None},
        {"name": "dataFilePath", "type": ["null", "string"], "default": None},
        {"name": "fileId", "type": ["null", "string"]},
        {"name": "partitionPath", "type": ["null", "string"], "default": None},
        {"name": "metrics", "type": ["null", {"type": "map", "values": "double"}], "default": None},
        {"name": "bootstrapFilePath", "type": ["null", "string"], "default": None},
    ],
}

_COMPACTION_STRATEGY = {
    "type": "record",
    "name": "HoodieCompactionStrategy",
    "namespace": _NS,
    "fields": [
        {"name": "compactorClassName", "type": ["null", "string"], "default": None},
        {"name": "strategyParams", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

COMPACTION_PLAN = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": _NS,
    "fields": [
        {"name": "operations", "type": ["null", {"type": "array", "items": _COMPACTION_OPERATION}], "default": None},
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "strategy", "type": ["null", _COMPACTION_STRATEGY], "default": None},
        {"name": "preserveHoodieMetadata", "type": ["boolean", "null"], "default": False},
    ],
}
# CompactionUtils.LATEST_COMPACTION_METADATA_VERSION: operations name their files (version 1 held absolute paths)
COMPACTION_PLAN_VERSION = 2

_PARSED = {
    name: fastavro.parse_schema(schema)
    for name, schema in {
        "HoodieCleanerPlan": CLEANER_PLAN,
        "HoodieCleanMetadata": CLEAN_METADATA,
        "HoodieRollbackPlan": ROLLBACK_PLAN,
        "HoodieRollbackMetadata": ROLLBACK_METADATA,
        "HoodieCompactionPlan": COMPACTION_PLAN,
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
        """An instant time, a metadata table's suffixed ones too (its cleans and rollbacks name them)."""
        if not (optional and value in (None, "")):
            validate_timeline_time(value, f"{self.source}: {field}")

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


# A slice's base instant: any instant a timeline holds, a metadata table's suffixed ones too (instant._FILE_RE)
_SLICE_INSTANT = re.compile(TIMELINE_TIME_PATTERN)
_NUMBER = "(?:0|[1-9][0-9]*)"  # as Java's %d writes one
_WRITE_TOKEN = f"{_NUMBER}-{_NUMBER}-{_NUMBER}"  # task partition, stage, attempt (FSUtils.makeWriteToken)


def _check_fields(check: _Checker, record: dict, schema: dict, field: str) -> None:
    """Every field of `schema` is in `record`: a damaged field name in the file's own schema hides none."""
    missing = [f["name"] for f in schema["fields"] if f["name"] not in record]
    if missing:
        raise CorruptInstantError(f"{check.source}: {field}: no field {missing[0]!r}")


def _check_compaction_plan(check: _Checker, plan: dict) -> None:
    """A plan Java can build its file-system views from, each name consistent with the slice it belongs to.

    Java reads every pending plan whenever it lists the table, so one it cannot use breaks all readers: a null
    log list (CompactionOperation copies it), two operations on one file group (CompactionUtils refuses), a name
    that parses to another file group or instant. Checking names against their slice also catches most damage:
    an Avro container has sync markers but no checksum, so a flipped byte that keeps the record decodable goes
    unseen only where nothing repeats it: metric values, extraMetadata, strategy, preserveHoodieMetadata, the
    digits of a write token or log version, a partition path that stays canonical.
    """
    _check_fields(check, plan, COMPACTION_PLAN, "plan")
    if plan["version"] != COMPACTION_PLAN_VERSION:
        raise CorruptInstantError(f"{check.source}: version: {plan['version']!r}, expected {COMPACTION_PLAN_VERSION}")
    if plan["strategy"] is not None:
        _check_fields(check, plan["strategy"], _COMPACTION_STRATEGY, "strategy")
    groups: set[tuple[str, str]] = set()
    for i, op in enumerate(plan["operations"] or []):
        group = _check_compaction_operation(check, op, f"operations[{i}]")
        if group in groups:
            raise CorruptInstantError(f"{check.source}: operations[{i}]: a second operation on file group {group[1]!r}")
        groups.add(group)


def _check_compaction_operation(check: _Checker, op: dict, field: str) -> tuple[str, str]:
    """(partition, file id) of an operation naming its slice's files (FSUtils.makeLogFileName, makeBaseFileName)."""
    _check_fields(check, op, _COMPACTION_OPERATION, field)
    partition = check.partition(op["partitionPath"], f"{field}.partitionPath")
    file_id, base = op["fileId"], op["baseInstantTime"]
    if file_id is None or "_" in file_id or "/" in file_id:  # Hudi splits file names at '_'
        raise CorruptInstantError(f"{check.source}: {field}.fileId: {file_id!r} is not a file group id")
    check.file(file_id, f"{field}.fileId")
    if base is None or not _SLICE_INSTANT.fullmatch(base):
        raise CorruptInstantError(f"{check.source}: {field}.baseInstantTime: {base!r} is not an instant time")
    if op["deltaFilePaths"] is None:
        raise CorruptInstantError(f"{check.source}: {field}.deltaFilePaths: null, expected a list of log names")
    fid, time = re.escape(file_id), re.escape(base)
    logs = re.compile(rf"\.{fid}_{time}\.log\.[1-9][0-9]*(_{_WRITE_TOKEN}(\.cdc)?)?")
    for name in op["deltaFilePaths"]:
        if not logs.fullmatch(name):
            raise CorruptInstantError(f"{check.source}: {field}.deltaFilePaths: {name!r} is not a log of the slice")
    name = op["dataFilePath"]
    if name is not None and not re.fullmatch(rf"{fid}_{_WRITE_TOKEN}_{time}\.(parquet|hfile|orc)", name):
        raise CorruptInstantError(f"{check.source}: {field}.dataFilePath: {name!r} is not the slice's base file")
    if op["bootstrapFilePath"] is not None:
        check.file(op["bootstrapFilePath"], f"{field}.bootstrapFilePath")
    return partition, file_id


_CHECKS: dict[str, Callable[[_Checker, dict], None]] = {
    "HoodieRollbackPlan": _check_rollback_plan,
    "HoodieRollbackMetadata": _check_rollback_metadata,
    "HoodieCleanerPlan": _check_cleaner_plan,
    "HoodieCleanMetadata": _check_clean_metadata,
    "HoodieCompactionPlan": _check_compaction_plan,
}


def planned_deletions(plan: dict[str, Any]) -> dict[str, list[str]]:
    """Partition -> file paths a HoodieCleanerPlan deletes (the plan's map may be null)."""
    return {p: [i["filePath"] for i in infos] for p, infos in (plan["filePathsToBeDeletedPerPartition"] or {}).items()}


@dataclasses.dataclass(frozen=True)
class CompactionOperation:
    """One file slice a compaction merges into a new base file (a HoodieCompactionOperation, by name)."""

    partition: str
    file_id: str
    base_instant: str
    base_file: str | None  # None for a slice of logs only
    log_files: tuple[str, ...]  # in the order Hudi reads them (HoodieLogFile.getLogFileComparator)
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    bootstrap_file: str | None = None


MIB = 1024 * 1024
DEFAULT_BASE_FILE_SIZE = 120 * MIB  # hoodie.parquet.max.file.size, which the metadata table leaves at its default


def slice_metrics(
    base_file_size: int | None, log_file_sizes: Iterable[int], default_base_file_size: int = DEFAULT_BASE_FILE_SIZE
) -> dict[str, float]:
    """The metrics Hudi's compaction strategies record for a slice (FileSliceMetricUtils): whole MiB of I/O, a
    slice without a base file counted as writing one of the default size. Keys in the order Java's HashMap writes."""
    sizes = list(log_file_sizes)
    read = ((base_file_size or 0) + sum(sizes)) // MIB
    write = (base_file_size or default_base_file_size) // MIB
    return {
        "TOTAL_LOG_FILES": float(len(sizes)),
        "TOTAL_IO_MB": float(read + write),
        "TOTAL_IO_READ_MB": float(read),
        "TOTAL_LOG_FILES_SIZE": float(sum(sizes)),
        "TOTAL_IO_WRITE_MB": float(write),
    }


def compaction_plan(
    operations: Iterable[CompactionOperation], extra_metadata: dict[str, str] | None = None
) -> dict[str, Any]:
    """A HoodieCompactionPlan as Hudi 0.15 schedules one (version 2, no strategy), for `encode`."""
    return {
        "operations": [
            {
                "baseInstantTime": op.base_instant,
                "deltaFilePaths": list(op.log_files),
                "dataFilePath": op.base_file,
                "fileId": op.file_id,
                "partitionPath": op.partition,
                "metrics": op.metrics,
                "bootstrapFilePath": op.bootstrap_file,
            }
            for op in operations
        ],
        "extraMetadata": extra_metadata,
        "version": COMPACTION_PLAN_VERSION,
        "strategy": None,
        "preserveHoodieMetadata": False,
    }


def compaction_operations(plan: dict[str, Any]) -> list[CompactionOperation]:
    """The operations of a decoded HoodieCompactionPlan (a null list or metrics map read as empty, as Java does)."""
    return [
        CompactionOperation(
            op["partitionPath"],
            op["fileId"],
            op["baseInstantTime"],
            op["dataFilePath"],
            tuple(op["deltaFilePaths"]),
            op["metrics"] or {},
            op["bootstrapFilePath"],
        )
        for op in plan["operations"] or []
    ]
