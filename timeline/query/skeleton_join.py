"""A bootstrapped file group's rows (RFC-12): its skeleton's meta columns beside its source file's data, row by
row, with the partition columns (which the source lacks) from the partition path, as Hudi's bootstrap reader
joins them. Every reader of a skeleton comes here through `reader.read_base_file`."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from timeline.errors import UnreadableDataFileError
from timeline.format.meta_fields import META_COLUMNS
from timeline.format.source_file import SourceFile
from timeline.io.storage import Storage


def read_joined(storage: Storage, skeleton_path: str, source: SourceFile, columns: list[str] | None) -> pa.Table:
    """Meta columns, then the source's columns, then the partition columns (strings, Hudi's bootstrap schema);
    only the side a projection needs is read. A source whose length or row count is not the skeleton's is
    not the file it was bootstrapped from: an error, never rows."""
    partition_columns = source.partition_columns
    wanted_meta = [c for c in META_COLUMNS if columns is None or c in columns]
    data = _read_source(source, columns, partition_columns)
    if wanted_meta:
        with storage.open_input(skeleton_path) as handle:
            skeleton = pq.ParquetFile(handle).read(columns=wanted_meta, use_threads=False)
        if skeleton.num_rows != data.num_rows:
            raise UnreadableDataFileError(
                f"skeleton {skeleton_path} holds {skeleton.num_rows} rows but its source {source.path} "
                f"{data.num_rows}: the source file was changed after the bootstrap"
            )
    else:
        skeleton = data.select([])
    arrays = [*skeleton.columns, *data.columns]
    names = [*skeleton.column_names, *data.column_names]
    for name, value in source.partition_values:
        if columns is None or name in columns:
            arrays.append(pa.array([value] * data.num_rows, pa.string()))
            names.append(name)
    joined = pa.Table.from_arrays(arrays, names=names)
    return joined if columns is None else joined.select([c for c in columns if c in names])


def joined_schema(skeleton: pa.Schema, source: SourceFile) -> pa.Schema:
    """The schema `read_joined` gives a skeleton: its meta columns, the source's columns, the partition columns."""
    source_storage = Storage(source.base_uri)
    with source_storage.open_input(source.path) as handle:
        data = pq.read_schema(handle)
    partition_columns = source.partition_columns
    meta = [skeleton.field(c) for c in META_COLUMNS if c in skeleton.names]
    kept = [f for f in data if f.name not in partition_columns]
    return pa.schema([*meta, *kept, *(pa.field(c, pa.string()) for c in partition_columns)])


def _read_source(source: SourceFile, columns: list[str] | None, partition_columns: list[str]) -> pa.Table:
    source_storage = Storage(source.base_uri)
    try:
        with source_storage.open_input(source.path) as handle:
            length = handle.size()
            if length != source.length or not _same_time(source_storage, source):
                raise UnreadableDataFileError(
                    f"source file {source_storage.uri(source.path)} is not the file bootstrapped ({length} bytes, "
                    f"the bootstrap recorded {source.length} and its modification time): it was changed since"
                )
            parquet = pq.ParquetFile(handle)
            names = [n for n in parquet.schema_arrow.names if n not in partition_columns]
            chosen = names if columns is None else [n for n in names if n in columns]
            data = parquet.read(columns=chosen, use_threads=False)
    except FileNotFoundError as err:
        raise UnreadableDataFileError(
            f"source file {source_storage.uri(source.path)} of a bootstrapped file group is gone"
        ) from err
    if not chosen:  # no data column asked for: the rows still count
        return pa.table({"rows": pa.nulls(parquet.metadata.num_rows)}).select([])
    return data


def _same_time(storage: Storage, source: SourceFile) -> bool:
    """The source's modification time is the one recorded (to the millisecond; to the second on an object store,
    whose listings keep no more); unknown (0) is not checked."""
    if not source.modified_ms:
        return True
    nanos = storage.fs.get_file_info(storage.full(source.path)).mtime_ns
    if nanos is None:
        return False
    if storage.is_s3:
        return nanos // 1_000_000_000 == source.modified_ms // 1000
    return nanos // 1_000_000 == source.modified_ms
