"""What a bootstrap source holds, checked before anything is written: its parquet files, their partition
folders (`col=value`, as `df.write.partitionBy` leaves them, the partition columns in the names only), one
schema, and the record keys of every file (present, and unique within a partition).

A bad source is refused with one clear error (`BadInputError`, exit 2) before the target is touched.
Names starting with `.` or `_` are Spark's and Hadoop's bookkeeping (`_SUCCESS`, `.crc`), skipped as Spark's
reader skips them; any other file that is not parquet is refused.
"""

from __future__ import annotations

import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from coordinator.write.column_names import check_input_columns
from timeline.errors import BadInputError
from timeline.format import keys, partition_path
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.file_names import PARQUET
from timeline.format.meta_fields import META_COLUMNS
from timeline.io.storage import Storage

READ_THREADS = 8
URI_CHARACTERS = ("?", "#")  # a URI parser ends the path there: the index's URIs could not name such a file
SHOWN = 5  # offending files or keys named in one error


@dataclass(frozen=True)
class ListedFile:
    """One parquet file of the source, as listed before the bootstrap wrote anything."""

    partition: str  # its folder below the source base ("" at the top): the Hudi partition path too
    path: str  # relative to the source base
    size: int
    mtime_ns: int
    rows: int = 0


@dataclass(frozen=True)
class SourceLayout:
    """A checked source: its files (each with its row count), partition columns and data schema."""

    base_uri: str
    files: list[ListedFile]
    partition_columns: list[str]
    schema: pa.Schema  # the files' columns

    @property
    def table_schema(self) -> pa.Schema:
        """The bootstrapped table's data schema: the files' columns, then the partition columns as strings
        (Hudi's bootstrap schema)."""
        return pa.schema([*self.schema, *(pa.field(c, pa.string()) for c in self.partition_columns)])

    def partitions(self) -> list[str]:
        return sorted({f.partition for f in self.files})


def absolute_uri(uri: str) -> str:
    """A local path made absolute (the table records it; a reader runs from anywhere), other URIs as given."""
    return uri.rstrip("/") if "://" in uri or uri.startswith("file:") else os.path.abspath(uri)


def list_source(source_uri: str, target_uri: str) -> tuple[Storage, list[ListedFile]]:
    """The source's parquet files with their sizes and modification times; refuses a source that overlaps the
    target, an absent or empty one, and files that are not parquet."""
    storage = Storage(absolute_uri(source_uri))
    target = Storage(absolute_uri(target_uri))
    roots = (
        (storage.root, target.root)
        if storage.is_s3
        else (os.path.realpath(storage.root), os.path.realpath(target.root))
    )
    if storage.fs.type_name == target.fs.type_name and _overlap(*roots):
        raise BadInputError(f"the source {source_uri} and the target {target_uri} overlap: neither may hold the other")
    try:
        listed = storage.fs.get_file_info(pafs.FileSelector(storage.root, recursive=True))
    except FileNotFoundError:
        raise BadInputError(f"bootstrap source {source_uri} does not exist") from None
    except (NotADirectoryError, OSError) as err:
        raise BadInputError(f"bootstrap source {source_uri} is not a folder of parquet files ({err})") from None
    files, foreign = [], []
    for info in listed:
        relative = info.path[len(storage.root) + 1 :]
        if info.type != pafs.FileType.File or any(p.startswith((".", "_")) for p in relative.split("/")):
            continue
        if not relative.endswith(PARQUET):
            foreign.append(relative)
            continue
        if any(c in relative for c in URI_CHARACTERS):
            raise BadInputError(f"source file {relative!r}: '?' and '#' cannot be part of a path a URI names")
        folder = relative.rpartition("/")[0]
        files.append(ListedFile(folder, relative, info.size, info.mtime_ns or 0))
    if foreign:
        raise BadInputError(f"bootstrap source {source_uri} holds files that are not parquet: {_shown(foreign)}")
    if not files:
        raise BadInputError(f"bootstrap source {source_uri} holds no parquet files")
    return storage, sorted(files, key=lambda f: f.path)


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def partition_columns(files: list[ListedFile], asked: list[str] | None) -> list[str]:
    """The columns the partition folders name (`col=value` at every level, the same columns everywhere), which
    `--partition-by`, when given, must repeat."""
    layouts = {tuple(p.partition("=")[0] for p in f.partition.split("/")) if f.partition else () for f in files}
    if len(layouts) > 1:
        shown = ", ".join("/".join(c) or "(top level)" for c in sorted(layouts))
        raise BadInputError(f"the source's files sit in inconsistent partition folders: {shown}")
    for f in files:
        problem = partition_path.problem(f.partition) if f.partition else None
        bad = [p for p in f.partition.split("/") if f.partition and not all(p.partition("=")[::2])]
        if problem is not None or bad or "%" in f.partition:
            reason = problem or (
                "an escaped value" if "%" in f.partition else f"{bad[0]!r} is not <column>=<value>, both non-empty"
            )
            raise BadInputError(f"source folder {f.partition!r} is not a partition folder Tandem can take: {reason}")
    found = list(layouts.pop())
    if len(set(found)) != len(found):
        raise BadInputError(f"the source's partition folders repeat a column: {'/'.join(found)}")
    if asked is not None and asked != found:
        raise BadInputError(
            f"--partition-by {','.join(asked) or '(none)'} does not match the source's partition folders "
            f"({'/'.join(found) or 'none'})"
        )
    return found


