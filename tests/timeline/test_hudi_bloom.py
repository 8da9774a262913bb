"""Hudi's bloom filters (timeline.index.hudi_bloom, timeline.index.hadoop_hash) without a JVM.

Java's own answers are pinned here (hashes and filters Hudi 0.15 computed: tests/interop/test_java_bloom.py
checks the same and much more against a live JVM); the vectorised hashing equals the one-key reference; a dynamic
filter's rows follow `InternalDynamicBloomFilter.getActiveStandardBF` key by key; the serialised forms round-trip;
damage raises ValueError.
"""

from __future__ import annotations

import base64
import struct
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.index import hadoop_hash, hudi_bloom
from timeline.index.hudi_bloom import (
    DYNAMIC_V0,
    SIMPLE,
    DynamicBoundedBloomFilter,
    SimpleBloomFilter,
    create_bloom_filter,
    filter_shape,
    footer_metadata,
    from_footer,
    from_mdt,
    from_string,
    mdt_fields,
)

# org.apache.hudi.common.util.hash.MurmurHash.getInstance().hash(key.getBytes(UTF_8), seed) in Hudi 0.15, for the
# seeds 0, 1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE: every tail length, sign-extended tail bytes, a NUL
SEEDS = (0, 1, -1, 2**31 - 1, -(2**31))
JAVA_MURMUR = {
    "a": (-1838653602, 626045324, 713507990, 70457854, 1813357478),
    "ab": (1525573013, -419373624, -1797532438, -1154512126, 882555261),
    "abc": (1775488903, -2144439693, -1465591341, -2108650437, 1132436191),
    "abcd": (646393889, -918586858, 1555318719, 912298519, 3374409),
    "k001": (-311570556, 642869378, -1968563997, 1683473691, -954623124),
    "é": (-384040333, -913757653, -1125067414, -482055678, 259116715),
    "€": (-1486029997, 239383939, 672433944, 1315458016, -843043317),
    "€x": (-540445419, 1258053985, -2036870400, -1393850376, 102549181),
    "😀": (-842402043, -962125668, -1030930139, -387901955, -199392083),
    "ÿÿÿ": (-971267017, -967997496, -1811705561, 1840145023, -328208161),
    "\x00": (-380735811, 0, -1725167783, 1926877361, 262382437),
    "0123456789abcdefg": (1781256855, 628869667, 1575012896, -2076870264, 1138196847),
    "Ωmega-ключ-鍵": (1080757351, 1246487421, 1499801913, 856817105, 437762207),
}
# BloomFilterFactory.createBloomFilter(...) then add(key) for each key, serializeToString(), in Hudi 0.15
JAVA_SIMPLE = ((20, 0.01, 0, SIMPLE), ["k1", "é", "ab€", "😀x", "0123456789"])
JAVA_SIMPLE_STRING = "/////wAAAAcBAAAAwBBgAEEgAkBgogQAAAICiEAgCGwCABICRA=="
# 4 keys a row, rows while rows * 4 < 10 (3 rows), then round-robin from row 0
JAVA_DYNAMIC = ((4, 0.05, 10, DYNAMIC_V0), [f"key-{i}" for i in range(15)] + ["ключ", "鍵"])
JAVA_DYNAMIC_STRING = (
    "/////wAAAAUBAAAAGQAAAAQAAAAJAAAAA/////8AAAAFAQAAABl/v/UA/////wAAAAUBAAAAGWs37wH/////AAAABQEAAAAZUTr+AQ=="
)

keys_st = st.lists(st.text(min_size=1, max_size=40), max_size=60)


def java_filter(case) -> hudi_bloom.HudiBloomFilter:
    (num_entries, fpp, max_entries, type_code), keys = case
    bloom = create_bloom_filter(num_entries, fpp, max_entries, type_code)
    bloom.add_many(keys)
    return bloom


@pytest.mark.parametrize("key", sorted(JAVA_MURMUR))
def test_murmur_hash_is_hudis(key):
    expected = [h & 0xFFFFFFFF for h in JAVA_MURMUR[key]]
    assert [hadoop_hash.murmur_hash(key.encode("utf-8"), seed) for seed in SEEDS] == expected
    batch = next(hadoop_hash.batches(hadoop_hash.key_array([key] * len(SEEDS))))[1]
    assert batch.hash(np.array(SEEDS, dtype=np.int64).astype(np.uint32)).tolist() == expected


