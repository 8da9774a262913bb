"""Hudi log files in pure Python: the block envelope byte for byte, every block kind round trip, torn and
corrupt files (a truncation at every offset, a bit flip at every offset) never read as data, and log file names
as Hudi parses them. The Java judges are in tests/interop/test_java_hudi_log.py."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import random
import struct

import fastavro
import pytest

from timeline.hudi_log import (
    MAGIC,
    BlockType,
    DeleteRecord,
    HeaderKey,
    HudiLogError,
    LogBlock,
    LogFileName,
    avro_block,
    avro_records,
    delete_block,
    deleted_records,
    encode_block,
    hfile_block,
    hfile_records,
    log_file_name,
    parse_log_name,
    read_blocks,
    read_intact,
    rollback_block,
    rollback_target,
)
from timeline.hudi_log.delete_records import decode_delete_content, encode_delete_content

# Java Hudi 0.15's first block of a metadata-table file group (.files-0000-0_00000000000000010.log.1_0-0-0):
# an empty delete block, written when the metadata table is initialised.
JAVA_EMPTY_DELETE = bytes.fromhex(
    "2348554449230000000000000042000000010000000100000001000000000000001130303030303030303030303030303031"
    "300000000000000009000000030000000100000000000000000000000048"
)
ROW_SCHEMA = json.dumps(  # in Avro's own rendering (Schema.toString), as Java writes a SCHEMA header
    {
        "type": "record",
        "name": "Row",
        "namespace": "tandem.test",
        "fields": [
            {"name": "key", "type": "string"},
            {"name": "n", "type": ["null", "long"], "default": None},
            {"name": "x", "type": "double"},
            {"name": "blob", "type": "bytes"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
        ],
    },
    separators=(",", ":"),
)
_ROW = fastavro.parse_schema(json.loads(ROW_SCHEMA))
EXTRA_KEYS = ("TARGET_INSTANT_TIME", "COMPACTED_BLOCK_TIMES", "RECORD_POSITIONS", "BLOCK_IDENTIFIER")
JAVA_ORDERINGS = ("IntWrapper", "LongWrapper", "StringWrapper", "BooleanWrapper", "DoubleWrapper")


def avro_bytes(record: dict) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, _ROW, record)
    return buffer.getvalue()


def text(rng: random.Random, longest: int = 12) -> str:
    alphabet = "abcXYZ019_-/.,=: éß☃𝄞"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


def row(rng: random.Random, blob: int = 8) -> dict:
    return {
        "key": text(rng),
        "n": rng.choice([None, rng.randint(-(2**63), 2**63 - 1)]),
        "x": rng.uniform(-1e9, 1e9),
        "blob": rng.randbytes(blob),
        "tags": [text(rng, 4) for _ in range(rng.randint(0, 3))],
    }


def ordering(rng: random.Random) -> tuple[str, object] | None:
    """An ordering value whose Java type py4j gives Java as it is (Integer, Long, Double, Boolean, String), so
    that the Java judge can write it too; every wrapper is test_delete_records_every_ordering_wrapper's."""
    wrapper = rng.choice((None, *JAVA_ORDERINGS))
    value = {
        None: None,
        "IntWrapper": rng.randint(-(2**31), 2**31 - 1),
        "LongWrapper": rng.choice([-1, 1]) * rng.randint(2**31, 2**63 - 1),  # beyond int, as a Java Long is
        "StringWrapper": text(rng),
        "BooleanWrapper": rng.random() < 0.5,
        "DoubleWrapper": rng.uniform(-1e6, 1e6),
    }[wrapper]
    return None if wrapper is None else (wrapper, value)


def extra_header(rng: random.Random) -> dict[str, str]:
    return {key: text(rng) for key in EXTRA_KEYS if rng.random() < 0.5}


