"""The metadata table's writer: initialization from storage and validation, compaction (seal, plan, execute,
clean), housekeeping before each deltacommit, and building the column-stats and bloom-filter indexes."""

from coordinator.mdt.bootstrap import ValidationReport, initialize, validate

__all__ = ["ValidationReport", "initialize", "validate"]
