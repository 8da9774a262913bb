"""A Hudi table: its storage, its config and its timeline, opened or created."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

from timeline.errors import BadInputError
from timeline.format import partition_path
from timeline.format.active_timeline import ARCHIVED_FOLDER, ActiveTimeline
from timeline.format.bootstrap_sources import BootstrapSources
from timeline.format.data_logs import DataLog, parse_data_log, parse_log_listing
from timeline.format.file_names import BaseFile, parse_base_file
from timeline.format.fs_view import FileSystemView, list_table_files, parse_listing
from timeline.format.instant import CLOCK
from timeline.format.source_file import BOOTSTRAP_BASE_PATH, METADATA_BOOTSTRAP_INSTANT, SourceFile
from timeline.format.table_config import (
    COPY_ON_WRITE,
    HOODIE_DIR,
    JAVA_METADATA_PARTITIONS_INFLIGHT,
    MERGE_ON_READ,
    METADATA_ENABLED,
    METADATA_FORMAT,
    METADATA_INDEXES,
    TABLE_TYPES,
    TANDEM_FORMAT,
    TableConfig,
    read_config,
    record_metadata_table,
    write_config,
)
from timeline.io import read_once
from timeline.io.storage import Storage
from timeline.mdt import health, layout
from timeline.mdt.log import DecodedLog
from timeline.mdt.reader import MetadataReader
from timeline.mdt.table import MetadataTable

TEMP_DIR = f"{HOODIE_DIR}/.temp"
HEARTBEAT_DIR = f"{HOODIE_DIR}/.heartbeat"
SOURCES = ("auto", "metadata", "storage")
DEFAULT_INDEXES = ("bloom_filters", "column_stats")


class TableView(FileSystemView):
    """A view that says where its listing came from, and why a read fell back to storage."""

    def __init__(
        self,
        files: Iterable[BaseFile],
        timeline: ActiveTimeline,
        as_of: str | None,
        source: str,
        fallback_reason: str | None = None,
        mdt: MetadataTable | None = None,
        logs: Iterable[DataLog] = (),
    ) -> None:
        super().__init__(files, timeline, as_of, logs)
        self.source = source
        self.fallback_reason = fallback_reason
        self.mdt = mdt  # the MDT as this view read it (its indexes answer from the same snapshot)


class _ReadOnce(MetadataTable):
    """The MDT as one view reads it: the health check and the reader share one timeline, listing and log read.

    Log files are immutable once created, and holding the timeline and slices
    means the reader merges exactly what was checked.
    """

    def __init__(self, data_storage: Storage) -> None:
        super().__init__(data_storage)
        self._timeline: ActiveTimeline | None = None
        self._slices: dict[str, layout.Slice] | None = None
        self._logs: dict[str, DecodedLog] = {}

    def timeline(self) -> ActiveTimeline:
        if self._timeline is None:
            self._timeline = super().timeline()
        return self._timeline

    def timeline_if_exists(self) -> ActiveTimeline | None:
        if self._timeline is None:
            self._timeline = super().timeline_if_exists()
            if self._timeline is None:
                return None
        return self._timeline

    def slices(self) -> dict[str, layout.Slice]:
        if self._slices is None:
            self._slices = super().slices()
        return self._slices

    def read_log(self, path: str) -> DecodedLog:
        if path not in self._logs:
            self._logs[path] = super().read_log(path)
        return self._logs[path]


@dataclass
class Table:
    storage: Storage
    config: TableConfig
    _sources: BootstrapSources | None = field(default=None, init=False, repr=False, compare=False)

    @staticmethod
    def open(uri: str) -> Table:
        storage = Storage(uri)
        return Table(storage, read_config(storage))

    @staticmethod
    def create(
        uri: str,
        name: str,
        record_key_fields: list[str],
        partition_fields: list[str] | None = None,
        hive_style: bool = False,
        precombine_field: str | None = None,
        with_metadata: bool = True,
        indexes: tuple[str, ...] = DEFAULT_INDEXES,
        hudi_format: bool = True,
        table_type: str = COPY_ON_WRITE,
        extra: dict[str, str] | None = None,
    ) -> Table:
        """A new table; with a metadata table keeping `indexes` (column stats and bloom filters by default:
        a new table has no files to build them from, so they cost nothing to turn on now), in Hudi's own
        format (every Hudi engine then lists from it), or in Tandem's previous one when not `hudi_format`
        (recorded, so the table keeps it). `table_type`: COPY_ON_WRITE or MERGE_ON_READ (updates and deletes
        go to log files, merged by readers and compacted later). `extra`: more `hoodie.properties` entries (a
        bootstrap's base path), recorded with the rest in one write."""
        if table_type not in TABLE_TYPES:
            raise BadInputError(f"unknown table type {table_type!r} (one of {', '.join(TABLE_TYPES)})")
        if table_type == MERGE_ON_READ and with_metadata and not hudi_format:
            raise BadInputError("a merge-on-read table keeps its metadata table in Hudi's format")
        if not name or not record_key_fields:
            raise BadInputError("a table needs a name and at least one record key field")
        if len(set(record_key_fields)) != len(record_key_fields):
            raise BadInputError("record key fields repeat")
        storage = Storage(uri)
        config = TableConfig(
            name=name,
            record_key_fields=record_key_fields,
            partition_fields=list(partition_fields or []),
            hive_style=hive_style,
            precombine_field=precombine_field,
            table_type=table_type,
        )
        config.raw.update(extra or {})
        if with_metadata:
            config.raw[METADATA_ENABLED] = "true"
            if hudi_format:  # recorded as being built from the start: a crash before it is would leave no trace
                config.raw[JAVA_METADATA_PARTITIONS_INFLIGHT] = "files"
            else:
                config.raw[METADATA_FORMAT] = TANDEM_FORMAT
            if indexes:
                config.raw[METADATA_INDEXES] = ",".join(sorted(indexes))
        for folder in (HOODIE_DIR, f"{HOODIE_DIR}/{ARCHIVED_FOLDER}", TEMP_DIR):
            storage.makedirs(folder)
        write_config(storage, config)
        table = Table(storage, config)
        if with_metadata and hudi_format:
            table.metadata().create_in_hudi_format(name, indexes)
            table.config = read_config(storage)
        elif with_metadata:
            table.metadata().create(name)
        return table

    @property
    def uri(self) -> str:
        return self.storage.base_uri

    def timeline(self) -> ActiveTimeline:
        return read_once.remembered(
            self.storage.full(HOODIE_DIR), "timeline", lambda: ActiveTimeline.load(self.storage, HOODIE_DIR)
        )

    def metadata(self) -> MetadataTable:
        return MetadataTable(self.storage)

    def has_metadata_table(self) -> bool:
        """Whether `hoodie.properties` records a metadata table (as of opening), whatever its files say.

        Recorded but missing is damage, not "no MDT": readers list storage and say
        so, writers refuse. `MetadataTable.exists()` says whether its files are there.
        """
        return self.config.metadata_enabled

    def delete_metadata_table(self) -> None:
        """Delete the MDT, then clear the record; a crash in between leaves a recorded, missing MDT (repairable)."""
        if not self.has_metadata_table() and not self.metadata().exists():
            raise BadInputError(f"{self.uri} has no metadata table")
        self.metadata().delete()
        self.config = record_metadata_table(self.storage, False)

    def bootstrap_sources(self) -> BootstrapSources | None:
        """A bootstrapped table's skeleton -> source mapping (None for any other table)."""
        if not self.config.raw.get(BOOTSTRAP_BASE_PATH):
            return None
        if self._sources is None or self._sources.base_uri != self.config.raw[BOOTSTRAP_BASE_PATH]:
            self._sources = BootstrapSources(self.storage, self.config)
        return self._sources

    def with_sources(self, files: list[BaseFile], timeline: ActiveTimeline) -> list[BaseFile]:
        """`files`, a skeleton's with the source file its rows join (RFC-12): what every reader is given. Until
        the bootstrap instant completes its skeletons are no one's to read (a view drops them)."""
        sources = self.bootstrap_sources()
        if sources is None or not timeline.is_completed_or_archived(METADATA_BOOTSTRAP_INSTANT):
            return files
        return sources.attach(files)

    def source_of(self, partition: str, file_id: str, instant: str) -> SourceFile | None:
        sources = self.bootstrap_sources()
        return None if sources is None else sources.source(partition, file_id, instant)

    def new_instant_time(self, timeline: ActiveTimeline) -> str:
        """An instant time strictly greater than every instant on both timelines."""
        mdt = self.metadata()
        return mdt.next_instant(timeline) if mdt.exists() else CLOCK.next_after(timeline.last_time())

    def storage_view(
        self,
        as_of: str | None = None,
        timeline: ActiveTimeline | None = None,
        fallback_reason: str | None = None,
        partitions: list[str] | None = None,
    ) -> TableView:
        """The view from a storage listing (of the whole table unless `partitions`; slow on object stores)."""
        if partitions is None:
            entries = list_table_files(self.storage)
        else:
            entries = [e for p in partitions for e in self.storage.list_files(p, recursive=False)]
        logs = parse_log_listing(entries) if self.config.merge_on_read else ()
        timeline = timeline or self.timeline()
        files = self.with_sources(parse_listing(entries), timeline)
        return TableView(files, timeline, _restored_as_of(timeline, as_of), "storage", fallback_reason, logs=logs)

    def metadata_view(
        self,
        as_of: str | None = None,
        timeline: ActiveTimeline | None = None,
        mdt: MetadataTable | None = None,
        partitions: list[str] | None = None,
    ) -> TableView:
        """The view from the metadata table as it stands (no health check): no storage listing at all."""
        timeline = timeline or self.timeline()
        mdt = mdt or self.metadata()
        reader = MetadataReader(mdt, timeline)
        rows = reader.listed_files(partitions)
        files = self.with_sources([f for p, name, size in rows if (f := parse_base_file(p, name, size))], timeline)
        logs = []
        if self.config.merge_on_read:
            logs = [g for p, n, size in reader.listed_logs(partitions) if (g := parse_data_log(p, n, size))]
        return TableView(files, timeline, _restored_as_of(timeline, as_of), "metadata", mdt=mdt, logs=logs)

    def view(self, as_of: str | None = None, source: str = "auto", partitions: list[str] | None = None) -> TableView:
        """The metadata table's view when the table has a healthy one, else storage's.

        "auto" lists storage when the MDT is unhealthy and says why (a
        `MetadataFallbackWarning`, and the view's `fallback_reason`); "metadata"
        raises instead; "storage" never reads the MDT. `partitions`: a view of
        only those (one MDT lookup, or one folder listing each), not of the table.
        """
        if partitions is not None:
            partitions = [partition_path.canonical(p, "partition") for p in partitions]
        with read_once.reuse_reads():  # the health check and the reader share each read: nothing writes here
            found = self.listing_source(source)
            if found.mdt is None:
                return self.storage_view(as_of, found.timeline, found.fallback_reason, partitions)
            return self.metadata_view(as_of, found.timeline, found.mdt, partitions)

    def listing_source(self, source: str = "auto") -> ListingSource:
        """Where a read's file listing comes from (see `view`), decided without listing anything yet:
        a planner can then ask the MDT for the partitions it needs only."""
        if source not in SOURCES:
            raise BadInputError(f"unknown listing source {source!r} (one of {', '.join(SOURCES)})")
        if source == "storage":
            return ListingSource(self.timeline(), None)
        mdt = _ReadOnce(self.storage)
        recorded = self.has_metadata_table()
        if not recorded and not mdt.exists():
            if source == "metadata":
                raise BadInputError(f"{self.uri} has no metadata table (`tandem metadata create` builds one)")
            return ListingSource(self.timeline(), None)
        timeline = self.timeline()
        found = health.problems(mdt, timeline, recorded)
        if not found:
            return ListingSource(timeline, mdt)
        reason = health.summary(found)
        if source == "metadata":
            raise health.MetadataUnhealthyError(f"metadata table unhealthy ({reason}); {health.repair_hint(self.uri)}")
        warnings.warn(health.fallback_message(reason, self.uri), health.MetadataFallbackWarning, stacklevel=3)
        return ListingSource(timeline, None, reason)

    def check_writable(self, data_timeline: ActiveTimeline | None = None) -> TableConfig:
        """Refuse to write on an unhealthy MDT (`listing_source` is the readers' side); call under the lock
        at begin and again at commit.

        The table's config is read afresh and returned: a long-lived `Table` may
        predate a `metadata create` or `metadata delete` (of the MDT or of an index)
        by another process.
        """
        config = read_config(self.storage)
        recorded = config.metadata_enabled
        mdt = self.metadata()
        if not recorded and not mdt.exists():
            return config
        found = health.problems(mdt, data_timeline or self.timeline(), recorded, writing=True, config=config)
        if found:
            reason = health.summary(found)
            raise health.MetadataUnhealthyError(
                f"metadata table unhealthy ({reason}); refusing to write — {health.repair_hint(self.uri)}"
            )
        return config


def _restored_as_of(timeline: ActiveTimeline, as_of: str | None) -> str | None:
    """While a restore is under way every view is as of its savepoint at the latest: the state it leaves, never
    a table half restored."""
    restored = timeline.restoring_to()
    return as_of if restored is None else min(as_of or restored, restored)


@dataclass(frozen=True)
class ListingSource:
    """A timeline, and the healthy MDT to list from (None: list storage, for `fallback_reason` when set)."""

    timeline: ActiveTimeline
    mdt: MetadataTable | None
    fallback_reason: str | None = None
