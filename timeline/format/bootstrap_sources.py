"""The skeleton -> source mapping of a bootstrapped table (RFC-12), from its bootstrap index: attached to the
base files and splits every reader receives, so no reader can read a skeleton without its data."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from timeline.errors import CorruptInstantError
from timeline.format import bootstrap_index
from timeline.format.file_names import BaseFile
from timeline.format.keys import DEFAULT_PARTITION
from timeline.format.source_file import BOOTSTRAP_BASE_PATH, METADATA_BOOTSTRAP_INSTANT, SourceFile
from timeline.format.table_config import TableConfig
from timeline.io.lru import LruCache
from timeline.io.storage import Storage

_INDEXES: LruCache[tuple[str, int, float | None], bootstrap_index.BootstrapIndex] = LruCache(16)


class BootstrapSources:
    """The sources of one table's skeletons; the index is read once, and again when a skeleton it does not know
    turns up (a bootstrap rolled back and run again since)."""

    def __init__(self, storage: Storage, config: TableConfig) -> None:
        self.storage = storage
        self.config = config
        self.base_uri = config.raw[BOOTSTRAP_BASE_PATH]
        self._index: bootstrap_index.BootstrapIndex | None = None

    def attach(self, files: Iterable[BaseFile]) -> list[BaseFile]:
        """The files, each skeleton with its source."""
        out = []
        for f in files:
            source = self.source(f.partition, f.file_id, f.instant)
            out.append(f if source is None else dataclasses.replace(f, source=source))
        return out

    def source(self, partition: str, file_id: str, instant: str) -> SourceFile | None:
        """A skeleton's source (only a base file of the metadata-only bootstrap instant has one, Hudi's rule)."""
        if instant != METADATA_BOOTSTRAP_INSTANT:
            return None
        mapping = self._lookup(partition, file_id, fresh=False) or self._lookup(partition, file_id, fresh=True)
        if mapping is None:
            raise CorruptInstantError(
                f"skeleton file group {partition or '(table root)'}/{file_id} has no source in the bootstrap index"
            )
        path = Storage(self.base_uri).relative(mapping.uri)
        if path is None:
            raise CorruptInstantError(
                f"bootstrap index: source {mapping.uri} lies outside {BOOTSTRAP_BASE_PATH}={self.base_uri}"
            )
        return SourceFile(
            self.base_uri, path, mapping.length, self._partition_values(partition), mapping.modification_time
        )

    def _lookup(self, partition: str, file_id: str, fresh: bool) -> bootstrap_index.SourceMapping | None:
        if self._index is None or fresh:
            self._index = _read_index(self.storage)
            if self._index is None:
                raise CorruptInstantError(f"{self.storage.base_uri}: a bootstrapped table without its bootstrap index")
        return self._index.source(partition, file_id)

    def _partition_values(self, partition: str) -> tuple[tuple[str, str | None], ...]:
        """The partition columns' values a skeleton's path gives (`col=value` folders, or positional ones)."""
        fields = self.config.partition_fields
        if not fields:
            return ()
        parts = partition.split("/") if partition else []
        if len(parts) != len(fields):
            raise CorruptInstantError(
                f"bootstrapped partition {partition!r} does not hold one folder per partition field {fields}"
            )
        values = []
        for name, part in zip(fields, parts, strict=True):
            key, equals, value = part.partition("=")
            if self.config.hive_style and not (equals and key == name):
                raise CorruptInstantError(f"bootstrapped partition {partition!r}: {part!r} is not {name}=<value>")
            shown = value if self.config.hive_style else part
            values.append((name, None if shown == DEFAULT_PARTITION else shown))
        return tuple(values)


def _read_index(storage: Storage) -> bootstrap_index.BootstrapIndex | None:
    """The index as readers read it, kept per process while its `.partitions` file stays the same (a table of
    10,000 bootstrapped files takes 0.2 s to read it)."""
    try:
        path = bootstrap_index.PARTITIONS_FILE
        key = (storage.full(path), storage.size(path), storage.mtime(path))
    except FileNotFoundError:
        return bootstrap_index.read_index(storage, whole=False)
    found = _INDEXES.get(key)
    if found is None:
        found = bootstrap_index.read_index(storage, whole=False)
        if found is not None:
            _INDEXES.put(key, found)
    return found
