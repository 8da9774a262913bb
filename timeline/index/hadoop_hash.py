"""The probe positions of Hudi's bloom filters: Hadoop's 32-bit MurmurHash, chained, over Arrow string arrays.

Hudi (`org.apache.hudi.common.bloom.HashFunction`, ported from Hadoop's) maps a key's UTF-8 bytes b to
`nb_hash` bit positions with `org.apache.hudi.common.util.hash.MurmurHash` (MurmurHash 2, 32 bit):

    seed = 0
    for i in range(nb_hash):
        seed = murmur(b, seed)                       # a Java int
        position[i] = Math.abs(seed % vector_size)   # Java's %: the sign of the dividend

so every probe hashes the whole key again. Two details of Hudi's MurmurHash (as in Hadoop's
`org.apache.hadoop.util.hash.MurmurHash`, its origin) differ from the reference MurmurHash 2: the 1 to 3 tail
bytes are taken from the key's end, the last one unshifted (`h ^= data[end - 3] << 16; h ^= data[end - 2] << 8;
h ^= data[end - 1]` for three), and they are Java bytes, sign-extended before the shift.

A block's mixed word (k *= m; k ^= k >>> 24; k *= m) and the tail's contribution do not depend on the seed:
`KeyBatch` computes them once per key, and each of the `nb_hash` hashes is then two uint32 operations per block
(h *= m; h ^= k) plus the tail and finalisation, for all the keys of a batch at once.

`murmur_hash` and `positions_of` are the same functions for one key in plain Python: the reference the vectorised
passes are tested against, and the cheaper way for a handful of keys.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["KeyBatch", "batches", "key_array", "murmur_hash", "positions_of"]

_MASK = 0xFFFFFFFF
_M = 0x5BD1E995
_M32 = np.uint32(_M)
_ONE32 = np.uint32(1)
BATCH_KEYS = 1 << 16  # keys hashed together: bounds the work arrays and keeps them in cache
BATCH_BLOCKS = 1 << 20  # and the mixed block words kept for them (4 MB)


def _mix(k: int) -> int:
    k = (k * _M) & _MASK
    k ^= k >> 24
    return (k * _M) & _MASK


def _signed_byte(b: int) -> int:
    return (b - 256 if b > 127 else b) & _MASK


def _prepared(data: bytes) -> tuple[list[int], int, int]:
    """A key's seed-independent parts: its mixed block words, its tail word and the tail's multiplier."""
    nblocks = len(data) >> 2
    words = [_mix(k) for k in struct.unpack_from(f"<{nblocks}I", data)]
    tail = data[nblocks << 2 :]
    value = 0
    for i, b in enumerate(reversed(tail)):  # the last byte unshifted, the one before it << 8, ...
        value ^= (_signed_byte(b) << 8 * i) & _MASK
    return words, value, _M if tail else 1


def _finish(h: int, words: list[int], tail: int, tail_mult: int) -> int:
    for k in words:
        h = ((h * _M) & _MASK) ^ k
    h = ((h ^ tail) * tail_mult) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def murmur_hash(data: bytes, seed: int) -> int:
    """`MurmurHash.hash(data, seed)` as an unsigned 32-bit int (Java's int, read unsigned)."""
    words, tail, tail_mult = _prepared(data)
    return _finish(((seed & _MASK) ^ len(data)) & _MASK, words, tail, tail_mult)


def positions_of(data: bytes, nb_hash: int, vector_size: int) -> list[int]:
    """The `nb_hash` bit positions of one key's UTF-8 bytes in a vector of `vector_size` bits."""
    words, tail, tail_mult = _prepared(data)
    out = []
    h = 0
    for _ in range(nb_hash):
        h = _finish(h ^ len(data), words, tail, tail_mult)
        out.append((h if h < 1 << 31 else (1 << 32) - h) % vector_size)
    return out


class KeyBatch:
    """Up to BATCH_KEYS keys with everything of their hashes that does not depend on the seed.

    The keys are in descending order of block count, so the keys with a block j are a prefix of the batch:
    block j is mixed into `h[:len(blocks[j])]` in place, with no index arrays.
    """

    def __init__(self, lengths: np.ndarray, blocks: list[np.ndarray], tail: np.ndarray, tail_mult: np.ndarray):
        self.lengths = lengths  # uint32
        self.blocks = blocks  # uint32 mixed words, blocks[j] for the keys with more than j blocks
        self.tail = tail  # uint32: the sign-extended tail bytes, XORed into h before the tail's multiply
        self.tail_mult = tail_mult  # uint32: m when the key has a tail, else 1
        self._positions: dict[tuple[int, int], list[np.ndarray]] = {}

    @classmethod
    def read(cls, words: np.ndarray | None, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> KeyBatch:
        """The keys at byte `starts` (intp) of `data` (uint8), `lengths` (intp, > 0) bytes long, given in
        descending order of `lengths >> 2`. `words[p]` is the little-endian uint32 at byte p (None when the
        data is shorter than 4 bytes: then no key has a block)."""
        nblocks = lengths >> 2
        counts = np.bincount(nblocks)
        with_block = len(lengths) - np.cumsum(counts)  # with_block[j]: keys with more than j blocks
        blocks = []
        for j in range(len(counts) - 1):
            assert words is not None
            k = words[starts[: with_block[j]] + 4 * j]
            k *= _M32
            k ^= k >> np.uint32(24)
            k *= _M32
            blocks.append(k)
        left = lengths & 3
        ends = starts + lengths
        signed = data.view(np.int8)
        tail = np.zeros(len(lengths), dtype=np.uint32)
        for r in (1, 2, 3):  # the r-th byte from the key's end, shifted by 8 (r - 1)
            present = left >= r
            byte = signed[np.where(present, ends - r, 0)].astype(np.int32).view(np.uint32)
            byte <<= np.uint32(8 * (r - 1))
            byte *= present  # the bytes a key does not have count 0
            tail ^= byte
        tail_mult = np.where(left > 0, _M32, _ONE32)
        return cls(lengths.astype(np.uint32), blocks, tail, tail_mult)

    def __len__(self) -> int:
        return len(self.lengths)

    def hash(self, seed: np.ndarray) -> np.ndarray:
        """`murmur_hash` of every key with its own seed (uint32), as a new uint32 array."""
        h = seed ^ self.lengths
        for k in self.blocks:
            head = h[: len(k)]
            head *= _M32
            head ^= k
        h ^= self.tail
        h *= self.tail_mult
        h ^= h >> np.uint32(13)
        h *= _M32
        h ^= h >> np.uint32(15)
        return h

    def chain(self, nb_hash: int, vector_size: int) -> Iterator[np.ndarray]:
        """The keys' positions (intp), one probe after another: Hudi's `HashFunction.hash`, by columns."""
        h = np.zeros(len(self), dtype=np.uint32)
        for _ in range(nb_hash):
            h = self.hash(h)
            yield self.position(h, vector_size)

    def positions(self, nb_hash: int, vector_size: int) -> list[np.ndarray]:
        """Every probe's positions (`chain`), worked out once per filter shape: a batch asked of many filters
        of one shape (files sized alike) hashes its keys once, not once per filter."""
        found = self._positions.get((nb_hash, vector_size))
        if found is None:
            found = self._positions[(nb_hash, vector_size)] = list(self.chain(nb_hash, vector_size))
        return found

    @staticmethod
    def position(h: np.ndarray, vector_size: int) -> np.ndarray:
        """`Math.abs(h % vector_size)` of uint32 hashes read as Java ints, as intp."""
        # |h % v| == |h| % v for Java's truncating %, and |h| of a Java int fits an int64
        magnitude = np.abs(h.view(np.int32), dtype=np.int64)
        magnitude %= vector_size
        return magnitude

    def subset(self, keep: np.ndarray) -> KeyBatch:
        """The keys where `keep` (bool) is set, still in descending order of block count."""
        blocks = [k[keep[: len(k)]] for k in self.blocks]
        while blocks and not len(blocks[-1]):
            blocks.pop()
        return KeyBatch(self.lengths[keep], blocks, self.tail[keep], self.tail_mult[keep])


def key_array(keys: object) -> pa.Array | pa.ChunkedArray:
    """Record keys as Arrow strings: a (large_)string Array or ChunkedArray as it is, anything else iterable
    (a list, a numpy array of str) converted. Keys are never null or empty: Hudi refuses both."""
    if isinstance(keys, str):
        raise TypeError("pass an iterable of keys, not one string")
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        try:
            keys = pa.array(keys if isinstance(keys, (list, np.ndarray)) else list(keys), type=pa.large_string())
        except (pa.ArrowTypeError, pa.ArrowInvalid) as err:
            raise TypeError(f"bloom filter keys are str: {err}") from None
    if pa.types.is_string_view(keys.type):
        keys = keys.cast(pa.large_string())
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        raise TypeError(f"bloom filter keys are strings, not {keys.type}")
    if keys.null_count:
        raise ValueError(f"bloom filter keys cannot be null ({keys.null_count} nulls)")
    if len(keys) and pc.min(pc.binary_length(keys)).as_py() == 0:
        raise ValueError("bloom filter keys cannot be empty")
    return keys


def batches(keys: pa.Array | pa.ChunkedArray) -> Iterator[tuple[np.ndarray, KeyBatch]]:
    """(indices into `keys`, the batch of those keys) for every key of `keys` (checked by `key_array`).

    Keys are batched in descending order of block count (where counts differ), so a batch of long keys loops
    over its blocks once for the lot, not once per batch its keys would otherwise be spread over.
    """
    base = 0
    for chunk in keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]:
        yield from _chunk_batches(chunk, base)
        base += len(chunk)


def _chunk_batches(chunk: pa.Array, base: int) -> Iterator[tuple[np.ndarray, KeyBatch]]:
    n = len(chunk)
    if n == 0:
        return
    _, offsets_buf, data_buf = chunk.buffers()
    offset_type = np.dtype(np.int64 if pa.types.is_large_string(chunk.type) else np.int32)
    offsets = np.frombuffer(offsets_buf, dtype=offset_type, count=n + 1, offset=chunk.offset * offset_type.itemsize)
    starts = offsets[:-1].astype(np.intp)
    lengths = np.diff(offsets).astype(np.intp)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    # words[p] is the little-endian uint32 at byte p: an unaligned view with a 1-byte stride, read by gathers
    words = np.ndarray((len(data) - 3,), dtype="<u4", buffer=data, strides=(1,)) if len(data) >= 4 else None
    nblocks = lengths >> 2
    order = None if nblocks.min() == nblocks.max() else np.argsort(-nblocks, kind="stable")
    if order is not None:
        starts, lengths, nblocks = starts[order], lengths[order], nblocks[order]
    total = np.cumsum(nblocks)
    lo = 0
    while lo < n:
        # at most BATCH_KEYS keys and BATCH_BLOCKS blocks, but always at least one key
        budget = (int(total[lo - 1]) if lo else 0) + BATCH_BLOCKS
        hi = max(lo + 1, min(lo + BATCH_KEYS, int(np.searchsorted(total, budget, side="right"))))
        batch = KeyBatch.read(words, data, starts[lo:hi], lengths[lo:hi])
        indices = (order[lo:hi] if order is not None else np.arange(lo, hi)) + base
        yield indices, batch
        lo = hi
