"""Java Hudi's own log reader and writer judge Tandem's Hudi log files (timeline.hudi_log).

Java reads the logs Tandem writes (random sequences of rollback, delete, Avro and HFile data blocks, empty and large
contents, every header key) with HoodieLogFormat.newReader and reports each block's type, header, where it ends and
its records; Java's HoodieLogFormatWriter writes the same blocks, and Tandem reads them the same way and would have
written the same bytes; Tandem reads a real metadata table Java wrote (the run's shared `java_mdt_table`, rollback
command blocks included) and re-makes its log files byte for byte from their records; and on torn and bit-flipped
logs both readers agree on every block Java accepts, Tandem being stricter only where the damage is. Hudi 1.2 reads
Tandem's logs too.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path

import fastavro
import pytest

from tests.hudi_reference.client import HudiReference
from tests.interop.java_judges import JUDGE_LOADER
from tests.timeline.test_hudi_log import ROW_SCHEMA, extra_header, ordering, row, text
from timeline.hudi_log import (
    BlockType,
    DeleteRecord,
    HeaderKey,
    HudiLogError,
    LogBlock,
    avro_block,
    avro_records,
    delete_block,
    deleted_records,
    encode_block,
    hfile_block,
    hfile_records,
    parse_log_name,
    read_blocks,
    read_intact,
    rollback_block,
    rollback_target,
)
from timeline.hudi_log.delete_records import encode_delete_content
from timeline.hudi_log.hfile_content import decode_hfile_content, encode_hfile_content

# `judge_classes`: TandemLogJudge among the helpers compiled once per run (a session fixture shared by files)
pytest_plugins = ["tests.interop.java_judges"]

# Runs in the reference JVM (HudiReference.jvm): reads log files with HoodieLogFormat.newReader (in the compiled
# TandemLogJudge, tests/interop/java_judges.py: one call a file), or writes them with HoodieLogFormatWriter from
# block specs.
JUDGE = (
    JUDGE_LOADER
    + r"""
import base64
import os
import struct

J = jvm.org.apache.hudi
_conf = J.storage.hadoop.HadoopStorageConfiguration(jvm.org.apache.hadoop.conf.Configuration())
_block = J.common.table.log.block
_avro = jvm.org.apache.avro


def _storage(path):
    return J.storage.HoodieStorageUtils.getStorage(path, _conf)


def _schema(text):
    return _avro.Schema.Parser().parse(text)


def _b64(data):
    return base64.b64encode(bytes(data)).decode()


_KEYS = [str(key.name()) for key in _block.HoodieLogBlock.HeaderMetadataType.values()]


def _map(data):
    # a header or footer map as Java serializes the one it read: one call, not one per entry
    data, pos, entries = bytes(data), 4, {}
    for _ in range(struct.unpack_from(">i", data)[0]):
        ordinal, size = struct.unpack_from(">ii", data, pos)
        entries[_KEYS[ordinal]] = data[pos + 8 : pos + 8 + size].decode()
        pos += 8 + size
    return entries


def _unpack(blob):
    blob, at, parts = bytes(blob), 4, []
    for _ in range(struct.unpack_from(">i", blob)[0]):
        (size,) = struct.unpack_from(">i", blob, at)
        parts.append(None if size < 0 else blob[at + 4 : at + 4 + size])
        at += 4 + max(size, 0)
    return parts


def _describe(packed):
    # a block as TandemLogJudge describes it: its type, header and footer, where its content starts and where it
    # ends, and its records: a command's type; a delete block's records re-serialized by Java (their keys where
    # Java cannot re-wrap an ordering value it unwrapped); a data block's record count and records' Avro
    # binary, back to back; or the error reading them raised
    kind, header, footer, content_at, end, *records = _unpack(packed)
    info = {"kind": kind.decode(), "header": _map(header), "footer": _map(footer)}
    info["content_at"], info["end"] = int(content_at), int(end)
    if records:
        tag, payload = records[0].decode(), records[1]
        if tag == "command":
            info["records"] = payload.decode()
        elif tag == "delete":
            info["records"] = _b64(payload)
        elif tag == "keys":
            flat = [None if part is None else part.decode() for part in _unpack(payload)]
            info["records"] = [list(pair) for pair in zip(flat[::2], flat[1::2])]
        elif tag == "data":
            count, data = _unpack(payload)
            info["records"] = [int(count), _b64(data)]
        else:
            info["records_error"] = payload.decode()
    return info


