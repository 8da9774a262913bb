"""Vectorised MurmurHash3 x64-128 over Arrow string arrays.

Hashing record keys one at a time in Python (`mmh3.hash_bytes` per key) dominated the cost of writing
bloom filters. `hash128` computes the same digests with numpy straight from an Arrow array's offsets and
data buffers: block j of every key that has one is mixed in lock-step, then every key's tail and
finalisation, so the Python-level work does not grow with the number of keys. Row i equals
`np.frombuffer(mmh3.hash_bytes(key_i_utf8, seed, True), "<u8")` on any machine.

Words are read from an aligned uint64 view W of the data, the word at byte p being
`(W[p >> 3] >> 8 (p & 7)) | (W[(p >> 3) + 1] << 64 - 8 (p & 7))`, and every step writes into buffers
allocated once per call: fresh temporaries per step were page-faulted in again and again, costing more
than the arithmetic.
"""

from __future__ import annotations

import operator
import sys

import mmh3
import numpy as np
import pyarrow as pa

__all__ = ["hash128"]

BATCH_KEYS = 1 << 16  # keys hashed together: bounds the work buffers and keeps them in cache
FEW_KEYS = 64  # up to this many keys are hashed by mmh3 one by one
# A batch loops over its longest key's blocks, at a fixed Python cost per block, however few keys have it; so
# the few keys with more blocks than this are taken out of their batches and hashed together afterwards.
LONG_BLOCKS = 32

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_N1 = np.uint64(0x52DCE729)
_N2 = np.uint64(0x38495AB5)
_U1 = np.uint64(1)
_U3 = np.uint64(3)
_U5 = np.uint64(5)
_U7 = np.uint64(7)
_U33 = np.uint64(33)
_U63 = np.uint64(63)
_SHIFTS = {r: (np.uint64(r), np.uint64(64 - r)) for r in (27, 31, 33)}
# _LOW_BYTES[t]: keeps the low t bytes of a little-endian word (t = 0..8; np.take clips other t to 0 or 8)
_LOW_BYTES = np.array([(1 << (8 * t)) - 1 for t in range(9)], dtype=np.uint64)
# a tail at byte p reads the words p >> 3 to (p >> 3) + 2: a batch is read in place only when its data buffer
# holds that many words from its last byte's word on (np.take's mode="clip", there for speed, never clips)
_SLACK_WORDS = 3


class _Work:
    """Per-call work buffers for up to `size` keys; `[:m]` slices of them are the operands of every step."""

    def __init__(self, size: int) -> None:
        u64 = np.uint64
        self.h1, self.h2, self.k1, self.k2, self.tmp = (np.empty(size, dtype=u64) for _ in range(5))
        self.shift, self.rshift = np.empty(size, dtype=u64), np.empty(size, dtype=u64)
        self.starts, self.lengths, self.word0, self.nblocks, self.index = (
            np.empty(size, dtype=np.intp) for _ in range(5)
        )
        self.copy = np.zeros(0, dtype=u64)  # data of a batch that cannot be read in place (grown on demand)


def _rotl(x: np.ndarray, r: int, tmp: np.ndarray) -> None:
    left, right = _SHIFTS[r]
    np.right_shift(x, right, out=tmp)
    np.left_shift(x, left, out=x)
    x |= tmp


def _mix_k1(k1: np.ndarray, tmp: np.ndarray) -> None:
    k1 *= _C1
    _rotl(k1, 31, tmp)
    k1 *= _C2


def _mix_k2(k2: np.ndarray, tmp: np.ndarray) -> None:
    k2 *= _C2
    _rotl(k2, 33, tmp)
    k2 *= _C1


def _fmix64(k: np.ndarray, tmp: np.ndarray) -> None:
    for mult in (_FMIX1, _FMIX2, None):
        np.right_shift(k, _U33, out=tmp)
        k ^= tmp
        if mult is not None:
            k *= mult


def _read_pair(
    words: np.ndarray,
    index: np.ndarray,
    shift: np.ndarray,
    rshift: np.ndarray,
    k1: np.ndarray,
    k2: np.ndarray,
    tmp: np.ndarray,
) -> None:
    """k1, k2 = the little-endian words at byte 8 * index + shift / 8 and 8 bytes on (index is clobbered)."""
    index += 1
    np.take(words, index, out=k2, mode="clip")  # W[i + 1]
    np.left_shift(k2, _U1, out=tmp)  # (w << 1) << (63 - s) == w << (64 - s), with no shift by 64 when s == 0
    tmp <<= rshift
    index -= 1
    np.take(words, index, out=k1, mode="clip")  # W[i]
    k1 >>= shift
    k1 |= tmp
    k2 >>= shift
    index += 2
    np.take(words, index, out=tmp, mode="clip")  # W[i + 2]
    tmp <<= _U1
    tmp <<= rshift
    k2 |= tmp


