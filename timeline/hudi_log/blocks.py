"""The block kinds Tandem writes and reads: what each puts in its header and content.

Every block carries INSTANT_TIME. Data blocks (HFile, Avro) carry their writer schema in SCHEMA. A rollback
is a COMMAND_BLOCK with COMMAND_BLOCK_TYPE "0" (HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK, by ordinal), the
rolled-back instant in TARGET_INSTANT_TIME and empty content (HoodieCommandBlock). A delete block's content is
a HoodieDeleteRecordList (delete_records). Extra header entries (COMPACTED_BLOCK_TIMES, ...) pass through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from timeline.hudi_log.avro_content import decode_avro_content, encode_avro_content
from timeline.hudi_log.delete_records import DeleteRecord, decode_delete_content, encode_delete_content
from timeline.hudi_log.framing import BlockType, HeaderKey, HudiLogError, LogBlock, encode_block, header_key
from timeline.hudi_log.hfile_content import decode_hfile_content, encode_hfile_content

ROLLBACK_COMMAND = "0"


def _header(instant: str, extra: Mapping[str | HeaderKey, str], **fixed: str) -> dict[HeaderKey, str]:
    """INSTANT_TIME, the kind's own entries and any extra ones, in key ordinal order."""
    entries = {header_key(key): value for key, value in extra.items()}
    entries |= {HeaderKey.INSTANT_TIME: instant, **{HeaderKey[name]: value for name, value in fixed.items()}}
    return dict(sorted(entries.items()))


def rollback_block(instant: str, target: str, header: Mapping[str | HeaderKey, str] = {}) -> bytes:
    """A command block that rolls back every block `target` wrote to this file group before it."""
    fixed = {"TARGET_INSTANT_TIME": target, "COMMAND_BLOCK_TYPE": ROLLBACK_COMMAND}
    return encode_block(BlockType.COMMAND_BLOCK, _header(instant, header, **fixed))


def delete_block(instant: str, records: Iterable[DeleteRecord], header: Mapping[str | HeaderKey, str] = {}) -> bytes:
    return encode_block(BlockType.DELETE_BLOCK, _header(instant, header), encode_delete_content(list(records)))


def hfile_block(
    instant: str,
    schema: str,
    records: Iterable[tuple[str, bytes]],
    header: Mapping[str | HeaderKey, str] = {},
    *,
    compression: str = "gz",
) -> bytes:
    """An HFile data block of (record key, Avro value) records under `schema` (JSON), as the metadata table's."""
    content = encode_hfile_content(records, schema, compression=compression)
    return encode_block(BlockType.HFILE_DATA_BLOCK, _header(instant, header, SCHEMA=schema), content)


def avro_block(instant: str, schema: str, records: Iterable[dict], header: Mapping[str | HeaderKey, str] = {}) -> bytes:
    """An Avro data block (version 3) of `records` under `schema` (JSON), as a merge-on-read data table's."""
    content = encode_avro_content(schema, records)
    return encode_block(BlockType.AVRO_DATA_BLOCK, _header(instant, header, SCHEMA=schema), content)


def _expect(block: LogBlock, kind: BlockType, *keys: str) -> None:
    """A block of `kind` with INSTANT_TIME and `keys` in its header, as Hudi writes every such block."""
    if block.kind is not kind:
        raise ValueError(f"a {block.kind.name} at offset {block.offset} is not a {kind.name}")
    missing = [key for key in ("INSTANT_TIME", *keys) if key not in block.header]
    if missing:
        raise HudiLogError(f"{kind.name} at offset {block.offset} lacks header {', '.join(missing)}")


def rollback_target(block: LogBlock) -> str:
    """The instant a rollback command block rolls back; HudiLogError for any other command."""
    _expect(block, BlockType.COMMAND_BLOCK, "COMMAND_BLOCK_TYPE", "TARGET_INSTANT_TIME")
    if block.header["COMMAND_BLOCK_TYPE"] != ROLLBACK_COMMAND:
        raise HudiLogError(f"unknown command block type {block.header['COMMAND_BLOCK_TYPE']!r}")
    return block.header["TARGET_INSTANT_TIME"]


def deleted_records(block: LogBlock) -> list[DeleteRecord]:
    _expect(block, BlockType.DELETE_BLOCK)
    return decode_delete_content(block.content)


def hfile_records(block: LogBlock) -> list[tuple[str, bytes]]:
    """The (record key, Avro value) cells of an HFile data block; decode values with the SCHEMA header."""
    _expect(block, BlockType.HFILE_DATA_BLOCK, "SCHEMA")
    return decode_hfile_content(block.content)[0]


def avro_records(block: LogBlock) -> list[dict[str, Any]]:
    _expect(block, BlockType.AVRO_DATA_BLOCK, "SCHEMA")
    return decode_avro_content(block.header["SCHEMA"], block.content)
