"""Hudi log files (format version 1, as Apache Hudi 0.14/0.15 write them): the block envelope and its damage
check (`framing`), the block kinds (`blocks`: rollback commands, deletes, HFile and Avro data), their contents
(`delete_records`, `hfile_content`, `avro_content`) and log file names (`names`)."""

from timeline.hudi_log.blocks import (
    avro_block,
    avro_records,
    delete_block,
    deleted_records,
    hfile_block,
    hfile_records,
    rollback_block,
    rollback_target,
)
from timeline.hudi_log.delete_records import DeleteRecord
from timeline.hudi_log.framing import (
    MAGIC,
    BlockType,
    HeaderKey,
    HudiLogError,
    LogBlock,
    encode_block,
    read_blocks,
    read_intact,
)
from timeline.hudi_log.names import LogFileName, log_file_name, parse_log_name

__all__ = [
    "MAGIC",
    "BlockType",
    "DeleteRecord",
    "HeaderKey",
    "HudiLogError",
    "LogBlock",
    "LogFileName",
    "avro_block",
    "avro_records",
    "delete_block",
    "deleted_records",
    "encode_block",
    "hfile_block",
    "hfile_records",
    "log_file_name",
    "parse_log_name",
    "read_blocks",
    "read_intact",
    "rollback_block",
    "rollback_target",
]
