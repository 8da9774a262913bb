"""Tagging (Hudi's index lookup): the file group each incoming record goes to, and the copies it deletes.

An upsert or delete must rewrite exactly the groups holding its keys; new keys top up a small group.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from coordinator.config import CoordinatorConfig
from coordinator.write.base_reads import BaseFileReads
from coordinator.write.bloom_index import bloom_candidates
from coordinator.write.column_names import unused_name
from coordinator.write.pool import each
from coordinator.write.rows import KEY, PARTITION, split_by
from timeline.format.file_names import BaseFile
from timeline.format.fs_view import FileSystemView
from timeline.format.table_config import TableConfig
from timeline.metrics import METRICS, TAGGING_FILES_SKIPPED

TARGET = "_tandem_target"  # the file id a tagged record goes to; NEW for records that start new file groups
DELETE = "_tandem_delete"  # a tagged row that deletes its key from TARGET rather than writing it there
NEW = ""


def tag(
    operation: str,
    rows: pa.Table,
    view: FileSystemView,
    reads: BaseFileReads,
    coordinator: CoordinatorConfig,
    small_file_limit: int,
    threads: int,
    no_small: frozenset[str] = frozenset(),
) -> tuple[dict[str, BaseFile], pa.Table]:
    """The simple index: every record with the file group it goes to (TARGET) and the copies it deletes.

    The index reads the keys of the latest base files of the partitions the
    records fall in, or of every partition under a global index. Returns the
    base files by file id, and `rows` tagged: one row per file group a record
    writes to (NEW when it starts one) and one DELETE row per copy it removes.
    New records never top up a group of `no_small` (merge-on-read groups with logs).
    """
    partitions = set(pc.unique(rows.column(PARTITION)).to_pylist())
    glob = coordinator.global_index
    files = [f for f in view.latest_base_files() if glob or f.partition in partitions]
    candidates = _may_hold(reads.table.config, coordinator, view, files, rows)
    held = each(lambda b: reads.keys_of(b, coordinator.bloom_index), candidates, threads)
    small = small_groups([f for f in files if f.file_id not in no_small], small_file_limit)
    if glob:
        tagged = _tag_anywhere(operation, rows, candidates, held, small, coordinator.update_partition_path)
    else:
        tagged = _tag_in_partition(operation, rows, candidates, held, small)
    return {f.file_id: f for f in files}, tagged


def _tag_in_partition(
    operation: str, rows: pa.Table, files: list[BaseFile], held: list[pa.ChunkedArray], small: dict[str, str]
) -> pa.Table:
    """The simple index, as a hash join per partition of the records' keys (the small side, hashed) with the
    keys its files hold: a record updates (or deletes from) every file of its partition holding its key; a
    new one goes to its partition's small group, else NEW. Rows come out in input order, a record's files in
    the order of `files`."""
    order = unused_name(rows.schema, "__row")
    found = unused_name(rows.schema, "__found")
    records = pa.table({KEY: rows.column(KEY), PARTITION: rows.column(PARTITION), order: np.arange(rows.num_rows)})
    keep = "inner" if operation == "delete" else "right outer"
    pieces = []
    for partition, part in split_by(records, PARTITION):
        mine = [i for i, f in enumerate(files) if f.partition == partition]
        located = pa.table(
            {
                KEY: pa.chunked_array([c for i in mine for c in held[i].chunks], pa.string()),
                found: np.repeat(np.array(mine, np.int32), [len(held[i]) for i in mine]),
            }
        )
        pieces.append(located.join(part.select([KEY, order]), KEY, join_type=keep).select([order, found]))
    joined = (
        pa.concat_tables(pieces)
        if pieces
        else pa.table({order: pa.array([], pa.int64()), found: pa.array([], pa.int32())})
    )
    joined = joined.sort_by([(order, "ascending"), (found, "ascending")])
    file_ids = pa.array([f.file_id for f in files], pa.string())
    targets = pc.take(file_ids, joined.column(found))
    tagged = rows.take(joined.column(order))
    if operation != "delete":
        new_target = pa.array([*small.values(), NEW], pa.string())
        slot = pc.index_in(tagged.column(PARTITION), value_set=pa.array(list(small), pa.string()))
        targets = pc.coalesce(targets, pc.take(new_target, pc.fill_null(slot, len(small))))
    tagged = tagged.append_column(TARGET, targets)
    return tagged.append_column(DELETE, pa.repeat(pa.scalar(operation == "delete"), tagged.num_rows))


def _tag_anywhere(
    operation: str,
    rows: pa.Table,
    files: list[BaseFile],
    held: list[pa.ChunkedArray],
    small: dict[str, str],
    update_partition_path: bool,
) -> pa.Table:
    """The global index: a key is one record wherever it is, so each record is routed by `route`."""
    located: dict[str, list[BaseFile]] = defaultdict(list)
    for base, keys in zip(files, held, strict=True):
        for key in keys.to_pylist():
            located[key].append(base)
    tags: list[tuple[int, str, str, bool]] = []  # (row, target file id, partition path, deletes)
    records = zip(rows.column(KEY).to_pylist(), rows.column(PARTITION).to_pylist(), strict=True)
    for i, (key, partition) in enumerate(records):
        found = sorted(located.get(key, []), key=lambda b: (b.partition, b.file_id))
        updates, deletes, partition = route(operation, found, partition, True, update_partition_path)
        if not updates and operation != "delete":
            tags.append((i, small.get(partition, NEW), partition, False))
        tags += [(i, b.file_id, partition, False) for b in updates]
        tags += [(i, b.file_id, b.partition, True) for b in deletes]
    take, targets, paths, deleted = (list(c) for c in zip(*tags, strict=True)) if tags else ([], [], [], [])
    tagged = rows.take(pa.array(take, pa.int64()))
    tagged = tagged.set_column(tagged.schema.get_field_index(PARTITION), PARTITION, pa.array(paths, pa.string()))
    tagged = tagged.append_column(TARGET, pa.array(targets, pa.string()))
    return tagged.append_column(DELETE, pa.array(deleted, pa.bool_()))


def _may_hold(
    config: TableConfig, coordinator: CoordinatorConfig, view: FileSystemView, files: list[BaseFile], rows: pa.Table
) -> list[BaseFile]:
    """The files the bloom index cannot rule out for the incoming keys (all of them without the index)."""
    if not coordinator.bloom_index or not files:
        return files
    partitions = None if coordinator.global_index else rows.column(PARTITION)
    candidates = bloom_candidates(config, view, files, rows.column(KEY), partitions)
    METRICS.incr(TAGGING_FILES_SKIPPED, len(files) - len(candidates))
    return candidates


def small_groups(files: list[BaseFile], small_file_limit: int) -> dict[str, str]:
    """Per partition, its smallest file group below the small-file limit: where an upsert's new keys go,
    so that file groups (and what the index must open) stay few however many upserts a table takes."""
    smallest: dict[str, BaseFile] = {}
    for f in files:
        if f.size < small_file_limit and (
            f.partition not in smallest
            or (f.size, f.file_id) < (smallest[f.partition].size, smallest[f.partition].file_id)
        ):
            smallest[f.partition] = f
    return {p: f.file_id for p, f in smallest.items()}


def route(
    operation: str, found: list[BaseFile], partition: str, global_index: bool, update_partition_path: bool
) -> tuple[list[BaseFile], list[BaseFile], str]:
    """Where one record goes, given the latest base files holding its key (sorted by partition, file id).

    Returns the files it updates, the files it is deleted from, and its partition
    path. Under the simple index a record is (key, partition): only files of its
    own partition count. Under the global index a key is one record wherever it
    is: a delete removes every copy; an upsert into a new partition moves the
    record (deleted from the old one) when `update_partition_path`, else updates
    it where it is (the first partition holding it), keeping that partition path.
    """
    here = [b for b in found if b.partition == partition]
    elsewhere = [b for b in found if b.partition != partition] if global_index else []
    if operation == "delete":
        return [], here + elsewhere, partition
    if elsewhere and not here and not update_partition_path:
        stay = elsewhere[0].partition
        return [b for b in elsewhere if b.partition == stay], [], stay
    return here, elsewhere, partition