@pytest.mark.parametrize("few", [hudi_bloom.FEW_KEYS, -1])
@pytest.mark.parametrize(("case", "expected"), [(JAVA_SIMPLE, JAVA_SIMPLE_STRING), (JAVA_DYNAMIC, JAVA_DYNAMIC_STRING)])
def test_filters_serialise_as_java_does(case, expected, few):
    with mock.patch.object(hudi_bloom, "FEW_KEYS", few):
        bloom = java_filter(case)
    assert bloom.serialize_to_string() == expected
    read = from_string(case[0][3], expected)
    assert read.might_contain_many(case[1]).all()
    assert all(read.might_contain(key) for key in case[1])
    assert read.serialize_to_string() == expected


def test_java_dynamic_filter_has_three_rows_then_round_robin():
    bloom = from_string(DYNAMIC_V0, JAVA_DYNAMIC_STRING)
    assert (bloom.rows, bloom.num_entries, bloom.current_nb_record) == (3, 4, 9)
    assert (bloom.vector_size, bloom.nb_hash) == filter_shape(4, 0.05) == (25, 5)


def test_filter_shape_is_hudis():
    assert filter_shape(60000, 1e-9) == (2587966, 30)  # the header of Java's default filters
    assert filter_shape(20, 0.01) == (192, 7)
    for num_entries, fpp in [(0, 1e-9), (-5, 1e-9), (10, 1.0), (10, 2.0), (1, 0.0), (10, float("nan"))]:
        with pytest.raises(ValueError):
            filter_shape(num_entries, fpp)
    for num_entries, fpp in [(10.0, 0.1), (True, 0.1), (10, "0.1")]:
        with pytest.raises(TypeError):
            filter_shape(num_entries, fpp)
    with pytest.raises(ValueError):
        filter_shape(2**31, 0.1)


def positions_vectorised(keys, nb_hash: int, vector_size: int) -> np.ndarray:
    out = np.zeros((len(keys), nb_hash), dtype=np.int64)
    for indices, batch in hadoop_hash.batches(hadoop_hash.key_array(keys)):
        for i, positions in enumerate(batch.chain(nb_hash, vector_size)):
            out[indices, i] = positions
    return out


def positions_reference(keys: list[str], nb_hash: int, vector_size: int) -> np.ndarray:
    rows = [hadoop_hash.positions_of(k.encode("utf-8"), nb_hash, vector_size) for k in keys]
    return np.array(rows, dtype=np.int64).reshape(len(keys), nb_hash)


