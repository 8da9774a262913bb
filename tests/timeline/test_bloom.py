"""Record-key bloom filters: no false negatives, the configured false-positive rate, stable bytes."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import zlib
from pathlib import Path
from unittest.mock import patch

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.index.bloom import (
    BLOOM_ARROW_SCHEMA,
    BLOOM_SCHEMA,
    BLOOM_TYPE,
    DEFAULT_FPP,
    DEFAULT_NUM_ENTRIES,
    BloomFilter,
    bloom_record,
    bloom_tombstone,
    key_hashes,
)
from timeline.index.murmur3 import hash128

REPO = Path(__file__).resolve().parents[2]
HEADER_BYTES = 4 + 1 + 2 + 8 + 8 + 8  # magic, version, hashes, bits, entries, fpp
KEYS = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
# sha256 of the filter below: pins the hash function, the probe sequence and the byte layout, so a
# change in any of them (or an mmh3 that hashes differently) is caught before it reaches a table
GOLDEN_SCRIPT = (
    "import hashlib\n"
    "from timeline.index.bloom import BloomFilter\n"
    "b = BloomFilter(1000, 0.001)\n"
    "b.add_all([f'uuid-{i}' for i in range(500)] + ['', 'é', '\\U0010ffff', 'a\\x00b'])\n"
    "print(hashlib.sha256(b.to_bytes()).hexdigest())\n"
)


def _filter_with(keys: list[str], num_entries: int = 1000, fpp: float = 0.01) -> BloomFilter:
    bloom = BloomFilter(num_entries, fpp)
    bloom.add_all(keys)
    return bloom


@settings(max_examples=60, deadline=None)
@given(st.lists(KEYS, max_size=300), st.integers(1, 5000), st.sampled_from([0.5, 0.01, 1e-6, DEFAULT_FPP]))
def test_no_false_negatives(keys, num_entries, fpp):
    bloom = _filter_with(keys, num_entries, fpp)
    again = BloomFilter.from_bytes(bloom.to_bytes())
    for candidate in (bloom, again):
        assert all(candidate.might_contain(k) for k in keys)
        if keys:
            assert candidate.might_contain_any(["\x00not-a-key", keys[-1]])
    assert again.to_bytes() == bloom.to_bytes()
    assert (again.num_bits, again.num_hashes, again.num_entries, again.fpp) == (
        bloom.num_bits,
        bloom.num_hashes,
        num_entries,
        fpp,
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(KEYS, min_size=1, max_size=200), st.lists(KEYS, min_size=1, max_size=200))
def test_one_key_and_many_keys_probe_the_same_bits(added, probed):
    for fpp in (0.3, 1e-3):  # 2 hashes, and 10: past the probes checked one by one
        bloom = _filter_with(added, num_entries=max(1, len(added) // 8), fpp=fpp)  # crowded: many positives
        answers = [bloom.might_contain(k) for k in probed]
        assert answers == [bloom.might_contain_any([k]) for k in probed]
        assert bloom.might_contain_any(probed) == any(answers)
        assert bloom.might_contain_any(probed + added[:1]) and bloom.might_contain_any(added[-1:] + probed)


@pytest.mark.parametrize(("num_entries", "fpp"), [(2000, 0.05), (5000, 0.01), (20000, 0.001)])
def test_false_positive_rate_is_near_the_configured_one(num_entries, fpp):
    bloom = _filter_with([f"key-{i}" for i in range(num_entries)], num_entries, fpp)
    probes = 200_000
    hits = sum(bloom.might_contain(f"other-{i}") for i in range(0, probes, 10)) * 10
    rate = hits / probes
    assert fpp / 2.5 <= rate <= fpp * 2.5, rate


def test_hudi_defaults_keep_false_positives_negligible():
    bloom = BloomFilter()
    assert (bloom.num_entries, bloom.fpp) == (DEFAULT_NUM_ENTRIES, DEFAULT_FPP)
    keys = [f"20240101-{i:09d}" for i in range(DEFAULT_NUM_ENTRIES)]
    bloom.add_all(keys)
    assert all(bloom.might_contain(k) for k in keys[::97])
    assert not any(bloom.might_contain(f"20240102-{i:09d}") for i in range(20_000))
    assert not bloom.might_contain_any([f"20240103-{i:09d}" for i in range(20_000)])


def test_a_large_batch_added_at_once_finds_every_key():
    keys = [f"4a5b7c1e-0000-4000-8000-{i:012d}" for i in range(100_000)]
    bloom = BloomFilter()
    bloom.add_all(keys)
    assert all(bloom.might_contain(k) for k in keys[::7])
    assert bloom.might_contain_any(keys[-3:])


def test_bytes_are_identical_across_processes():
    here = subprocess.run(
        [sys.executable, "-c", GOLDEN_SCRIPT], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    there = subprocess.run(
        [sys.executable, "-c", GOLDEN_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout
    bloom = BloomFilter(1000, 0.001)
    bloom.add_all([f"uuid-{i}" for i in range(500)] + ["", "é", "\U0010ffff", "a\x00b"])
    assert here == there == hashlib.sha256(bloom.to_bytes()).hexdigest() + "\n"
    assert here.strip() == "42d1abdd85d513ab105c58f1ccaaf2d15614f0cedd31e4dc0cead47e42483367"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_raises_value_error(data):
    with pytest.raises(ValueError):
        BloomFilter.from_bytes(data)


def test_truncation_and_corruption_raise_value_error():
    data = _filter_with(["a", "b", "c"], 100, 0.01).to_bytes()
    assert BloomFilter.from_bytes(data).might_contain("a")
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            BloomFilter.from_bytes(data[:cut])
    for position in range(0, len(data), 3):
        flipped = bytearray(data)
        flipped[position] ^= 0x10
        with pytest.raises(ValueError):
            BloomFilter.from_bytes(bytes(flipped))
    with pytest.raises(ValueError):
        BloomFilter.from_bytes(data + b"\x00")
    with pytest.raises(ValueError):
        BloomFilter.from_bytes("not bytes")


@pytest.mark.parametrize(
    ("num_entries", "fpp"),
    [(0, 0.01), (-1, 0.01), (True, 0.01), (1.5, 0.01), (10, 0.0), (10, 1.0), (10, float("nan")), (10**12, 1e-9)],
)
def test_bad_configuration_is_refused(num_entries, fpp):
    with pytest.raises(ValueError):
        BloomFilter(num_entries, fpp)


def test_records_and_tombstones():
    keys = pa.array(["k2", None, "k1", "k3"])
    record = bloom_record("year=2024", "f1_0-0-0_1.parquet", keys, num_entries=100, fpp=0.01)
    assert record["key"] == "year=2024\x00f1_0-0-0_1.parquet"
    assert (record["minRecordKey"], record["maxRecordKey"], record["bloomType"]) == ("k1", "k3", BLOOM_TYPE)
    bloom = BloomFilter.from_bytes(record["bloomFilter"])
    assert all(bloom.might_contain(k) for k in ("k1", "k2", "k3"))
    assert bloom_record("year=2024", "f1_0-0-0_1.parquet", ["k2", "k1", "k3"], 100, 0.01) == record
    # a file with more keys than configured gets a filter sized for them
    many = [f"k{i}" for i in range(3000)]
    assert BloomFilter.from_bytes(bloom_record("", "f", many, num_entries=100)["bloomFilter"]).num_entries == 3000
    empty = bloom_record("", "f.parquet", [])
    assert empty["key"] == ".\x00f.parquet" and empty["minRecordKey"] is None
    assert not BloomFilter.from_bytes(empty["bloomFilter"]).might_contain("x")
    tomb = bloom_tombstone("", "f.parquet")
    assert tomb["key"] == empty["key"] and tomb["isDeleted"] is True
    parsed = fastavro.parse_schema(BLOOM_SCHEMA)
    for rec in (record, tomb):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, rec)
        buffer.seek(0)
        assert fastavro.schemaless_reader(buffer, parsed) == rec
        assert pa.Table.from_pylist([rec], schema=BLOOM_ARROW_SCHEMA).to_pylist() == [rec]
    assert set(record) == {f["name"] for f in BLOOM_SCHEMA["fields"]} == set(BLOOM_ARROW_SCHEMA.names)
    with pytest.raises(TypeError):
        BloomFilter().add_all("one string")
    with pytest.raises(TypeError):
        BloomFilter().add_all([1])


def test_a_filter_of_another_version_is_refused_not_misread():
    """Version 1 probed other bits: reading its bytes with this version's probes would give false negatives."""
    data = bytearray(_filter_with([f"k{i}" for i in range(100)]).to_bytes())
    data[4] = 1  # the version byte, after the 4-byte magic
    body = bytes(data[:-4])
    with pytest.raises(ValueError, match="version"):
        BloomFilter.from_bytes(body + zlib.crc32(body).to_bytes(4, "big"))


