"""The files one write makes: new file groups sized by the target file size, and rewrites of existing
groups (stored rows merged with the records tagged to them), whose overflowing inserts start new groups."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from coordinator.write.base_reads import BaseFileReads
from coordinator.write.pool import each
from coordinator.write.rows import KEY, PARTITION, row_keys, split_by
from coordinator.write.tagging import DELETE, NEW, TARGET
from timeline.format.file_names import BaseFile, new_file_id
from timeline.format.schema_evolution import conform
from timeline.format.table_config import TableConfig


@dataclass
class FileWrite:
    """One file to write: its group, rows (with meta columns) and stat counters."""

    partition: str
    file_id: str
    rows: pa.Table
    prev_commit: str = "null"
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


def split_new(partition: str, rows: pa.Table, max_file_size: int) -> list[FileWrite]:
    """New file groups, as few as the target file size allows, evenly filled."""
    if rows.num_rows == 0:
        return []
    data_bytes = rows.drop_columns([KEY, PARTITION]).nbytes
    files = max(1, math.ceil(data_bytes / max_file_size))
    per_file = math.ceil(rows.num_rows / files)
    return [
        FileWrite(partition, new_file_id(), chunk, inserts=chunk.num_rows)
        for chunk in (rows.slice(start, per_file) for start in range(0, rows.num_rows, per_file))
    ]


def merge(
    reads: BaseFileReads,
    config: TableConfig,
    base: BaseFile,
    incoming: pa.Table | None,
    delete_keys: pa.Array,
    schema: pa.Schema | None = None,
) -> FileWrite:
    """Rewrite one file group in `schema`: old rows minus replaced/deleted keys, plus incoming.

    Only the incoming keys are hashed (the stored ones are probed against them), so
    the cost of a group follows the records that touch it, not a set of every key
    it stores.
    """
    old = reads.rows_of(base)
    if schema is not None:
        old = conform(old, schema, exact=False)  # stored rows: a widened column rounds, as readers read it
    old_keys = row_keys(old, config)
    incoming_keys = incoming.column(KEY).chunks if incoming is not None else []
    touching = pa.chunked_array([*incoming_keys, delete_keys], pa.string()).combine_chunks()
    replaced = pc.is_in(old_keys, value_set=touching)
    stored = old_keys.filter(replaced).combine_chunks()  # the keys this group holds that the records touch
    carried = old.filter(pc.invert(replaced))
    deletes = int(pc.sum(pc.is_in(delete_keys, value_set=stored)).as_py() or 0)
    write = FileWrite(base.partition, base.file_id, carried, prev_commit=base.instant, deletes=deletes)
    if incoming is not None and incoming.num_rows:
        is_update = pc.is_in(incoming.column(KEY), value_set=stored)
        if pc.all(is_update).as_py():  # the usual upsert: every record here updates a stored one
            updates, inserts = incoming, incoming.slice(0, 0)
        else:
            updates, inserts = incoming.filter(is_update), incoming.filter(pc.invert(is_update))
        write.rows = pa.concat_tables([carried, updates, inserts], promote_options="permissive")
        write.updates, write.inserts = updates.num_rows, inserts.num_rows
    return write


def top_up(reads: BaseFileReads, base: BaseFile, incoming: pa.Table, schema: pa.Schema | None) -> FileWrite:
    """Hudi's insert into a small file group: its stored rows carried, the new records after them, no key
    matched (an insert keeps duplicates, as Hudi's `hoodie.merge.allow.duplicate.on.inserts` does by default)."""
    old = reads.rows_of(base)
    if schema is not None:
        old = conform(old, schema, exact=False)
    rows = pa.concat_tables([old, incoming], promote_options="permissive")
    return FileWrite(base.partition, base.file_id, rows, prev_commit=base.instant, inserts=incoming.num_rows)


def fit(write: FileWrite, max_file_size: int) -> list[FileWrite]:
    """A rewritten group over the target size keeps what fits; its last new records start new groups.

    Rows are ordered carried, updated, inserted (see `merge`, `top_up`), so only inserts ever move.
    """
    if write.inserts == 0:
        return [write]
    size = write.rows.nbytes
    if size <= max_file_size:
        return [write]
    per_row = size / write.rows.num_rows
    keep = max(write.rows.num_rows - write.inserts, int(max_file_size / per_row))
    spilled = write.rows.num_rows - keep
    if spilled <= 0:
        return [write]
    moved = write.rows.slice(keep)  # new records: null commit times, so they get fresh meta columns
    write.rows, write.inserts = write.rows.slice(0, keep), write.inserts - spilled
    return [write, *split_new(write.partition, moved, max_file_size)]


def plan_group(
    target: str,
    group: pa.Table,
    bases: dict[str, BaseFile],
    schema: pa.Schema | None,
    reads: BaseFileReads,
    config: TableConfig,
    max_file_size: int,
) -> list[FileWrite]:
    """The files of the records tagged to one target: NEW ones start file groups, the rest rewrite the group."""
    gone = group.column(DELETE)
    delete_keys = pc.unique(group.filter(gone).column(KEY))
    records = group.filter(pc.invert(gone)).drop_columns([TARGET, DELETE])
    if target == NEW:
        return [w for p, part_rows in split_by(records, PARTITION) for w in split_new(p, part_rows, max_file_size)]
    merged = merge(reads, config, bases[target], records if records.num_rows else None, delete_keys, schema)
    return fit(merged, max_file_size)


def plan_tagged(
    tagged: pa.Table,
    bases: dict[str, BaseFile],
    schema: pa.Schema | None,
    reads: BaseFileReads,
    config: TableConfig,
    max_file_size: int,
    threads: int,
) -> list[FileWrite]:
    """The files of tagged records, every target group planned (`plan_group`) on the pool."""
    groups = list(split_by(tagged, TARGET))
    planned = each(lambda g: plan_group(*g, bases, schema, reads, config, max_file_size), groups, threads)
    return [write for writes in planned for write in writes]