def read_log(judge, path):
    answer = judge.read(path, args.get("records", True))  # the path of a file holding the answer
    try:
        with open(answer, "rb") as file:
            error, blocks = _unpack(file.read())
    finally:
        os.remove(answer)
    return {"blocks": [_describe(block) for block in _unpack(blocks)], "error": error and error.decode()}


def _header(entries):
    header = jvm.java.util.LinkedHashMap()
    for name, value in entries.items():
        header.put(_block.HoodieLogBlock.HeaderMetadataType.valueOf(name), value)
    return header


def _pack(parts):
    out = [struct.pack(">i", len(parts))]
    for part in parts:
        out.append(struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part)
    return b"".join(out)


def _utf8(text):
    return None if text is None else text.encode()


def _ordering(value):
    # an ordering value's Java type as py4j would box it: Boolean, Integer, Long, Double or String
    if value is None:
        return [b"none", None]
    if isinstance(value, bool):
        return [b"bool", str(value).lower().encode()]
    if isinstance(value, int):
        return [b"int" if -(2**31) <= value <= 2**31 - 1 else b"long", str(value).encode()]
    if isinstance(value, float):
        return [b"double", repr(value).encode()]
    return [b"string", value.encode()]


def _make_block(judge, spec, path):
    # the records of a delete or data block built in TandemLogJudge (one call, not several a record)
    kind, header = spec["kind"], _header(spec["header"])
    if kind == "COMMAND_BLOCK":
        return _block.HoodieCommandBlock(header)
    if kind == "DELETE_BLOCK":
        parts = [p for k, part, o in spec["deletes"] for p in (_utf8(k), _utf8(part), *_ordering(o))]
        return _block.HoodieDeleteBlock(judge.deletes(_pack(parts)), header)
    schema = _schema(spec["header"]["SCHEMA"])
    if kind == "AVRO_DATA_BLOCK":
        records = judge.records(_pack([base64.b64decode(r) for r in spec["records"]]), schema, False)
        return _block.HoodieAvroDataBlock(records, header, "key")
    parts = [p for key, r in spec["records"] for p in (key.encode(), base64.b64decode(r))]
    records = judge.records(_pack(parts), schema, True)
    return _block.HoodieHFileDataBlock(records, header, "GZ", J.storage.StoragePath(path), True)


def write_log(judge, folder, file_id, specs):
    writer = (
        J.common.table.log.HoodieLogFormat.newWriterBuilder().onParentPath(J.storage.StoragePath(folder))
        .withFileId(file_id).overBaseCommit("001").withLogVersion(1).withLogWriteToken("1-0-1")
        .withFileExtension(".log").withStorage(_storage(folder)).build()
    )
    path = str(writer.getLogFile().getPath().toString())
    for spec in specs:
        writer.appendBlock(_make_block(judge, spec, path))
    writer.close()
    return path


judge = judge_instance(args["classes"], "TandemLogJudge")  # tests/interop/java_judges.py
if args["op"] == "read":
    result = [read_log(judge, path) for path in args["paths"]]
else:
    result = [write_log(judge, args["folder"], f"java{i}-0", specs) for i, specs in enumerate(args["logs"])]
