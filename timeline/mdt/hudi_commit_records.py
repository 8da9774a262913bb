"""The metadata-table records of one data commit, as Hudi 0.15 builds them when it mirrors a commit
(HoodieTableMetadataUtil.convertMetadataToRecords): what a Tandem writer appends to a metadata table in Hudi's
format, so that Java's readers, compactor and data skipping find what Java itself would have written.

- `files`: one `__all_partitions__` record naming every partition the commit wrote to, and one record per
  partition listing each written file at the size its write stat records.
- `column_stats`: for each written base file, one record per top-level primitive column of its Parquet
  footer (meta columns included), bounds and counts aggregated over the row groups as ParquetUtils does.
- `bloom_filters`: for each written base file, the bloom filter its footer carries (the writer put it there),
  stored as its `serializeToString()` bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from timeline.format.commit_metadata import CommitMetadata
from timeline.index.hudi_bloom import from_footer
from timeline.mdt import hudi_records
from timeline.mdt.hudi_records import ColumnStats
from timeline.mdt.hudi_values import Wrapped, float_bounds, missing_bound, order_key, wrap


def files_records(metadata: CommitMetadata) -> list[dict[str, Any]]:
    """The `files` records of a commit: its partitions, then each partition's written files with their sizes
    (a file written twice counts at its larger size, as Hudi's merge keeps it)."""
    written: dict[str, dict[str, int]] = {}
    for partition, stats in metadata.partition_to_write_stats.items():
        files = written.setdefault(partition, {})
        for stat in stats:
            if stat.path:
                name = stat.path.rsplit("/", 1)[-1]
                files[name] = max(files.get(name, 0), stat.file_size_in_bytes)
    return listing_records(written)


def listing_records(files: Mapping[str, Mapping[str, int]]) -> list[dict[str, Any]]:
    """`__all_partitions__` naming every partition of `files` (partition -> {file name: size}), then one
    record per partition listing its files."""
    records = [hudi_records.partition_list_record(sorted(files))]
    records += [hudi_records.file_list_record(p, named) for p, named in sorted(files.items())]
    return records


def _lower(a: Wrapped | None, b: Wrapped | None) -> Wrapped | None:
    if a is None or b is None:
        return a if b is None else b
    return a if order_key(a) <= order_key(b) else b


def _higher(a: Wrapped | None, b: Wrapped | None) -> Wrapped | None:
    if a is None or b is None:
        return a if b is None else b
    return a if order_key(a) >= order_key(b) else b


def column_stats(
    file_name: str,
    footer: pq.FileMetaData,
    schema: pa.Schema,
    floats: Mapping[str, pa.ChunkedArray] | None = None,
) -> list[ColumnStats]:
    """The statistics of each top-level primitive column of a Parquet file, from its footer (in column
    order): min of the row groups' mins, max of their maxes, counts and sizes summed. A chunk holding values
    without a min and max (no statistics, or values longer than its writer keeps in them) leaves its column
    without bounds: the other chunks' bounds would not cover its values."""
    out: dict[str, ColumnStats] = {}
    unbounded: set[str] = set()
    for group in range(footer.num_row_groups):
        row_group = footer.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            name = chunk.path_in_schema
            if "." in name or schema.get_field_index(name) < 0:
                continue  # a nested column: Hudi indexes top-level fields only
            dtype = schema.field(name).type
            stats = chunk.statistics
            if stats is not None and stats.has_min_max:
                low, high = wrap(stats.min, dtype), wrap(stats.max, dtype)
            else:
                low = high = missing_bound(dtype, chunk.physical_type)
                if stats is None or not stats.has_null_count or stats.null_count < chunk.num_values:
                    unbounded.add(name)
            nulls = stats.null_count if stats is not None and stats.has_null_count else chunk.num_values
            found = out.get(name)
            if found is None:
                out[name] = ColumnStats(
                    file_name, name, low, high, chunk.num_values, nulls,
                    chunk.total_compressed_size, chunk.total_uncompressed_size,
                )  # fmt: skip
                continue
            out[name] = ColumnStats(
                file_name,
                name,
                _lower(found.min_value, low),
                _higher(found.max_value, high),
                found.value_count + chunk.num_values,
                found.null_count + nulls,
                found.total_size + chunk.total_compressed_size,
                found.total_uncompressed_size + chunk.total_uncompressed_size,
            )
    for name, values in (floats or {}).items():  # the file's own values, where its footer kept no statistics
        low, high = float_bounds(values, values.type)
        if name in out:
            out[name] = dataclasses.replace(out[name], min_value=low, max_value=high, null_count=values.null_count)
        unbounded.discard(name)
    return [
        dataclasses.replace(s, min_value=None, max_value=None) if s.column_name in unbounded else s
        for s in out.values()
    ]


def unrecorded_floats(footer: pq.FileMetaData) -> list[str]:
    """The top-level float columns of a Parquet file whose footer keeps no min and max (Tandem's files): their
    statistics must come from the values, or the record would claim every value null and Java's data skipping
    would rule the file out for any comparison on them."""
    names = set()
    for group in range(footer.num_row_groups):
        row_group = footer.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            stats = chunk.statistics
            if chunk.physical_type in ("FLOAT", "DOUBLE") and "." not in chunk.path_in_schema:
                if stats is None or not stats.has_min_max:
                    names.add(chunk.path_in_schema)
    return sorted(names)


def column_stats_records(
    partition: str, file_name: str, footer: pq.FileMetaData, floats: Mapping[str, pa.ChunkedArray] | None = None
) -> list[dict[str, Any]]:
    """`floats`: the values of the file's `unrecorded_floats` columns."""
    schema = footer.schema.to_arrow_schema()
    stats = column_stats(file_name, footer, schema, floats)
    return [hudi_records.column_stats_record(partition, s) for s in stats]


def bloom_filter_records(instant: str, files: Iterable[tuple[str, str, pq.FileMetaData]]) -> list[dict[str, Any]]:
    """The bloom filter record of each (partition, file name, footer) whose footer carries one."""
    records = []
    for partition, name, footer in files:
        bloom = from_footer(footer.metadata)
        if bloom is not None:
            data = bloom.serialize_to_string().encode()
            records.append(hudi_records.bloom_filter_record(partition, name, instant, bloom.type_code, data))
    return records
