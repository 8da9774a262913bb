"""The Hudi format: instants and the timeline, commit and action metadata, properties, keys, file names, schemas,
and Tandem's per-instant decision record."""

from timeline.format.active_timeline import ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.format.file_names import BaseFile, base_file_name, parse_base_file
from timeline.format.fs_view import FileGroup, FileSystemView
from timeline.format.instant import Instant, State, query_instant
from timeline.format.keys import partition_paths, record_keys

__all__ = [
    "ActiveTimeline",
    "BaseFile",
    "CommitMetadata",
    "FileGroup",
    "FileSystemView",
    "Instant",
    "State",
    "WriteStat",
    "base_file_name",
    "parse_base_file",
    "partition_paths",
    "query_instant",
    "record_keys",
]