def random_block(rng: random.Random, kind: str | None = None, big: bool = False) -> tuple[bytes, dict]:
    """One block of `kind` (else any) and the view a reader must give of it: kind, header, decoded records;
    `big`: 20000 deletes or a 3 MB record."""
    instant = rng.choice([f"{rng.randint(0, 10**17 - 1):017d}", text(rng)])
    kind = kind or rng.choice(["rollback", "delete", "avro", "hfile"])
    extra = extra_header(rng)
    if kind == "rollback":
        extra.pop("TARGET_INSTANT_TIME", None)
        target = text(rng)
        header = {"INSTANT_TIME": instant, "TARGET_INSTANT_TIME": target, "COMMAND_BLOCK_TYPE": "0", **extra}
        return rollback_block(instant, target, extra), {"kind": BlockType.COMMAND_BLOCK, "header": header}
    if kind == "delete":
        count = 20000 if big else rng.randint(0, 40)
        records = [
            DeleteRecord(rng.choice([None, text(rng)]), rng.choice([None, text(rng)]), ordering(rng))
            for _ in range(count)
        ]
        view = {"kind": BlockType.DELETE_BLOCK, "header": {"INSTANT_TIME": instant, **extra}, "deletes": records}
        return delete_block(instant, records, extra), view
    rows = [row(rng, blob=3_000_000 if big else 8) for _ in range(1 if big else rng.randint(0, 30))]
    header = {"INSTANT_TIME": instant, "SCHEMA": ROW_SCHEMA, **extra}
    if kind == "avro":
        view = {"kind": BlockType.AVRO_DATA_BLOCK, "header": header, "rows": [avro_bytes(r) for r in rows]}
        return avro_block(instant, ROW_SCHEMA, rows, extra), view
    cells = {r["key"]: avro_bytes({**r, "key": rng.choice([r["key"], ""])}) for r in rows}  # the key kept or not
    view = {"kind": BlockType.HFILE_DATA_BLOCK, "header": header, "cells": sorted(cells.items(), key=cell_order)}
    return hfile_block(instant, ROW_SCHEMA, cells.items(), extra), view


def cell_order(cell: tuple[str, bytes]) -> bytes:
    return cell[0].encode()


def random_log(rng: random.Random, blocks: int) -> tuple[bytes, list[dict]]:
    made = [random_block(rng) for _ in range(blocks)]
    return b"".join(data for data, _ in made), [view for _, view in made]


def view_of(block: LogBlock) -> dict:
    """What Tandem reads from a block, in the shape random_block expects."""
    view = {"kind": block.kind, "header": block.header}
    if block.kind is BlockType.COMMAND_BLOCK:
        assert rollback_target(block) == block.header["TARGET_INSTANT_TIME"]
    elif block.kind is BlockType.DELETE_BLOCK:
        view["deletes"] = deleted_records(block)
    elif block.kind is BlockType.AVRO_DATA_BLOCK:
        view["rows"] = [avro_bytes(r) for r in avro_records(block)]
    elif block.kind is BlockType.HFILE_DATA_BLOCK:
        view["cells"] = hfile_records(block)
    return view


def decode(block: LogBlock) -> object:
    """A block's records as Tandem takes them; raises for a block it cannot take."""
    readers = {
        BlockType.COMMAND_BLOCK: rollback_target,
        BlockType.DELETE_BLOCK: deleted_records,
        BlockType.AVRO_DATA_BLOCK: avro_records,
    }
    if block.kind not in readers:
        raise ValueError(f"Tandem reads no {block.kind.name}")
    return readers[block.kind](block)


def small_log() -> bytes:
    """Four small blocks of every kind Tandem writes but HFile: rollback, delete, Avro data, rollback."""
    rng = random.Random(7)
    deletes = [DeleteRecord("k1", "p1"), DeleteRecord("k2", None, ("LongWrapper", 2**40)), DeleteRecord(None, "p")]
    return b"".join(
        [
            rollback_block("20240101000000001", "20240101000000000"),
            delete_block("20240101000000002", deletes),
            avro_block("20240101000000003", ROW_SCHEMA, [row(rng), row(rng)], {"BLOCK_IDENTIFIER": "0,1"}),
            rollback_block("20240101000000004", "20240101000000003", {"COMPACTED_BLOCK_TIMES": "1,2"}),
        ]
    )


# -- the envelope


