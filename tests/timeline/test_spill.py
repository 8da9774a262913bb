"""Spilled bytes come back exactly, from any thread, or not at all: a damaged byte is an error, never data."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from timeline.io.spill import SpillFile, loaded


def test_kept_bytes_read_back_exactly_from_many_threads():
    spill = SpillFile()
    rng = random.Random(7)
    blobs = [rng.randbytes(rng.randrange(0, 5000)) for _ in range(200)]
    with ThreadPoolExecutor(4) as pool:
        kept = list(pool.map(spill.keep, blobs))
    assert [len(k) for k in kept] == [len(b) for b in blobs]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda k: k.load(), kept)) == blobs
    record = {"key": "k", "bloomFilter": kept[3], "isDeleted": False}
    assert loaded(record) == {"key": "k", "bloomFilter": blobs[3], "isDeleted": False}
    plain = {"key": "k"}
    assert loaded(plain) is plain
    spill.close()


def test_a_damaged_byte_is_refused():
    spill = SpillFile()
    first, second = spill.keep(b"a" * 100), spill.keep(b"b" * 100)
    spill._file.seek(second.offset + 50)
    spill._file.write(b"X")
    assert first.load() == b"a" * 100
    with pytest.raises(OSError, match="read back damaged"):
        second.load()
    spill.close()
    with pytest.raises(ValueError):
        first.load()  # closed: nothing is read after the write that kept it
