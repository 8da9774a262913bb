"""Typed partition values recovered from partition paths, for pruning a filter with the columns' own types.

A partition path holds its values as text (`timeline.format.keys.partition_paths`), so
a filter evaluated on the text compares strings where the rows compare numbers
or dates, and cannot see the nulls in the default partition. This module turns
each path back into the typed values whose rows it may hold; any engine can then
evaluate the partition part of a filter on them and keep a partition when any of
its candidates passes. A path that does not parse back to exactly itself is
undecided and always kept.
"""

from __future__ import annotations

import itertools
import re

import pyarrow as pa
import pyarrow.compute as pc

from timeline.errors import BadInputError
from timeline.format.keys import DEFAULT_PARTITION, partition_paths

PARTITION_COLUMN = "__partition"


def typed_fields(fields: list[str], schema: pa.Schema | None) -> dict[str, pa.DataType]:
    """The partition fields whose values a path gives back exactly, with their types in the table schema.

    A field missing from the data (or of a type not listed here) is left out: a
    filter on it cannot be decided from the paths.
    """
    if schema is None:
        return {}
    return {f: schema.field(f).type for f in fields if f in schema.names and _recoverable(schema.field(f).type)}


def _recoverable(kind: pa.DataType) -> bool:
    """Types whose text in a path is exact and one-to-one, also for values a file wrote in a narrower type.

    Under `timeline.format.schema_evolution`'s promotions an int read as long or decimal
    keeps its value, and one whose text changes (5 as decimal(4, 2) prints 5.00)
    is undecided. Not floats: a float column promoted to double reads 0.1f as
    0.10000000149011612 while its path still says 0.1. Not nanosecond timestamps:
    Spark cannot read them.
    """
    if pa.types.is_timestamp(kind):
        return kind.unit != "ns"
    return (
        pa.types.is_signed_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_date32(kind)
        or pa.types.is_decimal(kind)
    )


def path_values(partition: str, fields: list[str], hive_style: bool) -> list[str] | None:
    """The text value of each field in a partition path; None when the path does not split into exactly them.

    A value holding `/` makes more segments than fields, so a path that splits
    into exactly one segment per field (with the right `field=` prefixes) holds
    no such value.
    """
    segments = partition.split("/")
    if len(segments) != len(fields):
        return None
    if not hive_style:
        return segments
    values = []
    for field, segment in zip(fields, segments, strict=True):
        prefix = f"{field}="
        if not segment.startswith(prefix):
            return None
        values.append(segment[len(prefix) :])
    return values


def value_candidates(text: str, kind: pa.DataType) -> list | None:
    """Every value of `kind` whose path text is `text`; None when `text` is not exactly such a text.

    The default partition holds nulls and, for strings, the empty string and the
    string `__HIVE_DEFAULT_PARTITION__` itself (the writer maps all three there).
    """
    if text == DEFAULT_PARTITION:
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return [None, "", DEFAULT_PARTITION]
        return [None]
    try:
        value = pa.array([text]).cast(kind)
        if partition_paths(pa.table({"v": value}), ["v"], False).to_pylist() != [text]:
            return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, BadInputError):
        return None
    return value.to_pylist()


def partition_candidates(
    partitions: list[str], fields: list[str], types: dict[str, pa.DataType], hive_style: bool
) -> tuple[pa.Table, list[str]]:
    """One row per (partition, combination of its candidate values) over the typed fields, and the undecided paths.

    The table's columns are `__partition` and the fields of `types`, typed as in
    the table schema, so an engine evaluates a filter on them with the same casts
    as on the rows. Paths whose every value casts and prints back exactly take one
    vectorized pass; the others (default partitions, odd texts) go one by one.
    """
    typed = [f for f in fields if f in types]
    schema = pa.schema([pa.field(PARTITION_COLUMN, pa.string()), *(pa.field(f, types[f]) for f in typed)])
    paths = pa.array(partitions, pa.string())
    texts = pc.extract_regex(paths, _path_pattern(fields, hive_style)) if partitions else None
    if texts is None or not typed:
        return _candidates_one_by_one(partitions, fields, types, hive_style, schema)
    exact = pc.is_valid(texts)
    columns = {}
    for i, name in enumerate(fields):
        if name not in types:
            continue
        text = pc.fill_null(pc.struct_field(texts, [i]), DEFAULT_PARTITION)
        try:
            values = text.cast(types[name], safe=True)
            printed = partition_paths(pa.table({"v": pc.if_else(exact, values, None)}), ["v"], False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, BadInputError):
            return _candidates_one_by_one(partitions, fields, types, hive_style, schema)
        exact = pc.and_(exact, pc.and_(pc.not_equal(text, DEFAULT_PARTITION), pc.equal(printed, text)))
        columns[name] = values
    exact = pc.fill_null(exact, False)
    fast = pa.Table.from_arrays([paths.filter(exact), *(columns[f].filter(exact) for f in typed)], schema=schema)
    rest = paths.filter(pc.invert(exact)).to_pylist()
    slow, undecided = _candidates_one_by_one(rest, fields, types, hive_style, schema)
    return pa.concat_tables([fast, slow]), undecided


def _path_pattern(fields: list[str], hive_style: bool) -> str:
    """A regex whose groups are a path's field values, matching exactly the paths `path_values` splits."""
    segments = [(re.escape(f"{f}=") if hive_style else "") + f"(?P<v{i}>[^/]*)" for i, f in enumerate(fields)]
    return "^" + "/".join(segments) + "$"


def _candidates_one_by_one(
    partitions: list[str], fields: list[str], types: dict[str, pa.DataType], hive_style: bool, schema: pa.Schema
) -> tuple[pa.Table, list[str]]:
    typed = [f for f in fields if f in types]
    texts = {p: path_values(p, fields, hive_style) for p in partitions}
    split = {p: dict(zip(fields, t, strict=True)) for p, t in texts.items() if t is not None}
    choices = {f: _candidates_of(sorted({values[f] for values in split.values()}), types[f]) for f in typed}
    rows: list[tuple] = []
    undecided = [p for p, t in texts.items() if t is None]
    for partition, values in split.items():
        options = [choices[f][values[f]] for f in typed]
        if any(o is None for o in options):
            undecided.append(partition)
        else:
            rows += [(partition, *combination) for combination in itertools.product(*options)]
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays = [pa.array(column, f.type) for column, f in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema), undecided


def _candidates_of(texts: list[str], kind: pa.DataType) -> dict[str, list | None]:
    """`value_candidates` of many texts of one field: cast and printed back at once, one by one only on a failure."""
    regular = [t for t in texts if t != DEFAULT_PARTITION]
    try:
        values = pa.array(regular, pa.string()).cast(kind)
        printed = partition_paths(pa.table({"v": values}), ["v"], False).to_pylist() if regular else []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, BadInputError):
        return {t: value_candidates(t, kind) for t in texts}
    found = {t: [v] if back == t else None for t, v, back in zip(regular, values.to_pylist(), printed, strict=True)}
    if len(regular) < len(texts):
        found[DEFAULT_PARTITION] = value_candidates(DEFAULT_PARTITION, kind)
    return found