def test_envelope_is_hudi_0_15_layout():
    block = encode_block(BlockType.COMMAND_BLOCK, {"INSTANT_TIME": "002", "TARGET_INSTANT_TIME": "001"}, b"xyz")
    header = struct.pack(">iii3sii3s", 2, 0, 3, b"002", 1, 3, b"001")
    size = 4 + 4 + len(header) + 8 + 3 + 4 + 8
    expected = MAGIC + struct.pack(">qii", size, 1, 0) + header + struct.pack(">q", 3) + b"xyz"
    assert block == expected + struct.pack(">iq", 0, size + 6)
    assert {key.name: key.value for key in HeaderKey} == {
        "INSTANT_TIME": 0,
        "TARGET_INSTANT_TIME": 1,
        "SCHEMA": 2,
        "COMMAND_BLOCK_TYPE": 3,
        "COMPACTED_BLOCK_TIMES": 4,
        "RECORD_POSITIONS": 5,
        "BLOCK_IDENTIFIER": 6,
    }
    assert [kind.name for kind in BlockType] == [
        "COMMAND_BLOCK",
        "DELETE_BLOCK",
        "CORRUPT_BLOCK",
        "AVRO_DATA_BLOCK",
        "HFILE_DATA_BLOCK",
        "PARQUET_DATA_BLOCK",
        "CDC_DATA_BLOCK",
    ]


def test_java_written_empty_delete_block():
    assert delete_block("00000000000000010", []) == JAVA_EMPTY_DELETE
    (block,) = read_intact(JAVA_EMPTY_DELETE)
    assert (block.kind, block.header, block.offset, block.size) == (
        BlockType.DELETE_BLOCK,
        {"INSTANT_TIME": "0" * 15 + "10"},
        0,
        80,
    )
    assert deleted_records(block) == []


def test_header_entries_keep_their_order_and_are_checked():
    entries = {"SCHEMA": "s", HeaderKey.INSTANT_TIME: "i"}
    (block,) = read_blocks(encode_block(BlockType.AVRO_DATA_BLOCK, entries))
    assert list(block.header.items()) == [("SCHEMA", "s"), ("INSTANT_TIME", "i")]
    with pytest.raises(ValueError, match="unknown"):
        encode_block(BlockType.COMMAND_BLOCK, {"NOT_A_KEY": "x"})
    with pytest.raises(ValueError, match="twice"):
        encode_block(BlockType.COMMAND_BLOCK, {"SCHEMA": "a", HeaderKey.SCHEMA: "b"})
    with pytest.raises(TypeError):
        encode_block(BlockType.COMMAND_BLOCK, {"SCHEMA": 1})
    with pytest.raises(ValueError, match="never written"):
        encode_block(BlockType.CORRUPT_BLOCK, {})


def assert_round_trip(data: bytes, views: list[dict]) -> None:
    blocks = read_intact(data, expected_size=len(data))
    assert [view_of(b) for b in blocks] == views
    assert [b.offset for b in blocks] == [0] + [b.end for b in blocks[:-1]] and blocks[-1].end == len(data)
    assert b"".join(encode_block(b.kind, b.header, b.content, b.footer) for b in blocks) == data


def test_random_logs_round_trip():
    rng = random.Random(1)
    for _ in range(150):
        assert_round_trip(*random_log(rng, rng.randint(1, 6)))


def test_large_blocks_round_trip():
    rng = random.Random(4)
    made = [random_block(rng, kind, big=True) for kind in ("delete", "avro", "hfile")]
    assert_round_trip(b"".join(data for data, _ in made), [view for _, view in made])


def test_footer_and_empty_content():
    data = encode_block(BlockType.DELETE_BLOCK, {}, b"", {"BLOCK_IDENTIFIER": "f"})
    (block,) = read_intact(data)
    assert (block.header, block.content, block.footer) == ({}, b"", {"BLOCK_IDENTIFIER": "f"})


# -- damage


def test_truncation_at_every_offset_reads_as_torn():
    data = small_log()
    whole = read_intact(data)
    boundaries = {b.end for b in whole}
    for cut in range(len(data)):
        blocks = read_blocks(data[:cut])
        assert sum(b.size for b in blocks) == cut
        valid = [b for b in blocks if not b.corrupt]
        assert valid == [b for b in whole if b.end <= cut]
        if cut not in boundaries | {0}:
            assert blocks[-1].corrupt and blocks[-1].torn and blocks[-1].end == cut
            with pytest.raises(HudiLogError):
                read_intact(data[:cut])
        with pytest.raises(HudiLogError):
            read_intact(data[:cut], expected_size=len(data))