"""
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def avro(schema: str, record: dict) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(json.loads(schema)), record)
    return buffer.getvalue()


def unavro(schema: str, data: bytes) -> dict:
    """A record, its union branches named, so that `avro` writes it back to the same bytes."""
    parsed = fastavro.parse_schema(json.loads(schema))
    return fastavro.schemaless_reader(io.BytesIO(data), parsed, return_record_name=True)


def by_ordinal(header: dict[str, str]) -> dict[str, str]:
    return dict(sorted(header.items(), key=lambda entry: HeaderKey[entry[0]]))


# -- block specs: what Java's writer takes, what Tandem builds from them, and what a reader must give back


def random_spec(rng: random.Random, kind: str | None = None, big: bool = False) -> dict:
    """A block of `kind` (else any), with random extra header entries; `big`: 1000 deletes or a 3 MB record."""
    instant = rng.choice([f"{rng.randint(0, 10**17 - 1):017d}", text(rng)])
    extra = extra_header(rng)
    kind = kind or rng.choice(["COMMAND_BLOCK", "DELETE_BLOCK", "AVRO_DATA_BLOCK", "HFILE_DATA_BLOCK"])
    if kind == "COMMAND_BLOCK":
        header = {**extra, "INSTANT_TIME": instant, "TARGET_INSTANT_TIME": text(rng), "COMMAND_BLOCK_TYPE": "0"}
        return {"kind": kind, "header": by_ordinal(header)}
    if kind == "DELETE_BLOCK":
        deletes = [
            [rng.choice([None, text(rng)]), rng.choice([None, text(rng)]), ordering(rng)]
            for _ in range(1000 if big else rng.randint(0, 40))
        ]
        header = by_ordinal({**extra, "INSTANT_TIME": instant})
        return {"kind": kind, "header": header, "deletes": [[k, p, o and o[1]] for k, p, o in deletes], "raw": deletes}
    header = by_ordinal({**extra, "INSTANT_TIME": instant, "SCHEMA": ROW_SCHEMA})
    rows = [row(rng, blob=3_000_000 if big else 8) for _ in range(1 if big else rng.randint(0, 30))]
    if kind == "AVRO_DATA_BLOCK" or not any(r["key"] for r in rows):  # Java writes no empty HFile block
        return {"kind": "AVRO_DATA_BLOCK", "header": header, "records": [b64(avro(ROW_SCHEMA, r)) for r in rows]}
    rows = list({r["key"]: r for r in rows if r["key"]}.values())  # distinct non-empty keys, as the MDT's
    return {"kind": kind, "header": header, "records": [[r["key"], b64(avro(ROW_SCHEMA, r))] for r in rows]}


def tandem_block(spec: dict) -> bytes:
    """The block Tandem's builders make from a spec's inputs (the key emptied in HFile values, as Java does)."""
    header = dict(spec["header"])
    instant = header.pop("INSTANT_TIME")
    if spec["kind"] == "COMMAND_BLOCK":
        target = header.pop("TARGET_INSTANT_TIME")
        return rollback_block(instant, target, {k: v for k, v in header.items() if k != "COMMAND_BLOCK_TYPE"})
    if spec["kind"] == "DELETE_BLOCK":
        return delete_block(instant, [delete_record(d) for d in spec["raw"]], header)
    schema = header.pop("SCHEMA")
    if spec["kind"] == "AVRO_DATA_BLOCK":
        return avro_block(instant, schema, [unavro(schema, base64.b64decode(r)) for r in spec["records"]], header)
    cells = [(key, avro(schema, {**unavro(schema, base64.b64decode(r)), "key": ""})) for key, r in spec["records"]]
    return hfile_block(instant, schema, cells, header)


def expected(spec: dict) -> dict:
    """What reading a spec's block must give: its kind, header and records in the judge's terms."""
    view = {"kind": spec["kind"], "header": spec["header"], "footer": {}}
    if spec["kind"] == "COMMAND_BLOCK":
        return {**view, "records": "ROLLBACK_BLOCK"}
    if spec["kind"] == "DELETE_BLOCK":
        return {**view, "records": b64(encode_delete_content([delete_record(d) for d in spec["raw"]]))}
    records = spec["records"]
    if spec["kind"] == "HFILE_DATA_BLOCK":
        records = [r for _, r in sorted(records, key=lambda kr: kr[0].encode())]
    return {**view, "records": [len(records), b64(b"".join(base64.b64decode(r) for r in records))]}


def delete_record(raw: list) -> DeleteRecord:
    key, partition, ordering = raw
    return DeleteRecord(key, partition, tuple(ordering) if ordering else None)


ENVELOPE = ("kind", "header", "footer", "end", "content_at")


def envelope(block: LogBlock) -> dict:
    """Where a block ends and its content starts, and its header, in the judge's terms."""
    footer_size = 4 + sum(8 + len(value.encode()) for value in block.footer.values())
    content_at = block.end - len(block.content) - (0 if block.corrupt else 8 + footer_size)
    return {
        "kind": block.kind.name,
        "header": block.header,
        "footer": block.footer,
        "end": block.end,
        "content_at": content_at,
    }


