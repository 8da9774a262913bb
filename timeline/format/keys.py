"""Record keys and partition paths, computed as Hudi's key generators do.

Hudi 0.14/0.15 (`KeyGenUtils`): one record key field is its value as text, and
Hudi refuses a null or empty one; several are `f1:v1,f2:v2`, where a null value
is written `__null__` and an empty one `__empty__`, refused only when every
value is null or empty. A partition path is the values joined by `/` (`f=v`
hive style), a null or empty value being `__HIVE_DEFAULT_PARTITION__`.

Those encodings are not one-to-one: a `,` inside a value of a composite key, a
value that is one of the placeholders, or a `/` inside one value of a path of
several columns lets two different tuples make the same key or path, that is
one record. Such values are bad input naming the column and the value, so every
key written is exactly Hudi's and can be parsed back by Hudi's own splitting
(`KeyGenUtils.extractRecordKeys`, the Spark file index's partition values). A
null record key value stays bad input, as before; null and empty partition
values are one value, the default partition, as in Hudi, Hive and Spark.
"""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

from timeline.errors import BadInputError
from timeline.format import partition_path

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_PLACEHOLDER = "__null__"  # KeyGenUtils.NULL_RECORDKEY_PLACEHOLDER
EMPTY_PLACEHOLDER = "__empty__"  # KeyGenUtils.EMPTY_RECORDKEY_PLACEHOLDER
KEY_PARTS_SEPARATOR = ","  # between the `field:value` parts of a composite key
PLACEHOLDERS = pa.array([NULL_PLACEHOLDER, EMPTY_PLACEHOLDER])
PATH_SEPARATOR = "/"
# Why a value is refused; the Spark writer's SQL expressions raise the same words.
COMMA_REASON = "contains ',', which separates the fields of a record key (two different keys could become one record)"
SLASH_REASON = (
    "contains '/', which separates the values of a partition path of several columns"
    " (two different rows could get one path)"
)


def placeholder_reason(value: str) -> str:
    """Why a composite key value equal to one of Hudi's placeholders is refused."""
    meant = "a null" if value == NULL_PLACEHOLDER else "an empty"
    return f"is what Hudi writes for {meant} value in a record key of several fields (two keys could become one)"


def all_empty_reason(fields: list[str]) -> str:
    """`record key field 'a' ...` when every field of a composite key is empty, which Hudi refuses."""
    rest = ", ".join(repr(name) for name in fields[1:])
    return f"record key field {fields[0]!r} is empty, and so is every other key field ({rest})"


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


def _count(mask: pa.ChunkedArray) -> int:
    return pc.sum(mask).as_py() or 0


def _first(values: pa.ChunkedArray, mask: pa.ChunkedArray) -> str | None:
    """The first value where `mask` holds, or None."""
    return values.filter(mask)[0].as_py() if pc.any(mask).as_py() else None


def record_keys(table: pa.Table, fields: list[str]) -> pa.ChunkedArray:
    """`value` for one key field, `f1:v1,f2:v2` for several (an empty value `f:__empty__`).

    Null values, an empty single key, a composite key with every value empty,
    and composite key values that would make the key ambiguous are bad input.
    """
    parts = []
    for name in fields:
        values = _as_strings(table, name)
        nulls = values.null_count
        if nulls:
            raise BadInputError(f"record key field {name!r} is null in {nulls} row(s)")
        parts.append(values)
    if len(fields) == 1:
        empty = _count(pc.equal(parts[0], ""))
        if empty:
            raise BadInputError(f"record key field {fields[0]!r} is empty in {empty} row(s)")
        return parts[0]
    labelled = []
    for name, values in zip(fields, parts, strict=True):
        comma = _first(values, pc.match_substring(values, KEY_PARTS_SEPARATOR))
        if comma is not None:
            raise BadInputError(f"record key field {name!r} value {partition_path.shown(comma)} {COMMA_REASON}")
        taken = _first(values, pc.is_in(values, value_set=PLACEHOLDERS))
        if taken is not None:
            shown = partition_path.shown(taken)
            raise BadInputError(f"record key field {name!r} value {shown} {placeholder_reason(taken)}")
        written = pc.if_else(pc.equal(values, ""), EMPTY_PLACEHOLDER, values)
        labelled.append(pc.binary_join_element_wise(f"{name}:", written, ""))
    blank = _count(reduce(pc.and_, [pc.equal(values, "") for values in parts]))
    if blank:
        raise BadInputError(f"{all_empty_reason(fields)}, in {blank} row(s): Hudi refuses a key with no value")
    return pc.binary_join_element_wise(*labelled, KEY_PARTS_SEPARATOR)


def partition_paths(table: pa.Table, fields: list[str], hive_style: bool) -> pa.ChunkedArray:
    """`v1/v2` or `f1=v1/f2=v2`; empty for non-partitioned tables.

    Every distinct path is checked here, before any file of the write is made:
    a value that would not make a canonical partition path, or (with several
    columns) a value holding a `/`, is bad input naming its column.
    """
    if not fields:
        return pa.chunked_array([pa.array([""] * table.num_rows, pa.string())])
    parts = []
    for name in fields:
        values = _as_strings(table, name)
        slashed = _first(values, pc.match_substring(values, PATH_SEPARATOR)) if len(fields) > 1 else None
        if slashed is not None:
            raise BadInputError(f"partition column {name!r} value {partition_path.shown(slashed)} {SLASH_REASON}")
        values = pc.if_else(pc.or_kleene(pc.is_null(values), pc.equal(values, "")), DEFAULT_PARTITION, values)
        part = pc.binary_join_element_wise(f"{name}=", values, "") if hive_style else values
        _check_values(part, name, len(f"{name}=") if hive_style else 0)
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    paths = pc.binary_join_element_wise(*parts, PATH_SEPARATOR)
    partition_path.canonical_all(pc.unique(paths), f"partition columns {', '.join(fields)}")
    return paths


def _check_values(part: pa.ChunkedArray, column: str, prefix: int) -> None:
    """Each distinct path piece of one column (`prefix` = length of `name=`), named by its value."""
    for piece in partition_path.not_plain(pc.unique(part)):  # a plain piece is canonical on sight
        where = f"partition column {column!r} value {partition_path.shown(piece[prefix:])}"
        partition_path.canonical(piece, where)
