"""A merge-on-read rollback's command blocks: for each log a failed instant T wrote, a new log in the same slice
holding one rollback command block (Hudi's `HoodieCommandBlock`, TARGET_INSTANT_TIME = T), as Java's
marker-based rollback writes it on storage without appends (`.log.{next}_1-0-1`). The failed log stays:
deleting it would free its name for the next writer of the slice while another undoer of T still holds it.
Readers drop every block of T read before the command block."""

from __future__ import annotations

from timeline.format.data_logs import DataLog, parse_data_log, parse_log_listing
from timeline.hudi_log import log_file_name, rollback_block
from timeline.io.storage import Storage

ROLLOVER_TOKEN = "1-0-1"  # HoodieLogFormat.UNKNOWN_WRITE_TOKEN: the token Java's rollback writer uses
VERSION_TRIES = 64


def write_rollback_log(storage: Storage, failed_log: str, rollback_time: str, target: str) -> tuple[str, int]:
    """A new log after every log of `failed_log`'s slice, holding a command block that rolls `target` back;
    (its path, its size)."""
    partition, _, name = failed_log.rpartition("/")
    failed = parse_data_log(partition, name)
    if failed is None:
        raise ValueError(f"{failed_log} is not a log file")
    listed = parse_log_listing(storage.list_files(partition, recursive=False))
    same_slice = [g for g in listed if _same_slice(g, failed)]
    version = max((g.log.version for g in same_slice), default=failed.log.version) + 1
    data = rollback_block(rollback_time, target)
    for attempt in range(version, version + VERSION_TRIES):
        new = log_file_name(failed.file_id, failed.base_instant, attempt, ROLLOVER_TOKEN)
        path = f"{partition}/{new}" if partition else new
        if storage.create_if_absent(path, data):
            return path, len(data)
    raise FileExistsError(f"no free log version after {version} in the slice of {failed_log}")


def _same_slice(log: DataLog, other: DataLog) -> bool:
    return (log.file_id, log.base_instant) == (other.file_id, other.base_instant)
