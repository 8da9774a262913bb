"""Input column names: what every Hudi reader can hold, and names the writers may use beside them."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa

from timeline.errors import BadInputError

RESERVED_PREFIX = "_tandem_"  # the writers' own columns (TARGET, DELETE, the Spark writer's tags)
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_input_columns(schema: pa.Schema) -> None:
    """Column names every Hudi reader can hold: Avro names, unique regardless of case (Spark matches
    names case-insensitively), none in the writers' own namespace. Nested fields too."""

    def check(fields: Iterable[pa.Field], where: str) -> None:
        seen: dict[str, str] = {}
        for f in fields:
            shown = f"{where}{f.name}"
            if not _AVRO_NAME.fullmatch(f.name):
                raise BadInputError(f"column {shown!r}: not a valid Avro field name ([A-Za-z_][A-Za-z0-9_]*)")
            if f.name.startswith(RESERVED_PREFIX):
                raise BadInputError(f"column {shown!r}: names starting with {RESERVED_PREFIX!r} are reserved")
            other = seen.setdefault(f.name.lower(), f.name)
            if other != f.name:
                raise BadInputError(
                    f"columns {other!r} and {f.name!r} differ only in case; Hudi readers match names case-insensitively"
                )
            nested = _nested_fields(f.type)
            if nested is not None:
                check(nested, f"{shown}.")

    check(schema, "")


def _nested_fields(dtype: pa.DataType) -> list[pa.Field] | None:
    if pa.types.is_struct(dtype):
        return list(dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _nested_fields(dtype.value_type)
    if pa.types.is_map(dtype):
        return _nested_fields(dtype.item_type)
    return None


def unused_name(schema: pa.Schema, stem: str) -> str:
    """`stem`, or `stem` with underscores appended until no column of `schema` has the name."""
    name = stem
    while name in schema.names:
        name += "_"
    return name
