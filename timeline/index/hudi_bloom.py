"""Apache Hudi's record-key bloom filters, bit for bit as Hudi 0.14/0.15 (and 1.x) build and serialise them.

Java Hudi's bloom index reads these filters from parquet footers and from the metadata table's `bloom_filters`
partition, so a filter Tandem writes must be the one Java would have built from the same keys, and a filter
Java wrote must answer here as it does there. Both types of `org.apache.hudi.common.bloom.BloomFilterFactory`:

- SIMPLE (`SimpleBloomFilter`): one `InternalBloomFilter` of `vector_size` bits (0.15's copy of Hadoop's
  `org.apache.hadoop.util.bloom.BloomFilter`, which 0.14 used itself: the same bits and bytes).
- DYNAMIC_V0 (`HoodieDynamicBoundedBloomFilter` over `InternalDynamicBloomFilter`): rows of such filters, each
  holding `num_entries` keys; a full last row gets a new one while rows * num_entries < max_entries, after which
  keys go round-robin over the rows from row 0 (row 0 twice). A key is present if any row holds it.

Sizes (`BloomFilterUtils`): vector_size = (int) ceil(n * (-ln(fpp) / ln(2)^2)), nb_hash = (int) ceil(ln(2) *
vector_size / n), in Java doubles. Hashing: `hadoop_hash` (MURMUR_HASH, type 1, the only hash Hudi's factory uses).

Serialised form (`serializeToString`): Base64 (java.util.Base64, padded) of the Writable bytes, big-endian:
    filter:  int -1 (version) | int nb_hash | byte hash_type | int vector_size | ceil(vector_size / 8) bytes,
             bit i in byte i // 8 under mask 1 << (i % 8)
    dynamic: filter header (no bits) | int num_entries | int current_nb_record | int rows | rows x filter
Stored as that string in the parquet footer (`org.apache.hudi.bloomfilter`, with `hoodie_bloom_filter_type_code`
only for DYNAMIC types; no type code means SIMPLE) and as its UTF-8 bytes in the metadata table's
`HoodieMetadataBloomFilter.bloomFilter`, beside `type` (the type code's name).

The format has no checksum: a bit cleared by damage in the vector cannot be seen by any reader, Java's included.
Everything else that does not hold for a filter Hudi wrote (length, version, hash type, header fields, rows
unlike the first, bits past the vector's end, a dynamic filter's hash count not the one its sizes give) raises
ValueError, so a damaged filter fails loudly instead of answering "absent" for keys the file holds.
"""

from __future__ import annotations

import base64
import binascii
import math
import numbers
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import ClassVar

import numpy as np

from timeline.index.hadoop_hash import KeyBatch, batches, key_array, positions_of

__all__ = [
    "DYNAMIC_V0",
    "SIMPLE",
    "DynamicBoundedBloomFilter",
    "HudiBloomFilter",
    "SimpleBloomFilter",
    "create_bloom_filter",
    "filter_shape",
    "footer_metadata",
    "from_footer",
    "from_mdt",
    "from_string",
    "mdt_fields",
]

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
JENKINS_HASH = 0
MURMUR_HASH = 1
DEFAULT_NUM_ENTRIES = 60000  # hoodie.index.bloom.num_entries
DEFAULT_FPP = 1e-9  # hoodie.index.bloom.fpp
DEFAULT_MAX_ENTRIES = 100000  # hoodie.bloom.index.filter.dynamic.max.entries
DEFAULT_TYPE = DYNAMIC_V0  # hoodie.bloom.index.filter.type
FOOTER_KEY = "org.apache.hudi.bloomfilter"
OLD_FOOTER_KEY = "com.uber.hoodie.bloomfilter"
FOOTER_TYPE_KEY = "hoodie_bloom_filter_type_code"
# Hudi's factory makes at most 1075 hashes for any positive fpp; more is damage (or a zero fpp), not a filter
MAX_HASHES = 4096
UNPACKED_BITS = 1 << 27  # a filter up to this many bits is set as one byte per bit (a scatter is fast there)
FEW_KEYS = 8  # up to this many keys are hashed one by one in Python
CHECKED_PROBES = 3  # probes after each of which might_contain_many drops the keys already found absent