def _hash_batch(
    words: np.ndarray, work: _Work, m: int, seed: np.uint64, max_blocks: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Hashes the m (> 0) keys whose byte starts (in `words`) and lengths are in work.starts/lengths[:m].

    Only the first `max_blocks` blocks of each key are mixed (all of them if None): keys with more come out wrong.
    """
    starts, lengths, nblocks = work.starts[:m], work.lengths[:m], work.nblocks[:m]
    word0, shift, rshift = work.word0[:m], work.shift[:m], work.rshift[:m]
    h1, h2, k1, k2, tmp, index = work.h1[:m], work.h2[:m], work.k1[:m], work.k2[:m], work.tmp[:m], work.index[:m]
    h1.fill(seed)
    h2.fill(seed)
    np.right_shift(starts, 3, out=word0)
    np.right_shift(lengths, 4, out=nblocks)
    np.bitwise_and(starts.view(np.uint64), _U7, out=shift)
    shift <<= _U3  # bits to drop from the first word
    np.subtract(_U63, shift, out=rshift)

    # blocks: `c*` hold the keys that still have block j (all keys while j < the fewest blocks of any key)
    ch1, ch2, cword0, cshift, crshift, cnblocks = h1, h2, word0, shift, rshift, nblocks
    alive: np.ndarray | None = None  # batch positions of the `c*` keys once some are done
    fewest, most = int(nblocks.min()), int(nblocks.max())
    for j in range(most if max_blocks is None else min(most, max_blocks)):
        if j >= fewest:
            keep = cnblocks > j
            if alive is None:
                alive = np.flatnonzero(keep)  # h1/h2 of the other keys are final already
            else:
                done = ~keep
                h1[alive[done]] = ch1[done]
                h2[alive[done]] = ch2[done]
                alive = alive[keep]
            ch1, ch2, cword0, cshift, crshift, cnblocks = (
                a[keep] for a in (ch1, ch2, cword0, cshift, crshift, cnblocks)
            )
            fewest = int(cnblocks.min())
        c = len(ch1)
        ck1, ck2, ctmp, cindex = k1[:c], k2[:c], tmp[:c], index[:c]
        np.add(cword0, 2 * j, out=cindex)
        _read_pair(words, cindex, cshift, crshift, ck1, ck2, ctmp)
        _mix_k1(ck1, ctmp)
        ch1 ^= ck1
        _rotl(ch1, 27, ctmp)
        ch1 += ch2
        ch1 *= _U5
        ch1 += _N1
        _mix_k2(ck2, ctmp)
        ch2 ^= ck2
        _rotl(ch2, 31, ctmp)
        ch2 += ch1
        ch2 *= _U5
        ch2 += _N2
    if alive is not None:
        h1[alive] = ch1
        h2[alive] = ch2

    # tail: the 0..15 bytes after the blocks; mixing an all-zero k1 or k2 changes nothing, so no key is skipped
    np.left_shift(nblocks, 1, out=index)
    index += word0
    _read_pair(words, index, shift, rshift, k1, k2, tmp)
    tail = nblocks  # reused: nblocks is not needed any more
    np.bitwise_and(lengths, 15, out=tail)
    np.take(_LOW_BYTES, tail, out=tmp, mode="clip")
    k1 &= tmp
    tail -= 8
    np.take(_LOW_BYTES, tail, out=tmp, mode="clip")
    k2 &= tmp
    _mix_k1(k1, tmp)
    h1 ^= k1
    _mix_k2(k2, tmp)
    h2 ^= k2

    total = lengths.view(np.uint64)
    h1 ^= total
    h2 ^= total
    h1 += h2
    h2 += h1
    _fmix64(h1, tmp)
    _fmix64(h2, tmp)
    h1 += h2
    h2 += h1
    return h1, h2


def _hash_array(arr: pa.Array, seed: np.uint64, work: _Work, out: np.ndarray, defer_long: bool = True) -> None:
    n = len(arr)
    if n == 0:
        return
    _, offsets_buf, data_buf = arr.buffers()
    offset_type = np.dtype(np.int64 if pa.types.is_large_string(arr.type) else np.int32)
    offsets = np.frombuffer(offsets_buf, dtype=offset_type, count=n + 1, offset=arr.offset * offset_type.itemsize)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    # read in place when the buffer is 8-aligned (np.take would copy an unaligned view whole) and the machine
    # little-endian: the words must be read as little-endian, as MurmurHash3 reads its blocks
    in_place = data_buf is not None and data_buf.address % 8 == 0 and sys.byteorder == "little"
    data_words = np.frombuffer(data_buf, dtype=np.uint64, count=len(data) // 8) if in_place else None
    deferred: list[np.ndarray] = []
    for lo in range(0, n, BATCH_KEYS):
        hi = min(lo + BATCH_KEYS, n)
        m = hi - lo
        bounds = offsets[lo : hi + 1]
        first, last = int(bounds[0]), int(bounds[-1])
        if data_words is not None and (last >> 3) + _SLACK_WORDS <= len(data_words):
            words, base = data_words, 0
        else:  # copy the batch's bytes, zero-padded so its last tail reads stay in the copy
            need = ((last - first) >> 3) + _SLACK_WORDS + 1
            if len(work.copy) < need:
                work.copy = np.zeros(max(need, 2 * len(work.copy)), dtype=np.uint64)
            words, base = work.copy[:need], first
            copy_bytes = words.view(np.uint8)
            copy_bytes[: last - first] = data[first:last]
            copy_bytes[last - first :] = 0
            if sys.byteorder != "little":
                words.byteswap(inplace=True)
        np.subtract(bounds[:-1], base, out=work.starts[:m], dtype=np.intp)
        np.subtract(bounds[1:], bounds[:-1], out=work.lengths[:m], dtype=np.intp)
        max_blocks = None
        if defer_long:
            long = np.flatnonzero(work.lengths[:m] > 16 * LONG_BLOCKS)
            if 0 < len(long) <= m // 2:  # a batch of mostly long keys is hashed as it is
                deferred.append(long + lo)
                max_blocks = LONG_BLOCKS
        h1, h2 = _hash_batch(words, work, m, seed, max_blocks)
        out[lo:hi, 0] = h1
        out[lo:hi, 1] = h2
    if deferred:  # the long keys, gathered into one array (by Arrow) and hashed in batches of their own
        where = np.concatenate(deferred)
        long_keys = arr.take(pa.array(where))
        long_out = np.empty((len(where), 2), dtype=np.uint64)
        _hash_array(long_keys, seed, work, long_out, defer_long=False)
        out[where] = long_out


def hash_each(keys: list[str], seed: int = 0) -> np.ndarray:
    """`hash128` of Python strings, key by key with mmh3: for a handful of keys, and the reference it equals."""
    digest = b"".join(mmh3.hash_bytes(k.encode("utf-8"), seed, True) for k in keys)
    return np.frombuffer(digest, dtype="<u8").reshape(-1, 2).astype(np.uint64)


def hash128(keys: pa.Array | pa.ChunkedArray, seed: int = 0) -> np.ndarray:
    """(n, 2) uint64: the two 64-bit halves of each key's x64-128 MurmurHash3 of its UTF-8 bytes, machine independent.

    Row i equals `np.frombuffer(mmh3.hash_bytes(key_i.encode("utf-8"), seed, True), "<u8")`, so with seed 0
    the result equals `bloom.key_hashes` of the same keys. `keys` is a `string` or `large_string` Array or
    ChunkedArray (sliced or not, any number of chunks) with no nulls (ValueError); `seed` is 0..2**32-1, as
    for mmh3.
    """
    if isinstance(keys, pa.ChunkedArray):
        chunks = keys.chunks
    elif isinstance(keys, pa.Array):
        chunks = [keys]
    else:
        raise TypeError(f"hash128 wants a pyarrow Array or ChunkedArray, not {type(keys).__name__}")
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        raise TypeError(f"hash128 wants string or large_string keys, not {keys.type}")
    seed = operator.index(seed)
    if not 0 <= seed < 1 << 32:
        raise ValueError(f"hash128 seed must be in 0..2**32-1, not {seed}")
    if keys.null_count:
        raise ValueError(f"hash128 keys must not be null ({keys.null_count} nulls)")
    if len(keys) <= FEW_KEYS:  # a handful: mmh3 per key costs less than setting up the vector passes
        return hash_each(keys.to_pylist(), seed)
    out = np.empty((len(keys), 2), dtype=np.uint64)
    work = _Work(min(BATCH_KEYS, max((len(chunk) for chunk in chunks), default=0)))
    start = 0
    with np.errstate(over="ignore"):
        for chunk in chunks:
            _hash_array(chunk, np.uint64(seed), work, out[start : start + len(chunk)])
            start += len(chunk)
    return out
