"""Metadata-table log blocks and record merging: torn and corrupt blocks never crash a reader."""

from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.format.commit_metadata import CommitMetadata, WriteStat
from timeline.mdt import records as rec
from timeline.mdt.log import DATA, MAGIC, SEAL, LogBlock, decode_log, encode_block, encode_log

names = st.text("abcdef0123456789-", min_size=1, max_size=12).map(lambda s: f"{s}_0-1-0_20240101000000000.parquet")
file_maps = st.dictionaries(names, st.integers(0, 10**9), max_size=5)


def block(instant: str, files: dict[str, int], partition: str = "p=1") -> LogBlock:
    return LogBlock(instant, DATA, [rec.file_list(partition, files)])


@given(st.lists(file_maps, min_size=1, max_size=4))
def test_blocks_round_trip(maps):
    blocks = [block(f"2024010100000000{i}", m) for i, m in enumerate(maps)]
    decoded = decode_log(encode_log(blocks))
    assert decoded.corrupt == []
    assert [(b.instant, b.records) for b in decoded.blocks] == [(b.instant, b.records) for b in blocks]


@settings(max_examples=60)
@given(st.lists(file_maps, min_size=2, max_size=4), st.data())
def test_torn_tail_keeps_every_complete_block(maps, data):
    blocks = [block(f"2024010100000000{i}", m) for i, m in enumerate(maps)]
    encoded = [encode_block(b) for b in blocks]
    whole = b"".join(encoded[:-1])
    cut = data.draw(st.integers(0, len(encoded[-1]) - 1))
    decoded = decode_log(whole + encoded[-1][:cut])
    assert [b.instant for b in decoded.blocks] == [b.instant for b in blocks[:-1]]
    assert len(decoded.corrupt) == (1 if cut > 0 else 0)


@settings(max_examples=60)
@given(st.lists(file_maps, min_size=3, max_size=4), st.data())
def test_a_flipped_byte_loses_only_its_block(maps, data):
    blocks = [block(f"2024010100000000{i}", m) for i, m in enumerate(maps)]
    encoded = [bytearray(encode_block(b)) for b in blocks]
    victim = data.draw(st.integers(0, len(encoded) - 1))
    offset = data.draw(st.integers(len(MAGIC), len(encoded[victim]) - 1))
    encoded[victim][offset] ^= 0xFF
    decoded = decode_log(b"".join(bytes(e) for e in encoded))
    survivors = [b.instant for b in decoded.blocks]
    assert blocks[victim].instant not in survivors
    assert survivors == [b.instant for i, b in enumerate(blocks) if i != victim]
    assert decoded.corrupt


def test_crc_covers_header_and_payload():
    raw = encode_block(LogBlock("20240101000000000", SEAL, [{"sealed": "slice"}]))
    body = raw[len(MAGIC) : -4]
    assert zlib.crc32(body).to_bytes(4, "big") == raw[-4:]


def test_garbage_is_reported_not_raised():
    decoded = decode_log(b"\x00" * 100 + MAGIC + b"\xff\xff\xff\xff", "x.log")
    assert decoded.blocks == [] and len(decoded.corrupt) == 2


def test_merge_union_tombstone_and_max_size():
    older = rec.file_list("p", {"a": 10, "b": 5})
    newer = rec.file_list("p", {"a": 7, "c": 1}, deleted=["b"])
    merged = rec.merge(older, newer)
    assert rec.live_files(merged) == {"a": 10, "c": 1}
    assert rec.compacted(merged)["filesystemMetadata"] == {
        "a": {"size": 10, "isDeleted": False},
        "c": {"size": 1, "isDeleted": False},
    }


@given(st.lists(st.tuples(file_maps, st.lists(names, max_size=3)), min_size=1, max_size=6))
def test_merge_matches_a_set_model(steps):
    model: dict[str, int] = {}
    merged = None
    for added, deleted in steps:
        merged = rec.merge(merged, rec.file_list("p", added, deleted))
        for name, size in added.items():
            model[name] = max(model.get(name, size), size)
        for name in deleted:
            model.pop(name, None)
    assert rec.live_files(merged) == model


def test_commit_metadata_becomes_file_and_partition_records():
    metadata = CommitMetadata()
    metadata.add(WriteStat("f1-0", "p=a/f1-0_0-1-0_2024.parquet", "p=a", file_size_in_bytes=100))
    metadata.add(WriteStat("f2-0", "f2-0_0-1-0_2024.parquet", "", file_size_in_bytes=7))
    records = rec.from_commit(metadata, known_partitions={"p=a"})
    by_key = {r["key"]: r for r in records}
    assert rec.live_files(by_key["p=a"]) == {"f1-0_0-1-0_2024.parquet": 100}
    assert rec.live_files(by_key["."]) == {"f2-0_0-1-0_2024.parquet": 7}
    assert rec.live_files(by_key[rec.ALL_PARTITIONS]) == {".": 0}
    tombstones = rec.from_deleted_paths(["p=a/f1-0_0-1-0_2024.parquet"], deleted_partitions=["p=b"])
    assert tombstones[0]["filesystemMetadata"]["f1-0_0-1-0_2024.parquet"]["isDeleted"] is True
    assert tombstones[1]["filesystemMetadata"]["p=b"]["isDeleted"] is True
