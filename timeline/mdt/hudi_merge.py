"""How two metadata-table records of one key combine: `HoodieMetadataPayload.preCombine` of Hudi 0.15.

A reader folds a key's log records oldest to newest, then lays the result over the base file's record
(`combineAndGetUpdateValue` is the same preCombine), and compaction writes what comes out. The merge is
meant to be commutative and associative, since the order of MDT updates need not be that of the file
system's operations:

- `files` (partition list and file lists): the union of both maps, the newer entry applied to the older one:
  a newer tombstone removes a live file and is dropped with it, but is kept when the older record does not
  list the file (a base file further down may) or lists it deleted too; two live entries keep the larger size
  (files only grow). A file list entry must be a tombstone or have a positive size.
- `column_stats`: if either side is a tombstone, the newer record wins whole; otherwise the range widens (min
  of the mins, max of the maxes, ignoring absent bounds, in Java's `compareTo` order) and the four counts add.
- `bloom_filters`, `record_index`: the newer record wins whole.

Every record Hudi merges was read back from storage, and `HoodieMetadataPayload`'s constructor re-wraps the
bounds of a generic (not code-generated) record through the generic branch of `unwrapAvroValueWrapper`,
which returns the wrapper's raw Avro value: DateWrapper becomes IntWrapper, DecimalWrapper BytesWrapper (the
unscaled two's complement), TimestampMicrosWrapper and TimeMicrosWrapper LongWrapper. Delta commits write the
typed wrappers; what a merge or a compaction writes carries the raw ones (`as_read`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from timeline.mdt.hudi_records import (
    FILES_FIELD,
    STATS_FIELD,
    TYPE_BLOOM_FILTER,
    TYPE_COLUMN_STATS,
    TYPE_FILE_LIST,
    TYPE_PARTITION_LIST,
    TYPE_RECORD_INDEX,
    ColumnStats,
    column_stats_of,
    stats_to_avro,
)
from timeline.mdt.hudi_values import (
    BYTES,
    DATE,
    DECIMAL,
    INT,
    LONG,
    TIME_MICROS,
    TIMESTAMP_MICROS,
    Wrapped,
    order_key,
    unscaled,
)


def _to_byte_array(n: int) -> bytes:
    """`BigInteger.toByteArray()`: the shortest big-endian two's complement, at least one byte."""
    return n.to_bytes((n if n >= 0 else ~n).bit_length() // 8 + 1, "big", signed=True)


def _raw(wrapped: Wrapped | None) -> Wrapped | None:
    """A bound as `wrapValueIntoAvro(unwrapAvroValueWrapper(generic wrapper))` leaves it."""
    if wrapped is None:
        return None
    if wrapped.wrapper == DATE:
        return Wrapped(INT, wrapped.value)
    if wrapped.wrapper == DECIMAL:
        return Wrapped(BYTES, _to_byte_array(unscaled(wrapped.value)))
    if wrapped.wrapper == TIMESTAMP_MICROS:
        return Wrapped(LONG, wrapped.value)
    if wrapped.wrapper == TIME_MICROS:
        t = wrapped.value
        return Wrapped(LONG, ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond)
    return wrapped


def as_read(record: Mapping[str, Any]) -> dict[str, Any]:
    """A stored record as HoodieMetadataPayload holds it after reading it back: bounds re-wrapped raw."""
    if record["type"] != TYPE_COLUMN_STATS or record[STATS_FIELD] is None:
        return dict(record)
    stats = column_stats_of(record)
    stats = replace(stats, min_value=_raw(stats.min_value), max_value=_raw(stats.max_value))
    return {**record, STATS_FIELD: stats_to_avro(stats)}


def merged(base: Mapping[str, Any] | None, logs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The record a compaction writes for one key: the base file's record as it is when no log holds the
    key; else the log records folded oldest to newest, then laid over the base record."""
    if not logs:
        return None if base is None else dict(base)
    result = as_read(logs[0])
    for record in logs[1:]:
        result = combine(result, record)
    return result if base is None else combine(base, result)


def combine(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """`newer.preCombine(older)` of two stored records of one key and type."""
    older, newer = as_read(older), as_read(newer)
    if older["type"] != newer["type"]:
        raise ValueError(f"Cannot combine {older['type']} with {newer['type']}")
    if older["key"] != newer["key"]:
        raise ValueError(f"Cannot combine {older['key']} with {newer['key']} as the keys differ")
    kind = newer["type"]
    if kind in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
        return {**newer, FILES_FIELD: _combine_files(kind, older[FILES_FIELD], newer[FILES_FIELD])}
    if kind == TYPE_COLUMN_STATS:
        stats = _combine_stats(column_stats_of(older), column_stats_of(newer))
        return {**newer, STATS_FIELD: stats_to_avro(stats)}
    if kind in (TYPE_BLOOM_FILTER, TYPE_RECORD_INDEX):
        return dict(newer)
    raise ValueError(f"Unknown type of HoodieMetadataPayload: {kind}")


def _combine_files(kind: int, older: Mapping | None, newer: Mapping | None) -> dict[str, dict]:
    combined = dict(older or {})
    for name, info in (newer or {}).items():
        if kind == TYPE_FILE_LIST and not info["isDeleted"] and info["size"] <= 0:
            raise ValueError(f"Existing files should have size > 0: {name!r}")
        old = combined.get(name)
        if old is None:
            combined[name] = info
        elif info["isDeleted"]:
            if old["isDeleted"]:
                combined[name] = info
            else:
                del combined[name]
        else:
            combined[name] = {"size": max(info["size"], old["size"]), "isDeleted": False}
    return combined


def _bound(a: Wrapped | None, b: Wrapped | None, pick) -> Wrapped | None:
    present = [w for w in (a, b) if w is not None]
    if len({w.wrapper for w in present}) > 1:
        raise TypeError(f"bounds of two types do not compare: {a.wrapper} and {b.wrapper}")
    return pick(present, key=order_key) if present else None


def _combine_stats(older: ColumnStats, newer: ColumnStats) -> ColumnStats:
    if (older.file_name, older.column_name) != (newer.file_name, newer.column_name):
        raise ValueError(f"column stats of {newer.file_name}/{newer.column_name} over another file or column")
    if newer.is_deleted or older.is_deleted:
        return newer
    return replace(
        newer,
        min_value=_bound(older.min_value, newer.min_value, min),
        max_value=_bound(older.max_value, newer.max_value, max),
        value_count=older.value_count + newer.value_count,
        null_count=older.null_count + newer.null_count,
        total_size=older.total_size + newer.total_size,
        total_uncompressed_size=older.total_uncompressed_size + newer.total_uncompressed_size,
    )
