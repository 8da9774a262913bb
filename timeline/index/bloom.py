"""Record-key bloom filters for the metadata table's `bloom_filters` partition.

An index lookup skips a base file whose filter says a key is absent, so a filter
must never give a false negative, and its bytes must mean the same thing to every
process that reads them: hashing is MurmurHash3 x64-128 (mmh3) of the key's UTF-8
bytes, never Python's randomised `hash`, and the serialised form carries its own
bit count and hash count so a reader never recomputes them.

Serialised layout (big-endian):
    MAGIC (4) | version u8 | num_hashes u16 | num_bits u64 | num_entries u64 | fpp f64
    | bits (ceil(num_bits / 8) bytes, bit i = byte i // 8, bit i % 8) | CRC32 u32 of everything before
"""

from __future__ import annotations

import math
import numbers
import struct
import zlib
from collections.abc import Iterable, Iterator

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from timeline.index.murmur3 import hash_each

DEFAULT_NUM_ENTRIES = 60000  # hoodie.index.bloom.num_entries
DEFAULT_FPP = 1e-9  # hoodie.index.bloom.fpp
BLOOM_TYPE = "TANDEM_MMH3_V1"
MAGIC = b"TBLM"
# 2: enhanced double hashing over a prime bit count. A filter of another version probes other bits, so it
# is refused (ValueError), never read with this version's probes: that would answer "absent" for keys it holds.
VERSION = 2
MAX_HASHES = 64
SINGLE_PROBES = 3  # probes checked one by one before the rest are checked together
MAX_BITS = 1 << 36  # 8 GiB of filter: anything larger is garbage, not a filter
ADD_KEYS = 1 << 16  # keys whose probe positions are computed at once (num_hashes int64s each)
FEW_KEYS = 1024  # up to this many keys are set with `_positions_of`'s (n, num_hashes) matrix
UNPACKED_BITS = 1 << 28  # a filter up to this many bits (256 MB as bytes) is built unpacked
_HEADER = struct.Struct(">4sBHQQd")
_CRC = struct.Struct(">I")


def _prime_at_least(n: int) -> int:
    candidate = n | 1
    while any(candidate % d == 0 for d in range(3, math.isqrt(candidate) + 1, 2)):
        candidate += 2
    return candidate


def key_hashes(keys: list[str]) -> np.ndarray:
    """(n, 2) uint64: the two 64-bit halves of each key's x64-128 MurmurHash3, machine independent."""
    return hash_each(keys)


