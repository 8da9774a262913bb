"""Schema evolution on write: which incoming schema a table accepts, and what its schema becomes.

Hudi's rules (schema evolution on write, 0.14): a column missing from a batch
is written as nulls of the table's type; a new column is added, nullable, after
the existing ones; a column's type may only be promoted. A narrower incoming
type is cast to the table's (a long column takes ints; a string column takes
numbers; string and bytes take each other), and a wider one widens the table
(int -> long -> float -> double, decimal(p, s) -> decimal with no fewer integer
digits nor fewer fractional digits, int and long -> a decimal wide enough).
Widening rewrites no file: older files keep their narrower type and readers
cast them (`union`). Anything else (a number column given strings, a date
given strings, a changed struct) is bad input, refused before a file is written.

Types are compared in their canonical form, the Arrow twin of the Avro type a
commit records (int8 and int16 are Avro ints, timestamps are microseconds,
large and view types are plain), so a schema read back from a commit and one
read from a file agree.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from timeline.errors import BadInputError

INT_DIGITS = {32: 10, 64: 19}  # decimal integer digits an int / long needs
ALLOWED = "int -> long -> float -> double, wider decimals, numbers into string columns, string <-> bytes"


def canonical_type(dtype: pa.DataType) -> pa.DataType:
    """The Arrow type Tandem writes for `dtype`: the one its Avro type reads back as."""
    if pa.types.is_dictionary(dtype):
        return canonical_type(dtype.value_type)
    if pa.types.is_integer(dtype):
        narrow = dtype.bit_width < 32 or dtype == pa.int32()
        return pa.int32() if narrow else pa.int64()
    if pa.types.is_float16(dtype):
        return pa.float32()
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return pa.string()
    if pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype) or pa.types.is_binary_view(dtype):
        return pa.binary()
    if pa.types.is_date(dtype):
        return pa.date32()
    if pa.types.is_timestamp(dtype):
        return pa.timestamp("us", tz="UTC" if dtype.tz else None)
    if pa.types.is_decimal(dtype) and dtype.precision <= 38:
        return pa.decimal128(dtype.precision, dtype.scale)
    if _is_list(dtype):
        return pa.list_(canonical_type(dtype.value_type))
    if pa.types.is_map(dtype):
        return pa.map_(canonical_type(dtype.key_type), canonical_type(dtype.item_type))
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, canonical_type(f.type)) for f in dtype])
    return dtype


def canonical_schema(schema: pa.Schema) -> pa.Schema:
    """Every field canonical and nullable (Hudi's fields are all `["null", type]`)."""
    return pa.schema([pa.field(f.name, canonical_type(f.type)) for f in schema])


def evolve(table: pa.Schema | None, incoming: pa.Schema) -> pa.Schema:
    """The table's schema after a write of `incoming`: its columns widened as needed, new ones appended.

    Raises BadInputError naming the column and both types when a change is not a promotion.
    """
    incoming = canonical_schema(incoming)
    for field in incoming:
        if pa.types.is_null(field.type) and (table is None or field.name not in table.names):
            raise BadInputError(f"column {field.name!r} holds only nulls, so it has no type to add to the table")
    if table is None:
        return incoming
    table = canonical_schema(table)
    fields = [
        pa.field(f.name, merged_type(f.name, f.type, incoming.field(f.name).type)) if f.name in incoming.names else f
        for f in table
    ]
    return pa.schema(fields + [f for f in incoming if f.name not in table.names])


def with_zones_of(schema: pa.Schema, written: pa.Schema) -> pa.Schema:
    """`schema` with each timestamp column zoned (an instant) or not (a wall-clock time) as `written` stores it.

    For a commit schema that does not say: Avro's `timestamp-micros` is an instant
    to Hudi, but a table may hold wall-clock times under it (Tandem before it
    recorded `adjust-to-utc`).
    """
    fields = []
    for field in schema:
        stored = written.field(field.name).type if field.name in written.names else None
        if pa.types.is_timestamp(field.type) and stored is not None and pa.types.is_timestamp(stored):
            field = field.with_type(pa.timestamp(field.type.unit, tz="UTC" if stored.tz else None))
        fields.append(field)
    return pa.schema(fields)


def union(schemas: Iterable[pa.Schema]) -> pa.Schema | None:
    """The schema that reads every file of a table, given their schemas oldest first (readers)."""
    result = None
    for schema in schemas:
        result = evolve(result, pa.schema([f for f in schema if not pa.types.is_null(f.type)]))
    return result


def merged_type(path: str, table: pa.DataType, incoming: pa.DataType) -> pa.DataType:
    """The column's type after the write: the table's, or the incoming one when that widens it."""
    if table == incoming or pa.types.is_null(incoming):
        return table
    if pa.types.is_struct(table) and pa.types.is_struct(incoming):
        if [f.name for f in table] != [f.name for f in incoming]:
            raise _refused(path, table, incoming, "a struct's fields cannot change")
        pairs = zip(table, incoming, strict=True)
        return pa.struct([pa.field(t.name, merged_type(f"{path}.{t.name}", t.type, i.type)) for t, i in pairs])
    if _is_list(table) and _is_list(incoming):
        return pa.list_(merged_type(f"{path}[]", table.value_type, incoming.value_type))
    if pa.types.is_map(table) and pa.types.is_map(incoming) and table.key_type == incoming.key_type:
        return pa.map_(table.key_type, merged_type(f"{path}{{}}", table.item_type, incoming.item_type))
    if promotes(incoming, table) or _casts_into(incoming, table):
        return table
    if promotes(table, incoming):
        return incoming
    raise _refused(path, table, incoming, f"allowed: {ALLOWED}")


def promotes(narrow: pa.DataType, wide: pa.DataType) -> bool:
    """Every value of `narrow` is a value of `wide`: the table may widen from `narrow` to `wide`."""
    if pa.types.is_int32(narrow):
        return wide in (pa.int64(), pa.float32(), pa.float64()) or _decimal_holds(wide, INT_DIGITS[32], 0)
    if pa.types.is_int64(narrow):
        return wide in (pa.float32(), pa.float64()) or _decimal_holds(wide, INT_DIGITS[64], 0)
    if pa.types.is_float32(narrow):
        return pa.types.is_float64(wide)
    if pa.types.is_decimal(narrow):
        return _decimal_holds(wide, narrow.precision - narrow.scale, narrow.scale)
    return False


def _casts_into(incoming: pa.DataType, table: pa.DataType) -> bool:
    """Incoming values the table's column takes as they are written, the table's type unchanged."""
    if pa.types.is_string(table):
        return pa.types.is_integer(incoming) or pa.types.is_floating(incoming) or pa.types.is_binary(incoming)
    return pa.types.is_binary(table) and pa.types.is_string(incoming)


def _decimal_holds(dtype: pa.DataType, integer_digits: int, scale: int) -> bool:
    return pa.types.is_decimal(dtype) and dtype.scale >= scale and dtype.precision - dtype.scale >= integer_digits


def _is_list(dtype: pa.DataType) -> bool:
    return pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype)


