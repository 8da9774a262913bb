"""The rows of a merge-on-read file slice: its base file with its logs merged over it, as Hudi 0.15's snapshot
reader merges them with its default payload (OverwriteWithLatestAvroPayload; docs/hudi-mor-format.md §4-5).

Blocks are read in log order. A data or delete block counts only if the instant in its header completed (or
was archived) and is not after the read's `as_of`: a failed or running write's blocks are never seen, with or
without a rollback block. A rollback command block drops every earlier block of its target instant. Then:
- log against log: a later record replaces an earlier one unless the earlier one's ordering (precombine)
  value is greater; after a delete the later record always wins;
- a delete with the natural ordering (IntWrapper 0, what Tandem and Spark's delete operation write) always
  deletes; one carrying a value keeps an earlier record whose ordering value is greater;
- log against base: the log's record replaces the base row whatever the ordering; a deleted key is dropped,
  and so is a record whose `_hoodie_is_deleted` is true.
A committed log whose bytes are not whole (a damaged block, a size other than its commit recorded) is refused
as unreadable, never read past.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fastavro.schema import SchemaParseException

from timeline.errors import BadInputError, CorruptInstantError, UnreadableDataFileError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.avro_schema import avro_to_arrow
from timeline.format.data_logs import DataLog
from timeline.format.meta_fields import RECORD_KEY
from timeline.format.schema_evolution import conform, union
from timeline.hudi_log import BlockType, HudiLogError, LogBlock, avro_records, deleted_records, read_intact
from timeline.hudi_log.blocks import rollback_target
from timeline.io.storage import Storage

IS_DELETED = "_hoodie_is_deleted"
NATURAL_ORDER = ("IntWrapper", 0)  # a delete that removes the key whatever it held
_WRAPPERS = {
    "int": "IntWrapper",
    "long": "LongWrapper",
    "float": "FloatWrapper",
    "double": "DoubleWrapper",
    "string": "StringWrapper",
    "boolean": "BooleanWrapper",
    "bytes": "BytesWrapper",
}


@dataclass(frozen=True)
class VisibleInstants:
    """Which block instants a read counts, frozen when it is planned (and shipped to Spark executors as is):
    completed ones, and ones older than the active timeline (archived) that no rollback undid, none after
    `as_of`. `ActiveTimeline.is_completed_or_archived`'s rule on a snapshot of it."""

    completed: frozenset[str]
    earliest_active: str | None  # None: nothing counts as archived (no archive, or no active timeline)
    undone: frozenset[str]
    as_of: str | None
    since: str | None = None  # an incremental read's start (exclusive): older blocks are not merged at all

    @staticmethod
    def of(timeline: ActiveTimeline, as_of: str | None, since: str | None = None) -> VisibleInstants:
        archived = bool(timeline.instants) and bool(timeline.archived_files)
        earliest = timeline.earliest_write_time() if archived else None
        undone = timeline.undone_times() if archived else frozenset()
        return VisibleInstants(timeline.completed_times(), earliest, undone, as_of, since)

    def __contains__(self, instant: str) -> bool:
        if self.as_of is not None and instant > self.as_of:
            return False
        if self.since is not None and instant <= self.since:
            return False
        if instant in self.completed:
            return True
        return self.earliest_active is not None and instant < self.earliest_active and instant not in self.undone


@dataclass
class _Latest:
    """The newest state of one key in the logs: a record (None once deleted) and its ordering value."""

    record: dict | None
    ordering: Any
    schema: str | None
    wrapper: str | None = None  # the Java class of `ordering` as Hudi wraps it (IntWrapper, LongWrapper, ...)


def _greater(older: Any, newer: Any) -> bool:
    """Whether an older ordering value beats a newer one (only a strictly greater comparable value does)."""
    if older is None or newer is None:
        return False
    try:
        return bool(older > newer)
    except TypeError:
        return False


def valid_blocks(storage: Storage, logs: Sequence[DataLog], visible: VisibleInstants) -> list[LogBlock]:
    """The data and delete blocks a snapshot reads from a slice's logs, oldest first."""
    queued: list[LogBlock] = []
    for log in logs:
        try:
            blocks = read_intact(storage.read_bytes(log.path), log.size or None)
        except HudiLogError as err:
            raise UnreadableDataFileError(f"log file {log.path} could not be read ({err})") from err
        for block in blocks:
            instant = block.header.get("INSTANT_TIME", "")
            if block.kind is BlockType.COMMAND_BLOCK:
                try:
                    target = rollback_target(block)
                except (HudiLogError, ValueError) as err:
                    raise UnreadableDataFileError(f"log file {log.path}: {err}") from err
                queued = [b for b in queued if b.header.get("INSTANT_TIME") != target]
            elif block.kind not in (BlockType.AVRO_DATA_BLOCK, BlockType.DELETE_BLOCK):
                raise UnreadableDataFileError(
                    f"log file {log.path} holds a {block.kind.name}; data tables are read from Avro data and "
                    "delete blocks"
                )
            elif "INSTANT_TIME" not in block.header:
                raise UnreadableDataFileError(f"log file {log.path}: a {block.kind.name} without INSTANT_TIME")
            elif instant in visible:
                queued.append(block)
    return queued


