"""Row kernels every write step shares: the record key and partition path columns, splitting rows by a
column's values, and keeping one row per record. Pure functions of Arrow tables, so the Spark writer's
executors compute exactly what the local writer does."""

from __future__ import annotations

from collections.abc import Iterator
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

from coordinator.write.column_names import unused_name
from timeline.format import keys
from timeline.format.meta_fields import PARTITION_PATH, RECORD_KEY
from timeline.format.schema_evolution import conform
from timeline.format.table_config import TableConfig

KEY = RECORD_KEY
PARTITION = PARTITION_PATH
# `split_by` reorders rows by one take up to this size: a take joins a string column's chunks into one array,
# whose 32-bit offsets overflow past 2 GiB; larger inputs are filtered per value, chunk by chunk.
TAKE_BYTES = 1024 * 1024 * 1024


def with_keys(data: pa.Table, key_fields: list[str], partition_fields: list[str], hive_style: bool) -> pa.Table:
    """`data` with its record key and partition path columns, as every writer computes them."""
    data = data.append_column(KEY, keys.record_keys(data, key_fields))
    return data.append_column(PARTITION, keys.partition_paths(data, partition_fields, hive_style))


def key_typed(data: pa.Table, schema: pa.Schema, key_fields: list[str], partition_fields: list[str]) -> pa.Table:
    """`data` with its key and partition fields in the table's types (a delete's other columns may be anything),
    so their keys read as the stored records' do."""
    typed = [schema.field(name) for name in dict.fromkeys([*key_fields, *partition_fields]) if name in schema.names]
    return conform(data, pa.schema(typed))


def row_keys(rows: pa.Table, config: TableConfig) -> pa.ChunkedArray:
    """Keys of stored rows; files of tables without meta fields hold nulls there."""
    if config.populate_meta_fields and KEY in rows.column_names:
        return rows.column(KEY)
    return keys.record_keys(rows, config.record_key_fields)


def dedupe(rows: pa.Table, by: list[str], precombine_field: str | None) -> pa.Table:
    """Keep one row per value of the `by` columns: the largest precombine value, else the last row."""
    order = unused_name(rows.schema, "__order")  # any name may be an input column's
    rows = rows.append_column(order, pa.array(range(rows.num_rows)))
    sort = [(c, "ascending") for c in by]
    pre = precombine_field
    if pre and pre in rows.column_names:
        sort.append((pre, "descending"))
    sort.append((order, "descending"))
    rows = rows.sort_by(sort)
    if rows.num_rows:
        first = reduce(pc.or_, [changes(rows.column(c)) for c in by])
        mask = pa.concat_arrays([pa.array([True])] + list(first.chunks))
        rows = rows.filter(mask)
    return rows.sort_by(order).drop_columns([order])


def some_chunk(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """`column` with at least one chunk: a kernel or filter over no rows returns a chunked array of none,
    and `indices_nonzero` over one segfaults from pyarrow 14 to 25 (26 fixed it)."""
    return column if column.num_chunks else pa.chunked_array([pa.array([], column.type)], column.type)


def changes(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """For each row after the first, whether its value differs from the row before: the starts of the runs
    of a sorted column (one row has none, as one empty chunk)."""
    n = len(values)
    return some_chunk(pc.not_equal(values.slice(1), values.slice(0, max(n - 1, 0))))


def split_by(rows: pa.Table, column: str) -> Iterator[tuple[str, pa.Table]]:
    """The rows of each value of `column` (never null), values in sorted order, rows in their order.

    One stable sort, then a slice per run of equal values: an upsert splits by the file group
    each record goes to, so a filter of every row per value would cost rows x groups.
    """
    n = rows.num_rows
    if n == 0:
        return
    if rows.nbytes > TAKE_BYTES:
        for value in sorted(set(rows.column(column).to_pylist())):
            yield value, rows.filter(pc.equal(rows.column(column), value))
        return
    ordered = rows.take(pc.sort_indices(rows.column(column)))  # stable: ties keep their order
    values = ordered.column(column)
    ends = pc.indices_nonzero(changes(values)).to_pylist()
    for start, end in zip([0, *(e + 1 for e in ends)], [*(e + 1 for e in ends), n], strict=True):
        yield values[start].as_py(), ordered.slice(start, end - start)
