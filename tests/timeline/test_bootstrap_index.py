"""timeline.format.bootstrap_index: Hudi 0.15's bootstrap index (RFC-12), round trips, damage, and Java Hudi 0.15
as the judge (the tests taking `java_hudi` skip where the reference is not installed, as tests/interop's do)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timeline.errors import BadInputError, ConflictError, CorruptInstantError
from timeline.format import bootstrap_index as bi
from timeline.format.bootstrap_index import (
    FILE_IDS_FILE,
    PARTITIONS_FILE,
    BootstrapIndex,
    SourceMapping,
    drop_index,
    read_index,
    write_index,
)
from timeline.format.partition_path import problem
from timeline.hfile import HFileReader
from timeline.hfile.trailer import TRAILER_SIZE, decode_trailer, encode_trailer
from timeline.io.storage import Storage

NOW_MS = 1_700_000_000_123
_TEXT = st.characters(blacklist_categories=("Cs",))  # any character UTF-8 can carry
# Folders whose byte order and Java's String order of `part=<p>;fileid=<id>` disagree (`1` vs `10`: `;` > `0`),
# whose UTF-16 and UTF-8 orders disagree (U+FF5E vs U+1F600), and a `;` Java's key parser would split on.
HAZARDS = ["month=1", "month=10", "month=1-2", "a=1/b=2", "a=1/b=10", "a=1", "x;y", "d=\uff5e", "d=\U0001f600"]
FOLDER = st.sampled_from(HAZARDS) | st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"), min_size=1, max_size=6
).filter(lambda name: problem(name) is None)
PARTITION = st.just("") | st.lists(FOLDER, min_size=1, max_size=3).map("/".join).filter(lambda p: problem(p) is None)
FILE_ID = st.uuids().map(str) | st.from_regex(r"[A-Za-z0-9.-]{1,12}", fullmatch=True).filter(
    lambda f: f not in (".", "..")
)
LONG = st.integers(-(1 << 63), (1 << 63) - 1)


@st.composite
def mappings(draw) -> list[SourceMapping]:
    out = []
    for partition in draw(st.lists(PARTITION, unique=True, max_size=5)):
        source = draw(st.text(_TEXT, max_size=12))
        for file_id in draw(st.lists(FILE_ID, unique=True, min_size=1, max_size=5)):
            owner = draw(st.none() | st.text(_TEXT, max_size=6))
            group = draw(st.none() | st.text(_TEXT, max_size=6))
            uri, length = draw(st.text(_TEXT, min_size=1, max_size=40)), draw(st.integers(0, (1 << 63) - 1))
            out.append(SourceMapping(partition, file_id, source, uri, length, draw(LONG), owner, group))
    return draw(st.permutations(out))


def reader(data: bytes) -> HFileReader:
    return HFileReader(data)


def cells(data: bytes) -> list[tuple[bytes, bytes]]:
    return list(reader(data).items())


def rebuilt(data: bytes) -> bytes:
    """The index file this module writes for `data`'s cells and INDEX_INFO."""
    return bi._hfile(cells(data), {bi.INDEX_INFO: reader(data).file_info[bi.INDEX_INFO]})


def without_syncs(data: bytes) -> bytes:
    """An index file with every Avro container's random sync marker (its last 16 bytes) zeroed and INDEX_INFO's
    createdTimestamp set to 0: what is left must be equal between two writers of the same index."""
    found = reader(data)
    rows = [(key, value.replace(value[-16:], bytes(16))) for key, value in found.items()]
    info = bi._decode(found.file_info[bi.INDEX_INFO], "HoodieBootstrapIndexInfo", "INDEX_INFO")
    stamp = bi._index_info(info["bootstrapBasePath"], 0, info["numKeys"])
    return bi._hfile(rows, {bi.INDEX_INFO: stamp.replace(stamp[-16:], bytes(16))})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mappings())
