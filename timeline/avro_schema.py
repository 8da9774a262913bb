"""Arrow schema -> Avro schema JSON, for `extraMetadata.schema` of commits."""

from __future__ import annotations

import json
import re

import pyarrow as pa

from timeline.errors import BadInputError


def _avro_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"_{cleaned}"


def _decimal_size(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) - 1 < 10**precision - 1:
        size += 1
    return size


def _type(dtype: pa.DataType, name: str, namespace: str) -> object:
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_integer(dtype):
        return "long" if dtype.bit_width > 32 or dtype == pa.uint32() else "int"
    if pa.types.is_float32(dtype) or pa.types.is_float16(dtype):
        return "float"
    if pa.types.is_float64(dtype):
        return "double"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype):
        return "bytes"
    if pa.types.is_date(dtype):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(dtype):
        logical = "timestamp-millis" if dtype.unit in ("s", "ms") else "timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_decimal(dtype):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{name}",
            "size": _decimal_size(dtype.precision),
            "logicalType": "decimal",
            "precision": dtype.precision,
            "scale": dtype.scale,
        }
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return {"type": "array", "items": _nullable(dtype.value_type, name, namespace)}
    if pa.types.is_map(dtype):
        return {"type": "map", "values": _nullable(dtype.item_type, name, namespace)}
    if pa.types.is_struct(dtype):
        return _record(list(dtype), name, namespace)
    raise BadInputError(f"column {name!r}: Arrow type {dtype} has no Avro equivalent in Hudi tables")


def _nullable(dtype: pa.DataType, name: str, namespace: str) -> list:
    return ["null", _type(dtype, name, namespace)]


def _record(fields: list[pa.Field], name: str, namespace: str) -> dict:
    inner_ns = f"{namespace}.{name}"
    return {
        "type": "record",
        "name": _avro_name(name),
        "namespace": namespace,
        "fields": [{"name": f.name, "type": _nullable(f.type, f.name, inner_ns), "default": None} for f in fields],
    }


def arrow_to_avro(schema: pa.Schema, table_name: str) -> str:
    """Hudi's naming: record `<table>_record` in namespace `hoodie.<table>`."""
    record_name = f"{_avro_name(table_name)}_record"
    return json.dumps(_record(list(schema), record_name, f"hoodie.{_avro_name(table_name)}"), separators=(",", ":"))