_VERSION = -1  # InternalFilter.VERSION
_HEADER = struct.Struct(">iibi")  # version, nb_hash, hash_type, vector_size
_INT = struct.Struct(">i")
_FIELDS = struct.Struct(">ibi")  # the header after the version
_DYNAMIC = struct.Struct(">iii")  # nr, current_nb_record, rows
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LN2 = math.log(2.0)
_LN2_SQUARED = _LN2 * _LN2


def _java_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError(f"{what} {value} is not a Java int")
    return int(value)


def _wrap_int(value: int) -> int:
    """Java int arithmetic: the low 32 bits, signed."""
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def _d2i(value: float) -> int:
    """Java's (int) of a double: NaN is 0, out-of-range values saturate."""
    if math.isnan(value):
        return 0
    return int(min(max(value, _INT_MIN), _INT_MAX))


def _java_log(value: float) -> float:
    if math.isnan(value) or value < 0:
        return math.nan
    return -math.inf if value == 0 else math.log(value)


def _ceil(value: float) -> float:
    return float(math.ceil(value)) if math.isfinite(value) else value


def filter_shape(num_entries: int, error_rate: float) -> tuple[int, int]:
    """(vector_size, nb_hash) as `BloomFilterUtils.getBitSize` / `getNumHashes` compute them; ValueError where
    Hudi's constructors throw (no bits, no hashes)."""
    num_entries = _java_int(num_entries, "num_entries")
    if not isinstance(error_rate, numbers.Real):
        raise TypeError(f"error_rate must be a number, not {type(error_rate).__name__}")
    # Java: (int) Math.ceil(numEntries * (-Math.log(errorRate) / LOG2_SQUARED)), LOG2_SQUARED = log(2) * log(2)
    vector_size = _d2i(_ceil(float(num_entries) * (-_java_log(float(error_rate)) / _LN2_SQUARED)))
    if vector_size <= 0:
        raise ValueError(f"a bloom filter of {num_entries} entries at error rate {error_rate!r} has no bits")
    return vector_size, _num_hashes(vector_size, num_entries)


def _num_hashes(vector_size: int, num_entries: int) -> int:
    # Java: (int) Math.ceil(Math.log(2) * bitSize / numEntries); num_entries != 0 whenever vector_size > 0
    nb_hash = _d2i(_ceil(_LN2 * float(vector_size) / float(num_entries)))
    if not 0 < nb_hash <= MAX_HASHES:
        raise ValueError(f"a bloom filter of {vector_size} bits for {num_entries} entries would have {nb_hash} hashes")
    return nb_hash


def _hash_type(hash_type: int) -> int:
    if hash_type == MURMUR_HASH:
        return hash_type
    name = " (Jenkins)" if hash_type == JENKINS_HASH else ""
    raise ValueError(f"bloom filter hash type {hash_type}{name} is not supported: Hudi writes MurmurHash (1)")


