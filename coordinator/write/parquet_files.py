"""The one place Tandem writes a data file's parquet, and the leaf walk that names its columns as parquet
does (the writer turns statistics off per leaf; Spark's input check looks at every leaf's type)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq


def write_parquet(table: pa.Table, out: pa.NativeFile, row_group_size: int) -> pq.FileMetaData:
    """The one place Tandem writes a data file.

    Float and double columns (nested ones too) get neither min/max statistics nor
    dictionary pages. pyarrow's statistics leave NaN out and tell -0.0 from 0.0,
    and a dictionary holds -0.0 and 0.0 as different values, so a reader that
    skips row groups by them (Spark's pushdown: `f > 5` drops a NaN, `f = 0`
    drops a -0.0) would lose rows SQL says match.
    """
    exact = [path for path, dtype in leaf_columns(table.schema) if not pa.types.is_floating(dtype)]
    with pq.ParquetWriter(out, table.schema, write_statistics=exact, use_dictionary=exact) as writer:
        writer.write_table(table, row_group_size=row_group_size)
    return writer.writer.metadata


def leaf_columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """(parquet column path, type) of every leaf, named as pyarrow writes them (`s.x`, `l.list.element`)."""
    leaves = []
    for field in schema:
        for path, dtype in _leaves(field.type):
            leaves.append((".".join([field.name, *path]), dtype))
    return leaves


def _leaves(dtype: pa.DataType) -> list[tuple[list[str], pa.DataType]]:
    if pa.types.is_struct(dtype):
        return [([f.name, *path], leaf) for f in dtype for path, leaf in _leaves(f.type)]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return [(["list", "element", *path], leaf) for path, leaf in _leaves(dtype.value_type)]
    if pa.types.is_map(dtype):
        keys_ = [(["key_value", "key", *path], leaf) for path, leaf in _leaves(dtype.key_type)]
        return keys_ + [(["key_value", "value", *path], leaf) for path, leaf in _leaves(dtype.item_type)]
    return [([], dtype)]