def fields(block: LogBlock) -> tuple[set[int], set[int]]:
    """The offsets of a footer-less block's structural bytes (magic, sizes, lengths, counts, version) and of
    its naming fields (the block type and the header keys), which a flip can turn into other valid names."""
    naming = set(range(block.offset + 18, block.offset + 22))
    values: set[int] = set()
    pos = block.offset + 6 + 8 + 4 + 4 + 4
    for value in block.header.values():
        naming.update(range(pos, pos + 4))
        pos += 8
        values.update(range(pos, pos + len(value.encode())))
        pos += len(value.encode())
    pos += 8
    values.update(range(pos, pos + len(block.content)))
    return set(range(block.offset, block.end)) - values - naming, naming


def test_bit_flip_at_every_offset_never_reads_as_data():
    """A flipped bit in a block's structure makes that block corrupt; in its type or a header key, a block
    that keeps the original values (and whose records Tandem refuses when something it needs went missing);
    blocks elsewhere read as before. A flip inside a header value or the content is beyond the format, which
    has no checksum (an HFile's content has its own)."""
    data = small_log()
    whole = read_intact(data)
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] ^= 1 << (at % 8)
        blocks = read_blocks(bytes(damaged))
        assert sum(b.size for b in blocks) == len(data)
        (hit,) = [b for b in whole if b.offset <= at < b.end]
        structural, naming = fields(hit)
        if at in structural:
            with pytest.raises(HudiLogError):
                read_intact(bytes(damaged))
        for block in blocks:
            if block.corrupt or block in whole:
                continue
            assert block.offset == hit.offset and block.size == hit.size and at not in structural, at
            if at in naming:
                assert sorted(block.header.values()) == sorted(hit.header.values()), at
                if block.kind is not hit.kind or not set(hit.header) <= set(block.header):
                    with pytest.raises(ValueError):
                        decode(block)


def test_garbage_before_between_and_after_blocks():
    one, two = rollback_block("2", "1"), rollback_block("3", "2")
    blocks = read_blocks(b"junk" + one)
    assert [b.corrupt for b in blocks] == [True, False] and blocks[0].content == b"junk"
    blocks = read_blocks(one + b"garbage" + two)  # Hudi's check: no magic right after `one`
    assert [b.corrupt for b in blocks] == [True, False] and blocks[0].content == one[6:] + b"garbage"
    blocks = read_blocks(one + MAGIC[:3])  # Java stops silently at a partial magic; here it is a torn tail
    assert [(b.corrupt, b.torn) for b in blocks] == [(False, False), (True, True)]
    blocks = read_blocks(one + b"#HUD1#garbage")
    assert [b.corrupt for b in blocks] == [True] and blocks[0].torn


def test_resync_lands_on_magic_inside_a_torn_block():
    inner = rollback_block("5", "4")
    outer = encode_block(BlockType.DELETE_BLOCK, {"INSTANT_TIME": "6"}, b"\x00" * 10 + inner)
    blocks = read_blocks(outer[:-12] + rollback_block("7", "6"))  # as Java does: the next MAGIC, wherever it is
    assert [b.corrupt for b in blocks] == [True, False, False]
    assert rollback_target(blocks[1]) == "4" and rollback_target(blocks[2]) == "6"
    assert read_blocks(outer)[0].content.endswith(inner)  # a whole block is not scanned


@pytest.mark.parametrize(
    "field, value, reason",
    [
        (14, struct.pack(">i", 2), "format version 2"),
        (18, struct.pack(">i", 7), "unknown block type 7"),
        (18, struct.pack(">i", 2), "unknown block type 2"),
        (26, struct.pack(">i", 9), "unknown header key ordinal 9"),
        (22, struct.pack(">i", -1), "negative header"),
        (22, struct.pack(">i", 4), "header INSTANT_TIME given twice"),  # the content length read as a key
        (30, struct.pack(">i", 999), "header value runs past the end of its block"),
        (6, struct.pack(">q", (1 << 32) + 59), "runs past the end of the file"),
    ],
)
def test_damage_inside_a_sound_envelope(field: int, value: bytes, reason: str):
    """Fields Hudi's check does not cover (Java throws on most, or keeps only an int of the size): a corrupt
    block bounded by the envelope, and the next block reads."""
    first, second = bytearray(rollback_block("2", "1")), rollback_block("3", "2")
    assert struct.unpack(">q", first[6:14])[0] == 59
    first[field : field + len(value)] = value
    blocks = read_blocks(bytes(first) + second)
    assert blocks[0].corrupt and reason in blocks[0].reason
    assert not blocks[-1].corrupt and rollback_target(blocks[-1]) == "2"