class HudiBloomFilter:
    """What SIMPLE and DYNAMIC_V0 filters share: rows of `vector_size` bits probed by the same `nb_hash` positions.

    The rows are kept packed as they are serialised, (rows, ceil(vector_size / 8)) uint8; while keys are being
    added to a filter of up to UNPACKED_BITS bits they are unpacked to a byte per bit until next read.
    """

    type_code: ClassVar[str]

    def __init__(self, vector_size: int, nb_hash: int, packed: np.ndarray) -> None:
        self.vector_size = vector_size
        self.nb_hash = nb_hash
        self.hash_type = MURMUR_HASH
        self._packed_rows = packed
        self._unpacked: np.ndarray | None = None

    # -- the bits

    @property
    def _packed(self) -> np.ndarray:
        if self._unpacked is not None:
            self._packed_rows = np.packbits(self._unpacked, axis=1, bitorder="little")
            self._unpacked = None
        return self._packed_rows

    @property
    def rows(self) -> int:
        return len(self._packed_rows) if self._unpacked is None else len(self._unpacked)

    def _add_rows(self, count: int) -> None:
        packed = self._packed
        self._packed_rows = np.concatenate([packed, np.zeros((count, packed.shape[1]), dtype=np.uint8)])

    def _set(self, rows: int | np.ndarray, positions: np.ndarray) -> None:
        """Set bit `positions` (intp) of `rows` (one row, or each position's own)."""
        if self.rows * self.vector_size <= UNPACKED_BITS:
            if self._unpacked is None:
                self._unpacked = np.unpackbits(self._packed_rows, axis=1, count=self.vector_size, bitorder="little")
            self._unpacked.reshape(-1)[positions + rows * self.vector_size] = 1
        else:
            packed = self._packed.reshape(-1)
            index = (positions >> 3) + rows * self._packed_rows.shape[1]
            np.bitwise_or.at(packed, index, np.left_shift(1, positions & 7).astype(np.uint8))

    def _present(self, packed: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(rows, n) bool: whether each row has each bit set."""
        return ((packed[:, positions >> 3] >> (positions & 7).astype(np.uint8)) & 1).astype(bool)

    # -- keys

    def _rows_for(self, n: int) -> int | np.ndarray:
        """The row each of the next `n` keys goes to, in order (adding rows as the filter's type does)."""
        raise NotImplementedError

    def add(self, key: str) -> None:
        self.add_many([_key(key)])

    def add_many(self, keys: object) -> None:
        """Add keys (a pyarrow string array, or an iterable of str) in order, as Java's `add` one after another."""
        keys = key_array(keys)
        if not len(keys):
            return
        rows = self._rows_for(len(keys))
        if len(keys) <= FEW_KEYS:
            for i, key in enumerate(keys.to_pylist()):
                positions = np.array(positions_of(key.encode("utf-8"), self.nb_hash, self.vector_size))
                self._set(rows if isinstance(rows, int) else int(rows[i]), positions)
            return
        for indices, batch in batches(keys):
            key_rows = rows if isinstance(rows, int) else rows[indices]
            for positions in batch.chain(self.nb_hash, self.vector_size):
                self._set(key_rows, positions)

    def might_contain(self, key: str) -> bool:
        positions = np.array(positions_of(_key(key).encode("utf-8"), self.nb_hash, self.vector_size))
        return bool(self._present(self._packed, positions).all(axis=1).any())

    def might_contain_many(self, keys: object) -> np.ndarray:
        """`might_contain` of each key, as a bool array. After each of the first CHECKED_PROBES probes the keys
        already absent are dropped (about half of them each time in a filter about half full), so absent keys
        cost a few hashes each and present ones all `nb_hash`."""
        keys = key_array(keys)
        out = np.zeros(len(keys), dtype=bool)
        packed = self._packed
        if len(keys) <= FEW_KEYS:
            for i, key in enumerate(keys.to_pylist()):
                out[i] = self.might_contain(key)
            return out
        for indices, batch in batches(keys):
            out[indices] = self._batch_present(packed, batch)
        return out

    def might_contain_any(self, prepared: Sequence[KeyBatch]) -> bool:
        """Whether any key of `prepared` (`hadoop_hash.batches` of them, made once) may be present: the
        seed-free half of hashing done once for a batch asked of many filters."""
        return bool(might_contain_any_of([self], prepared)[0])

    def _batch_present(self, packed: np.ndarray, batch: KeyBatch) -> np.ndarray:
        out = np.zeros(len(batch), dtype=bool)
        live = np.arange(len(batch))  # the batch's keys not found absent yet
        found = np.ones((len(packed), len(batch)), dtype=bool)  # the rows that may still hold each live key
        h = np.zeros(len(batch), dtype=np.uint32)
        for i in range(self.nb_hash):
            h = batch.hash(h)
            found &= self._present(packed, KeyBatch.position(h, self.vector_size))
            if i < CHECKED_PROBES:
                keep = found.any(axis=0)
                if not keep.all():
                    batch, h, live, found = batch.subset(keep), h[keep], live[keep], found[:, keep]
                    if not len(live):
                        return out
        out[live] = found.any(axis=0)
        return out

    # -- serialised forms

    def _header(self) -> bytes:
        return _HEADER.pack(_VERSION, self.nb_hash, self.hash_type, self.vector_size)

    def _row_bytes(self, row: int) -> bytes:
        return self._header() + self._packed[row].tobytes()

    def to_writable(self) -> bytes:
        """The bytes Java's `write(DataOutput)` writes: what the Base64 string encodes."""
        raise NotImplementedError

    def serialize_to_string(self) -> str:
        """`serializeToString()`: the parquet footer value, and (as UTF-8) the metadata table's bytes."""
        return base64.b64encode(self.to_writable()).decode("ascii")


class SimpleBloomFilter(HudiBloomFilter):
    """Hudi's SIMPLE filter: one vector, sized for `num_entries` keys at `error_rate` and never grown."""

    type_code = SIMPLE

    @classmethod
    def create(cls, num_entries: int, error_rate: float, hash_type: int = MURMUR_HASH) -> SimpleBloomFilter:
        vector_size, nb_hash = filter_shape(num_entries, error_rate)
        _hash_type(hash_type)
        return cls(vector_size, nb_hash, np.zeros((1, _nbytes(vector_size)), dtype=np.uint8))

    def _rows_for(self, n: int) -> int:
        return 0

    def to_writable(self) -> bytes:
        return self._row_bytes(0)


class DynamicBoundedBloomFilter(HudiBloomFilter):
    """Hudi's DYNAMIC_V0 filter (`HoodieDynamicBoundedBloomFilter`): rows of `num_entries` keys, up to
    `max_entries` keys' worth, then round-robin.

    Java serialises the rows, `num_entries` and the active row's key count, but not `max_entries`, whether the
    bound was reached or where the round-robin stands: a filter read back has max_entries 0, so its next key
    past a full row starts the round-robin at row 0, as Java's does.
    """

    type_code = DYNAMIC_V0

    def __init__(self, vector_size: int, nb_hash: int, packed: np.ndarray, num_entries: int, current: int) -> None:
        super().__init__(vector_size, nb_hash, packed)
        self.num_entries = num_entries
        self.current_nb_record = current
        self.max_entries = 0
        self._reached_max = False
        self._next_row = 0  # curMatrixIndex

    @classmethod
    def create(
        cls, num_entries: int, error_rate: float, max_entries: int, hash_type: int = MURMUR_HASH
    ) -> DynamicBoundedBloomFilter:
        vector_size, nb_hash = filter_shape(num_entries, error_rate)
        _hash_type(hash_type)
        out = cls(vector_size, nb_hash, np.zeros((1, _nbytes(vector_size)), dtype=np.uint8), num_entries, 0)
        out.max_entries = _java_int(max_entries, "max_entries")
        return out

    def _rows_for(self, n: int) -> np.ndarray:
        """`InternalDynamicBloomFilter.getActiveStandardBF` for n keys in a row, a phase at a time."""
        rows = np.empty(n, dtype=np.intp)
        done = 0
        while done < n:
            if self._reached_max:
                rows[done:] = (self._next_row + np.arange(n - done)) % self.rows
                self._next_row += n - done
                self.current_nb_record += n - done
                break
            if self.current_nb_record < self.num_entries:
                take = min(n - done, self.num_entries - self.current_nb_record)
                rows[done : done + take] = self.rows - 1
                self.current_nb_record += take
                done += take
            elif _wrap_int(self.rows * self.num_entries) < self.max_entries:
                self._add_rows(1)
                self.current_nb_record = 0
            else:
                self._reached_max = True
                rows[done] = 0
                self.current_nb_record += 1
                done += 1
        return rows

    def to_writable(self) -> bytes:
        parts = [self._header(), _DYNAMIC.pack(self.num_entries, self.current_nb_record, self.rows)]
        parts.extend(self._row_bytes(row) for row in range(self.rows))
        return b"".join(parts)


STACKED_CELLS = 1 << 22  # rows x keys probed at once by `might_contain_any_of` (bounds its memory)


def might_contain_any_of(blooms: Sequence[HudiBloomFilter], prepared: Sequence[KeyBatch]) -> np.ndarray:
    """`might_contain_any(prepared)` of each filter, as a bool array: filters of one shape are stacked row on
    row and every probe is one gather over all of them, instead of a few small array operations per filter
    (a table's files share a handful of shapes; tagging asks one key batch of every file of a partition)."""
    out = np.zeros(len(blooms), dtype=bool)
    keys = sum(len(batch) for batch in prepared)
    if not keys:
        return out
    by_shape: dict[tuple[int, int], list[int]] = {}
    for index, bloom in enumerate(blooms):
        by_shape.setdefault((bloom.nb_hash, bloom.vector_size), []).append(index)
    for (nb_hash, vector_size), members in by_shape.items():
        probes = [batch.positions(nb_hash, vector_size) for batch in prepared]
        for chunk in _chunks(members, [blooms[i].rows for i in members], max(1, STACKED_CELLS // keys)):
            packed = np.concatenate([blooms[i]._packed for i in chunk])
            owners = np.repeat(np.arange(len(chunk)), [blooms[i].rows for i in chunk])
            row_holds = np.zeros(len(packed), dtype=bool)
            for positions in probes:
                found = np.ones((len(packed), len(positions[0]) if positions else 0), dtype=bool)
                for probe in positions:
                    found &= ((packed[:, probe >> 3] >> (probe & 7).astype(np.uint8)) & 1).astype(bool)
                row_holds |= found.any(axis=1)
            held = np.zeros(len(chunk), dtype=bool)
            np.logical_or.at(held, owners, row_holds)
            out[chunk] = held
    return out


def _chunks(members: list[int], rows: list[int], most_rows: int) -> Iterator[list[int]]:
    """`members` in runs of at most `most_rows` filter rows (a filter with more rows makes a run alone)."""
    chunk: list[int] = []
    total = 0
    for member, count in zip(members, rows, strict=True):
        if chunk and total + count > most_rows:
            yield chunk
            chunk, total = [], 0
        chunk.append(member)
        total += count
    if chunk:
        yield chunk


def _nbytes(vector_size: int) -> int:
    return (vector_size + 7) // 8


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"bloom filter keys are str, not {type(key).__name__}")
    if not key:
        raise ValueError("bloom filter keys cannot be empty")
    return key


def create_bloom_filter(
    num_entries: int = DEFAULT_NUM_ENTRIES,
    error_rate: float = DEFAULT_FPP,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    type_code: str = DEFAULT_TYPE,
) -> HudiBloomFilter:
    """`BloomFilterFactory.createBloomFilter`: a new filter of the given type (its name, in any case)."""
    code = _type_code(type_code)
    if code == SIMPLE:
        return SimpleBloomFilter.create(num_entries, error_rate)
    return DynamicBoundedBloomFilter.create(num_entries, error_rate, max_entries)


def _type_code(type_code: object) -> str:
    if isinstance(type_code, str):
        for code in (SIMPLE, DYNAMIC_V0):
            if type_code.upper() == code:
                return code
    raise ValueError(f"bloom filter type code not recognizable: {type_code!r}")


# -- reading


class _Reader:
    """Big-endian fields of a Writable, with truncation reported as ValueError."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int, what: str) -> bytes:
        if self.at + size > len(self.data):
            raise ValueError(f"bloom filter truncated: {len(self.data)} bytes, {what} needs {self.at + size}")
        out = self.data[self.at : self.at + size]
        self.at += size
        return out

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
        return fmt.unpack(self.take(fmt.size, what))


def _read_header(reader: _Reader) -> tuple[int, int]:
    """(vector_size, nb_hash) of an `InternalFilter` header, checked as Hudi's `readFields` and constructors
    check it (and nb_hash against MAX_HASHES)."""
    (version,) = reader.unpack(_INT, "the version")
    if version > 0:  # Hadoop's unversioned format: the version is nb_hash, and the hash Jenkins
        _hash_type(JENKINS_HASH)
    if version != _VERSION:
        raise ValueError(f"unsupported bloom filter version {version}")
    nb_hash, hash_type, vector_size = reader.unpack(_FIELDS, "the header")
    _hash_type(hash_type)
    if vector_size <= 0:
        raise ValueError(f"bad bloom filter vector size {vector_size}")
    if not 0 < nb_hash <= MAX_HASHES:
        raise ValueError(f"bad bloom filter hash count {nb_hash}")
    return vector_size, nb_hash


def _read_bits(reader: _Reader, vector_size: int) -> np.ndarray:
    raw = np.frombuffer(reader.take(_nbytes(vector_size), "the bit vector"), dtype=np.uint8)
    if vector_size % 8 and raw[-1] >> (vector_size % 8):
        raise ValueError("bloom filter has bits set past the end of its vector")
    return raw


def _decode(serialized: str | bytes) -> bytes:
    if isinstance(serialized, str):
        try:
            serialized = serialized.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError("a serialised bloom filter is Base64: it has non-ASCII characters") from None
    if not isinstance(serialized, (bytes, bytearray, memoryview)):
        raise TypeError(f"a serialised bloom filter is a str, not {type(serialized).__name__}")
    try:
        return base64.b64decode(serialized, validate=True)
    except binascii.Error as err:
        raise ValueError(f"a serialised bloom filter is not Base64: {err}") from None


def from_string(type_code: str, serialized: str | bytes) -> HudiBloomFilter:
    """`BloomFilterFactory.fromString(serialized, typeCode)`; ValueError for anything Hudi did not write."""
    code = _type_code(type_code)
    reader = _Reader(_decode(serialized))
    vector_size, nb_hash = _read_header(reader)
    if code == SIMPLE:
        bits = _read_bits(reader, vector_size)
        if reader.at != len(reader.data):
            raise ValueError(f"bloom filter has {len(reader.data) - reader.at} bytes after its end")
        return SimpleBloomFilter(vector_size, nb_hash, bits[None].copy())
    num_entries, current, rows = reader.unpack(_DYNAMIC, "the dynamic filter's counts")
    if num_entries <= 0 or current < 0 or rows <= 0:
        raise ValueError(f"bad dynamic bloom filter: {num_entries} entries a row, {current} in the last, {rows} rows")
    if _num_hashes(vector_size, num_entries) != nb_hash:  # BloomFilterUtils sized it from num_entries
        raise ValueError(f"bad dynamic bloom filter: {nb_hash} hashes for {vector_size} bits of {num_entries}")
    if len(reader.data) - reader.at != rows * (_HEADER.size + _nbytes(vector_size)):
        raise ValueError(f"dynamic bloom filter of {rows} rows is {len(reader.data)} bytes long")
    packed = np.empty((rows, _nbytes(vector_size)), dtype=np.uint8)
    for row in range(rows):
        if _read_header(reader) != (vector_size, nb_hash):
            raise ValueError(f"dynamic bloom filter row {row} differs from the filter in size or hashes")
        packed[row] = _read_bits(reader, vector_size)
    return DynamicBoundedBloomFilter(vector_size, nb_hash, packed, num_entries, current)


def mdt_fields(bloom: HudiBloomFilter) -> dict[str, str | bytes]:
    """`type` and `bloomFilter` of the metadata table's HoodieMetadataBloomFilter record for this filter."""
    return {"type": bloom.type_code, "bloomFilter": bloom.serialize_to_string().encode("ascii")}


def from_mdt(type_code: str, data: bytes) -> HudiBloomFilter:
    """The filter of a `bloom_filters` record (`BloomFilterFactory.fromByteBuffer(bloomFilter, type)`)."""
    return from_string(type_code, bytes(data))


def footer_metadata(bloom: HudiBloomFilter) -> dict[str, str]:
    """The parquet key-value metadata Hudi's write support adds for the filter (min/max record keys aside)."""
    out = {FOOTER_KEY: bloom.serialize_to_string()}
    if "DYNAMIC" in bloom.type_code:
        out[FOOTER_TYPE_KEY] = bloom.type_code
    return out


def from_footer(metadata: Mapping[str | bytes, str | bytes] | None) -> HudiBloomFilter | None:
    """The filter in a parquet file's key-value metadata (pyarrow's bytes or str), as Hudi's
    `readBloomFilterFromMetadata` finds it; None when the file has none."""

    def text(value: str | bytes) -> str:
        return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else value

    found = {text(key): text(value) for key, value in (metadata or {}).items()}
    serialized = found.get(FOOTER_KEY) or found.get(OLD_FOOTER_KEY)
    if serialized is None:
        return None
    return from_string(found.get(FOOTER_TYPE_KEY, SIMPLE), serialized)