def check_layout(
    storage: Storage, files: list[ListedFile], columns: list[str], record_key: list[str], precombine: str | None
) -> SourceLayout:
    """Every file's footer read: one schema across all, no partition column inside a file, the key (and
    precombine) columns present. Returns the files with their row counts."""
    with ThreadPoolExecutor(READ_THREADS) as pool:
        footers = list(pool.map(lambda f: _footer(storage, f), files))
    schemas = [m.schema.to_arrow_schema().remove_metadata() for m in footers]
    first_file, first = files[0], schemas[0]
    differing = [f.path for f, schema in zip(files, schemas, strict=True) if not schema.equals(first)]
    if differing:
        raise BadInputError(
            f"the source's files disagree on their schema: {_shown(differing)} differ from {first_file.path} "
            f"({', '.join(f'{f.name} {f.type}' for f in first)})"
        )
    inside = [c for c in columns if c in first.names]
    if inside:
        raise BadInputError(f"partition column(s) {', '.join(inside)} are both folder names and file columns")
    taken = [c for c in first.names if c in META_COLUMNS]
    if taken:
        raise BadInputError(f"the source's files already hold Hudi meta columns ({', '.join(taken)})")
    for name in [*record_key, *([precombine] if precombine else [])]:
        if name not in first.names:
            where = " (a partition column is only in the folder names)" if name in columns else ""
            raise BadInputError(f"the source's files have no column {name!r}{where}")
    counted = [
        ListedFile(f.partition, f.path, f.size, f.mtime_ns, m.num_rows) for f, m in zip(files, footers, strict=True)
    ]
    layout = SourceLayout(storage.base_uri, counted, columns, first)
    check_input_columns(layout.table_schema)  # names every writer and reader can hold, before any write
    try:
        arrow_to_avro(layout.table_schema, "bootstrap")
    except (BadInputError, ValueError, TypeError) as err:
        raise BadInputError(f"the source's schema cannot be a table's: {err}") from None
    return layout


def _footer(storage: Storage, file: ListedFile) -> pq.FileMetaData:
    try:
        with storage.open_input(file.path) as handle:
            return pq.ParquetFile(handle).metadata
    except (OSError, pa.ArrowException) as err:
        raise BadInputError(f"source file {file.path} is not a readable parquet file ({str(err).strip()})") from err


def record_keys(storage: Storage, layout: SourceLayout, record_key: list[str]) -> dict[str, pa.ChunkedArray]:
    """Each file's record keys (Hudi's key generator over the key columns), read once for both the duplicate
    check and the skeletons; a null or empty key, or a key twice in one partition, is refused (the keys shown)."""

    with ThreadPoolExecutor(READ_THREADS) as pool:
        read = pool.map(lambda f: read_keys(storage, f, record_key), layout.files)
        found = dict(zip((f.path for f in layout.files), read, strict=True))
    by_partition: dict[str, list[ListedFile]] = defaultdict(list)
    for f in layout.files:
        by_partition[f.partition].append(f)
    for partition, files in sorted(by_partition.items()):
        _refuse_duplicates(partition, files, found)
    return found


def read_keys(storage: Storage, file: ListedFile, record_key: list[str]) -> pa.ChunkedArray:
    """One file's record keys, in its row order."""
    try:
        with storage.open_input(file.path) as handle:
            columns = pq.ParquetFile(handle).read(columns=record_key, use_threads=False)
        return keys.record_keys(columns, record_key)
    except BadInputError as err:
        raise BadInputError(f"source file {file.path}: {err}") from None
    except (OSError, pa.ArrowException) as err:
        raise BadInputError(f"source file {file.path}: its key columns cannot be read ({str(err).strip()})") from None


def _refuse_duplicates(partition: str, files: list[ListedFile], found: dict[str, pa.ChunkedArray]) -> None:
    chunks = [c for f in files for c in found[f.path].chunks]
    if not chunks:
        return
    counts = pc.value_counts(pa.chunked_array(chunks, pa.string()))
    repeated = counts.filter(pc.greater(counts.field("counts"), 1)).field("values").to_pylist()
    if not repeated:
        return
    shown = []
    for key in repeated[:SHOWN]:
        holders = [f.path for f in files if pc.any(pc.equal(found[f.path], key)).as_py()]
        shown.append(f"{key!r} in {', '.join(holders)}")
    where = f"partition {partition!r}" if partition else "the source"
    raise BadInputError(
        f"{len(repeated)} record key(s) occur more than once in {where}: {'; '.join(shown)}"
        f"{' ...' if len(repeated) > SHOWN else ''}"
    )


def unchanged(storage: Storage, files: list[ListedFile]) -> None:
    """Refuse when a source file changed (size or modification time) since it was listed: a skeleton joins the
    file it was made from, never another."""
    changed = []
    for f in files:
        try:
            info = storage.fs.get_file_info(storage.full(f.path))
        except OSError:
            info = None
        if info is None or info.type != pafs.FileType.File or info.size != f.size or (info.mtime_ns or 0) != f.mtime_ns:
            changed.append(f.path)
    if changed:
        raise BadInputError(f"source files changed during the bootstrap: {_shown(changed)}; nothing was committed")


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")