def test_read_intact_wants_a_whole_nonempty_file():
    with pytest.raises(HudiLogError, match="empty"):
        read_intact(b"")
    with pytest.raises(HudiLogError, match="recorded 81"):
        read_intact(JAVA_EMPTY_DELETE, expected_size=81)
    with pytest.raises(HudiLogError, match="offset 80"):
        read_intact(JAVA_EMPTY_DELETE + b"#HU")
    assert read_blocks(b"") == []


# -- block kinds


def test_delete_records_every_ordering_wrapper():
    records = [
        DeleteRecord(None, None),
        DeleteRecord("k", "p/q", ("BooleanWrapper", False)),
        DeleteRecord("k", "", ("IntWrapper", -5)),
        DeleteRecord("", "p", ("LongWrapper", 2**62)),
        DeleteRecord("k", "p", ("FloatWrapper", 0.25)),
        DeleteRecord("k", "p", ("DoubleWrapper", -1e300)),
        DeleteRecord("k", "p", ("BytesWrapper", b"\x00\xff")),
        DeleteRecord("k", "p", ("StringWrapper", "é𝄞")),
        DeleteRecord("k", "p", ("DateWrapper", 19000)),
        DeleteRecord("k", "p", ("DecimalWrapper", decimal.Decimal("-12.345000000000000"))),
        DeleteRecord("k", "p", ("TimeMicrosWrapper", datetime.time(1, 2, 3, 4))),
        DeleteRecord("k", "p", ("TimestampMicrosWrapper", 1_700_000_000_000_000)),
    ]
    assert decode_delete_content(encode_delete_content(records)) == records
    with pytest.raises(ValueError, match="unknown ordering wrapper"):
        encode_delete_content([DeleteRecord("k", "p", ("ShortWrapper", 1))])


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"\x00\x00\x00\x02\x00\x00\x00\x01\x00", "version 2"),
        (b"\x00\x00\x00\x03\x00\x00\x00\x02\x00", "says 2 Avro bytes"),
        (b"\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00", "bytes after"),
        (b"\x00\x00\x00\x03\x00\x00\x00\x01\x02", "not a HoodieDeleteRecordList"),
        (b"\x00\x00\x00", "shorter"),
    ],
)
def test_damaged_delete_content(content: bytes, reason: str):
    with pytest.raises(HudiLogError, match=reason):
        decode_delete_content(content)


def test_avro_data_block_content():
    rng = random.Random(3)
    rows = [row(rng) for _ in range(5)]
    (block,) = read_intact(avro_block("1", ROW_SCHEMA, rows))
    assert avro_records(block) == rows
    assert struct.unpack(">ii", block.content[:8]) == (3, 5)
    for damaged, reason in [
        (block.content[:-1], "runs past"),
        (block.content + b"\x00", "after the last"),
        (b"\x00\x00\x00\x02" + block.content[4:], "version 2"),
        (block.content[:6], "record count"),
    ]:
        with pytest.raises(HudiLogError, match=reason):
            avro_records(LogBlock(block.kind, block.header, {}, damaged, 0, 0))


def test_kind_decoders_check_kind_and_header():
    (command,) = read_blocks(rollback_block("2", "1"))
    assert rollback_target(command) == "1"
    for header, reason in [
        ({"INSTANT_TIME": "2", "COMMAND_BLOCK_TYPE": "0"}, "lacks header TARGET_INSTANT_TIME"),
        ({"TARGET_INSTANT_TIME": "1", "COMMAND_BLOCK_TYPE": "0"}, "lacks header INSTANT_TIME"),
        ({"INSTANT_TIME": "2", "TARGET_INSTANT_TIME": "1", "COMMAND_BLOCK_TYPE": "1"}, "unknown command block type"),
    ]:
        (other,) = read_blocks(encode_block(BlockType.COMMAND_BLOCK, header))
        with pytest.raises(HudiLogError, match=reason):
            rollback_target(other)
    (other,) = read_blocks(rollback_block("2", "1", {"COMMAND_BLOCK_TYPE": "1", "INSTANT_TIME": "9"}))
    assert rollback_target(other) == "1" and other.header["INSTANT_TIME"] == "2"  # the kind's own entries win
    with pytest.raises(ValueError, match="not a DELETE_BLOCK"):
        deleted_records(command)
    (avro,) = read_blocks(encode_block(BlockType.AVRO_DATA_BLOCK, {"INSTANT_TIME": "1"}))
    with pytest.raises(HudiLogError, match="lacks header SCHEMA"):
        avro_records(avro)


