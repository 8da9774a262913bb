"""`hash128` against mmh3, key by key: every block/tail length, non-ASCII, slices, chunking, seeds."""

from __future__ import annotations

from unittest import mock

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.index import murmur3
from timeline.index.bloom import key_hashes


def hash128(keys, seed: int = 0):
    """The vectorised passes, however few the keys (few are otherwise hashed one by one)."""
    with mock.patch.object(murmur3, "FEW_KEYS", -1):
        return murmur3.hash128(keys, seed)


STRING_TYPES = [pa.string(), pa.large_string()]


def reference(keys: list[str], seed: int = 0) -> np.ndarray:
    digest = b"".join(mmh3.hash_bytes(k.encode("utf-8"), seed, True) for k in keys)
    return np.frombuffer(digest, dtype="<u8").reshape(-1, 2)


def assert_hashes(got: np.ndarray, keys: list[str], seed: int = 0) -> None:
    assert got.dtype == np.uint64
    assert got.shape == (len(keys), 2)
    np.testing.assert_array_equal(got, reference(keys, seed))


# mostly short keys (every block count 0..3 and tail length 0..15 in bytes, with 1- to 4-byte characters)
short_text = st.text(st.characters(codec="utf-8"), max_size=70)
ascii_text = st.text(st.sampled_from("ab0-_"), max_size=200)
long_text = st.text(st.characters(codec="utf-8"), min_size=300, max_size=1200)
keys_strategy = st.lists(st.one_of(short_text, short_text, ascii_text, long_text), max_size=40)


@settings(max_examples=60, deadline=None)
@given(keys=keys_strategy, large=st.booleans())
def test_matches_mmh3(keys: list[str], large: bool) -> None:
    assert_hashes(hash128(pa.array(keys, STRING_TYPES[large])), keys)


@settings(max_examples=60, deadline=None)
@given(keys=keys_strategy, data=st.data(), large=st.booleans())
def test_sliced(keys: list[str], data: st.DataObject, large: bool) -> None:
    start = data.draw(st.integers(0, len(keys)))
    stop = data.draw(st.integers(start, len(keys)))
    arr = pa.array(keys, STRING_TYPES[large]).slice(start, stop - start)
    assert_hashes(hash128(arr), keys[start:stop])


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.tuples(keys_strategy, st.integers(0, 3)), max_size=5), large=st.booleans())
def test_chunked(parts: list[tuple[list[str], int]], large: bool) -> None:
    # each chunk is sliced (by `skip` keys) out of a larger array, so chunks carry non-zero offsets
    chunks = [pa.array(["pad"] * skip + keys, STRING_TYPES[large]).slice(skip) for keys, skip in parts]
    arr = pa.chunked_array(chunks, type=STRING_TYPES[large])
    assert_hashes(hash128(arr), [k for keys, _ in parts for k in keys])


@settings(max_examples=60, deadline=None)
@given(keys=keys_strategy, batch=st.integers(1, 7), long_blocks=st.integers(0, 4), large=st.booleans())
def test_small_batches(keys: list[str], batch: int, long_blocks: int, large: bool) -> None:
    # many batches per array: all but the last read the Arrow data buffer in place, the last a padded copy;
    # a batch's few keys over long_blocks blocks are hashed apart, after the others
    with mock.patch.object(murmur3, "BATCH_KEYS", batch), mock.patch.object(murmur3, "LONG_BLOCKS", long_blocks):
        assert_hashes(hash128(pa.array(keys, STRING_TYPES[large])), keys)


@settings(max_examples=40, deadline=None)
@given(keys=keys_strategy, misalign=st.integers(0, 7), batch=st.sampled_from([2, 1 << 16]), spare=st.integers(0, 40))
def test_foreign_buffers(keys: list[str], misalign: int, batch: int, spare: int) -> None:
    # a data buffer at any alignment, with or without bytes after the last key, from another producer
    encoded = [k.encode("utf-8") for k in keys]
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in encoded], dtype=np.int64)]).astype(np.int32)
    data = pa.py_buffer(b"\xff" * misalign + b"".join(encoded) + b"\xee" * spare).slice(misalign)
    arr = pa.Array.from_buffers(pa.string(), len(keys), [None, pa.py_buffer(offsets.tobytes()), data])
    with mock.patch.object(murmur3, "BATCH_KEYS", batch):
        assert_hashes(hash128(arr), keys)


