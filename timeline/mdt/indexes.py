"""Records of the MDT's index partitions: `column_stats` and `bloom_filters` (RFC-27).

A stats or bloom record describes one immutable base file, so it is a fact about
that file for as long as the file is live: a reader may use whatever records
exist for the live files of its view, and a live file without a record is simply
never skipped. That is why an index can be built beside running writers, and why
a writer that did not produce records loses speed, never rows. Deleting a file
(clean, rollback) writes a file tombstone that removes all of its records.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from timeline.format.commit_metadata import WriteStat
from timeline.format.file_names import split_path
from timeline.format.table_config import TableConfig
from timeline.index.bloom import BLOOM_ARROW_SCHEMA, BLOOM_TYPE, BloomFilter, bloom_tombstone
from timeline.index.column_ranges import ranges_of_table
from timeline.index.column_stats import COLUMN_STATS_ARROW_SCHEMA, file_tombstone, indexable_columns
from timeline.index.hudi_bloom import SIMPLE, create_bloom_filter
from timeline.index.murmur3 import hash128
from timeline.mdt.log import BLOOM_FILTERS, COLUMN_STATS, INDEX_PARTITIONS
from timeline.mdt.records import NON_PARTITIONED

ARROW_SCHEMAS = {COLUMN_STATS: COLUMN_STATS_ARROW_SCHEMA, BLOOM_FILTERS: BLOOM_ARROW_SCHEMA}
BASE_ROW_GROUP = 16384


def check_names(indexes: Iterable[str]) -> list[str]:
    """The index partitions named, in order; ValueError for an unknown one."""
    names = list(dict.fromkeys(indexes))
    unknown = [n for n in names if n not in INDEX_PARTITIONS]
    if unknown:
        raise ValueError(f"unknown metadata index {unknown[0]!r} (known: {', '.join(INDEX_PARTITIONS)})")
    return names


def from_write_stats(stats: Iterable[WriteStat], indexes: Iterable[str]) -> dict[str, list[dict]]:
    """The index records a commit's writers computed for its new files, for the indexes the table keeps."""
    wanted = set(indexes)
    out: dict[str, list[dict]] = {p: [] for p in INDEX_PARTITIONS if p in wanted}
    for stat in stats:
        if COLUMN_STATS in out and stat.column_stats:
            out[COLUMN_STATS].extend(stat.column_stats)
        if BLOOM_FILTERS in out and stat.bloom_filter:
            out[BLOOM_FILTERS].append(stat.bloom_filter)
    return {p: records for p, records in out.items() if records}


def tombstones(paths: Iterable[str], indexes: Iterable[str]) -> dict[str, list[dict]]:
    """File tombstones in every index partition for deleted base files (paths relative to the table)."""
    files = [split_path(p) for p in paths]
    out: dict[str, list[dict]] = {}
    if COLUMN_STATS in indexes:
        out[COLUMN_STATS] = [file_tombstone(partition, name) for partition, name in files]
    if BLOOM_FILTERS in indexes:
        out[BLOOM_FILTERS] = [bloom_tombstone(partition, name) for partition, name in files]
    return {p: r for p, r in out.items() if r}


def file_of(record: dict) -> tuple[str, str]:
    return record["partition"], record["fileName"]


def apply_records(merged: dict[str, dict], dead: set[tuple[str, str]], records: Iterable[dict]) -> None:
    """Apply log records in order: a record replaces its key; a tombstone removes every record of its file."""
    for record in records:
        if record["isDeleted"]:
            target = file_of(record)
            dead.add(target)
            for key in [k for k, r in merged.items() if file_of(r) == target]:
                del merged[key]
        else:
            merged[record["key"]] = record
            dead.discard(file_of(record))