def _wrapper_of(schema: str, field: str | None) -> str | None:
    """The wrapper Java puts a record's ordering value in (HoodieAvroUtils.wrapValueIntoAvro picks it by the
    value's Java class, which the field's Avro type decides); None when the field is not a plain one."""
    if field is None:
        return None
    for entry in json.loads(schema).get("fields", []):
        if entry.get("name") == field:
            kind = entry["type"]
            kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
            kind = kind.get("type") if isinstance(kind, dict) else kind
            return _WRAPPERS.get(kind)
    return None


def merged_log_records(blocks: Iterable[LogBlock], precombine: str | None) -> dict[str, _Latest]:
    """Each key's newest state after the blocks, by the log-against-log rules above. A delete keeps an earlier
    record only when their ordering values are of one Java class (`ReflectionUtils.isSameClass`)."""
    latest: dict[str, _Latest] = {}
    for block in blocks:
        try:
            if block.kind is BlockType.DELETE_BLOCK:
                for deleted in deleted_records(block):
                    key, ordering = deleted.record_key or "", deleted.ordering
                    value = None if ordering is None else ordering[1]
                    older = latest.get(key)
                    natural = ordering is None or tuple(ordering) == NATURAL_ORDER
                    kept = (
                        older is not None
                        and older.record is not None
                        and not natural
                        and older.wrapper == ordering[0]
                        and _greater(older.ordering, value)
                    )
                    if not kept:
                        latest[key] = _Latest(None, value, None)
                continue
            records = avro_records(block)
            schema = block.header["SCHEMA"]
            wrapper = _wrapper_of(schema, precombine)
            for record in records:
                key = record.get(RECORD_KEY) or ""
                ordering = record.get(precombine) if precombine else None
                older = latest.get(key)
                if older is None or older.record is None or not _greater(older.ordering, ordering):
                    latest[key] = _Latest(record, ordering, schema, wrapper)
        except (HudiLogError, ValueError, KeyError, TypeError, SchemaParseException) as err:
            raise UnreadableDataFileError(f"a log block at offset {block.offset} could not be read ({err})") from err
    return latest


def merge_slice(base: pa.Table, latest: dict[str, _Latest], schema: pa.Schema | None = None) -> pa.Table:
    """The base rows with the logs' newest records over them: replaced and deleted keys out, the log
    records (updates, then inserts) after the untouched base rows, all in `schema` (else the union)."""
    if not latest:
        return base if schema is None else conform(base, schema, exact=False)
    touched = pa.array(list(latest), pa.string())
    keep = pc.invert(pc.is_in(base.column(RECORD_KEY), value_set=touched)) if base.num_rows else None
    untouched = base.filter(keep) if keep is not None else base
    by_schema: dict[str, list[dict]] = {}
    for state in latest.values():
        if state.record is not None and not state.record.get(IS_DELETED):
            by_schema.setdefault(state.schema or "", []).append(state.record)
    parts = [untouched]
    for text, records in by_schema.items():
        try:
            log_schema = avro_to_arrow(text, "a log block's schema")
        except CorruptInstantError as err:
            raise UnreadableDataFileError(str(err)) from err
        parts.append(pa.Table.from_pylist(records, schema=log_schema))
    try:
        target = schema if schema is not None else union(p.schema for p in parts)
    except BadInputError as err:
        raise BadInputError(f"a file slice's base and logs disagree on a column's type: {err}") from err
    wide = [conform(p, target, exact=False).select(target.names) for p in parts]
    return pa.concat_tables(wide, promote_options="permissive")


@dataclass(frozen=True)
class LogMerge:
    """What reading a merge-on-read table's latest slices needs besides their base files: each group's logs
    (`FileSystemView.slice_logs`), the instants whose blocks count, and the precombine field that orders one
    log record against another. Plain data: a Spark executor merges with the driver's plan."""

    logs: dict[tuple[str, str], list[DataLog]]
    visible: VisibleInstants
    precombine: str | None

    @staticmethod
    def of(
        logs: dict[tuple[str, str], list[DataLog]],
        timeline: ActiveTimeline,
        as_of: str | None,
        precombine: str | None,
        since: str | None = None,
    ) -> LogMerge:
        """`since`: an incremental read, which merges only the blocks of its range (Hudi 0.15's
        MergeOnReadIncrementalRelation reads only the files the range's commits wrote)."""
        return LogMerge(logs, VisibleInstants.of(timeline, as_of, since), precombine)

    def logs_of(self, partition: str, file_id: str) -> list[DataLog]:
        return self.logs.get((partition, file_id), [])

    def merged(self, storage: Storage, base: pa.Table, partition: str, file_id: str) -> pa.Table:
        """A slice's rows: `base` (its base file's rows) with its logs merged over them."""
        logs = self.logs_of(partition, file_id)
        if not logs:
            return base
        blocks = valid_blocks(storage, logs, self.visible)
        return merge_slice(base, merged_log_records(blocks, self.precombine))
