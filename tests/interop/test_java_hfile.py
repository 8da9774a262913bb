"""Java judges timeline.hfile: HBase 2.4's HFile reader and writer (shaded in Hudi 0.15, what it writes the
metadata table with), and Hudi's native HFile reader (0.15 and 1.2) and writer (1.2).

Tandem writes files (empty, one key, random binary keys, shared prefixes, values bigger than a block, enough
blocks for two and four index levels, GZ and none): every Java reader returns the same cells, the same answers
to point lookups of present and absent keys, the same file info and meta blocks. For the same input HBase's
writer produces the very same bytes. Java-written files (the metadata table of the run's shared Java table,
`java_mdt_table`: its base files and the HFiles embedded in its log blocks; files from HBase's writer with
multi-level indexes; files from Hudi 1.2's native writer) read the same in Tandem as in Java. Java loops over
cells in small helper classes (tests/interop/java_judges.py, compiled once per run against the bundles).
"""

from __future__ import annotations

import base64
import random
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.interop.java_judges import JUDGE_LOADER
from timeline.hfile import HFileReader, write_hfile
from timeline.hfile.trailer import TRAILER_SIZE, decode_trailer

# `judge_classes`: the helpers, compiled once per run (a session fixture shared by the files that use them)
pytest_plugins = ["tests.interop.java_judges"]

# Runs in the reference process: instantiate the compiled helpers once per JVM, then call one method.
CALL = (
    JUDGE_LOADER
    + """
import base64
judge = judge_instance(args["classes"], args["name"])
values = [base64.b64decode(value[0]) if isinstance(value, list) else value for value in args["values"]]
result = getattr(judge, args["method"])(*values)  # None, or the path of a file holding the answer
"""
)

CODECS = {"gz": "GZ", "none": "NONE"}
NATIVE_CODECS = {"gz": "GZIP", "none": "NONE"}
MAX_CHUNK = 128 * 1024  # HBase's hfile.index.block.max.size


def take(answer: str) -> bytes:
    """The answer a helper left in a file (tests/interop/java_judges.py), the file removed."""
    path = Path(answer)
    try:
        return path.read_bytes()
    finally:
        path.unlink()


def pack(parts: Sequence[bytes | None]) -> bytes:
    out = [struct.pack(">i", len(parts))]
    for part in parts:
        out.append(struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part)
    return b"".join(out)


def unpack(blob: bytes) -> list[bytes | None]:
    (count,) = struct.unpack_from(">i", blob)
    at, parts = 4, []
    for _ in range(count):
        (size,) = struct.unpack_from(">i", blob, at)
        at += 4
        parts.append(None if size < 0 else blob[at : at + size])
        at += max(size, 0)
    return parts


def pairs(blob: bytes) -> list[tuple[bytes, bytes]]:
    flat = unpack(blob)
    return list(zip(flat[::2], flat[1::2], strict=True))


def flat(items) -> list[bytes]:
    return [part for pair in items for part in pair]


class Judge:
    """Helper classes compiled against one reference's bundle, called in its JVM."""

    def __init__(self, reference, classes: Path) -> None:
        self.reference, self.classes = reference, classes

    def __call__(self, name: str, method: str, *values) -> bytes | None:
        wire = [[base64.b64encode(v).decode()] if isinstance(v, bytes) else v for v in values]
        answer = self.reference.jvm(CALL, classes=str(self.classes), name=name, method=method, values=wire)
        return None if answer is None else take(answer)

    def hbase_read(self, path: Path, probes: list[bytes], metas: list[bytes]) -> dict:
        blob = self("TandemHBaseJudge", "read", str(path), pack(probes), pack(metas))
        entries, levels, cells, found, info, meta_blocks = unpack(blob)
        return {
            "entries": int(entries),
            "levels": int(levels),
            "cells": pairs(cells),
            "found": unpack(found),
            "info": dict(pairs(info)),
            "metas": dict(zip(metas, unpack(meta_blocks), strict=True)),
        }

    def native_read(self, path: Path, probes: list[bytes], info_keys: list[bytes], metas: list[bytes]) -> dict:
        probes = sorted(probes)
        blob = self("TandemNativeJudge", "read", str(path), pack(probes), pack(info_keys), pack(metas))
        entries, cells, info, meta_blocks, found = unpack(blob)
        return {
            "entries": int(entries),
            "cells": pairs(cells),
            "found": dict(zip(probes, unpack(found), strict=True)),
            "info": dict(zip(info_keys, unpack(info), strict=True)),
            "metas": dict(zip(metas, unpack(meta_blocks), strict=True)),
        }