def tandem_view(block: LogBlock) -> dict:
    """What Tandem reads from a block, in the judge's terms (an HFile value's empty key is the cell's, as
    Java's reader has it)."""
    view = envelope(block)
    if block.kind is BlockType.COMMAND_BLOCK:
        rollback_target(block)
        view["records"] = "ROLLBACK_BLOCK"
    elif block.kind is BlockType.DELETE_BLOCK:
        deleted_records(block)
        view["records"] = b64(block.content)
    elif block.kind is BlockType.AVRO_DATA_BLOCK:
        records = [avro(block.header["SCHEMA"], r) for r in avro_records(block)]
        view["records"] = [len(records), b64(b"".join(records))]
    elif block.kind is BlockType.HFILE_DATA_BLOCK:
        schema = block.header["SCHEMA"]
        records = [(key, unavro(schema, value)) for key, value in hfile_records(block)]
        records = [avro(schema, {**r, "key": r.get("key") or key}) for key, r in records]
        view["records"] = [len(records), b64(b"".join(records))]
    return view


@dataclass(frozen=True)
class LogJudge:
    """Hudi's log reader and writer in one reference JVM, by way of TandemLogJudge (compiled once per run)."""

    reference: HudiReference
    classes: Path

    def read(self, paths: list[Path], records: bool = True) -> list[dict]:
        paths = [str(p) for p in paths]
        return self.reference.jvm(JUDGE, op="read", classes=str(self.classes), paths=paths, records=records)

    def write(self, folder: Path, logs: list[list[dict]]) -> list[str]:
        return self.reference.jvm(JUDGE, op="write", classes=str(self.classes), folder=str(folder), logs=logs)


@pytest.fixture(scope="module")
def log_judge(java_hudi, judge_classes) -> LogJudge:
    return LogJudge(java_hudi, judge_classes)


@pytest.fixture(scope="module")
def log_judge_1x(java_hudi_1x, judge_classes) -> LogJudge:
    return LogJudge(java_hudi_1x, judge_classes)


def read_by_java(judge: LogJudge, paths: list[Path], records: bool = True) -> list[dict]:
    return judge.read(paths, records)


def random_logs(seed: int, count: int) -> list[list[dict]]:
    """`count` logs of 1-6 random blocks, then two of big blocks."""
    rng = random.Random(seed)
    logs = [[random_spec(rng) for _ in range(rng.randint(1, 6))] for _ in range(count)]
    big = [random_spec(rng, kind, big=True) for kind in ("DELETE_BLOCK", "AVRO_DATA_BLOCK", "HFILE_DATA_BLOCK")]
    return [*logs, big[:2], big[2:]]


def without_raw(specs: list[dict]) -> list[dict]:
    return [{k: v for k, v in spec.items() if k != "raw"} for spec in specs]


# -- Tandem writes, Java reads


def write_tandem_logs(folder: Path, logs: list[list[dict]]) -> list[Path]:
    paths = []
    for i, specs in enumerate(logs):
        path = folder / f".tandem{i}-0_001.log.1_0-0-0"
        path.write_bytes(b"".join(tandem_block(spec) for spec in specs))
        paths.append(path)
    return paths


def assert_java_reads_tandem_logs(judge: LogJudge, folder: Path, seed: int, count: int) -> None:
    logs = random_logs(seed, count)
    paths = write_tandem_logs(folder, logs)
    for path, specs, java in zip(paths, logs, read_by_java(judge, paths), strict=True):
        assert java["error"] is None, (path, java["error"])
        tandem = [tandem_view(block) for block in read_intact(path.read_bytes())]
        assert [{k: b[k] for k in ("kind", "header", "footer", "records")} for b in java["blocks"]] == [
            expected(spec) for spec in specs
        ]
        assert java["blocks"] == tandem, path


def test_java_reads_tandem_logs(log_judge, tmp_path):
    assert_java_reads_tandem_logs(log_judge, tmp_path, seed=11, count=24)


def test_hudi_1x_reads_tandem_logs(log_judge_1x, tmp_path):
    assert_java_reads_tandem_logs(log_judge_1x, tmp_path, seed=12, count=8)


# -- Java writes, Tandem reads


def test_tandem_reads_java_logs_and_writes_their_bytes(log_judge, tmp_path):
    logs = random_logs(21, 16)
    paths = log_judge.write(tmp_path, [without_raw(specs) for specs in logs])
    for i, (path, specs) in enumerate(zip(paths, logs, strict=True)):
        name = parse_log_name(Path(path).name)
        assert (name.file_id, name.base_instant, name.version, name.write_token) == (f"java{i}-0", "001", 1, "1-0-1")
        data = Path(path).read_bytes()
        blocks = read_intact(data)
        views = [tandem_view(block) for block in blocks]
        assert [{k: v[k] for k in ("kind", "header", "footer", "records")} for v in views] == [
            expected(spec) for spec in specs
        ]
        assert data == b"".join(tandem_block(spec) for spec in specs), path


