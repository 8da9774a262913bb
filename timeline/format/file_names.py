"""Hudi base-file names: `<fileId>_<writeToken>_<instantTime>.parquet`."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

from timeline.errors import CorruptInstantError
from timeline.format import partition_path
from timeline.format.source_file import SourceFile

PARQUET = ".parquet"
PARTITION_METADATA = ".hoodie_partition_metadata"
BASE_FILE_PATTERN = r"^(?P<file_id>[^_/]+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d{14,17})\.parquet$"
_BASE_RE = re.compile(BASE_FILE_PATTERN)


def partition_metadata(instant: str, depth: int) -> bytes:
    """A partition's `.hoodie_partition_metadata`, as HoodiePartitionMetadata writes it: the instant that
    created the partition and how many folders deep it sits."""
    stamp = datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
    return f"#partition metadata\n#{stamp}\ncommitTime={instant}\npartitionDepth={depth}\n".encode()


@dataclass(frozen=True)
class BaseFile:
    """One parquet base file of a file group, with its size in bytes."""

    partition: str
    file_id: str
    write_token: str
    instant: str
    size: int = 0
    # A bootstrapped table's skeleton file (instant 00000000000001): the source file its rows join, by position
    source: SourceFile | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return base_file_name(self.file_id, self.write_token, self.instant)

    @property
    def path(self) -> str:
        return f"{self.partition}/{self.name}" if self.partition else self.name


def new_file_id() -> str:
    """A new file group id: a UUID4 with Hudi's `-0` suffix (no `_`)."""
    return f"{uuid.uuid4()}-0"


def write_token(task_partition: int, stage_id: int = 1, attempt_id: int = 0) -> str:
    return f"{task_partition}-{stage_id}-{attempt_id}"


def base_file_name(file_id: str, token: str, instant: str) -> str:
    return f"{file_id}_{token}_{instant}{PARQUET}"


def parse_base_file(partition: str, name: str, size: int = 0) -> BaseFile | None:
    """The base file a name stands for, or None if it is not a Hudi base file name.

    Names come from listings and metadata records: a partition that is not
    canonical means a corrupt record, never a path to use.
    """
    m = _BASE_RE.match(name)
    if not m:
        return None
    partition_path.canonical(partition, f"base file {name!r}", CorruptInstantError)
    return BaseFile(partition, m.group(1), m.group(2), m.group(3), size)


def split_path(path: str) -> tuple[str, str]:
    """(partition, file name) of a path relative to the table base; a non-canonical partition is bad input."""
    return partition_path.split_file_path(path, f"path {partition_path.shown(path)}")


def group_by_partition(paths: list[str]) -> dict[str, list[str]]:
    """Paths relative to the base, grouped by partition, in input order."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(split_path(path)[0], []).append(path)
    return groups