def test_round_trip_in_unsigned_byte_order(written):
    with tempfile.TemporaryDirectory() as folder:
        storage = Storage(folder)
        assert write_index(storage, "s3a://bucket/source", written, NOW_MS) == [PARTITIONS_FILE, FILE_IDS_FILE]
        index = read_index(storage)
        assert index == BootstrapIndex("s3a://bucket/source", {(m.partition, m.file_id): m for m in written})
        for m in written:
            assert index.source(m.partition, m.file_id) == m
        assert index.source("no-such", "file") is None
        keys = {
            PARTITIONS_FILE: {f"part={m.partition}".encode() for m in written},
            FILE_IDS_FILE: {f"part={m.partition};fileid={m.file_id}".encode() for m in written},
        }
        files = {path: storage.read_bytes(path) for path in keys}
        for path, expected in keys.items():
            assert [key for key, _ in cells(files[path])] == sorted(expected)  # Python orders bytes unsigned
        # written again from what was read, it is the same index: each partition's map keeps its order
        drop_index(storage)
        write_index(storage, index.base_path, list(index.mappings.values()), NOW_MS + 1)
        for path, data in files.items():
            assert without_syncs(storage.read_bytes(path)) == without_syncs(data)


def test_byte_order_is_not_javas_string_order(tmp_path):
    """Java 0.15 sorts `.fileids` as (partition, file id) Strings, so its own bootstrap of `month=1` and `month=10`
    fails in HBase ("Added a key not lexically larger than previous"); byte order is the one an HFile accepts."""
    storage = Storage(str(tmp_path))
    ids = ["b", "a"]
    write_index(
        storage,
        "/src",
        [SourceMapping(p, i, p, f"file:/src/{p}/{i}", 1, 2) for p in ("month=1", "month=10") for i in ids],
    )
    keys = [key for key, _ in cells(storage.read_bytes(FILE_IDS_FILE))]
    assert keys == [
        b"part=month=10;fileid=a",
        b"part=month=10;fileid=b",
        b"part=month=1;fileid=a",
        b"part=month=1;fileid=b",
    ]


def test_empty_and_absent(tmp_path):
    storage = Storage(str(tmp_path))
    assert read_index(storage) is None
    drop_index(storage)  # nothing to drop is fine
    write_index(storage, "/src", [], NOW_MS)
    assert read_index(storage) == BootstrapIndex("/src", {})
    drop_index(storage)
    assert read_index(storage) is None
    assert not (tmp_path / PARTITIONS_FILE).exists() and not (tmp_path / FILE_IDS_FILE).exists()


SMALL = [
    SourceMapping("city=a", str(uuid.UUID(int=i)), "city=a", f"file:/src/city=a/part-{i}.parquet", 100 + i, NOW_MS)
    for i in range(3)
] + [SourceMapping("", "top", "", "file:/src/part-9.parquet", 7, NOW_MS, "root", "root")]


def small_index() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as folder:
        storage = Storage(folder)
        write_index(storage, "/src", SMALL, NOW_MS)
        return {path: storage.read_bytes(path) for path in (PARTITIONS_FILE, FILE_IDS_FILE)}


SMALL_FILES = small_index()


def read_damaged(path: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name, content in {**SMALL_FILES, path: data}.items():
            os.makedirs(os.path.dirname(f"{folder}/{name}"), exist_ok=True)
            Path(folder, name).write_bytes(content)
        with pytest.raises(CorruptInstantError, match=re.escape(path)):
            read_index(Storage(folder))


def test_the_undamaged_index_reads():
    with tempfile.TemporaryDirectory() as folder:
        for name, content in SMALL_FILES.items():
            os.makedirs(os.path.dirname(f"{folder}/{name}"), exist_ok=True)
            Path(folder, name).write_bytes(content)
        index = read_index(Storage(folder))
    assert index == BootstrapIndex("/src", {(m.partition, m.file_id): m for m in SMALL})
    assert next(iter(index.mappings)) == ("", "top")  # `part=` sorts first


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(SMALL_FILES)), st.data())
def test_any_flipped_byte_is_refused(path, data):
    original = SMALL_FILES[path]
    at = data.draw(st.integers(0, len(original) - 1), label="offset")
    flip = data.draw(st.integers(1, 255), label="xor")
    read_damaged(path, original[:at] + bytes([original[at] ^ flip]) + original[at + 1 :])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(SMALL_FILES)), st.data())
def test_any_truncation_or_appended_byte_is_refused(path, data):
    original = SMALL_FILES[path]
    cut = data.draw(st.integers(0, len(original) - 1), label="length")
    read_damaged(path, original[:cut])
    read_damaged(path, original + data.draw(st.binary(min_size=1, max_size=8), label="tail"))


