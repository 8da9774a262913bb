"""Tandem's everyday API in one place: create or open a table, write a pyarrow table or a Spark DataFrame as one
instant (the metadata table first, under the lock), read or plan a scan with a filter and time travel, and run
the table services.

    import tandem

    table = tandem.create_table("/data/trips", "trips", record_key=["trip_id"], partition_by=["city"])
    tandem.write(table, rows, "upsert")
    tandem.read(table, where="fare > 9", as_of="2026-11-22 10:15:00")
"""

from coordinator.config import CoordinatorConfig
from coordinator.protocol.recovery import RecoveryReport
from coordinator.services.steps import CompactionReport
from coordinator.write.writer import WriteOptions, WriteResult
from tandem.api import archive, clean, compact, create_table, open_table, read, read_dataframe, recover, scan, write
from timeline.errors import BadInputError, ConflictError, TandemError
from timeline.query.scan import ScanPlan
from timeline.table import Table

__all__ = [
    "BadInputError",
    "CompactionReport",
    "ConflictError",
    "CoordinatorConfig",
    "RecoveryReport",
    "ScanPlan",
    "Table",
    "TandemError",
    "WriteOptions",
    "WriteResult",
    "archive",
    "clean",
    "compact",
    "create_table",
    "open_table",
    "read",
    "read_dataframe",
    "recover",
    "scan",
    "write",
]