def merged_table(partition: str, base: pa.Table | None, log_records: dict[str, dict], dead: set) -> pa.Table:
    """Base rows minus the keys the logs replaced and the files they tombstoned, plus the logs' live records."""
    schema = ARROW_SCHEMAS[partition]
    parts = []
    if base is not None and base.num_rows:
        base = base.select(schema.names).cast(schema)
        drop = pc.is_in(base.column("key"), pa.array(list(log_records), pa.string()))
        if dead:
            files = pc.binary_join_element_wise(base.column("partition"), base.column("fileName"), "\x00")
            gone = pa.array([f"{p}\x00{n}" for p, n in dead], pa.string())
            drop = pc.or_(drop, pc.is_in(files, gone))
        parts.append(base.filter(pc.invert(drop)))
    if log_records:
        parts.append(pa.Table.from_pylist(list(log_records.values()), schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def keep_live(table: pa.Table, live: set[tuple[str, str]]) -> pa.Table:
    """Only the records of live files (compaction's garbage collection; a reader's view filter)."""
    if table.num_rows == 0:
        return table
    files = pc.binary_join_element_wise(table.column("partition"), table.column("fileName"), "\x00")
    return table.filter(pc.is_in(files, pa.array([f"{p}\x00{n}" for p, n in live], pa.string())))


COLUMN_LIST = "hoodie.metadata.index.column.stats.column.list"
MAX_COLUMNS = "hoodie.metadata.index.column.stats.max.columns.to.index"
BLOOM_ENTRIES = "hoodie.index.bloom.num_entries"
BLOOM_FPP = "hoodie.index.bloom.fpp"
DEFAULT_MAX_COLUMNS = 32
DEFAULT_BLOOM_FPP = 1e-9


def indexed_columns(config: TableConfig, schema: pa.Schema) -> list[str]:
    """The columns whose ranges the table indexes (Hudi's column list, else the first 32 it can)."""
    listed = [c.strip() for c in (config.raw.get(COLUMN_LIST) or "").split(",") if c.strip()]
    return indexable_columns(schema, listed or None, int(config.raw.get(MAX_COLUMNS) or DEFAULT_MAX_COLUMNS))


def bloom_record(
    config: TableConfig, partition: str, name: str, count: int, keys: Iterable[pa.Array | pa.ChunkedArray]
) -> dict:
    """The bloom filter of a file's `count` record keys, given batch by batch (nulls skipped), sized for exactly
    its rows (a base file never grows): Tandem's own, or for a `bloom_filters` partition in Hudi's format,
    Hudi's SIMPLE filter in its serialized form (`bloomType` its type code)."""
    fpp = float(config.raw.get(BLOOM_FPP) or DEFAULT_BLOOM_FPP)
    hudi = BLOOM_FILTERS in config.java_metadata_partitions
    bloom = create_bloom_filter(max(count, 1), fpp, type_code=SIMPLE) if hudi else BloomFilter(max(count, 1), fpp)
    low = high = None
    for batch in keys:
        present = batch.drop_null()
        if len(present):
            if hudi:
                bloom.add_many(present)
            else:
                bloom.add_hashed(hash128(present))
            extremes = pc.min_max(present)
            low = _lesser(low, extremes["min"].as_py())
            high = _greater(high, extremes["max"].as_py())
    return {
        "key": f"{partition or NON_PARTITIONED}\x00{name}",
        "partition": partition,
        "fileName": name,
        "bloomFilter": bloom.serialize_to_string().encode() if hudi else bloom.to_bytes(),
        "bloomType": bloom.type_code if hudi else BLOOM_TYPE,
        "minRecordKey": low,
        "maxRecordKey": high,
        "isDeleted": False,
    }


def _lesser(a: str | None, b: str) -> str:
    return b if a is None or b < a else a


def _greater(a: str | None, b: str) -> str:
    return b if a is None or b > a else a


def records_for_file(
    config: TableConfig, partition: str, name: str, rows: pa.Table, keys: pa.ChunkedArray, footer: pq.FileMetaData
) -> tuple[list[dict] | None, dict | None]:
    """A new file's index records, for the indexes the table keeps: (column stats, bloom filter)."""
    kept = config.metadata_indexes
    stats = None
    if COLUMN_STATS in kept:
        sizes = column_sizes(footer)
        ranges = ranges_of_table(rows, indexed_columns(config, rows.schema), sizes)
        stats = [r.to_record(partition, name) for r in ranges]
    bloom = bloom_record(config, partition, name, len(keys), [keys]) if BLOOM_FILTERS in kept else None
    return stats, bloom


def column_sizes(footer: pq.FileMetaData) -> dict[str, tuple[int, int]]:
    """Top-level column -> (compressed, uncompressed) bytes over every row group."""
    sizes: dict[str, list[int]] = {}
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            top = chunk.path_in_schema.split(".")[0]
            total = sizes.setdefault(top, [0, 0])
            total[0] += chunk.total_compressed_size
            total[1] += chunk.total_uncompressed_size
    return {k: (v[0], v[1]) for k, v in sizes.items()}
