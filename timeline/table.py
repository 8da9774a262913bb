"""A Hudi table: its storage, its config and its timeline, opened or created."""

from __future__ import annotations

from dataclasses import dataclass

from timeline.active_timeline import ARCHIVED_FOLDER, ActiveTimeline
from timeline.errors import BadInputError
from timeline.file_names import parse_base_file
from timeline.fs_view import FileSystemView, list_base_files
from timeline.instant import CLOCK
from timeline.mdt.reader import MetadataReader
from timeline.mdt.table import MetadataTable
from timeline.storage import Storage
from timeline.table_config import HOODIE_DIR, TableConfig, read_config, write_config

META_COLUMNS = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
]
TEMP_DIR = f"{HOODIE_DIR}/.temp"
HEARTBEAT_DIR = f"{HOODIE_DIR}/.heartbeat"


@dataclass
class Table:
    storage: Storage
    config: TableConfig

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
    ) -> Table:
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
        )
        for folder in (HOODIE_DIR, f"{HOODIE_DIR}/{ARCHIVED_FOLDER}", TEMP_DIR):
            storage.makedirs(folder)
        write_config(storage, config)
        table = Table(storage, config)
        if with_metadata:
            table.metadata().create(name)
        return table

    @property
    def uri(self) -> str:
        return self.storage.base_uri

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, HOODIE_DIR)

    def metadata(self) -> MetadataTable:
        return MetadataTable(self.storage)

    def new_instant_time(self, timeline: ActiveTimeline) -> str:
        """An instant time strictly greater than every instant on both timelines."""
        mdt = self.metadata()
        return mdt.next_instant(timeline) if mdt.exists() else CLOCK.next_after(timeline.last_time())

    def storage_view(self, as_of: str | None = None, timeline: ActiveTimeline | None = None) -> FileSystemView:
        """The view from a full storage listing (slow on object stores)."""
        return FileSystemView(list_base_files(self.storage), timeline or self.timeline(), as_of)

    def metadata_view(self, as_of: str | None = None, timeline: ActiveTimeline | None = None) -> FileSystemView:
        """The view from the metadata table: no storage listing at all."""
        timeline = timeline or self.timeline()
        listing = MetadataReader(self.metadata(), timeline).listing()
        columns = (listing.column(c).to_pylist() for c in ("partition", "file", "size"))
        files = [f for p, name, size in zip(*columns, strict=True) if (f := parse_base_file(p, name, size))]
        return FileSystemView(files, timeline, as_of)

    def view(self, as_of: str | None = None, source: str = "auto") -> FileSystemView:
        """The metadata table's view when it exists (or is asked for), else storage's."""
        if source == "storage" or (source == "auto" and not self.metadata().exists()):
            return self.storage_view(as_of)
        if not self.metadata().exists():
            raise BadInputError(f"{self.uri} has no metadata table (`tandem metadata create` builds one)")
        return self.metadata_view(as_of)