@settings(max_examples=40, deadline=None)
@given(keys=keys_strategy, seed=st.integers(0, 2**32 - 1))
def test_seed(keys: list[str], seed: int) -> None:
    assert_hashes(hash128(pa.array(keys, pa.string()), seed=seed), keys, seed)


@pytest.mark.parametrize("string_type", STRING_TYPES)
def test_every_length_and_boundary(string_type: pa.DataType) -> None:
    # every key length 0..200 (all tail lengths after 0..12 blocks), first and last in the buffer
    keys = ["".join(chr(0x61 + (i * 7 + n) % 26) for i in range(n)) for n in range(201)]
    for ordered in (keys, keys[::-1]):
        assert_hashes(hash128(pa.array(ordered, string_type)), ordered)
    assert_hashes(hash128(pa.array(keys, string_type).slice(150)), keys[150:])


def test_long_key_among_short() -> None:
    keys = [str(i) for i in range(1000)]
    keys[500] = "\u00e9x" * 5000 + "tail"
    keys.append("y" * 10007)
    assert_hashes(hash128(pa.array(keys)), keys)
    sliced = pa.chunked_array([pa.array(["pad", *keys]).slice(1), pa.array(keys[::-1])])
    assert_hashes(hash128(sliced), keys + keys[::-1])


def test_more_keys_than_one_batch() -> None:
    keys = [f"key-{i}" * (i % 5) for i in range(70_000)]
    got = hash128(pa.chunked_array([pa.array(keys[:3]), pa.array(keys[3:])]))
    np.testing.assert_array_equal(got, key_hashes(keys))


@pytest.mark.parametrize("string_type", STRING_TYPES)
def test_empty(string_type: pa.DataType) -> None:
    for arr in (
        pa.array([], string_type),
        pa.array(["a", "b"], string_type).slice(2),
        pa.chunked_array([], type=string_type),
        pa.chunked_array([pa.array([], string_type)], type=string_type),
    ):
        got = hash128(arr)
        assert got.shape == (0, 2) and got.dtype == np.uint64


def test_all_empty_strings() -> None:
    assert_hashes(hash128(pa.array(["", "", ""])), ["", "", ""])


def test_equals_bloom_key_hashes() -> None:
    keys = ["", "a", "record-key-0001", "\u4e2d\u6587\U0001f600" * 9]
    np.testing.assert_array_equal(hash128(pa.array(keys)), key_hashes(keys))


@pytest.mark.parametrize("string_type", STRING_TYPES)
def test_nulls_raise(string_type: pa.DataType) -> None:
    with pytest.raises(ValueError, match="null"):
        hash128(pa.array(["a", None, "b"], string_type))
    with pytest.raises(ValueError, match="null"):
        hash128(pa.chunked_array([pa.array(["a"], string_type), pa.array([None], string_type)]))
    # a slice that leaves the null out is fine
    assert_hashes(hash128(pa.array(["a", None, "b", "c"], string_type).slice(2)), ["b", "c"])


def test_rejects_other_types_and_seeds() -> None:
    with pytest.raises(TypeError):
        hash128(pa.array([b"a"], pa.binary()))
    with pytest.raises(TypeError):
        hash128(["a"])  # type: ignore[arg-type]
    for seed in (-1, 2**32):
        with pytest.raises(ValueError):
            hash128(pa.array(["a"]), seed=seed)


@given(st.lists(st.text(max_size=40), max_size=80), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_few_keys_hashed_one_by_one_equal_the_vectorised_passes(keys, seed):
    array = pa.array(keys, pa.string())
    np.testing.assert_array_equal(murmur3.hash128(array, seed), hash128(array, seed))
