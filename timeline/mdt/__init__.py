"""The metadata table's read side and layout: slices and names, records and log blocks, the completed-instant
filter, and the health check. Its writer protocol (compaction, initialization, index builds) is
`coordinator.mdt`."""

from timeline.mdt.health import MetadataUnhealthyError
from timeline.mdt.reader import MetadataReader
from timeline.mdt.table import MetadataTable

__all__ = ["MetadataReader", "MetadataTable", "MetadataUnhealthyError"]
