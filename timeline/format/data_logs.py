"""The log files of a merge-on-read table's file groups, and which of them belong to each group's latest slice.

A log names its file group and the base instant of the slice it extends
(`.{fileId}_{baseInstant}.log.{version}_{token}`), never the instant that wrote it:
that is in every block's header, so a reader filters blocks, not files (`slice_merge`).
The latest slice of a group starts at its latest visible base file B and holds every
log whose base instant is B or later: logs named for a pending compaction C > B are
written while C runs and are read over B's slice until C's base file completes
(Hudi's `mergeCompactionPendingFileSlices`); their blocks are all newer than C.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from timeline.errors import UnsupportedTableError
from timeline.format import partition_path
from timeline.format.file_names import BaseFile
from timeline.hudi_log.names import LOG_EXTENSION, LogFileName, parse_log_name
from timeline.io.storage import FileEntry


@dataclass(frozen=True)
class DataLog:
    """One log file of a data table's file group, with its size in bytes."""

    partition: str
    log: LogFileName
    size: int = 0

    @property
    def file_id(self) -> str:
        return self.log.file_id

    @property
    def base_instant(self) -> str:
        return self.log.base_instant

    @property
    def name(self) -> str:
        return self.log.name

    @property
    def path(self) -> str:
        return f"{self.partition}/{self.name}" if self.partition else self.name


def parse_data_log(partition: str, name: str, size: int = 0) -> DataLog | None:
    """The data log a file name stands for; None for anything else, including a temp file or a Hadoop checksum
    file whose name merely starts like a log's (only a name that is exactly a log name counts)."""
    parsed = parse_log_name(name)
    if parsed is None or parsed.name != name or parsed.extension != LOG_EXTENSION or parsed.suffix:
        return None
    if parsed.write_token is None or "/" in parsed.file_id or not parsed.base_instant.isdigit():
        return None
    return DataLog(partition, parsed, size)


def parse_log_listing(entries: Iterable[FileEntry]) -> list[DataLog]:
    """The data logs among listed entries (paths relative to the table base) in canonical partition folders."""
    found = []
    for entry in entries:
        partition, _, name = entry.path.rpartition("/")
        if name.startswith(".") and partition_path.problem(partition) is None:
            log = parse_data_log(partition, name, entry.size)
            if log is not None:
                found.append(log)
    return found


def slice_logs(
    latest: Iterable[BaseFile],
    logs: Iterable[DataLog],
    as_of: str | None = None,
    replaced: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset(),
) -> dict[tuple[str, str], list[DataLog]]:
    """The logs of each latest slice, keyed by (partition, file id), in the order Hudi reads them.

    Logs of replaced groups and of older slices are not read. A log of a group with no visible base file is
    refused when its slice could hold visible records (its base instant at or before `as_of`): Tandem reads
    file groups that start with a base file, as Hudi's Spark writer makes them with its default index, and
    never drops such records silently.
    """
    bases = {(f.partition, f.file_id): f.instant for f in latest}
    found: dict[tuple[str, str], list[DataLog]] = defaultdict(list)
    orphans: list[DataLog] = []
    for log in logs:
        group = (log.partition, log.file_id)
        base = bases.get(group)
        if base is not None and log.base_instant >= base:
            found[group].append(log)
        elif base is None and group not in replaced and (as_of is None or log.base_instant <= as_of):
            orphans.append(log)
    if orphans:
        shown = ", ".join(o.path for o in orphans[:3])
        raise UnsupportedTableError(
            f"{len(orphans)} log file(s) of file groups without a base file (log-only file groups are not "
            f"supported): {shown}"
        )
    for group_logs in found.values():
        group_logs.sort(key=lambda log: log.log.order_key)
    return dict(found)