def test_the_trailer_is_checked_where_no_checksum_covers_it():
    """HFileReader ignores the trailer's uncompressed sizes; the index is refused when any field differs from
    what the writer makes of the cells (each field is a varint: its low bit changes the value and nothing else)."""
    data = SMALL_FILES[PARTITIONS_FILE]
    trailer = decode_trailer(data[-TRAILER_SIZE:])
    for field in ("uncompressed_data_index_size", "total_uncompressed_bytes"):
        damaged = replace(trailer, **{field: getattr(trailer, field) ^ 1})
        again = data[:-TRAILER_SIZE] + encode_trailer(damaged)
        assert len(again) == len(data) and HFileReader(again).file_info  # timeline.hfile reads it
        read_damaged(PARTITIONS_FILE, again)


@pytest.mark.parametrize("missing", [PARTITIONS_FILE, FILE_IDS_FILE])
def test_one_file_without_the_other_is_refused(tmp_path, missing):
    storage = Storage(str(tmp_path))
    write_index(storage, "/src", SMALL, NOW_MS)
    os.unlink(tmp_path / missing)
    with pytest.raises(CorruptInstantError, match=re.escape(missing)):
        read_index(storage)


def test_files_of_two_indexes_are_refused(tmp_path):
    storage = Storage(str(tmp_path))
    write_index(storage, "/src", SMALL[:2], NOW_MS)
    (tmp_path / "fileids").write_bytes((tmp_path / FILE_IDS_FILE).read_bytes())
    drop_index(storage)
    write_index(storage, "/src", SMALL, NOW_MS)
    (tmp_path / FILE_IDS_FILE).write_bytes((tmp_path / "fileids").read_bytes())
    with pytest.raises(CorruptInstantError, match="no entry for file group"):
        read_index(storage)


@pytest.mark.parametrize("existing", [[PARTITIONS_FILE], [FILE_IDS_FILE], [PARTITIONS_FILE, FILE_IDS_FILE]])
def test_write_refuses_an_existing_index(tmp_path, existing):
    storage = Storage(str(tmp_path))
    for path in existing:
        storage.write_bytes(path, b"theirs")
    with pytest.raises(ConflictError, match="already has a bootstrap index"):
        write_index(storage, "/src", SMALL, NOW_MS)
    for path in (PARTITIONS_FILE, FILE_IDS_FILE):
        assert (tmp_path / path).exists() == (path in existing)
        assert path not in existing or (tmp_path / path).read_bytes() == b"theirs"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([SMALL[0], SMALL[0]], "mapped twice"),
        ([SMALL[0], SourceMapping("city=a", "x", "elsewhere", "file:/x", 1, 1)], "one source folder per partition"),
        ([SourceMapping("a/../b", "x", "", "file:/x", 1, 1)], "partition path"),
        ([SourceMapping("", "x_1", "", "file:/x", 1, 1)], "file id"),
        ([SourceMapping("", "x", "", "", 1, 1)], "source uri"),
        ([SourceMapping("", "x", "", "file:/x", -1, 1)], "source length"),
    ],
)
def test_write_refuses_what_java_could_not_use(tmp_path, bad, message):
    with pytest.raises(BadInputError, match=message):
        write_index(Storage(str(tmp_path)), "/src", bad, NOW_MS)
    assert read_index(Storage(str(tmp_path))) is None


def test_hadoop_checksum_sidecars_go_with_the_files(tmp_path):
    """Java verifies a local file against its `.crc` (Hadoop's ChecksumFileSystem): one left beside an index
    written again fails Java's reads with a ChecksumException. Dropping removes them, and so does writing."""
    storage = Storage(str(tmp_path))
    sidecars = [
        tmp_path / p.rpartition("/")[0] / f".{p.rpartition('/')[2]}.crc" for p in (PARTITIONS_FILE, FILE_IDS_FILE)
    ]
    for write_first in (True, False):
        if write_first:
            write_index(storage, "/src", SMALL, NOW_MS)
        for sidecar in sidecars:
            sidecar.parent.mkdir(parents=True, exist_ok=True)
            sidecar.write_bytes(b"crc")
        if write_first:
            drop_index(storage)
            assert read_index(storage) is None
        else:
            write_index(storage, "/src", SMALL, NOW_MS)
        assert not any(s.exists() for s in sidecars)


