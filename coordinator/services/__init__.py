"""Table services as their own locked steps (recover, clean, compact, archive) and the long-running workers."""

from coordinator.services.steps import CompactionReport, archive_table, clean, compact, recover_table

__all__ = ["CompactionReport", "archive_table", "clean", "compact", "recover_table"]