@pytest.fixture(scope="module")
def judge(java_hudi, judge_classes) -> Judge:
    return Judge(java_hudi, judge_classes)


@pytest.fixture(scope="module")
def judge_1x(java_hudi_1x, judge_classes) -> Judge:
    return Judge(java_hudi_1x, judge_classes)


def long_keys(n: int, width: int = 120) -> list[bytes]:
    """Keys sharing a long prefix, so HBase's shortened index keys stay long and index levels appear early."""
    return [b"k" * (width - 9) + b"-%08d" % i for i in range(n)]


def _cases() -> dict[str, tuple[list[tuple[bytes, bytes]], dict, dict, dict]]:
    """name -> (cells, file info, meta blocks, write options)."""
    rng = random.Random(2024)

    def with_values(keys, high: int) -> list[tuple[bytes, bytes]]:
        return [(key, rng.randbytes(rng.randrange(high))) for key in sorted(keys)]

    hudi_info = {b"schema": b'{"type":"record"}', b"minRecordKey": b"a", b"maxRecordKey": b"z"}
    binary = {rng.randbytes(rng.randrange(1, 12)) for _ in range(1500)} | {b"\x00", b"\x7f", b"\x80", b"\xff\xff"}
    shared = {
        b"p%d/%s/c%d" % (p, b"f" * (f % 7) + b"%03d" % f, c) for p in range(3) for f in range(60) for c in range(4)
    }
    return {
        "empty": ([], hudi_info, {b"bloomFilter": b"x" * 100}, {}),
        "one_key": ([(b"only", b"value")], hudi_info, {}, {}),
        "hex_keys_gz": (
            with_values({rng.randbytes(10).hex().encode() for _ in range(3000)}, 300),
            hudi_info,
            {},
            {"block_size": 4096},
        ),
        "binary_keys_none": (with_values(binary, 120), {}, {}, {"block_size": 512, "compression": "none"}),
        "shared_prefixes": (
            with_values(shared, 60),
            hudi_info,
            {b"bloomFilter": rng.randbytes(4000)},
            {"block_size": 256},
        ),
        "values_over_a_block": (
            [(b"a", rng.randbytes(150_000)), (b"b", b""), (b"c", rng.randbytes(90_000))],
            hudi_info,
            {},
            {},
        ),
        "two_levels": (with_values(long_keys(2000), 30), hudi_info, {}, {"block_size": 1}),
        "four_levels": (with_values(long_keys(1200), 30), {}, {}, {"block_size": 1, "index_chunk_size": 1024}),
    }


CASES = _cases()


def _probes(cells: list[tuple[bytes, bytes]], seed: int) -> list[bytes]:
    """Every tenth present key, and absent keys before, between and after them."""
    rng = random.Random(seed)
    keys = [key for key, _ in cells]
    present = set(keys)
    absent = [b"", b"\x00", b"\xff" * 3, *(key + b"\x00" for key in keys[::97]), *(key[:-1] for key in keys[1::89])]
    absent += [rng.randbytes(rng.randrange(1, 9)) for _ in range(30)]
    return keys[::10] + [key for key in absent if key not in present]


def _levels(data: bytes) -> int:
    return decode_trailer(data[-TRAILER_SIZE:]).num_data_index_levels


