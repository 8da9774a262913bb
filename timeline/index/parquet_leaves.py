"""The leaf columns of an Arrow schema as parquet stores them: the one walk that names them.

The writer turns statistics off per leaf, Spark's input check looks at every leaf's type, and the column
statistics find a top-level column's leaf by counting the leaves before it; all three must agree with parquet.
"""

from __future__ import annotations

import pyarrow as pa


def leaf_columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """(parquet column path, type) of every leaf, named as pyarrow writes them (`s.x`, `l.list.element`)."""
    leaves = []
    for field in schema:
        for path, dtype in type_leaves(field.type):
            leaves.append((".".join([field.name, *path]), dtype))
    return leaves


def type_leaves(dtype: pa.DataType) -> list[tuple[list[str], pa.DataType]]:
    """(path below the column, type) of each parquet leaf a column of type `dtype` is stored as, in order."""
    if pa.types.is_struct(dtype):
        return [([f.name, *path], leaf) for f in dtype for path, leaf in type_leaves(f.type)]
    if _is_list(dtype):
        return [(["list", "element", *path], leaf) for path, leaf in type_leaves(dtype.value_type)]
    if pa.types.is_map(dtype):
        keys_ = [(["key_value", "key", *path], leaf) for path, leaf in type_leaves(dtype.key_type)]
        return keys_ + [(["key_value", "value", *path], leaf) for path, leaf in type_leaves(dtype.item_type)]
    return [([], dtype)]


def _is_list(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
        or pa.types.is_list_view(dtype)
        or pa.types.is_large_list_view(dtype)
    )
