"""timeline.hfile on its own: round trips, HBase's index shapes, damage detection, hudi-rs as a reader.

The Java judges (HBase 2.4 through Hudi 0.15, Hudi's native readers and writer) are in
tests/interop/test_java_hfile.py; these tests need nothing but the project venv.
"""

from __future__ import annotations

import io
import json
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.hfile import HFileError, HFileReader, write_hfile
from timeline.hfile.cell import cell_key, midpoint_row, read_vint, write_vint
from timeline.hfile.trailer import TRAILER_SIZE, decode_trailer

HBASE_KEYS = {b"hfile.LASTKEY", b"hfile.AVG_KEY_LEN", b"hfile.AVG_VALUE_LEN", b"hfile.CREATE_TIME_TS"}
HBASE_KEYS |= {b"MAX_MEMSTORE_TS_KEY", b"KEY_VALUE_VERSION"}


def trailer_of(data: bytes):
    return decode_trailer(data[-TRAILER_SIZE:])


def long_keys(n: int, width: int = 120) -> list[bytes]:
    """Keys sharing a long prefix: HBase's index keys for them stay long, so index levels appear early."""
    return [b"k" * (width - 9) + b"-%08d" % i for i in range(n)]


def check_reads(data: bytes, cells: list[tuple[bytes, bytes]], absent: list[bytes]) -> HFileReader:
    reader = HFileReader(data)
    assert list(reader.items()) == cells
    assert len(reader) == len(cells)
    for key, value in cells:
        assert reader.get(key) == value
    for key in absent:
        assert reader.get(key) is None
    return reader


@settings(max_examples=60, deadline=None)
@given(
    entries=st.dictionaries(st.binary(max_size=24), st.binary(max_size=300), max_size=120),
    absent=st.lists(st.binary(max_size=24), max_size=20),
    block_size=st.sampled_from([1, 64, 700, 64 * 1024]),
    compression=st.sampled_from(["gz", "none"]),
    prefix=st.binary(max_size=2),
)
def test_round_trip(entries, absent, block_size, compression, prefix):
    cells = sorted(entries.items())
    data = write_hfile(cells, {b"schema": b"{}"}, block_size=block_size, compression=compression)
    reader = check_reads(data, cells, [key for key in absent if key not in entries])
    assert list(reader.scan_prefix(prefix)) == [(k, v) for k, v in cells if k.startswith(prefix)]
    assert reader.file_info[b"schema"] == b"{}"


def test_empty_file():
    data = write_hfile([])
    reader = check_reads(data, [], [b"", b"a"])
    assert list(reader.scan_prefix(b"")) == []
    assert b"hfile.LASTKEY" not in reader.file_info  # HBase writes no last key for an empty file
    trailer = trailer_of(data)
    assert (trailer.first_data_block_offset, trailer.last_data_block_offset, trailer.data_index_count) == (-1, -1, 0)