def _tandem_view(data: bytes, probes: list[bytes], metas: list[bytes]) -> dict:
    reader = HFileReader(data)
    return {
        "entries": len(reader),
        "cells": list(reader.items()),
        "found": [reader.get(probe) for probe in probes],
        "info": reader.file_info,
        "metas": {name: reader.meta_block(name) for name in metas},
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_java_reads_tandem_files(judge, judge_1x, tmp_path, case):
    cells, info, metas, options = CASES[case]
    data = write_hfile(cells, info, meta_blocks=metas, **options)
    path = tmp_path / f"{case}.hfile"
    path.write_bytes(data)
    probes = _probes(cells, len(case))
    tandem = _tandem_view(data, probes, list(metas))
    assert tandem["cells"] == cells

    hbase = judge.hbase_read(path, probes, list(metas))
    assert hbase["levels"] == _levels(data)  # HBase reads the index depth Tandem wrote
    assert {key: hbase[key] for key in tandem} == tandem

    expected_found = dict(zip(probes, tandem["found"], strict=True))
    natives = [judge_1x] if hbase["levels"] > 1 else [judge, judge_1x]  # 0.15's reader knows one level only
    for native in natives:
        view = native.native_read(path, probes, list(tandem["info"]), list(metas))
        assert (view["entries"], view["cells"], view["found"]) == (len(cells), cells, expected_found)
        assert view["info"] == tandem["info"]
        assert view["metas"] == metas


@pytest.mark.parametrize("case", sorted(CASES))
def test_tandem_bytes_are_hbase_bytes(judge, tmp_path, case):
    """HBase 2.4's writer, configured as Hudi 0.15 configures it, writes exactly Tandem's bytes."""
    cells, info, metas, options = CASES[case]
    path = tmp_path / f"{case}.hfile"
    judge(
        "TandemHBaseJudge",
        "write",
        str(path),
        pack(flat(cells)),
        pack(flat(info.items())),
        pack(flat(metas.items())),
        options.get("block_size", 64 * 1024),
        CODECS[options.get("compression", "gz")],
        options.get("index_chunk_size", MAX_CHUNK),
    )
    java = path.read_bytes()
    assert write_hfile(cells, info, meta_blocks=metas, **options) == java
    assert list(HFileReader(java).items()) == cells


def _embedded_hfiles(log: bytes) -> list[bytes]:
    """HFiles inside a log file's data blocks: each ends 4096 bytes after a trailer magic and starts right after
    the 8-byte content length that counts it."""
    found, at = [], log.find(b'TRABLK"$')
    while at >= 0:
        end = at + 4096
        for start in range(at - 1, 7, -1):
            if struct.unpack_from(">q", log, start - 8)[0] == end - start:
                found.append(log[start:end])
                break
        at = log.find(b'TRABLK"$', at + 1)
    return found


@pytest.fixture(scope="module")
def java_metadata_hfiles(java_mdt_table) -> dict[str, bytes]:
    """HFiles Hudi 0.15 wrote for the shared table's metadata table (tests/hudi_reference/java_mdt.py, read
    only): compacted base files, and the HFiles of its log blocks (files, column_stats and bloom_filters
    records; file lists with the files a clean deleted among them)."""
    found = {}
    for file in sorted(java_mdt_table.mdt.glob("*/*")):
        if file.name.endswith(".hfile"):
            found[file.name] = file.read_bytes()
        elif ".log." in file.name and not file.name.endswith(".crc"):
            for i, data in enumerate(_embedded_hfiles(file.read_bytes())):
                found[f"{file.name}#{i}"] = data
    kinds = {(name.lstrip(".").split("-")[0], ".log." in name) for name in found}
    assert {kind for kind, _ in kinds} == {"files", "col", "bloom"} and {log for _, log in kinds} == {True, False}
    return found


def test_tandem_reads_java_metadata_table(judge, java_metadata_hfiles, tmp_path):
    for name, data in java_metadata_hfiles.items():
        path = tmp_path / "java.hfile"
        path.write_bytes(data)
        keys = [key for key, _ in HFileReader(data).items()]
        probes = [*keys, *(key + b"!" for key in keys), b"", b"zzz"]
        hbase = judge.hbase_read(path, probes, [b"bloomFilter"])
        hbase["metas"] = {name: meta for name, meta in hbase["metas"].items() if meta is not None}
        tandem = _tandem_view(data, probes, list(hbase["metas"]))
        assert tandem == {key: hbase[key] for key in hbase if key != "levels"}
        assert (HFileReader(data).meta_block(b"bloomFilter") is None) == (not hbase["metas"])
        # and Tandem writes the same file again: Hudi 0.15 writes its metadata table with 1 MB blocks
        reserved = {b"MAX_MEMSTORE_TS_KEY", b"KEY_VALUE_VERSION"}
        info = {k: v for k, v in hbase["info"].items() if not k.startswith(b"hfile.") and k not in reserved}
        assert write_hfile(hbase["cells"], info, meta_blocks=hbase["metas"], block_size=1 << 20) == data, name


@pytest.mark.parametrize(
    "cells, options",
    [
        pytest.param(
            [(k, k * 3) for k in sorted({b"%d-%x" % (i % 7, i * 7919) for i in range(20000)})],
            {"block_size": 1},
            id="20000-blocks",
        ),
        pytest.param([(k, b"v" * 40) for k in long_keys(3000)], {"block_size": 64}, id="default-chunks"),
        pytest.param([(k, b"") for k in long_keys(1500)], {"block_size": 1, "index_chunk_size": 700}, id="deep"),
    ],
)
def test_tandem_reads_java_multi_level_files(judge, tmp_path, cells, options):
    """Large files from HBase's writer, their block index two or more levels deep."""
    path = tmp_path / "java.hfile"
    block_size, chunk = options["block_size"], options.get("index_chunk_size", MAX_CHUNK)
    judge("TandemHBaseJudge", "write", str(path), pack(flat(cells)), pack([]), pack([]), block_size, "GZ", chunk)
    data = path.read_bytes()
    reader = HFileReader(data)
    assert _levels(data) > 1
    assert list(reader.items()) == cells
    assert all(reader.get(key) == value for key, value in cells[::7])
    assert reader.get(cells[0][0] + b"\x00") is None
    assert write_hfile(cells, **options) == data


@pytest.mark.parametrize("compression", ["gz", "none"])
def test_tandem_reads_hudi_1x_native_files(judge_1x, tmp_path, compression):
    """Files from Hudi 1.2's own HFile writer (string keys, its own file info layout)."""
    rng = random.Random(17)
    keys = sorted({f"key-{rng.randrange(10**6):06d}-é".encode() for _ in range(2500)})
    cells = [(key, rng.randbytes(rng.randrange(200))) for key in keys]
    info = {b"schema": b'{"type":"record"}', b"minRecordKey": keys[0]}
    path = tmp_path / "native.hfile"
    blob = [pack(flat(cells)), pack(flat(info.items())), pack([b"bloomFilter", b"bits"])]
    judge_1x("TandemNativeWriter", "write", str(path), *blob, 4096, NATIVE_CODECS[compression])
    data = path.read_bytes()
    probes = _probes(cells, 17)
    tandem = _tandem_view(data, probes, [b"bloomFilter"])
    native = judge_1x.native_read(path, probes, list(tandem["info"]), [b"bloomFilter"])
    assert tandem["cells"] == native["cells"] == cells
    assert dict(zip(probes, tandem["found"], strict=True)) == native["found"]
    assert tandem["info"] == native["info"]
    assert {k: tandem["info"][k] for k in info} == info
    assert tandem["metas"] == native["metas"] == {b"bloomFilter": b"bits"}