def test_hfile_data_block_round_trip():
    records = [("p2", b"\x02"), ("__all_partitions__", b"\x01"), ("p1", b"\x03"), ("é", b""), ("\ue000", b"x")]
    (block,) = read_intact(hfile_block("5", ROW_SCHEMA, records))
    assert block.kind is BlockType.HFILE_DATA_BLOCK and block.header == {"INSTANT_TIME": "5", "SCHEMA": ROW_SCHEMA}
    assert hfile_records(block) == sorted(records, key=cell_order)
    with pytest.raises(ValueError):  # Java keeps duplicate keys; the metadata table never has them
        hfile_block("5", ROW_SCHEMA, [("k", b""), ("k", b"")])


def test_bit_flip_anywhere_in_hfile_content_never_reads_as_records():
    """The log format has no checksum, but an HFile checks each of its blocks: a flipped bit in the content
    of an HFile data block fails the read, or (in a few bytes no reader looks at) changes nothing."""
    rng = random.Random(2)
    cells = sorted(((f"key-{i:02d}", avro_bytes({**row(rng), "key": ""})) for i in range(20)), key=cell_order)
    (block,) = read_intact(hfile_block("5", ROW_SCHEMA, cells))
    unchanged = 0
    for at in range(len(block.content)):
        damaged = bytearray(block.content)
        damaged[at] ^= 1 << (at % 8)
        try:
            assert hfile_records(LogBlock(block.kind, block.header, {}, bytes(damaged), 0, 0)) == cells, at
            unchanged += 1
        except HudiLogError:
            pass
    assert unchanged < 10


# -- names


def test_log_file_names_as_hudi_parses_them():
    java = ".files-0000-0_00000000000000012001.log.3_4-98-189"
    assert parse_log_name(java) == LogFileName("files-0000-0", "00000000000000012001", 3, "4-98-189")
    assert log_file_name("files-0000-0", "00000000000000012001", 3, "4-98-189") == java
    cdc = log_file_name("a1b2-0", "20240101000000000", 2, "0-1-2", cdc=True)
    assert cdc == ".a1b2-0_20240101000000000.log.2_0-1-2.cdc" and parse_log_name(cdc).suffix == ".cdc"
    assert parse_log_name(".f_1.log.1") == LogFileName("f", "1", 1, None)
    assert parse_log_name(".commits_.archive.2_1-0-1") == LogFileName("commits", "", 2, "1-0-1", ".archive")
    assert parse_log_name(".a_b_c.log.1_0-0-0").file_id == "a_b"  # the longest file id that leaves the rest
    assert parse_log_name(".f_1.log.1_0-0-0.extra").write_token == "0-0-0"  # the pattern is not end-anchored
    assert parse_log_name("..f_1.log.1_0-0-0.crc").file_id == ".f"  # Hadoop's checksum file of a log
    for name in ("f_1.log.1_0-0-0", ".f.log.1", ".f_1.log.x", "f-0_0-1-2_20240101.parquet", ".f_1.log.١"):
        assert parse_log_name(name) is None, name
    for bad in [("f", "1", 0, "0-0-0"), ("f", "1", 1, "0-0"), ("f", "1.log.1_0-0-0", 1, "0-0-0")]:
        with pytest.raises(ValueError):
            log_file_name(*bad)


def test_log_files_sort_as_hudi_reads_them():
    names = [
        ".f_2.log.1_0-0-0",
        ".f_1.log.2_0-0-0",
        ".f_1.log.1_2-0-0",
        ".f_1.log.1_10-0-0",
        ".f_1.log.1",
        ".f_1.log.1_10-0-0.cdc",
    ]
    ordered = sorted(names, key=lambda n: parse_log_name(n).order_key)
    assert ordered == [names[4], names[3], names[5], names[2], names[1], names[0]]
