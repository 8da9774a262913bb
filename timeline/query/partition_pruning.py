"""Partition pruning: which partitions may hold a row matching a filter, judged from their paths' values.

A partition is a file whose columns hold one value each, so the same three-valued evaluation that skips
files decides it. Tables have tens of thousands of partitions: their values are parsed once per partition
tuple and sorted, and evaluated a block at a time, so that a block no row of which can match costs one
evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from timeline.index.column_stats import type_kind
from timeline.io.lru import LruCache
from timeline.query.column_facts import Facts, facts_of_value, known_bound
from timeline.query.partition_filter import PARTITION_COLUMN, partition_candidates
from timeline.query.predicate import Expr, columns_of
from timeline.query.skipping import evaluate

# Sorted partitions are evaluated a block at a time: a block that may match splits into PARTITION_FANOUT
# blocks, down to PARTITION_ROWS evaluated one by one.
PARTITION_BLOCK, PARTITION_FANOUT, PARTITION_ROWS = 512, 8, 8


def prune_partitions(
    expr: Expr,
    partitions: Iterable[str],
    fields: list[str],
    types: Mapping[str, pa.DataType],
    hive_style: bool,
) -> list[str]:
    """The partitions that may hold a row satisfying `expr` (names as resolved), in their given order.

    `types`: the partition fields whose path values are exact (`partition_filter.typed_fields`).
    Each partition's candidate values (`partition_filter.partition_candidates`) are
    evaluated as a one-row file; a partition is kept when any candidate may match, and
    one whose path is undecided unless no row at all can match (`x = NULL`). The full
    filter is still applied to the rows.
    """
    source = partitions
    partitions = list(partitions)
    typed = {f: types[f] for f in fields if f in types}
    unknown = evaluate(expr, lambda column: None)[0]  # what a partition whose values are unknown may hold
    if not partitions or not columns_of(expr) & set(typed):
        return partitions if unknown else []
    mentioned = [f for f in fields if f in typed and f in columns_of(expr)]
    table, undecided = _sorted_candidates(source, partitions, list(fields), typed, hive_style, mentioned)
    kept = set(undecided) if unknown else set()
    blocks = [table.slice(start, PARTITION_BLOCK) for start in range(0, table.num_rows, PARTITION_BLOCK)]
    while blocks:
        block = blocks.pop()
        if block.num_rows > 1 and not evaluate(expr, _block_facts(block, typed, mentioned[0]).get)[0]:
            continue
        if block.num_rows > PARTITION_ROWS:
            size = -(-block.num_rows // PARTITION_FANOUT)
            blocks += [block.slice(start, size) for start in range(0, block.num_rows, size)]
            continue
        columns = [block.column(n).to_pylist() for n in block.column_names]
        for partition, *values in zip(*columns, strict=True):
            if partition not in kept:
                given = {n: facts_of_value(v, typed[n]) for n, v in zip(mentioned, values, strict=True)}
                if evaluate(expr, given.get)[0]:
                    kept.add(partition)
    return [p for p in partitions if p in kept]


CANDIDATE_CACHE_ENTRIES = 8
_CANDIDATES: LruCache[tuple, tuple[Iterable[str], pa.Table, list[str]]] = LruCache(CANDIDATE_CACHE_ENTRIES)


def _sorted_candidates(
    source: Iterable[str],
    partitions: list[str],
    fields: list[str],
    typed: Mapping[str, pa.DataType],
    hive_style: bool,
    mentioned: list[str],
) -> tuple[pa.Table, list[str]]:
    """Each partition's typed candidate values of the `mentioned` fields, sorted by the first, and the
    partitions whose paths are undecided. Kept per partition tuple (immutable, so its identity names its
    content, and held here so the identity is not reused): a process plans every later query without
    parsing 10,000 paths again."""
    key = (id(source), tuple(fields), tuple((f, str(t)) for f, t in typed.items()), hive_style, tuple(mentioned))
    found = _CANDIDATES.get(key) if isinstance(source, tuple) else None
    if found is not None and found[0] is source:
        return found[1], found[2]
    table, undecided = partition_candidates(partitions, fields, dict(typed), hive_style)
    table = table.select([PARTITION_COLUMN, *mentioned])
    table = table.take(pc.sort_indices(table, [(mentioned[0], "ascending", "at_end")]))
    if isinstance(source, tuple):
        _CANDIDATES.put(key, (source, table, undecided))
    return table, undecided


def _block_facts(block: pa.Table, typed: Mapping[str, pa.DataType], ordered: str) -> dict[str, Facts | None]:
    """One fact per column over a block of partitions' values, as if the block were one file: a block no
    row of which can match is pruned with one evaluation (its rows sorted, blocks are narrow).

    Rows are sorted by column `ordered` (nulls last), in Arrow's order, which for every
    type a path gives back exactly is the values' own: its bounds are its first and last value.
    """
    out: dict[str, Facts | None] = {}
    for name in block.column_names[1:]:
        dtype, column = typed[name], block.column(name)
        kind = type_kind(dtype)
        if kind is None:
            out[name] = None
            continue
        count = len(column) - column.null_count
        if name == ordered:
            ends = [column[0].as_py(), column[count - 1].as_py()] if count else []
        else:
            ends = [v for v in column.to_pylist() if v is not None]
        bounds = [known_bound(v, kind, dtype) for v in ends]
        known = None not in bounds and bool(bounds)
        out[name] = Facts(
            kind,
            dtype,
            min(bounds) if known else None,
            max(bounds) if known else None,
            values=count > 0,
            nan=False,
            nulls=count < len(column),
        )
    return out
