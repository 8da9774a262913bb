"""Arrow types as Hive's type strings, as Hudi's sync (`HiveSchemaUtil.convertField`) writes a table's columns to
a Hive-style catalog, and which changes of a column's type it takes (docs/hudi-catalog-sync-format.md).

Decided: timestamps are `timestamp`, as Hudi writes them with `hoodie.datasource.hive_sync.support_timestamp=true`
(its default, `bigint`, serves Hive versions that read no Parquet timestamp; Spark, Trino and Athena read them)."""

from __future__ import annotations

import pyarrow as pa

from timeline.errors import BadInputError

# The type changes Hudi's sync lets through (`HiveSchemaUtil.isSchemaTypeUpdateAllowed`: int to bigint, float to
# double, and any change between types that both hold a struct); any other would be refused half way, with
# `HoodieHiveSyncException`: files the catalog's readers cannot read as the new type.
WIDENINGS = {("int", "bigint"), ("float", "double")}


def hive_type(arrow: pa.DataType, where: str = "column") -> str:
    """The Hive type string of an Arrow type; BadInputError for one no Hive-style catalog can hold."""
    simple = _simple(arrow)
    if simple is not None:
        return simple
    if pa.types.is_decimal(arrow):
        return f"decimal({arrow.precision},{arrow.scale})"
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return f"array<{hive_type(arrow.value_type, where)}>"
    if pa.types.is_map(arrow):
        return f"map<{hive_type(arrow.key_type, where)},{hive_type(arrow.item_type, where)}>"
    if pa.types.is_struct(arrow):
        fields = ",".join(f"{f.name}:{hive_type(f.type, where)}" for f in arrow)
        return f"struct<{fields}>"
    raise BadInputError(f"{where} has type {arrow}, which a Hive-style catalog cannot hold")


def _simple(arrow: pa.DataType) -> str | None:
    if pa.types.is_boolean(arrow):
        return "boolean"
    if pa.types.is_int8(arrow) or pa.types.is_int16(arrow) or pa.types.is_int32(arrow):
        return "int"  # Parquet stores them as INT32, which Hudi's sync maps to int
    if pa.types.is_uint8(arrow) or pa.types.is_uint16(arrow):
        return "int"
    if pa.types.is_int64(arrow) or pa.types.is_uint32(arrow):
        return "bigint"
    if pa.types.is_float32(arrow):
        return "float"
    if pa.types.is_float64(arrow):
        return "double"
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "string"
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow) or pa.types.is_fixed_size_binary(arrow):
        return "binary"
    if pa.types.is_date(arrow):
        return "date"
    if pa.types.is_timestamp(arrow):
        return "timestamp"
    return None


def change_allowed(old: str, new: str) -> bool:
    """Whether a catalog column of type `old` may become `new`, as Hudi's sync decides it."""
    return old == new or (old, new) in WIDENINGS or ("struct" in old and "struct" in new)
