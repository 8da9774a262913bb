"""Record keys and partition paths, computed as Hudi's key generators do."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from timeline import partition_path
from timeline.errors import BadInputError

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def _as_strings(table: pa.Table, column: str) -> pa.ChunkedArray:
    if column not in table.column_names:
        raise BadInputError(f"input has no column {column!r} (columns: {', '.join(table.column_names)})")
    values = table.column(column)
    if pa.types.is_boolean(values.type):
        return pc.if_else(values, "true", "false")
    try:
        return pc.cast(values, pa.string())
    except pa.ArrowNotImplementedError as err:
        raise BadInputError(f"column {column!r} of type {values.type} cannot be a key or partition field") from err


def record_keys(table: pa.Table, fields: list[str]) -> pa.ChunkedArray:
    """`value` for one key field, `f1:v1,f2:v2` for several; a null key is bad input."""
    parts = []
    for name in fields:
        values = _as_strings(table, name)
        nulls = values.null_count
        if nulls:
            raise BadInputError(f"record key field {name!r} is null in {nulls} row(s)")
        parts.append(values)
    if len(fields) == 1:
        return parts[0]
    labelled = [pc.binary_join_element_wise(f"{name}:", vals, "") for name, vals in zip(fields, parts, strict=True)]
    return pc.binary_join_element_wise(*labelled, ",")


def partition_paths(table: pa.Table, fields: list[str], hive_style: bool) -> pa.ChunkedArray:
    """`v1/v2` or `f1=v1/f2=v2`; empty for non-partitioned tables.

    Every distinct path is checked here, before any file of the write is made:
    a value that would not make a canonical partition path is bad input naming
    its column.
    """
    if not fields:
        return pa.chunked_array([pa.array([""] * table.num_rows, pa.string())])
    parts = []
    for name in fields:
        values = _as_strings(table, name)
        values = pc.if_else(pc.or_kleene(pc.is_null(values), pc.equal(values, "")), DEFAULT_PARTITION, values)
        part = pc.binary_join_element_wise(f"{name}=", values, "") if hive_style else values
        _check_values(part, name, len(f"{name}=") if hive_style else 0)
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    paths = pc.binary_join_element_wise(*parts, "/")
    partition_path.canonical_all(pc.unique(paths), f"partition columns {', '.join(fields)}")
    return paths


def _check_values(part: pa.ChunkedArray, column: str, prefix: int) -> None:
    """Each distinct path piece of one column (`prefix` = length of `name=`), named by its value."""
    for piece in partition_path.not_plain(pc.unique(part)):  # a plain piece is canonical on sight
        where = f"partition column {column!r} value {partition_path.shown(piece[prefix:])}"
        partition_path.canonical(piece, where)