def test_every_ordering_wrapper_reads_in_java(log_judge, tmp_path):
    """Java reads each wrapper Tandem writes, and re-serializes those it can re-wrap to the same bytes."""
    wrappers = {
        "BooleanWrapper": True,
        "IntWrapper": -3,
        "LongWrapper": 2**40,
        "FloatWrapper": 0.5,
        "DoubleWrapper": 2.25,
        "BytesWrapper": b"\x00\x01",
        "StringWrapper": "é",
        "DateWrapper": 19000,
        "DecimalWrapper": decimal.Decimal("1.250000000000000"),
        "TimeMicrosWrapper": datetime.time(1, 2, 3, 4),
        "TimestampMicrosWrapper": 1_700_000_000_000_000,
    }
    path = tmp_path / ".w-0_1.log.1_0-0-0"
    path.write_bytes(b"".join(delete_block("1", [DeleteRecord("k", "p", item)]) for item in wrappers.items()))
    (java,) = read_by_java(log_judge, [path])
    assert java["error"] is None
    rewrapped = []
    for block, wrapper, tandem in zip(java["blocks"], wrappers, read_intact(path.read_bytes()), strict=True):
        if block["records"] == [["k", "p"]]:  # Java read the record, and cannot re-wrap its ordering value
            continue
        assert base64.b64decode(block["records"]) == tandem.content
        rewrapped.append(wrapper)
    assert len(rewrapped) >= 9, rewrapped  # all but the time types


# -- a metadata table Java wrote


@pytest.fixture(scope="module")
def java_mdt_logs(java_mdt_table) -> dict[Path, int | None]:
    """The metadata-table log files of the run's shared Java table (tests/hudi_reference/java_mdt.py, read
    only), and the size the completed delta commit that wrote each recorded for it, if one is on the active
    timeline: a partition's file groups start with a log of one empty delete block (written when Java
    initialised the partition, in no delta commit's write stats), then logs of HFile data blocks, one per delta
    commit; a rollback appends a log of its command block (in no delta commit either)."""
    metadata = java_mdt_table.mdt
    sizes = {}
    for commit in (metadata / ".hoodie").glob("*.deltacommit"):
        for stats in json.loads(commit.read_text())["partitionToWriteStats"].values():
            sizes |= {metadata / stat["path"]: stat["fileSizeInBytes"] for stat in stats}
    names = {path: parse_log_name(path.name) for path in metadata.glob("*/.*")}
    logs = sorted(p for p, n in names.items() if n and n.extension == ".log" and p.suffix != ".crc")
    return {path: sizes.get(path) for path in logs}


def test_tandem_reads_javas_metadata_table_logs(log_judge, java_mdt_table, java_mdt_logs):
    completed = {p.name.split(".")[0] for p in (java_mdt_table.mdt / ".hoodie").glob("*.deltacommit")}
    kinds = set()
    for path, java in zip(java_mdt_logs, read_by_java(log_judge, list(java_mdt_logs)), strict=True):
        data = path.read_bytes()
        blocks = read_intact(data, expected_size=java_mdt_logs[path])
        # a completed delta commit records the whole size of the log it wrote; no commit names the log of a
        # partition's initialisation (its delete block), of a rollback (its command block), or of a delta
        # commit rolled back or archived
        written = blocks[0].kind is BlockType.HFILE_DATA_BLOCK and blocks[0].header["INSTANT_TIME"] in completed
        assert (java_mdt_logs[path] is not None) == written, path
        assert java["error"] is None and java["blocks"] == [tandem_view(b) for b in blocks], path
        remade = []
        for block in blocks:
            kinds.add(block.kind)
            content = block.content
            if block.kind is BlockType.HFILE_DATA_BLOCK:  # the same cells make Java's HFile, byte for byte
                cells, schema = decode_hfile_content(block.content)
                assert schema == block.header["SCHEMA"]
                content = encode_hfile_content(cells, schema)
            remade.append(encode_block(block.kind, block.header, content))
        assert b"".join(remade) == data, path
    assert kinds == {BlockType.DELETE_BLOCK, BlockType.HFILE_DATA_BLOCK, BlockType.COMMAND_BLOCK}
    assert sum(size is not None for size in java_mdt_logs.values()) >= 3