# -- Java Hudi 0.15 as the judge

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("city", pa.string()), ("fare", pa.float64())])
SOURCE = {"city=a": [1, 2, 3], "city=b": [4, 5]}
OPTIONS = {
    "hoodie.table.name": "boot",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "fare",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.hive_style_partitioning": "true",
}
SKELETON = re.compile(r"^([0-9a-f-]{36})_\d+-\d+-\d+_00000000000001\.parquet$")


def _rows(ids: list[int], city: str) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "region": f"r{i}", "city": city, "fare": i / 2} for i in ids], schema=SCHEMA)


@pytest.fixture(scope="module")
def java_bootstrapped(java_hudi, tmp_path_factory) -> tuple[Path, Path]:
    """(table, source): Java's metadata-only bootstrap of a hive-style parquet folder, as Spark's `partitionBy`
    writes one (the partition column is not in the files)."""
    root = tmp_path_factory.mktemp("java-bootstrap")
    source = root / "source"
    for folder, ids in SOURCE.items():
        (source / folder).mkdir(parents=True)
        for i in ids:
            pq.write_table(_rows([i], folder[5:]).drop_columns(["city"]), source / folder / f"part-{i}.parquet")
    rows = pa.concat_tables(_rows(ids, folder[5:]) for folder, ids in SOURCE.items())
    java_hudi.write(root / "table", rows, "bootstrap", {**OPTIONS, "hoodie.bootstrap.base.path": str(source)})
    return root / "table", source


def test_reads_javas_index(java_bootstrapped):
    table, source = java_bootstrapped
    index = read_index(Storage(str(table)))
    assert index.base_path == str(source)
    skeletons = {
        (folder, SKELETON.match(name).group(1))
        for folder in SOURCE
        for name in os.listdir(table / folder)
        if SKELETON.match(name)
    }
    assert set(index.mappings) == skeletons and len(skeletons) == sum(map(len, SOURCE.values()))
    sources = set()
    for (partition, _), m in index.mappings.items():
        path = Path(m.uri.removeprefix("file:"))
        assert m.uri == f"file:{path}" and path.parent == source / partition and m.source_partition == partition
        assert m.length == path.stat().st_size and m.modification_time == path.stat().st_mtime_ns // 1_000_000
        sources.add(path)
    assert sources == {source / f / f"part-{i}.parquet" for f, ids in SOURCE.items() for i in ids}


def _java_rows(java_hudi, table: Path) -> list[list[str]]:
    """Java's snapshot of `table` with its metadata table on and off, rows sorted (an error counts as rows)."""
    from tests.hudi_reference.client import Read

    reads = java_hudi.read_many([Read(str(table), metadata=True), Read(str(table), metadata=False)])
    return [
        sorted(json.dumps(r, sort_keys=True) for r in found.to_pylist())
        if isinstance(found, pa.Table)
        else [str(found)]
        for found in reads
    ]


def test_java_reads_the_index_written_again(java_hudi, java_bootstrapped, tmp_path):
    """Java's index dropped and written again from what `read_index` made of it: Java reads the same rows, and
    the files equal Java's but for each Avro container's random sync marker (createdTimestamp is given)."""
    table = tmp_path / "table"
    shutil.copytree(java_bootstrapped[0], table)
    storage = Storage(str(table))
    java_files = {path: storage.read_bytes(path) for path in (PARTITIONS_FILE, FILE_IDS_FILE)}
    created = bi._cells(java_files[PARTITIONS_FILE], PARTITIONS_FILE)[1]["createdTimestamp"]
    before = _java_rows(java_hudi, table)
    assert all(len(rows) == 5 for rows in before), before
    index = read_index(storage)
    drop_index(storage)
    for rows in _java_rows(java_hudi, table):  # without the index Java reads the skeletons alone
        assert len(rows) == 5 and all('"fare": null' in row for row in rows), rows
    write_index(storage, index.base_path, list(index.mappings.values()), created)
    assert _java_rows(java_hudi, table) == before
    for path, data in java_files.items():
        written = storage.read_bytes(path)
        assert len(written) == len(data) and without_syncs(written) == without_syncs(data)
        assert rebuilt(data) == data  # the HFile around the values, byte for byte Java's
