"""One scan planner for every engine: which base files a query must read, from the metadata table.

Given a table, a snapshot (latest, as of an instant, or the changes in
(since, until]) and an optional filter, the planner lists the latest file slices
(from the MDT; a storage listing only when the table has none or it is
unhealthy, and the plan says so), prunes partitions on their typed values and
files on their column statistics, and returns splits. Pruning only ever drops a
file no row of which can satisfy the filter; the whole filter stays with the
engine as the residual, so a predicate the planner cannot translate costs
speed, never rows. The set of splits is fixed when the plan is made: a commit
that lands later is simply not in it (snapshot isolation).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from timeline import table_schema
from timeline.errors import BadInputError, TandemError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.data_logs import DataLog, parse_data_log, slice_logs
from timeline.format.file_names import BaseFile
from timeline.format.fs_view import FILES_SCHEMA, latest_files
from timeline.format.instant import CLEAN, SAVEPOINT, WRITE_ACTIONS, query_instant
from timeline.format.partition_path import file_path
from timeline.format.source_file import SourceFile
from timeline.index.column_stats import ColumnRange
from timeline.io import read_once
from timeline.mdt.hudi_ranges import column_range
from timeline.mdt.log import COLUMN_STATS
from timeline.mdt.reader import MetadataReader
from timeline.mdt.snapshot import MetadataSnapshot
from timeline.mdt.table import MetadataTable
from timeline.mor.slice_merge import LogMerge
from timeline.query.partition_filter import PARTITION_COLUMN, partition_candidates, typed_fields
from timeline.query.partition_pruning import prune_partitions
from timeline.query.predicate import Expr, columns_of, parse_sql, resolve, to_sql
from timeline.query.skipping import may_match
from timeline.table import ListingSource, Table

LOG = logging.getLogger(__name__)
URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"


@dataclass(frozen=True)
class Split:
    """One base file to read, with what the planner knows about it."""

    path: str
    partition: str
    file_id: str
    instant: str
    size: int
    partition_values: dict[str, Any]
    stats: dict[str, ColumnRange] | None = None
    source: SourceFile | None = None  # a bootstrapped skeleton's source file, joined by position on read


@dataclass(frozen=True)
class ScanPlan:
    """The files of a scan as columns (`files`, FILES_SCHEMA), with `Split` objects made only when asked for:
    planning 100,000 files is a few Arrow kernels, not 100,000 Python objects. Built once and frozen; it
    carries its residual filter (`residual`, DuckDB SQL), which a reader applies to every row it reads."""

    table: Table
    files: pa.Table
    schema: pa.Schema | None
    filter: Expr | None
    given_sql: str | None = None  # the filter as given, when it was DuckDB SQL text
    since: str | None = None
    until: str | None = None
    as_of: str | None = None
    source: str = "metadata"
    fallback_reason: str | None = None
    pruned_by_stats: int = 0
    stats: str = "not used"
    notes: tuple[str, ...] = ()
    ranges: dict[tuple[str, str], dict[str, ColumnRange]] | None = None
    partition_types: dict[str, pa.DataType] = field(default_factory=dict)
    count_pruned: Callable[[], int] = lambda: 0
    merge: LogMerge | None = None  # a merge-on-read table's slice logs, merged over their base files on read

    @functools.cached_property
    def residual(self) -> str | None:
        """The whole filter as DuckDB SQL, for a reader that applies it to the rows: the text as given, else the
        parsed tree written back, only when asked (a tree whose literals SQL cannot spell still plans)."""
        if self.given_sql is not None or self.filter is None:
            return self.given_sql
        try:
            return to_sql(self.filter, "duckdb")
        except ValueError as err:
            raise BadInputError(f"the filter cannot be applied to the rows read: {err}") from err

    def noted(self, note: str) -> ScanPlan:
        """The same plan with one more note (what a connector did not use for pruning, say)."""
        return dataclasses.replace(self, notes=(*self.notes, note))

    @property
    def num_splits(self) -> int:
        return self.files.num_rows

    @functools.cached_property
    def splits(self) -> list[Split]:
        columns = [self.files.column(c).to_pylist() for c in ("partition", "file", "size", "file_id", "instant")]
        values = _partition_values(self.table, sorted(set(columns[0])), self.partition_types)
        out = []
        for partition, name, size, file_id, instant in zip(*columns, strict=True):
            ranges = self.ranges.get((partition, name)) if self.ranges is not None else None
            path = file_path(partition, name)
            source = self.table.source_of(partition, file_id, instant)
            out.append(Split(path, partition, file_id, instant, size, values[partition], ranges, source))
        return out

    @property
    def paths(self) -> list[str]:
        return [s.path for s in self.splits]

    @functools.cached_property
    def pruned_by_partition(self) -> int:
        """Files of the partitions the filter pruned, counted when asked (the plan never lists them)."""
        return self.count_pruned()

    @property
    def considered(self) -> int:
        return self.num_splits + self.pruned_by_stats + self.pruned_by_partition

    def explain(self) -> dict:
        """What the plan did, for `--explain` and `--json`."""
        return {
            "source": self.source,
            "fallback_reason": self.fallback_reason,
            "snapshot": self.until if self.since is not None else self.as_of,
            "files_considered": self.considered,
            "pruned_by_partition": self.pruned_by_partition,
            "pruned_by_column_stats": self.pruned_by_stats,
            "files_to_read": self.num_splits,
            "column_stats": self.stats,
            "notes": list(self.notes),
        }


def plan_scan(
    table: Table,
    where: Expr | str | None = None,
    as_of: str | None = None,
    since: str | None = None,
    until: str | None = None,
    dialect: str = "duckdb",
    source: str = "auto",
    read_optimized: bool = False,
) -> ScanPlan:
    """Plan a read; see the module docstring. `where` is an engine-neutral tree or SQL text in `dialect`.
    `read_optimized`: a merge-on-read table's base files alone (Hudi's read-optimized query: no log merged).

    From a healthy MDT the partitions are pruned on the MDT's partition list first,
    and only the surviving partitions' files are listed. The health check and the listing share each read.
    """
    with read_once.reuse_reads():
        return _plan(table, where, as_of, since, until, dialect, source, read_optimized)


def _plan(
    table: Table,
    where: Expr | str | None,
    as_of: str | None,
    since: str | None,
    until: str | None,
    dialect: str,
    source: str,
    read_optimized: bool = False,
) -> ScanPlan:
    as_of, since, until = (
        None if value is None else query_instant(value, name)
        for value, name in ((as_of, "as of"), (since, "since"), (until, "until"))
    )
    if since is not None and as_of is not None:
        raise BadInputError("an incremental read (since/until) cannot also be as of an instant")
    found = table.listing_source(source)
    restored = found.timeline.restoring_to()
    if restored is not None:  # a restore under way: the state it leaves, never a table half restored
        until = min(until or restored, restored) if since is not None else None
        as_of = min(as_of or restored, restored) if since is None else None
    end = until if since is not None else as_of  # any time, as in Hudi: the latest commit at or before it
    if as_of is not None:
        _check_retained(found.timeline, as_of)
    lister = _Lister(table, found, end)
    schema = lister.schema()
    expr = parse_sql(where, dialect) if isinstance(where, str) else where
    if expr is not None and schema is not None:
        expr = resolve(expr, schema)
    types = typed_fields(table.config.partition_fields, schema)
    everything: Sequence[str] = ()
    kept: Sequence[str] = ()
    if expr is not None and schema is not None:  # without a filter, the partition list is not needed
        everything = lister.partitions()
        kept = _prune_partitions(table, expr, everything, types)
    files = lister.files(kept if len(kept) < len(everything) else None)
    # the slices' logs, of every listed group: an incremental read then keeps the groups its range wrote
    merge = None if read_optimized else lister.log_merge(files, kept if len(kept) < len(everything) else None, since)
    if since is not None:
        files = _written_since(files, found.timeline, since, until)
    count_pruned: Callable[[], int] = int  # 0: no partition pruned
    if len(kept) < len(everything):
        pruned = sorted(set(everything) - set(kept))
        count_pruned = functools.partial(_count_files, lister, pruned, found.timeline, since, until)
    ranges, stats = _column_stats(table, found.mdt, found.timeline, expr, files, types, schema)
    pruned_by_stats = 0
    if ranges is not None and expr is not None:
        types = _types(schema)

        def may_hold(partition: str, name: str) -> bool:
            found = ranges.get((partition, name))
            return found is None or may_match(expr, found, types)

        def slice_may_hold(partition: str, name: str, file_id: str) -> bool:
            """A slice's merged rows are its base's untouched rows and its logs' records: it may hold a match
            if its base or any log may (Hudi's rule); a log without statistics (a rollback's) always may."""
            logs = merge.logs_of(partition, file_id) if merge is not None else []
            return may_hold(partition, name) or any(may_hold(partition, log.name) for log in logs)

        columns = ("partition", "file", "file_id")
        keep = [
            slice_may_hold(p, n, i) for p, n, i in zip(*(files.column(c).to_pylist() for c in columns), strict=True)
        ]
        pruned_by_stats = keep.count(False)
        files = files.filter(pa.array(keep, pa.bool_()))
    return ScanPlan(
        table,
        files,
        schema,
        expr,
        given_sql=where if isinstance(where, str) and dialect == "duckdb" else None,
        since=since,
        until=until,
        as_of=as_of,
        source="metadata" if found.mdt is not None else "storage",
        fallback_reason=found.fallback_reason,
        pruned_by_stats=pruned_by_stats,
        stats=stats,
        ranges=ranges,
        partition_types=types,
        count_pruned=count_pruned,
        merge=merge,
    )


class _Lister:
    """The files of a snapshot, from the MDT (only the partitions asked for) or from one storage listing."""

    def __init__(self, table: Table, found: ListingSource, end: str | None) -> None:
        self.table = table
        self.found = found
        self.end = end
        self.reader = MetadataReader(found.mdt, found.timeline) if found.mdt is not None else None
        self._storage_files: pa.Table | None = None
        self._storage_logs: list[DataLog] = []

    def partitions(self) -> Sequence[str]:
        if self.reader is not None:
            return self.reader.partition_tuple()
        return sorted(set(self._from_storage().column("partition").to_pylist()))

    def files(self, partitions: list[str] | None) -> pa.Table:
        """The latest base file of each live file group, of `partitions` (None: all)."""
        if self.reader is None:
            files = self._from_storage()
            if partitions is not None:
                files = files.filter(pc.is_in(files.column("partition"), pa.array(partitions, pa.string())))
            return files
        if partitions is not None and not partitions:
            return FILES_SCHEMA.empty_table()
        return latest_files(self.reader.listing(partitions, base_files=True), self.found.timeline, self.end)

    def _from_storage(self) -> pa.Table:
        if self._storage_files is None:
            view = self.table.storage_view(self.end, self.found.timeline, self.found.fallback_reason)
            self._storage_files = view.latest_table()
            self._storage_logs = view.logs
        return self._storage_files

    def log_merge(self, files: pa.Table, partitions: list[str] | None, since: str | None) -> LogMerge | None:
        """The logs of the latest slices of `files` (listed from `partitions`, None: all), on a merge-on-read
        table; None on copy-on-write. `since`: an incremental read's start (only its range's blocks merge)."""
        config = self.table.config
        if not config.merge_on_read:
            return None
        if self.reader is None:
            self._from_storage()  # the whole table's logs: a pruned partition's would have no base file here
            wanted = None if partitions is None else set(partitions)
            logs = [g for g in self._storage_logs if wanted is None or g.partition in wanted]
        else:
            logs = [g for p, n, size in self.reader.listed_logs(partitions) if (g := parse_data_log(p, n, size))]
        latest = [
            BaseFile(p, i, "", t)
            for p, i, t in zip(*(files.column(c).to_pylist() for c in ("partition", "file_id", "instant")), strict=True)
        ]
        timeline = self.found.timeline
        found = slice_logs(latest, logs, self.end, timeline.replaced_file_ids(self.end))
        return LogMerge.of(found, timeline, self.end, config.precombine_field, since)

    def schema(self) -> pa.Schema | None:
        """The stored schema of the newest write's files (`table_schema.stored`); the newest listed file's
        otherwise."""
        schema = table_schema.stored(self.table, self.found.timeline, self.end)
        if schema is not None:
            return schema
        files = self.files(None)
        if not files.num_rows:
            return None
        newest = pc.index(files.column("instant"), pc.max(files.column("instant"))).as_py()
        partition, name = files.column("partition")[newest].as_py(), files.column("file")[newest].as_py()
        return table_schema.of_file(self.table, file_path(partition, name))


def _check_retained(timeline: ActiveTimeline, as_of: str) -> None:
    """Refuse, as Hudi does (`TimelineUtils.validateTimestampAsOf`), a time travel to before what the last
    completed clean kept: its files may be gone, so an answer could silently miss rows."""
    cleans = [i for i in timeline.completed() if i.action == CLEAN]
    if not cleans or any(i.time == as_of and i.action == SAVEPOINT for i in timeline.completed()):
        return  # a savepoint's files are kept by every clean
    retained = timeline.avro(cleans[-1]).get("earliestCommitToRetain") or ""
    if retained and as_of < retained:
        raise BadInputError(
            f"as of {as_of}: clean {cleans[-1].time} kept the commits from {retained} on only "
            "(hoodie.cleaner.commits.retained); the table as of an earlier time is gone, as Hudi says"
        )
    writes = timeline.completed_writes()
    if not retained and writes and as_of < writes[0].time:
        raise BadInputError(
            f"as of {as_of}: older than the first retained commit {writes[0].time} (cleaned and archived since)"
        )


def _written_since(files: pa.Table, timeline: ActiveTimeline, since: str, until: str | None) -> pa.Table:
    """The files of the groups commits in (since, until] wrote; every file when the range reaches archived
    commits, whose write stats the active timeline no longer holds (Hudi's full-scan fallback): the rows are
    then chosen by their commit time alone."""
    if timeline.instants and since < timeline.earliest_write_time() and timeline.archived_files:
        return files
    touched = _groups_written(timeline, since, until)
    groups = pc.binary_join_element_wise(files.column("partition"), files.column("file_id"), "\x00")
    return files.filter(pc.is_in(groups, pa.array(["\x00".join(k) for k in touched], pa.string())))


def _count_files(
    lister: _Lister, partitions: list[str], timeline: ActiveTimeline, since: str | None, until: str | None
) -> int:
    """The files of the pruned `partitions` the plan would otherwise have read (listed only when asked)."""
    files = lister.files(partitions)
    return (_written_since(files, timeline, since, until) if since is not None else files).num_rows


def _types(schema: pa.Schema) -> dict[str, pa.DataType]:
    return {f.name: f.type for f in schema}


def _prune_partitions(
    table: Table, expr: Expr, partitions: Sequence[str], types: dict[str, pa.DataType]
) -> Sequence[str]:
    fields = table.config.partition_fields
    if not fields or not types or table.config.raw.get(URL_ENCODE) == "true":
        return partitions
    return prune_partitions(expr, partitions, fields, types, table.config.hive_style)


def _partition_values(table: Table, partitions: list[str], types: dict[str, pa.DataType]) -> dict[str, dict]:
    """Per partition, the typed value of each partition field its path gives back exactly (one candidate only)."""
    out: dict[str, dict[str, Any]] = {p: {} for p in partitions}
    fields = table.config.partition_fields
    typed = {f: types[f] for f in fields if f in types}
    if not typed or not partitions:
        return out
    candidates, _ = partition_candidates(partitions, fields, typed, table.config.hive_style)
    seen: dict[str, dict[str, set]] = {}
    columns = {n: candidates.column(n).to_pylist() for n in candidates.column_names}
    for i, partition in enumerate(columns[PARTITION_COLUMN]):
        found = seen.setdefault(partition, {f: set() for f in typed})
        for name in typed:
            found[name].add(_hashable(columns[name][i]))
    for partition, found in seen.items():
        out[partition] = {name: next(iter(v))[1] for name, v in found.items() if len(v) == 1}
    return out


def _hashable(value: Any) -> tuple[str, Any]:
    """A set member for a candidate value: its repr tells "" from None and 1 from True."""
    return (repr(value), value)


def _column_stats(
    table: Table,
    mdt: MetadataTable | None,
    timeline: ActiveTimeline,
    expr: Expr | None,
    files: pa.Table,
    partition_types: dict[str, pa.DataType],
    schema: pa.Schema | None,
) -> tuple[dict[tuple[str, str], dict[str, ColumnRange]] | None, str]:
    """Ranges of the filter's columns per file, from the MDT's `column_stats` (None when unusable), and what
    the plan says of them.

    A damaged index never answers: any failure to read or decode it plans
    without column statistics (and says so), it never drops a file.
    """
    if expr is None or not files.num_rows:
        return None, "not used"
    if columns_of(expr) <= set(partition_types):
        return None, "not needed: the filter is on partition values only, decided exactly"
    hudi_format = mdt is not None and mdt.is_hudi_format()
    if COLUMN_STATS not in (mdt.hudi_partitions() if hudi_format else table.config.metadata_indexes):
        return None, "no column_stats index"
    if mdt is None:
        return None, "not used: the listing came from storage"
    wanted = sorted(columns_of(expr))
    try:
        partitions = sorted(pc.unique(files.column("partition")).to_pylist())
        reader = MetadataReader(mdt, timeline)
        if reader.snapshot is not None:
            out = _hudi_ranges(reader.snapshot, wanted, partitions, schema)
        else:
            out = {}
            for record in reader.index(COLUMN_STATS, partitions, wanted).to_pylist():
                ranges = out.setdefault((record["partition"], record["fileName"]), {})
                ranges[record["columnName"]] = ColumnRange.from_record(record)
    except (TandemError, OSError, pa.ArrowException, ValueError, KeyError, TypeError) as err:
        LOG.warning("%s: column_stats index unreadable, planning without it: %s", table.uri, err)
        return None, f"not used: the column_stats index is unreadable ({err})"
    if reader.snapshot is not None and reader.snapshot.corrupt:
        LOG.warning("%s: column_stats index has corrupt blocks, planning without it", table.uri)
        return None, "not used: the column_stats index has corrupt blocks"
    return out, f"used for {', '.join(wanted)}"


def _hudi_ranges(
    snapshot: MetadataSnapshot, columns: list[str], partitions: list[str], schema: pa.Schema | None
) -> dict[tuple[str, str], dict[str, ColumnRange]]:
    """The ranges Hudi's records give, each read as the table's type of its column (`hudi_ranges`)."""
    types = {c: schema.field(c).type for c in columns if schema is not None and c in schema.names}
    out: dict[tuple[str, str], dict[str, ColumnRange]] = {}
    for (partition, file_name), found in snapshot.column_stats_of_files(list(types), partitions).items():
        for stats in found:
            found_range = column_range(stats, types[stats.column_name])
            if found_range is not None:
                out.setdefault((partition, file_name), {})[stats.column_name] = found_range
    return out


def _groups_written(timeline: ActiveTimeline, since: str, until: str | None) -> set[tuple[str, str]]:
    touched = set()
    for instant in timeline.completed():
        if instant.action in WRITE_ACTIONS and instant.time > since and (until is None or instant.time <= until):
            for stat in timeline.commit_metadata(instant).write_stats():
                touched.add((stat.partition_path, stat.file_id))
    return touched