# -- torn and damaged logs


def damage_log() -> bytes:
    """A small log of every kind: rollback, delete, Avro data, HFile data (the largest, last)."""
    rng = random.Random(5)
    rows = [{**row(rng), "key": key} for key in ("a", "b")]
    specs = [
        {
            "kind": "COMMAND_BLOCK",
            "header": {"INSTANT_TIME": "2", "TARGET_INSTANT_TIME": "1", "COMMAND_BLOCK_TYPE": "0"},
        },
        {
            "kind": "DELETE_BLOCK",
            "header": {"INSTANT_TIME": "3"},
            "raw": [["k1", "p", None], ["k2", None, ["IntWrapper", 4]]],
        },
        {
            "kind": "AVRO_DATA_BLOCK",
            "header": {"INSTANT_TIME": "4", "SCHEMA": ROW_SCHEMA},
            "records": [b64(avro(ROW_SCHEMA, row(rng)))],
        },
        {
            "kind": "HFILE_DATA_BLOCK",
            "header": {"INSTANT_TIME": "5", "SCHEMA": ROW_SCHEMA},
            "records": [[r["key"], b64(avro(ROW_SCHEMA, r))] for r in rows],
        },
    ]
    return b"".join(tandem_block(spec) for spec in specs)


def assert_readers_agree(tandem: list[LogBlock], java: dict, flipped: int | None) -> None:
    """Java's blocks are Tandem's, but for one Java takes as valid where Tandem finds the damage (Java may then
    have read on into the next block); Tandem's valid blocks are Java's, as far as Java got before it threw. On
    a truncation Java never throws."""
    ours = [envelope(block) for block in tandem]
    theirs = [{key: block[key] for key in ENVELOPE} for block in java["blocks"]]
    for block in theirs:
        if block not in ours:
            assert flipped is not None and block["kind"] != "CORRUPT_BLOCK", (block, ours)
            damaged = [b for b in tandem if b.corrupt and b.offset <= flipped < b.end]
            assert any(b.offset <= block["content_at"] < b.end for b in damaged), (block, ours)
    reached = max((block["end"] for block in theirs), default=0)
    for block, view in zip(tandem, ours, strict=True):
        if not block.corrupt and (java["error"] is None or block.end <= reached):
            assert view in theirs, (view, theirs, java["error"])
    assert flipped is not None or java["error"] is None


def test_torn_and_flipped_logs_against_java(log_judge, tmp_path):
    """Truncations around every block boundary and at random, bit flips at random in the small blocks and in
    the HFile: the readers agree (test_hudi_log truncates and flips at every offset, Tandem alone). On a flip
    inside the HFile, Tandem refuses the block (the HFile's checksums); Java fails, or gives the original
    records when the flip missed what it reads: neither returns damaged records."""
    data = damage_log()
    whole = read_intact(data)
    hfile = envelope(whole[-1])["content_at"]
    rng = random.Random(9)
    cuts = {b.offset + step for b in whole for step in (1, 3, 6, 13, 14, 22, 30)} | set(
        rng.sample(range(len(data)), 10)
    )
    cases: list[tuple[bytes, int | None]] = [(data[:cut], None) for cut in sorted(cuts)]
    for at in rng.sample(range(hfile), 60) + rng.sample(range(hfile, whole[-1].end - 12), 20):
        damaged = bytearray(data)
        damaged[at] ^= 1 << rng.randrange(8)
        cases.append((bytes(damaged), at))
    paths = []
    for i, (case, _) in enumerate(cases):
        paths.append(tmp_path / f".d{i}-0_1.log.1_0-0-0")
        paths[-1].write_bytes(case)
    for (case, flipped), java in zip(cases, read_by_java(log_judge, paths, records=False), strict=True):
        assert_readers_agree(read_blocks(case), java, flipped)
    in_hfile = [(p, case) for p, (case, at) in zip(paths, cases, strict=True) if at is not None and at >= hfile]
    original = tandem_view(whole[-1])["records"]
    for (path, case), java in zip(in_hfile, read_by_java(log_judge, [p for p, _ in in_hfile]), strict=True):
        damaged = read_blocks(case)[-1]
        assert damaged.kind is BlockType.HFILE_DATA_BLOCK
        with pytest.raises(HudiLogError, match="HFile data block content is damaged"):
            hfile_records(damaged)
        assert java["blocks"][-1].get("records", original) == original, path