@given(st.lists(KEYS, max_size=300), st.integers(1, 2000), st.sampled_from([1e-9, 1e-3, 0.3]), st.data())
@settings(max_examples=30, deadline=None)
def test_keys_added_in_batches_set_exactly_the_bits_of_every_probe(keys, entries, fpp, data):
    """`add_hashed` walks the probes one step at a time without a modulo, in batches of any size, packed or
    not: the bits it sets are exactly those of the closed-form positions (`_positions_of`), and the
    Arrow-batch hash is the per-key one."""
    halves = key_hashes(keys)
    assert (hash128(pa.array(keys, pa.string())) == halves).all()
    expected = np.zeros(BloomFilter(entries, fpp).num_bits, dtype=bool)
    if keys:
        expected[BloomFilter(entries, fpp)._positions_of(halves).ravel()] = True
    packed_in_place = data.draw(st.booleans())
    step = data.draw(st.integers(1, 64))
    bloom = BloomFilter(entries, fpp)
    with patch("timeline.index.bloom.ADD_KEYS", step):
        with patch("timeline.index.bloom.UNPACKED_BITS", 0 if packed_in_place else bloom.num_bits):
            for start in range(0, len(keys), step * 2):
                bloom.add_hashed(halves[start : start + step * 2])
    assert bloom.to_bytes()[HEADER_BYTES:-4] == np.packbits(expected, bitorder="little").tobytes()
