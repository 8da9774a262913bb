"""The `column_stats` records of a merge-on-read log file, as Hudi 0.15's append handle makes them
(`HoodieAppendHandle.processAppendResult`, `HoodieTableMetadataUtil.collectColumnRangeMetadata`): every top-level
field of the data blocks' schema, meta columns included, over the records of its data blocks only (a delete
block adds no row), with both sizes 0.

- `valueCount` counts every record; `nullCount` its nulls and, as Java's `canCompare` rules, every map value.
- Bounds are the Avro values as Java compares them: dates as days (`LocalDate.ofEpochDay`, no calendar detour,
  unlike a Parquet footer's), timestamps as the stored long in the field's unit, decimals upcast as for base
  files, floats from their values, -inf to +inf when a NaN is there (`hudi_values.float_bounds`). Nested fields get
  none.
- A log with a delete block and no data block gets Hudi's empty record per indexed column (no bounds, counts 0);
  a log of command blocks alone (a rollback's) gets none: Hudi indexes no rollback log, so its slice is never
  skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from timeline.format.avro_schema import avro_to_arrow
from timeline.hudi_log import BlockType, LogBlock, avro_records
from timeline.mdt.hudi_records import ColumnStats
from timeline.mdt.hudi_values import DATE, Wrapped, float_bounds, order_key, wrap


def log_column_stats(file_name: str, blocks: Sequence[LogBlock], indexed: Iterable[str]) -> list[ColumnStats]:
    """The statistics of each column of log `file_name` (its blocks, verified); `indexed`: the columns a log
    without a data block is recorded under (the table's meta and schema columns)."""
    tables = [_rows(block) for block in blocks if block.kind is BlockType.AVRO_DATA_BLOCK]
    if not tables:
        if any(block.kind is BlockType.DELETE_BLOCK for block in blocks):
            return [ColumnStats(file_name, column, None, None, 0, 0, 0, 0) for column in indexed]
        return []
    found: dict[str, ColumnStats] = {}
    for rows in tables:
        for field in rows.schema:
            stats = _column(file_name, field, rows.column(field.name))
            found[field.name] = _merged(found[field.name], stats) if field.name in found else stats
    return list(found.values())


def _rows(block: LogBlock) -> pa.Table:
    schema = avro_to_arrow(block.header["SCHEMA"], "a log block's schema")
    return pa.Table.from_pylist(avro_records(block), schema=schema)


def _column(file_name: str, field: pa.Field, values: pa.ChunkedArray) -> ColumnStats:
    nulls = len(values) if pa.types.is_map(field.type) else values.null_count
    low = high = None
    if pa.types.is_floating(field.type):
        low, high = float_bounds(values, field.type)
    elif _bounded(field.type) and values.null_count < len(values):
        extremes = pc.min_max(values)
        low, high = (_wrapped(extremes[end], field.type) for end in ("min", "max"))
    return ColumnStats(file_name, field.name, low, high, len(values), nulls, 0, 0)


def _bounded(dtype: pa.DataType) -> bool:
    return not (pa.types.is_nested(dtype) or pa.types.is_null(dtype))


def _wrapped(scalar: pa.Scalar, dtype: pa.DataType) -> Wrapped | None:
    if pa.types.is_date(dtype):
        return Wrapped(DATE, scalar.value)
    if pa.types.is_timestamp(dtype):
        return wrap(scalar.value, dtype)  # the stored long, in the field's own unit
    try:
        return wrap(scalar.as_py(), dtype)
    except (TypeError, ValueError, ArithmeticError):
        return None  # a decimal beyond the wrapper's decimal(30, 15), a type Hudi has no wrapper for


def _merged(first: ColumnStats, second: ColumnStats) -> ColumnStats:
    """Two data blocks' statistics of one column (`HoodieColumnRangeMetadata.merge`); a block without bounds
    leaves the column without them unless its values were all null."""

    def bound(a: Wrapped | None, b: Wrapped | None, count_b: int, lower: bool) -> Wrapped | None:
        if b is None:
            return a if count_b == 0 else None
        if a is None:
            return None if first.value_count > first.null_count else b
        if a.wrapper != b.wrapper:
            return None
        return min(a, b, key=order_key) if lower else max(a, b, key=order_key)

    filled = second.value_count - second.null_count
    return ColumnStats(
        first.file_name,
        first.column_name,
        bound(first.min_value, second.min_value, filled, True),
        bound(first.max_value, second.max_value, filled, False),
        first.value_count + second.value_count,
        first.null_count + second.null_count,
        0,
        0,
    )
