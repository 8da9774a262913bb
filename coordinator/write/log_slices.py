"""Where a merge-on-read upsert's records go: the slice each touched file group's new log extends, and which
groups may still take new records into a rewritten base file (Hudi's rule with its default index: only a
small group whose latest slice has no logs and no pending compaction; every other group takes logs)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import pyarrow as pa
import pyarrow.compute as pc

from coordinator.write.log_files import LogTarget
from coordinator.write.rows import KEY
from coordinator.write.tagging import DELETE, TARGET, small_groups
from timeline.format.file_names import BaseFile
from timeline.format.fs_view import FileSystemView
from timeline.mor.pending import pending_compactions


class LogSlices:
    """The view's latest slices with their logs, and the pending compactions that move a group's next log
    to the slice they start."""

    def __init__(self, view: FileSystemView) -> None:
        self.pending = pending_compactions(view.timeline)
        self.logs = view.slice_logs()
        touched = {group for group, logs in self.logs.items() if logs} | set(self.pending)
        self.extended = frozenset(file_id for _, file_id in touched)

    def small_targets(self, view: FileSystemView, small_file_limit: int) -> set[str]:
        """The groups tagging may give new records (as `tagging.tag` picks them): rewritten, never logged."""
        return {base.file_id for base in small_bases(view, small_file_limit, self.extended).values()}

    def target(self, base: BaseFile) -> LogTarget:
        """The slice the next log of `base`'s group extends, and the version that log takes."""
        group = (base.partition, base.file_id)
        instant = self.pending.get(group, base.instant)
        logs = [log for log in self.logs.get(group, []) if log.base_instant == instant]
        version = max((log.log.version for log in logs), default=0) + 1
        base_file = base.name if instant == base.instant else ""
        return LogTarget(base.partition, base.file_id, instant, base_file, tuple(g.name for g in logs), version)


def small_bases(
    view: FileSystemView, small_file_limit: int, extended: AbstractSet[str] = frozenset()
) -> dict[str, BaseFile]:
    """Per partition, the latest base file of the group new records top up (`tagging.small_groups`); groups in
    `extended` (a merge-on-read slice with logs or a pending compaction) take none."""
    files = {(f.partition, f.file_id): f for f in view.latest_base_files() if f.file_id not in extended}
    chosen = small_groups(list(files.values()), small_file_limit)
    return {partition: files[partition, file_id] for partition, file_id in chosen.items()}


def split_deletes(records: pa.Table) -> tuple[pa.Table, list[str]]:
    """One group's tagged records -> the rows it updates (tag columns dropped) and the keys it deletes."""
    gone = records.column(DELETE)
    updates = records.filter(pc.invert(gone)).drop_columns([TARGET, DELETE])
    deleted = pc.unique(records.filter(gone).column(KEY)).to_pylist()
    return updates, deleted
