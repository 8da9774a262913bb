"""Merge-on-read writes: a file group's updates and deletes of one instant as ONE new log file of its slice
(`.{fileId}_{baseInstant}.log.{version}_{token}`: an Avro data block version 3, then a delete block), never an
append to an existing file, as Hudi writes on local and object storage.

The file is created whole or not at all (`create_if_absent`), after its marker: two writers that pick the
same version cannot overwrite each other, the second takes the next version. Every block's header carries the
writing instant, which is what proves the file belongs to it when a rollback deletes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from coordinator.protocol.transaction import WRITE_FILE
from coordinator.write.meta_columns import with_meta
from coordinator.write.new_files import FileOwner, InstantSink
from timeline.crash_points import crash_point
from timeline.errors import ConflictError
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.commit_metadata import DeltaWrite, WriteStat
from timeline.format.file_names import write_token
from timeline.hudi_log import DeleteRecord, avro_block, delete_block, log_file_name
from timeline.mor.slice_merge import NATURAL_ORDER

VERSION_TRIES = 64  # versions tried past the highest known one before giving up (each taken by another writer)


@dataclass(frozen=True)
class LogTarget:
    """The slice a file group's new log extends: its base instant (the latest base file's, or a pending
    compaction's), that base file's name ("" if the slice has none yet) and the slice's log names so far."""

    partition: str
    file_id: str
    base_instant: str
    base_file: str
    logs: tuple[str, ...]
    next_version: int


def avro_records(rows: pa.Table) -> list[dict]:
    """Rows as Avro datums: a map column's entries become a dict (Arrow gives (key, value) pairs)."""
    maps = [f.name for f in rows.schema if pa.types.is_map(f.type)]
    records = rows.to_pylist()
    for record in records if maps else []:
        for name in maps:
            if record[name] is not None:
                record[name] = dict(record[name])
    return records


def write_log(
    owner: FileOwner,
    sink: InstantSink,
    target: LogTarget,
    updates: pa.Table,
    delete_keys: list[str],
    task: int,
    table_name: str,
    token: str | None = None,
) -> WriteStat:
    """Write one log of `updates` (rows keyed like a base file's) and `delete_keys`; its write stat. `token`:
    the write token in the name (Spark: partition-stage-attempt), else the task's."""
    instant = sink.time
    blocks: list[bytes] = []
    if updates.num_rows:
        rows = with_meta(updates, target.file_id, instant, task, True)  # _hoodie_file_name: the file id
        blocks.append(avro_block(instant, arrow_to_avro(rows.schema, table_name), avro_records(rows)))
    if delete_keys:
        deletes = [DeleteRecord(key, target.partition, NATURAL_ORDER) for key in delete_keys]
        blocks.append(delete_block(instant, deletes))
    data = b"".join(blocks)
    owner.ensure_partitions([target.partition], instant)
    storage = owner.table.storage
    token = token or write_token(task)
    for version in range(target.next_version, target.next_version + VERSION_TRIES):
        name = log_file_name(target.file_id, target.base_instant, version, token)
        path = f"{target.partition}/{name}" if target.partition else name
        sink.create_marker(path, "APPEND")
        if storage.create_if_absent(path, data):
            break
    else:
        raise ConflictError(
            f"file group {target.file_id}: log versions {target.next_version}.. are all taken; another writer "
            "is writing to it"
        )
    crash_point(WRITE_FILE)
    return WriteStat(
        file_id=target.file_id,
        path=path,
        partition_path=target.partition,
        prev_commit=target.base_instant,
        num_writes=updates.num_rows,
        num_update_writes=updates.num_rows,
        num_deletes=len(delete_keys),
        total_write_bytes=len(data),
        file_size_in_bytes=len(data),
        delta=DeltaWrite(version, 0, target.base_file, (*target.logs, name)),
    )
