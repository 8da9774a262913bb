"""Commit and replacecommit metadata JSON, field for field as Hudi 0.14 writes it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from timeline.errors import CorruptInstantError
from timeline.format import partition_path
from timeline.format.instant import validate_timeline_time


@dataclass(frozen=True)
class DeltaWrite:
    """What HoodieDeltaWriteStat adds for a log file: its version, where this commit's blocks start in it, the
    slice's base file name ("" for a slice without one) and the slice's log names, this one last."""

    log_version: int
    log_offset: int
    base_file: str
    log_files: tuple[str, ...]

    def to_json(self) -> dict:
        return {
            "logVersion": self.log_version,
            "logOffset": self.log_offset,
            "baseFile": self.base_file,
            "logFiles": list(self.log_files),
            "recordsStats": {"val": None},
        }

    @staticmethod
    def from_json(obj: dict) -> DeltaWrite | None:
        if "logVersion" not in obj:
            return None
        logs = obj.get("logFiles") or []
        return DeltaWrite(
            int(obj["logVersion"]), int(obj.get("logOffset") or 0), obj.get("baseFile") or "", tuple(logs)
        )


@dataclass
class WriteStat:
    """What one file write did; `path` is relative to the table base."""

    file_id: str
    path: str
    partition_path: str
    prev_commit: str = "null"
    num_writes: int = 0
    num_inserts: int = 0
    num_update_writes: int = 0
    num_deletes: int = 0
    total_write_bytes: int = 0
    file_size_in_bytes: int = 0
    total_write_errors: int = 0
    # The file's MDT index records, computed by its writer from the rows it wrote. Not part of
    # Hudi's commit JSON: they reach the MDT in the same deltacommit as the file itself.
    column_stats: list[dict] | None = None
    bloom_filter: dict | None = None
    delta: DeltaWrite | None = None  # set for a merge-on-read log file: HoodieDeltaWriteStat's fields

    @property
    def is_log(self) -> bool:
        return self.delta is not None

    def to_json(self) -> dict:
        return {
            "fileId": self.file_id,
            "path": self.path,
            "cdcStats": None,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": self.total_write_errors,
            "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size_in_bytes,
            "minEventTime": None,
            "maxEventTime": None,
            **(self.delta.to_json() if self.delta is not None else {}),
        }

    def counts(self) -> dict[str, int]:
        """The stat's counts and sizes by their JSON names (none may be negative)."""
        return {
            "numWrites": self.num_writes,
            "numInserts": self.num_inserts,
            "numUpdateWrites": self.num_update_writes,
            "numDeletes": self.num_deletes,
            "totalWriteBytes": self.total_write_bytes,
            "fileSizeInBytes": self.file_size_in_bytes,
            "totalWriteErrors": self.total_write_errors,
        }

    @staticmethod
    def from_json(obj: dict) -> WriteStat:
        return WriteStat(
            file_id=obj["fileId"],
            path=obj.get("path") or "",
            partition_path=obj.get("partitionPath") or "",
            prev_commit=obj.get("prevCommit") or "null",
            num_writes=int(obj.get("numWrites") or 0),
            num_inserts=int(obj.get("numInserts") or 0),
            num_update_writes=int(obj.get("numUpdateWrites") or 0),
            num_deletes=int(obj.get("numDeletes") or 0),
            total_write_bytes=int(obj.get("totalWriteBytes") or 0),
            file_size_in_bytes=int(obj.get("fileSizeInBytes") or 0),
            total_write_errors=int(obj.get("totalWriteErrors") or 0),
            delta=DeltaWrite.from_json(obj),
        )


@dataclass
class CommitMetadata:
    """`HoodieCommitMetadata` / `HoodieReplaceCommitMetadata` as JSON."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    schema: str | None = None
    extra_metadata: dict[str, str] = field(default_factory=dict)
    compacted: bool = False
    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    def add(self, stat: WriteStat) -> None:
        self.partition_to_write_stats.setdefault(stat.partition_path, []).append(stat)

    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    def touched_file_groups(self) -> set[tuple[str, str]]:
        """(partition, fileId) pairs this instant wrote or replaced."""
        touched = {(s.partition_path, s.file_id) for s in self.write_stats()}
        for partition, ids in (self.partition_to_replace_file_ids or {}).items():
            touched.update((partition, fid) for fid in ids)
        return touched

    def to_json_bytes(self) -> bytes:
        extra = dict(self.extra_metadata)
        if self.schema is not None:
            extra["schema"] = self.schema
        doc: dict = {
            "partitionToWriteStats": {
                p: [s.to_json() for s in stats] for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": extra,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            doc["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        return json.dumps(doc, separators=(",", ":")).encode()  # no indent: the C encoder, 10x faster

    @staticmethod
    def from_json_bytes(data: bytes, source: str = "commit metadata") -> CommitMetadata:
        """Parse; an empty or malformed file is a CorruptInstantError naming `source`."""
        if not data.strip():
            raise CorruptInstantError(f"{source} is empty")
        try:
            doc = json.loads(data)
            stats = {
                p: [WriteStat.from_json(s) for s in (lst or [])]
                for p, lst in (doc.get("partitionToWriteStats") or {}).items()
            }
            extra = dict(doc.get("extraMetadata") or {})
            schema = extra.pop("schema", None)
            metadata = CommitMetadata(
                partition_to_write_stats=stats,
                operation_type=doc.get("operationType") or "UNKNOWN",
                schema=schema,
                extra_metadata=extra,
                compacted=bool(doc.get("compacted")),
                partition_to_replace_file_ids=doc.get("partitionToReplaceFileIds"),
            )
            metadata.check(source)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CorruptInstantError(f"{source} is not valid commit metadata JSON: {err}") from err
        return metadata

    def check(self, source: str) -> None:
        """Partition paths, file paths and prevCommit of a file read back: these name files later."""
        for partition, stats in self.partition_to_write_stats.items():
            partition_path.canonical(partition, f"{source}: partitionToWriteStats", CorruptInstantError)
            for stat in stats:
                where = f"{source}: write stat of file group {partition_path.shown(stat.file_id)}"
                partition_path.canonical(stat.partition_path, f"{where}: partitionPath", CorruptInstantError)
                if stat.path:
                    folder, _ = partition_path.split_file_path(stat.path, f"{where}: path", CorruptInstantError)
                    if folder != stat.partition_path:
                        raise CorruptInstantError(
                            f"{where}: path {partition_path.shown(stat.path)} is not in its partition "
                            f"{partition_path.shown(stat.partition_path)}"
                        )
                negative = [name for name, value in stat.counts().items() if value < 0]
                if negative:
                    raise CorruptInstantError(f"{where}: negative {', '.join(negative)}")
                if stat.prev_commit != "null":
                    validate_timeline_time(stat.prev_commit, f"{where}: prevCommit")
        for partition in self.partition_to_replace_file_ids or {}:
            partition_path.canonical(partition, f"{source}: partitionToReplaceFileIds", CorruptInstantError)