# keys of every tail length and block count, with 1- to 4-byte characters, some long
vector_keys = st.lists(
    st.one_of(st.text(min_size=1, max_size=30), st.text(st.sampled_from("aé€😀"), min_size=40, max_size=300)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(
    keys=vector_keys,
    nb_hash=st.integers(1, 40),
    vector_size=st.one_of(st.integers(1, 100), st.integers(1, 2**31 - 1)),
    batch_keys=st.sampled_from([1, 3, 1 << 16]),
    batch_blocks=st.sampled_from([1, 7, 1 << 20]),
    large=st.booleans(),
    chunks=st.integers(1, 3),
)
def test_vectorised_positions_equal_the_reference(keys, nb_hash, vector_size, batch_keys, batch_blocks, large, chunks):
    kind = pa.large_string() if large else pa.string()
    cut = len(keys) // chunks
    parts = [keys[i * cut : (i + 1) * cut] for i in range(chunks - 1)] + [keys[(chunks - 1) * cut :]]
    arrow = pa.chunked_array([pa.array(p, type=kind) for p in parts], type=kind)
    with (
        mock.patch.object(hadoop_hash, "BATCH_KEYS", batch_keys),
        mock.patch.object(hadoop_hash, "BATCH_BLOCKS", batch_blocks),
    ):
        got = positions_vectorised(arrow, nb_hash, vector_size)
    np.testing.assert_array_equal(got, positions_reference(keys, nb_hash, vector_size))


def test_sliced_arrays_hash_their_own_keys():
    keys = [f"key-{i}-{'é' * (i % 7)}" for i in range(300)]
    sliced = pa.array(["x", *keys, "y"]).slice(1, len(keys))
    np.testing.assert_array_equal(positions_vectorised(sliced, 9, 1000), positions_reference(keys, 9, 1000))


def java_rows(nr: int, max_nr: int, rows: int, current: int, count: int) -> tuple[list[int], int, int]:
    """`InternalDynamicBloomFilter.add`'s rows for `count` keys, key by key as Java picks them."""
    reached, index, out = False, 0, []
    for _ in range(count):
        if reached:
            row = index % rows
            index += 1
        elif current >= nr and rows * nr < max_nr:
            rows, current, row = rows + 1, 0, rows
        elif current >= nr:
            reached, row = True, 0
        else:
            row = rows - 1
        out.append(row)
        current += 1
    return out, rows, current


@settings(max_examples=80, deadline=None)
@given(
    nr=st.integers(1, 6),
    max_nr=st.integers(-3, 40),
    counts=st.lists(st.integers(0, 25), max_size=5),
    read_back=st.booleans(),
)
def test_dynamic_rows_follow_java(nr, max_nr, counts, read_back):
    bloom = DynamicBoundedBloomFilter.create(nr, 0.1, max_nr)
    rows, current = 1, 0
    if read_back:  # a filter read back has no bound: max_nr 0
        bloom.add_many([f"k{i}" for i in range(nr)])
        bloom = from_string(DYNAMIC_V0, bloom.serialize_to_string())
        rows, current, max_nr = 1, nr, 0
    got, expected = [], []
    for count in counts:
        got.extend(bloom._rows_for(count).tolist())
    expected, rows, current = java_rows(nr, max_nr, rows, current, sum(counts))
    assert got == expected
    assert (bloom.rows, bloom.current_nb_record) == (rows, current)


@settings(max_examples=40, deadline=None)
@given(
    keys=keys_st,
    type_code=st.sampled_from([SIMPLE, DYNAMIC_V0]),
    num_entries=st.integers(1, 50),
    fpp=st.sampled_from([0.3, 0.01, 1e-9]),
    max_entries=st.integers(0, 120),
    unpacked_bits=st.sampled_from([0, hudi_bloom.UNPACKED_BITS]),
)
def test_every_path_builds_the_same_filter(keys, type_code, num_entries, fpp, max_entries, unpacked_bits):
    """Vectorised or key by key, in one call or in several, unpacked or set in place: the same bits."""
    with mock.patch.object(hudi_bloom, "UNPACKED_BITS", unpacked_bits):
        with mock.patch.object(hudi_bloom, "FEW_KEYS", -1):
            whole = create_bloom_filter(num_entries, fpp, max_entries, type_code)
            whole.add_many(pa.array(keys, type=pa.string()))
        one_by_one = create_bloom_filter(num_entries, fpp, max_entries, type_code)
        for key in keys:
            one_by_one.add(key)
        halves = create_bloom_filter(num_entries, fpp, max_entries, type_code)
        halves.add_many(keys[: len(keys) // 2])
        halves.add_many(np.array(keys[len(keys) // 2 :], dtype=object))
    serialised = whole.serialize_to_string()
    assert one_by_one.serialize_to_string() == serialised == halves.serialize_to_string()
    read = from_string(type_code, serialised)
    assert read.serialize_to_string() == serialised
    probes = keys + [f"absent-{i}" for i in range(40)]
    with mock.patch.object(hudi_bloom, "FEW_KEYS", -1):
        many = read.might_contain_many(probes)
    assert many.tolist() == [read.might_contain(k) for k in probes] == whole.might_contain_many(probes).tolist()
    assert many[: len(keys)].all()
    for start in range(0, len(probes), 7):  # any of a set of keys, hashed once for many filters
        part = probes[start : start + 7]
        prepared = [batch for _, batch in hadoop_hash.batches(pa.array(part, pa.string()))]
        assert read.might_contain_any(prepared) == any(read.might_contain(k) for k in part)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.text(min_size=1, max_size=12), max_size=30),
            st.sampled_from([SIMPLE, DYNAMIC_V0]),
            st.sampled_from([(5, 0.3), (20, 0.01), (20, 0.3)]),  # few shapes: filters of one shape stack
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.text(min_size=1, max_size=12), max_size=25),
    st.sampled_from([1, 7, 1 << 22]),
)
def test_filters_asked_at_once_answer_as_each_alone(specs, asked, cells):
    """`might_contain_any_of` (filters of a shape stacked, in chunks of any size) against each filter asked
    key by key: the same answer for every filter."""
    blooms = []
    for keys, type_code, (entries, fpp) in specs:
        bloom = create_bloom_filter(entries, fpp, entries * 3, type_code)
        bloom.add_many(keys)
        blooms.append(bloom)
    probes = asked + [k for keys, _, _ in specs[:1] for k in keys[:2]]  # some present in the first filter
    prepared = [batch for _, batch in hadoop_hash.batches(pa.array(probes, pa.string()))]
    with mock.patch.object(hudi_bloom, "STACKED_CELLS", cells):
        answers = hudi_bloom.might_contain_any_of(blooms, prepared)
    assert answers.tolist() == [any(b.might_contain(k) for k in probes) for b in blooms]


def test_keys_are_checked_before_anything_is_added():
    bloom = create_bloom_filter(2, 0.1, 10, DYNAMIC_V0)
    before = bloom.serialize_to_string()
    for keys, error in [(["a", ""], ValueError), (["a", None], ValueError), (["a", 3], TypeError), ("ab", TypeError)]:
        with pytest.raises(error):
            bloom.add_many(keys)
        with pytest.raises(error):
            bloom.might_contain_many(keys)
    with pytest.raises(ValueError):
        bloom.add("")
    with pytest.raises(ValueError):
        bloom.might_contain("")
    with pytest.raises(TypeError):
        bloom.might_contain(b"a")
    with pytest.raises(TypeError):
        bloom.add_many(pa.array([1, 2]))
    assert bloom.serialize_to_string() == before and bloom.current_nb_record == 0
    assert bloom.might_contain_many([]).tolist() == []


def test_type_codes_and_hash_types():
    assert isinstance(create_bloom_filter(10, 0.1, 10, "simple"), SimpleBloomFilter)
    assert isinstance(from_string("dynamic_v0", JAVA_DYNAMIC_STRING), DynamicBoundedBloomFilter)
    for code in ["", "DYNAMIC", "BLOOM", None]:
        with pytest.raises(ValueError, match="type code"):
            create_bloom_filter(10, 0.1, 10, code)
        with pytest.raises(ValueError, match="type code"):
            from_string(code, JAVA_SIMPLE_STRING)
    with pytest.raises(ValueError, match="Jenkins"):
        SimpleBloomFilter.create(10, 0.1, hash_type=hudi_bloom.JENKINS_HASH)


def test_footer_and_metadata_table_forms():
    simple, dynamic = java_filter(JAVA_SIMPLE), java_filter(JAVA_DYNAMIC)
    assert footer_metadata(simple) == {"org.apache.hudi.bloomfilter": JAVA_SIMPLE_STRING}
    assert footer_metadata(dynamic) == {
        "org.apache.hudi.bloomfilter": JAVA_DYNAMIC_STRING,
        "hoodie_bloom_filter_type_code": "DYNAMIC_V0",
    }
    as_pyarrow = {k.encode(): v.encode() for k, v in footer_metadata(dynamic).items()}
    assert from_footer({**as_pyarrow, b"hoodie_min_record_key": b"a"}).serialize_to_string() == JAVA_DYNAMIC_STRING
    assert isinstance(from_footer({"com.uber.hoodie.bloomfilter": JAVA_SIMPLE_STRING}), SimpleBloomFilter)
    assert from_footer({b"parquet.avro.schema": b"{}"}) is None and from_footer(None) is None
    assert mdt_fields(dynamic) == {"type": "DYNAMIC_V0", "bloomFilter": JAVA_DYNAMIC_STRING.encode()}
    fields = mdt_fields(simple)
    assert from_mdt(fields["type"], fields["bloomFilter"]).serialize_to_string() == JAVA_SIMPLE_STRING


# -- damage


def writable(serialised: str) -> bytes:
    return base64.b64decode(serialised)


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(("type_code", "serialised"), [(SIMPLE, JAVA_SIMPLE_STRING), (DYNAMIC_V0, JAVA_DYNAMIC_STRING)])
def test_truncated_or_extended_filters_are_refused(type_code, serialised):
    data = writable(serialised)
    for end in range(len(data)):
        with pytest.raises(ValueError):
            from_string(type_code, encoded(data[:end]))
    with pytest.raises(ValueError):
        from_string(type_code, encoded(data + b"\x00"))
    for text in [serialised[:-1], serialised + "A", serialised[:10] + "*" + serialised[11:], "é" + serialised, ""]:
        with pytest.raises(ValueError):
            from_string(type_code, text)
    with pytest.raises(TypeError):
        from_string(type_code, 42)


def header_damage(data: bytes, offset: int, fmt: str, value) -> str:
    damaged = bytearray(data)
    struct.pack_into(fmt, damaged, offset, value)
    return encoded(bytes(damaged))


def test_bad_header_fields_are_refused():
    data = writable(JAVA_SIMPLE_STRING)
    for offset, fmt, value, match in [
        (0, ">i", -2, "version"),
        (0, ">i", 7, "Jenkins"),  # Hadoop's unversioned form
        (8, ">b", 0, "Jenkins"),
        (8, ">b", 2, "hash type"),
        (4, ">i", 0, "hash count"),
        (4, ">i", hudi_bloom.MAX_HASHES + 1, "hash count"),
        (9, ">i", 0, "vector size"),
        (9, ">i", -192, "vector size"),
        (9, ">i", 200, "truncated"),
        (9, ">i", 184, "after its end"),
        (9, ">i", 2**31 - 1, "truncated"),
    ]:
        with pytest.raises(ValueError, match=match):
            from_string(SIMPLE, header_damage(data, offset, fmt, value))
    past_end = bytearray(data)
    past_end[-1] |= 0x80
    with pytest.raises(ValueError):  # 192 bits fill their bytes: a vector of 190 has 2 bits past its end
        from_string(SIMPLE, header_damage(bytes(past_end), 9, ">i", 190))


def test_bad_dynamic_fields_are_refused():
    data = writable(JAVA_DYNAMIC_STRING)  # outer header 13 | nr 4 | current 4 | rows 4 | rows x (13 + 4)
    for offset, fmt, value in [
        (13, ">i", 0),  # no keys a row
        (13, ">i", 40),  # 25 bits for 40 keys is 1 hash, not 5
        (17, ">i", -1),  # a negative count
        (21, ">i", 0),  # no rows
        (21, ">i", 4),  # more rows than bytes
        (21, ">i", 2),  # fewer
        (25 + 4, ">i", 6),  # a row hashing differently from the filter
        (25 + 17 + 9, ">i", 26),  # a row of another size
        (4, ">i", 6),  # the filter's hash count unlike its rows' and its sizes'
    ]:
        with pytest.raises(ValueError):
            from_string(DYNAMIC_V0, header_damage(data, offset, fmt, value))
    with pytest.raises(ValueError):  # a SIMPLE filter read as dynamic: its bits are no counts
        from_string(DYNAMIC_V0, JAVA_SIMPLE_STRING)


@pytest.mark.parametrize("flip", [0x01, 0x80, 0xFF])
def test_damage_outside_the_vectors_never_hides_a_key(flip):
    """Every byte of a dynamic filter that is not vector bits, changed: refused, or every key still present.
    (Cleared vector bits no reader can see: the format has no checksum.)"""
    case = ((3, 0.1, 7, DYNAMIC_V0), [f"key-{i}" for i in range(12)])
    bloom = java_filter(case)
    data = bloom.to_writable()
    row = 13 + (bloom.vector_size + 7) // 8
    outside = list(range(25)) + [25 + r * row + i for r in range(bloom.rows) for i in range(13)]
    for offset in outside:
        damaged = bytearray(data)
        damaged[offset] ^= flip
        try:
            read = from_string(DYNAMIC_V0, encoded(bytes(damaged)))
        except ValueError:
            continue
        assert read.might_contain_many(case[1]).all(), offset
