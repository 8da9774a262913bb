"""Arrow schema <-> Avro schema JSON, for `extraMetadata.schema` of commits.

Arrow -> Avro writes the schema a commit records; Avro -> Arrow reads the table
schema back from the latest commit, as Hudi's writers (and Tandem's) record it.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from timeline.errors import BadInputError, CorruptInstantError

MAX_DECIMAL128_PRECISION = 38
ADJUST_TO_UTC = "adjust-to-utc"


def _avro_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"_{cleaned}"


def _decimal_size(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) - 1 < 10**precision - 1:
        size += 1
    return size


def _timestamp(dtype: pa.TimestampType) -> dict:
    """`timestamp-*`, with `adjust-to-utc` telling instants (a time zone) from wall-clock times (none).

    Avro's own `local-timestamp-*` is what Spark calls a wall-clock time, but Hudi
    0.14 has no such type and the `hudi` package cannot parse it; `adjust-to-utc`
    is how Iceberg marks the difference on a `timestamp-*`, and readers that do
    not know it read the column as the parquet file says.
    """
    unit = "millis" if dtype.unit in ("s", "ms") else "micros"
    return {"type": "long", "logicalType": f"timestamp-{unit}", ADJUST_TO_UTC: dtype.tz is not None}


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
        return _timestamp(dtype)
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


_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "enum": pa.string(),
}
_LOGICAL = {
    "date": pa.date32(),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
}


def _from_avro(node: object, named: dict[str, pa.DataType]) -> pa.DataType:
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"union {node} is not a nullable type")
        return _from_avro(branches[0], named)
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return _PRIMITIVES[node]
        if node in named:
            return named[node]
        raise ValueError(f"unknown Avro type {node!r}")
    kind, logical = node["type"], node.get("logicalType")
    if logical == "decimal":
        precision, scale = int(node["precision"]), int(node.get("scale", 0))
        wide = precision > MAX_DECIMAL128_PRECISION
        return pa.decimal256(precision, scale) if wide else pa.decimal128(precision, scale)
    if logical in ("timestamp-millis", "timestamp-micros") and node.get(ADJUST_TO_UTC) is False:
        return _LOGICAL[f"local-{logical}"]
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if kind == "array":
        return pa.list_(_from_avro(node["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), _from_avro(node["values"], named))
    if kind == "record":
        dtype = pa.struct([pa.field(f["name"], _from_avro(f["type"], named)) for f in node["fields"]])
        named[node["name"]] = named[f"{node.get('namespace', '')}.{node['name']}"] = dtype
        return dtype
    if kind == "fixed":
        return pa.binary()
    return _from_avro(kind, named)


def records_zones(text: str) -> bool:
    """Whether a schema says which timestamps are wall-clock times (Tandem's do; Hudi 0.14's have none)."""
    return ADJUST_TO_UTC in text


def avro_to_arrow(text: str, source: str = "commit schema") -> pa.Schema:
    """The Arrow schema of an Avro record schema JSON; one that is not a record of known types is corrupt."""
    try:
        dtype = _from_avro(json.loads(text), {})
    except (ValueError, KeyError, TypeError) as err:
        raise CorruptInstantError(f"{source} is not an Avro record schema Tandem reads: {err}") from err
    if not pa.types.is_struct(dtype):
        raise CorruptInstantError(f"{source} is not an Avro record schema")
    return pa.schema(list(dtype))