class BloomFilter:
    """A fixed-size bloom filter over string keys (Kirsch-Mitzenmacher double hashing)."""

    def __init__(self, num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP) -> None:
        if isinstance(num_entries, bool) or not isinstance(num_entries, numbers.Integral) or num_entries < 1:
            raise ValueError(f"bloom filter num_entries must be a positive int, not {num_entries!r}")
        if not isinstance(fpp, numbers.Real) or not 0.0 < fpp < 1.0:
            raise ValueError(f"bloom filter fpp must be in (0, 1), not {fpp!r}")
        num_entries, fpp = int(num_entries), float(fpp)
        num_bits = _prime_at_least(max(64, math.ceil(-num_entries * math.log(fpp) / (math.log(2) ** 2))))
        if num_bits > MAX_BITS:
            raise ValueError(f"a bloom filter for {num_entries} entries at fpp {fpp} needs {num_bits} bits: too many")
        num_hashes = min(MAX_HASHES, max(1, round(num_bits / num_entries * math.log(2))))
        self._init(num_entries, fpp, num_bits, num_hashes, np.zeros(-(-num_bits // 8), dtype=np.uint8))

    def _init(self, num_entries: int, fpp: float, num_bits: int, num_hashes: int, packed: np.ndarray) -> None:
        """`packed` is the serialised bit layout itself, so a loaded filter is probed without unpacking it."""
        self.num_entries = num_entries
        self.fpp = fpp
        self.num_bits = num_bits
        self.num_hashes = num_hashes
        self._packed_bits = packed
        self._unpacked: np.ndarray | None = None

    def _positions(self, keys: list[str]) -> np.ndarray:
        return self._positions_of(key_hashes(keys))

    def _positions_of(self, halves: np.ndarray) -> np.ndarray:
        """(n, num_hashes) bit positions by enhanced double hashing (Dillinger and Manolios).

        x starts at h1 mod m and moves by y, and y (h2 mod m) grows by i at step i,
        all mod m. Plain double hashing (a fixed step) lets two keys whose first
        two probes agree share every probe, which keeps the false-positive rate
        near 1/m whatever the configured rate; the growing step breaks that. m is
        prime, so no step shares a factor with it. The i-th position (x after i
        steps) is x0 + i*y0 + (i^3 - i)/6 mod m in closed form: one vectorised
        expression, not `num_hashes` passes (below 2^43 before the mod: no overflow).
        """
        m = np.int64(self.num_bits)
        x = (halves[:, 0] % np.uint64(self.num_bits)).astype(np.int64)
        y = (halves[:, 1] % np.uint64(self.num_bits)).astype(np.int64)
        i = np.arange(self.num_hashes, dtype=np.int64)
        return (x[:, None] + i * y[:, None] + (i**3 - i) // 6) % m

    def add(self, key: str) -> None:
        self.add_all([key])

    def add_all(self, keys: Iterable[str]) -> None:
        keys = _key_list(keys)
        if keys:
            self.add_hashed(key_hashes(keys))

    def add_hashed(self, halves: np.ndarray) -> None:
        """Add keys hashed by `key_hashes` (or `murmur3.hash128`), ADD_KEYS at a time, one probe at a time.

        A filter up to UNPACKED_BITS is set as one byte per bit, unpacked until it is
        next read (a scatter is fast there); a larger one is set in place in its
        packed bits, so building never holds more than UNPACKED_BITS bytes.
        """
        for start in range(0, len(halves), ADD_KEYS):
            chunk = halves[start : start + ADD_KEYS]
            # a few keys: the closed form in one step costs less than num_hashes steps of numpy calls
            steps = [self._positions_of(chunk).ravel()] if len(chunk) <= FEW_KEYS else self._steps(chunk)
            for positions in steps:
                if self.num_bits <= UNPACKED_BITS:
                    if self._unpacked is None:
                        self._unpacked = np.unpackbits(self._packed, count=self.num_bits, bitorder="little")
                    self._unpacked[positions] = 1
                else:
                    np.bitwise_or.at(self._packed, positions >> 3, np.left_shift(1, positions & 7).astype(np.uint8))

    def _steps(self, halves: np.ndarray) -> Iterator[np.ndarray]:
        """`_positions_of`'s columns one after another, as `might_contain` walks them: x moves by y and y
        grows by i. Each sum is below 2m, so `min(v, v - m)` in wrapping uint64 arithmetic replaces the
        modulo (v - m wraps past every position when v < m), and no (n, num_hashes) matrix is built."""
        m = np.uint64(self.num_bits)
        x = halves[:, 0] % m
        y = halves[:, 1] % m
        for i in range(1, self.num_hashes + 1):
            yield x
            if i < self.num_hashes:
                x = x + y
                np.minimum(x, x - m, out=x)
                y += np.uint64(i)
                np.minimum(y, y - m, out=y)

    @property
    def _packed(self) -> np.ndarray:
        """The bits in the serialised layout, packed from the unpacked form if keys were added since."""
        if self._unpacked is not None:
            self._packed_bits = np.packbits(self._unpacked, bitorder="little")
            self._unpacked = None
        return self._packed_bits

    def might_contain(self, key: str) -> bool:
        """One key: the probe sequence of `_positions` in plain Python, stopping at the first clear bit."""
        if type(key) is not str:
            raise TypeError(f"bloom filter keys are str, not {type(key).__name__}")
        digest = mmh3.hash_bytes(key.encode("utf-8"), 0, True)
        m = self.num_bits
        x = int.from_bytes(digest[:8], "little") % m
        y = int.from_bytes(digest[8:], "little") % m
        packed = self._packed
        for i in range(1, self.num_hashes + 1):
            if not (packed[x >> 3] >> (x & 7)) & 1:
                return False
            x = (x + y) % m
            y = (y + i) % m
        return True

    def might_contain_any(self, keys: Iterable[str]) -> bool:
        keys = _key_list(keys)
        return self.might_contain_any_hashed(key_hashes(keys)) if keys else False

    def might_contain_any_hashed(self, halves: np.ndarray) -> bool:
        """`might_contain_any` of keys hashed once by `key_hashes` (one batch checked against many filters)."""
        return self.might_contain_any_probed(self.probes(halves)) if len(halves) else False

    def probes(self, halves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Byte offsets and bit shifts of `halves`' positions: the same for every filter of this size and hash
        count, so a batch checked against many such filters computes them once."""
        positions = self._positions_of(halves)
        return positions >> 3, (positions & 7).astype(np.uint8)

    def shape(self) -> tuple[int, int]:
        """What `probes` depends on."""
        return self.num_bits, self.num_hashes

    def might_contain_any_probed(self, probes: tuple[np.ndarray, np.ndarray]) -> bool:
        """The first probes one at a time, keeping only the keys still possibly present (each halves them: a
        filter is about half ones), then the remaining probes of the survivors in one step: a batch of absent
        keys costs about two probes per key, and a key that is present costs no `num_hashes` passes."""
        offsets, shifts = probes
        alive = np.arange(len(offsets))
        for i in range(min(SINGLE_PROBES, self.num_hashes)):
            hit = (self._packed[offsets[alive, i]] >> shifts[alive, i]) & 1
            alive = alive[hit.astype(bool)]
            if not alive.size:
                return False
        if self.num_hashes <= SINGLE_PROBES:
            return True
        rest = (self._packed[offsets[alive, SINGLE_PROBES:]] >> shifts[alive, SINGLE_PROBES:]) & 1
        return bool(rest.all(axis=1).any())

    def to_bytes(self) -> bytes:
        header = _HEADER.pack(MAGIC, VERSION, self.num_hashes, self.num_bits, self.num_entries, self.fpp)
        body = header + self._packed.tobytes()
        return body + _CRC.pack(zlib.crc32(body))

    @staticmethod
    def from_bytes(data: bytes) -> BloomFilter:
        """The filter `to_bytes` wrote; ValueError for anything else (garbage, truncation, corruption)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValueError(f"bloom filter bytes expected, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER.size + _CRC.size:
            raise ValueError(f"bloom filter truncated: {len(data)} bytes")
        magic, version, num_hashes, num_bits, num_entries, fpp = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise ValueError("not a bloom filter: bad magic")
        if version != VERSION:
            raise ValueError(f"unsupported bloom filter version {version}")
        if not 1 <= num_hashes <= MAX_HASHES or not 64 <= num_bits <= MAX_BITS or num_entries < 1:
            raise ValueError(f"bad bloom filter header: {num_hashes} hashes, {num_bits} bits, {num_entries} entries")
        if not 0.0 < fpp < 1.0:
            raise ValueError(f"bad bloom filter fpp {fpp!r}")
        packed = -(-num_bits // 8)
        if len(data) != _HEADER.size + packed + _CRC.size:
            raise ValueError(f"bloom filter is {len(data)} bytes, its header says {_HEADER.size + packed + _CRC.size}")
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if crc != zlib.crc32(data[: -_CRC.size]):
            raise ValueError("bloom filter checksum mismatch")
        raw = np.frombuffer(data, dtype=np.uint8, count=packed, offset=_HEADER.size)
        if num_bits % 8 and raw[-1] >> (num_bits % 8):
            raise ValueError("bloom filter has bits set past its end")
        out = BloomFilter.__new__(BloomFilter)
        out._init(num_entries, fpp, num_bits, num_hashes, raw)
        return out


def _key_list(keys: Iterable[str] | pa.Array | pa.ChunkedArray) -> list[str]:
    if isinstance(keys, str):
        raise TypeError("pass an iterable of keys, not one string")
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = keys.to_pylist()
    out = [k for k in keys if k is not None]
    for k in out:
        if type(k) is not str:
            raise TypeError(f"bloom filter keys are str, not {type(k).__name__}")
    return out


def bloom_key(partition: str, file_name: str) -> str:
    return f"{partition or '.'}\x00{file_name}"


def bloom_record(
    partition: str,
    file_name: str,
    keys: pa.Array | pa.ChunkedArray | list[str],
    num_entries: int = DEFAULT_NUM_ENTRIES,
    fpp: float = DEFAULT_FPP,
) -> dict:
    """The record of one base file's record keys (nulls ignored).

    The filter is sized for max(num_entries, number of keys), so a file with more keys than
    configured still gets the configured false-positive rate.
    """
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        extremes = pc.min_max(keys)
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        keys = _key_list(keys)
    else:
        keys = _key_list(keys)
        low, high = (min(keys), max(keys)) if keys else (None, None)
    bloom = BloomFilter(max(num_entries, len(keys)), fpp)
    bloom.add_all(keys)
    return {
        "key": bloom_key(partition, file_name),
        "partition": partition,
        "fileName": file_name,
        "bloomFilter": bloom.to_bytes(),
        "bloomType": BLOOM_TYPE,
        "minRecordKey": low,
        "maxRecordKey": high,
        "isDeleted": False,
    }


def bloom_tombstone(partition: str, file_name: str) -> dict:
    """The record that removes a file's filter (its `bloomFilter` is empty: check isDeleted first)."""
    return {
        "key": bloom_key(partition, file_name),
        "partition": partition,
        "fileName": file_name,
        "bloomFilter": b"",
        "bloomType": BLOOM_TYPE,
        "minRecordKey": None,
        "maxRecordKey": None,
        "isDeleted": True,
    }


BLOOM_SCHEMA = {
    "type": "record",
    "name": "TandemBloomFilter",
    "namespace": "tandem.metadata",
    "fields": [
        {"name": "key", "type": "string"},
        {"name": "partition", "type": "string"},
        {"name": "fileName", "type": "string"},
        {"name": "bloomFilter", "type": "bytes"},
        {"name": "bloomType", "type": "string"},
        {"name": "minRecordKey", "type": ["null", "string"], "default": None},
        {"name": "maxRecordKey", "type": ["null", "string"], "default": None},
        {"name": "isDeleted", "type": "boolean"},
    ],
}

BLOOM_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("partition", pa.string()),
        ("fileName", pa.string()),
        ("bloomFilter", pa.binary()),
        ("bloomType", pa.string()),
        ("minRecordKey", pa.string()),
        ("maxRecordKey", pa.string()),
        ("isDeleted", pa.bool_()),
    ]
)