def _refused(path: str, table: pa.DataType, incoming: pa.DataType, why: str) -> BadInputError:
    return BadInputError(f"column {path!r}: the table has {table}, the input has {incoming} ({why})")


def conform(data: pa.Table, schema: pa.Schema, exact: bool = True) -> pa.Table:
    """`data` in `schema`: its columns cast, missing ones null; columns `schema` lacks follow, unchanged.

    Incoming values are `exact`: one the cast cannot carry exactly (nanoseconds,
    an integer past 2^53 as a double, bytes that are not UTF-8 as a string) is bad
    input. Stored values are not: a long column widened to double reads (and is
    rewritten) rounded, as every reader of the widened table reads it.
    """
    if all(data.schema.get_field_index(f.name) >= 0 and data.schema.field(f.name).equals(f, True) for f in schema):
        extras = [name for name in data.column_names if name not in schema.names]
        ordered = data.select([*schema.names, *extras])  # already conforming: only the order changes
        return ordered.replace_schema_metadata(None)  # as below: a file's footer metadata is not carried over
    columns, fields = [], []
    for field in schema:
        if field.name in data.column_names:
            columns.append(_cast(data.column(field.name), field, exact))
        else:
            columns.append(pa.chunked_array([pa.nulls(data.num_rows, field.type)], field.type))
        fields.append(field)
    for name in data.column_names:
        if name not in schema.names:
            columns.append(data.column(name))
            fields.append(data.schema.field(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _cast(column: pa.ChunkedArray, field: pa.Field, exact: bool) -> pa.ChunkedArray:
    if column.type == field.type:
        return column
    try:
        return column.cast(field.type, safe=exact)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        reason = str(err).splitlines()[0]
        message = f"column {field.name!r}: cannot write {column.type} values as {field.type}: {reason}"
        raise BadInputError(message) from err
