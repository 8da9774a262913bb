"""The plans and metadata of clean and rollback instants, as Hudi's Avro records: one builder for each, used by
the data table and the metadata table alike, so the two cannot drift from each other or from Hudi."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
CLEAN_PLAN_VERSION = 2
ROLLBACK_VERSION = 1


def _name(path: str) -> str:
    return path.rpartition("/")[2]


SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"  # CleanerUtils.SAVEPOINTED_TIMESTAMPS


def clean_plan(
    policy: str,
    earliest: Mapping[str, str] | None,
    paths: Mapping[str, Sequence[str]],
    extra: Mapping[str, str] | None = None,
) -> dict:
    """`HoodieCleanerPlan`: the paths to delete per partition, and the earliest instant retained
    (`{"timestamp", "action"}`, completed) when the policy has one; `extra`: its `extraMetadata`."""
    return {
        "earliestInstantToRetain": {**earliest, "state": "COMPLETED"} if earliest else None,
        "policy": policy,
        "filesToBeDeletedPerPartition": None,
        "version": CLEAN_PLAN_VERSION,
        "filePathsToBeDeletedPerPartition": {
            partition: [{"filePath": path, "isBootstrapBaseFile": False} for path in files]
            for partition, files in paths.items()
        },
        "partitionsToBeDeleted": None,
        "extraMetadata": dict(extra) if extra else None,
    }


def clean_metadata(
    policy: str,
    started: str,
    millis: int,
    earliest: str,
    last_completed: str,
    deleted: Mapping[str, Sequence[str]],
    extra: Mapping[str, str] | None = None,
) -> dict:
    """`HoodieCleanMetadata` of clean `started`: the paths deleted per partition, recorded by file name as Hudi
    records them; `extra`: its `extraMetadata` (the plan's, as Java copies it)."""
    return {
        "policy": policy,
        "startCleanTime": started,
        "timeTakenInMillis": millis,
        "totalFilesDeleted": sum(len(files) for files in deleted.values()),
        "earliestCommitToRetain": earliest,
        "lastCompletedCommitTimestamp": last_completed,
        "partitionMetadata": {
            partition: {
                "partitionPath": partition,
                "policy": policy,
                "deletePathPatterns": [_name(path) for path in files],
                "successDeleteFiles": [_name(path) for path in files],
                "failedDeleteFiles": [],
                "isPartitionDeleted": None,
            }
            for partition, files in deleted.items()
        },
        "version": CLEAN_PLAN_VERSION,
        "bootstrapPartitionMetadata": None,
        "extraMetadata": dict(extra) if extra else None,
    }


def rollback_plan(
    time: str, action: str, paths: Mapping[str, Sequence[str]], logs: Mapping[str, Sequence[str]] | None = None
) -> dict:
    """`HoodieRollbackPlan` of instant `time` (`action`): the base files it wrote, per partition, and the
    merge-on-read logs whose blocks a command block rolls back (`logBlocksToBeDeleted`, Java's stub count 1)."""
    logs = logs or {}
    return {
        "instantToRollback": {"commitTime": time, "action": action},
        "RollbackRequests": [
            {
                "partitionPath": partition,
                "fileId": None,
                "latestBaseInstant": time,
                "filesToBeDeleted": list(paths.get(partition, ())),
                "logBlocksToBeDeleted": {path: 1 for path in logs[partition]} if logs.get(partition) else None,
            }
            for partition in sorted(set(paths) | set(logs))
        ],
        "version": ROLLBACK_VERSION,
    }


def rollback_metadata(
    started: str,
    millis: int,
    target: Mapping[str, str],
    deleted: Mapping[str, Sequence[str]],
    command_logs: Mapping[str, Mapping[str, int]] | None = None,
) -> dict:
    """`HoodieRollbackMetadata` of rollback `started` undoing `target` (`{"commitTime", "action"}`): the files
    deleted per partition, and the logs its command blocks went to (`rollbackLogFiles`, path -> size)."""
    command_logs = command_logs or {}
    return {
        "startRollbackTime": started,
        "timeTakenInMillis": millis,
        "totalFilesDeleted": sum(len(files) for files in deleted.values()),
        "commitsRollback": [target["commitTime"]],
        "partitionMetadata": {
            partition: {
                "partitionPath": partition,
                "successDeleteFiles": list(deleted.get(partition, ())),
                "failedDeleteFiles": [],
                "rollbackLogFiles": dict(command_logs[partition]) if command_logs.get(partition) else None,
                "writtenLogFiles": None,
            }
            for partition in sorted(set(deleted) | set(command_logs))
        },
        "version": ROLLBACK_VERSION,
        "instantsRollback": [dict(target)],
    }