def test_file_info_is_what_hbase_writes():
    cells = [(b"a", b"12345"), (b"bcd", b"1")]
    reader = HFileReader(write_hfile(cells, {b"schema": b"s", b"minRecordKey": b"a"}))
    assert set(reader.file_info) == HBASE_KEYS | {b"schema", b"minRecordKey"}
    assert reader.file_info[b"hfile.LASTKEY"] == cell_key(b"bcd")
    assert reader.file_info[b"hfile.AVG_KEY_LEN"] == struct.pack(">i", (13 + 15) // 2)  # row + 12 key bytes
    assert reader.file_info[b"hfile.AVG_VALUE_LEN"] == struct.pack(">i", 3)
    assert reader.file_info[b"hfile.CREATE_TIME_TS"] == bytes(8)  # Hudi never sets HFileContext's create time
    assert reader.file_info[b"MAX_MEMSTORE_TS_KEY"] == bytes(8)
    assert reader.file_info[b"KEY_VALUE_VERSION"] == struct.pack(">i", 1)


def test_meta_blocks_round_trip():
    bloom = bytes(random.Random(1).randrange(256) for _ in range(5000))
    reader = HFileReader(write_hfile([(b"k", b"v")], meta_blocks={b"bloomFilter": bloom, b"a": b""}))
    assert reader.meta_block(b"bloomFilter") == bloom
    assert reader.meta_block(b"a") == b""
    assert reader.meta_block(b"missing") is None


@pytest.mark.parametrize(
    "cells, message",
    [
        ([(b"b", b""), (b"a", b"")], "strictly increasing"),
        ([(b"a", b""), (b"a", b"")], "strictly increasing"),
        ([(b"x" * 32768, b"")], "at most 32767"),
    ],
)
def test_writer_refuses_bad_cells(cells, message):
    with pytest.raises(ValueError, match=message):
        write_hfile(cells)


@pytest.mark.parametrize("key", [b"hfile.LASTKEY", b"hfile.anything", b"KEY_VALUE_VERSION", b"MAX_MEMSTORE_TS_KEY"])
def test_writer_refuses_hbase_file_info_keys(key):
    with pytest.raises(ValueError, match="HBase's"):
        write_hfile([], {key: b""})


def test_writer_refuses_unknown_compression():
    with pytest.raises(ValueError, match="compression"):
        write_hfile([], compression="snappy")


@pytest.mark.parametrize(
    "left, right, mid",
    [
        (b"abc", b"abz", b"abd"),  # room between the first differing bytes: left's byte + 1
        (b"abc", b"abd", b"abd"),  # no room: right up to the difference
        (b"ab", b"abc", b"abc"),  # left is a prefix of right
        (b"\x80", b"\x90", b"\x81"),
        (b"\x7f\x00", b"\xff", b"\x80"),
        (b"\xfe", b"\xff", b"\xff"),
    ],
)
def test_midpoint_rows(left, right, mid):
    assert midpoint_row(left, right) == mid
    assert left < mid <= right


@pytest.mark.parametrize("value", [0, 1, -1, 127, 128, -112, -113, 255, 70000, -70000, 2**40, -(2**63), 2**63 - 1])
def test_hadoop_vints(value):
    assert read_vint(write_vint(value), 0) == (value, len(write_vint(value)))


@pytest.mark.parametrize(
    "cells, kwargs, levels",
    [
        ([(k, b"v" * 20) for k in long_keys(2000)], {"block_size": 1}, 2),  # HBase's default 128 KiB index chunks
        ([(k, b"v" * 20) for k in long_keys(1200)], {"block_size": 1, "index_chunk_size": 1024}, 4),
        (
            [(k, b"v" * 20) for k in long_keys(600)],
            {"block_size": 1, "index_chunk_size": 1024, "compression": "none"},
            3,
        ),
    ],
)
def test_multi_level_index(cells, kwargs, levels):
    data = write_hfile(cells, **kwargs)
    assert trailer_of(data).num_data_index_levels == levels
    reader = check_reads(data, cells, [b"", b"k", cells[0][0] + b"\x00", b"\xff"])
    prefix = cells[0][0][:-3]
    assert list(reader.scan_prefix(prefix)) == [(k, v) for k, v in cells if k.startswith(prefix)]


def test_value_bigger_than_a_block():
    rng = random.Random(7)
    cells = [(b"a", rng.randbytes(200_000)), (b"b", b""), (b"c", rng.randbytes(70_000))]
    check_reads(write_hfile(cells), cells, [b"ab"])


def _answers(data: bytes, probes: list[bytes], count: bool = True) -> tuple:
    reader = HFileReader(data)
    items = list(reader.items())
    gets = [reader.get(key) for key in probes]
    scans = [list(reader.scan_prefix(p)) for p in (b"", b"k1", b"zz")]
    counted = len(reader) if count else None
    return items, counted, gets, scans, reader.file_info, reader.meta_block(b"bloomFilter")


def _damage_is_caught(data: bytes, positions) -> None:
    probes = [key for key, _ in HFileReader(data).items()] + [b"", b"k15x", b"zzz"]
    expected = _answers(data, probes)
    for at in positions:
        damaged = bytearray(data)
        damaged[at] ^= 1 << (at % 8)
        try:
            answers = _answers(bytes(damaged), probes)
        except HFileError:
            continue
        assert answers == expected, f"a flipped bit at byte {at} changed an answer"


def test_every_flipped_byte_is_caught_or_harmless():
    """A bit flipped anywhere: HFileError, or (trailer fields no answer depends on) the very same answers."""
    rng = random.Random(3)
    cells = [(b"k%02d" % i, rng.randbytes(rng.randrange(150))) for i in range(40)]
    data = write_hfile(cells, {b"schema": b"{}"}, block_size=1024, meta_blocks={b"bloomFilter": b"bits" * 30})
    _damage_is_caught(data, range(len(data)))


def test_a_verified_file_answers_as_the_undamaged_one():
    """`verify` checks checksums without parsing cells: every file it passes after a flipped bit, whatever
    the compression and index depth, answers exactly as before (the health check's gate for base files; the
    trailer's entry count, which no answer uses, is left to `len()`)."""
    rng = random.Random(11)
    cells = [(b"k%03d" % i, rng.randbytes(rng.randrange(120))) for i in range(120)]
    for kwargs in ({"compression": "gz"}, {"compression": "none", "index_chunk_size": 256}):
        data = write_hfile(cells, block_size=700, meta_blocks={b"bloomFilter": b"bits" * 30}, **kwargs)
        probes = [key for key, _ in cells] + [b"", b"k15x", b"zzz"]
        expected = _answers(data, probes, count=False)
        passed = 0
        for at in range(len(data)):
            damaged = bytearray(data)
            damaged[at] ^= 1 << (at % 8)
            try:
                HFileReader(bytes(damaged)).verify()
            except HFileError:
                continue
            passed += 1
            answers = _answers(bytes(damaged), probes, count=False)
            assert answers == expected, f"verify passed a flip at byte {at} that matters"
        assert passed < len(data) // 10  # only the trailer's unchecked fields may pass


def test_flips_in_a_multi_level_file():
    cells = [(k, b"value") for k in long_keys(300)]
    data = write_hfile(cells, block_size=1, index_chunk_size=512, compression="none")
    assert trailer_of(data).num_data_index_levels > 2
    trailer_start = len(data) - TRAILER_SIZE
    _damage_is_caught(data, [*random.Random(5).sample(range(trailer_start), 400), *range(trailer_start, len(data))])


def test_truncated_or_extended_files_are_refused():
    data = write_hfile([(b"k%03d" % i, b"v" * i) for i in range(100)], block_size=512)
    for size in range(len(data)):
        with pytest.raises(HFileError):
            HFileReader(data[:size])
    with pytest.raises(HFileError):
        HFileReader(data + b"\x00")
    with pytest.raises(HFileError):
        HFileReader(b"\x00" + data)


def test_a_damaged_entry_count_is_not_returned():
    data = bytearray(write_hfile([(b"a", b"1"), (b"b", b"2")]))
    at = data.index(b"\x38\x02", len(data) - TRAILER_SIZE)  # entry_count = 2 (protobuf field 7)
    data[at + 1] = 3
    with pytest.raises(HFileError, match="counts 3 cells"):
        len(HFileReader(bytes(data)))


def test_hudi_rs_reads_tandem_hfiles(tmp_path):
    """hudi-rs (the `hudi` package) reads a Tandem-written base file of a metadata table, values decoded by the
    Avro schema in the file info."""
    hudi = pytest.importorskip("hudi")
    fastavro = pytest.importorskip("fastavro")
    schema = {
        "type": "record",
        "name": "HoodieMetadataRecord",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {"name": "key", "type": "string"},
            {"name": "type", "type": "int"},
            {"name": "blob", "type": "bytes"},
        ],
    }
    parsed = fastavro.parse_schema(schema)
    rng = random.Random(13)
    rows = [{"key": f"key-{i:05d}", "type": i % 7, "blob": rng.randbytes(i % 90)} for i in range(3000)]

    def avro(row: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, row)
        return out.getvalue()

    base = tmp_path / ".hoodie" / "metadata"
    (base / ".hoodie").mkdir(parents=True)
    (base / "files").mkdir()
    (base / ".hoodie" / "hoodie.properties").write_text(
        "hoodie.table.name=t_metadata\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=6\n"
        "hoodie.table.base.file.format=HFILE\nhoodie.table.recordkey.fields=key\nhoodie.populate.meta.fields=false\n"
        "hoodie.timeline.layout.version=1\n"
    )
    cells = [(row["key"].encode(), avro(row)) for row in rows]
    info = {b"schema": json.dumps(schema).encode()}
    for name, kwargs in {"gz": {"block_size": 4096}, "levels": {"block_size": 1, "index_chunk_size": 2048}}.items():
        data = write_hfile(cells, info, compression="gz" if name == "gz" else "none", **kwargs)
        (base / "files" / f"{name}.hfile").write_bytes(data)
        batch = hudi.HudiFileGroupReader(str(base)).read_file_slice_from_paths(f"files/{name}.hfile", [])
        assert batch.select(["key", "type", "blob"]).to_pylist() == rows
