"""HoodieCompactionPlan (timeline.format.avro_metadata) on its own: Hudi 0.15's schema, round trips, plans Java
wrote, the checks a plan must pass, and damage.

The Java judges (Hudi 0.15 reading Tandem's plans and writing its own) are in
tests/interop/test_java_compaction_plan.py; these tests need nothing but the project venv.
"""

from __future__ import annotations

import base64
import io
import json
import random
import re
import zlib
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.errors import CorruptInstantError
from timeline.format.avro_metadata import (
    COMPACTION_PLAN,
    MIB,
    CompactionOperation,
    compaction_operations,
    compaction_plan,
    decode,
    encode,
    slice_metrics,
)

# Two `.compaction.requested` files of a metadata table Java Hudi 0.15 wrote (zlib, base64): the first compacts
# every file group of three partitions, the second three slices of logs only (no base file) among others.
JAVA_PLANS = {
    "20261126071256978001": (
        "eNrFl79v20YUx1kiCFwPRacgyBAcOHkQCf7SL6NtnLhKK8CJjFhAgQaGcCJPIl2SJ5BHOUZqoFPRpVv/iq5dO7Rrh/4FHToW7ZK9S98dKVlVKJ"
        "lU5ISAAendfd67+37vHeXe8Ow9+Q6exlRLHI+E+Dv0UmEXE6LsKzFxaOwqNSXCIf/+OaWuTw5pOMEO82l0HOAoH00gxKfQeKxh+OwRzUtdXxOJ"
        "Q+qSACaOfBK4ibL//OUsI52QGPNUCQxnVZ8rURrA7PkqcBzjCxj2GQkBLr263ix3YeUhTkg3ShiOWN+HyMryCYv9aAzjYitneIq1PLSvnGQfLk"
        "8va/PEsFWGH/sBOcbM22BbZepdntagzginAVP2ed7F+viq/BvuanWRERToutsTbYJj5osjdZOrDgnMcdZ4EuIJDE5xkJKES0nTYUA2LjeklMF8"
        "PLkhO07XngPyAko/IQzzA1F2y5UWtKkuUxInWVvO1uRHjPcxX9kiZyxAXEhGxherd3LdfXByleH168DJptH4MMBJ8hS/8Y0A26AOBPoeQQ7PiX"
        "glxDzMkJ+gSUynvktc5JGYoMSjaeAisIxELrpacucFcdLFtSM85EI4LMtZQ5AD83wiL4NaE7iT0ZhE/O6jMTr3gwDhIKGzimISmeVFM1kRoyhN"
        "iKastm029RjHOEzezYmaSZrARvkyCIOzxPcMyqCvyAWKaUCQHyGXj4R+BCQ693zHQ5miiK8G+cIDXyMacuZiI5AroOOFAAYzYOqVhn7kBClo6N"
        "Bo5I9z1WelCPLo+WK+iBA34cIOZ4oTd53AFfridF1/TWLQJ56SrAEKrgC4mAKSvbqXU49gnwTSSz/d/vHXw1etpz9/f+/393e//Vf+oSZ/IO+Z"
        "utkwDLOhNw3TtuqWoeuGvONq/IWQqDo8qj4omqSBtJoxsFXDtlVLN8oiJkfqDdWySyMWR1qAtNtlEZsj7ZZqW21JHv6P0VXDaKqmXS+mPT5Zvr"
        "uIyLvim7x7v9/rPzwaHPU+GzzuHnVOJPF8eHAni3d7gyePpPxB89izzsNPFwb2lpIMTrpfdgRR//tAmVNfPOv2OwuYJK0wS2baMKA0VGGRvHtK"
        "mKbn2tQlOS5kjVyjxjqN9opQ+Z6IDvLoKs1ePdiOZtL93zbR7FaBZta1mvFTazWroiZHxektlFuwudzNanJbpeWWtnREf0n+2ETu2wWamdfKDf"
        "eK2W5WRU1+eIXcjaqoxVHRGI0ipzhr5U61qjlllnZqZ0tOSR//ta3GMNY7ZeROtaqiwinRU60iuTlr53K3q8ltvPXGOPh6o8bYCTSHBir818rK"
        "3NtmLnW7CmZyTMhcCbM4JvqoWQWzOSZ6qCnJZ69x9czQur7OULSMyXchkobRQARv+j38zUf/bMPLa9rGyn846VUwk2Pix1MlzOKY8LJVBbM5Jr"
        "xsLXvJuUbupVHeS+Nte/nnJ+u9hOcW/C3/OP4PRRGGvw=="
    ),
    "20261126071311759011001": (
        "eNrVVc9v40QUDhanntGy4oBGPvVQW3Z+OE0vZClZNlKXVNtISCzdaGK/xLM79lgzk3SrVcWV8575F/gfkLgh/g0kxGHFjQMX3thx6i1JSdOuAE"
        "uR4vfe9733ffPDg/Hz96x7dC6Fq8IYEvoteWXr8wzsA1tCKGRk79kpTcz7IyEiBociyWiomUiPOU0XWYUhUyLk1KX4PwY3nkXMzYkTEQHHwgkD"
        "Hin74OmrklFkIKmhUpguuj610xnH6uUUVEp6jmmmIUHwxtMNSu6VncdUQT9VmqZ6yDCytr3SkqVTzOdSntM5dRehA/uk+HNxerG3JEapmj5kHI"
        "6pjreQtUm/i9M97DOhM67tA8Nb7U8v299S1fomE2zQj+7OtIxKzfIt9S6nTgBrwmvWJKEZJueUz0AZK8VszGHrdmMhNNbT7B0tx+m1+wBeYuvH"
        "oKnZEJtKvtFA2/oyB6mKY1nOxFJtzrGZrIrzKyBjpIbp+Xol/3QfnFwy/P06CIsyIQ85VeoLeusbAWWIEAPDGEhoOInpRHRMNWGKZFLMWQQRiU"
        "ECUbGY8YjgkkEakcuRey8hnFVnJ3RsjAh1wblHkIMavpxXY68M72QyhdTcfUKSM8Y5oVyJsmNeBCUvKW0lWpCZAtdev2xl6TGVNFH/zo4qLVUo"
        "1IwBGveS0YzOkBdwTqTgQFhKIpNJWIpIchazMCaFo8RMQ1i+BswFl4RLswnaxcW0EqC4GFh66SFLQz5DD0ORTth04XrZCkgszqp8KUCkjLHj0n"
        "GIrjP4Bufi9LrzlUn0R86hOAArrgC8mDgUn+6r1BPUCUhf++XnNz/+9P3rP7775s/pr69V23rzobVj7da9euD79cBr+/VW0Gnve55v7USu+SAo"
        "x8PH8Uarily01vVHTafeCJyW728KqRtIc99ptTaGNAwkaDmB19kU0jSQdtsJmp2vN4S0Rr7jOX7NGr9V7zl1L3Carf3VyNgUW/erEGsnf7N2Ph"
        "4Ohg+ORkeDz0cP+0e9k1r+fNC9V8T7g9HjT2uLhyxjT3oPPqskdq+QjE76X/VMonv4W9deor580h/2KrBa7a21bfh+u9XxfM+yuDvmQiQODmkO"
        "2wpflsWLNca049UsuRLnOQ3Pd4JOZzVD4c/uKqj1UR4dLaLr/Pr9k7vxq/bD8K78amziV22F6satVD/r3q3qZ90bqa5vq7r+f1btb6va/8+pxu"
        "d9/F39EvwF6rRRGA=="
    ),
}


def java_plan(time: str) -> bytes:
    return zlib.decompress(base64.b64decode(JAVA_PLANS[time]))


def java_op(
    partition: str, file_id: str, base: str, base_token: str | None, log_tokens: str, log_bytes: int, write_mb=0.0
) -> CompactionOperation:
    """An operation as Java's plan generator makes one: hfile bases, log versions from 1 (their write tokens given),
    the default strategy's metrics."""
    tokens = log_tokens.split()
    metrics = {
        "TOTAL_LOG_FILES": float(len(tokens)),
        "TOTAL_IO_MB": write_mb,
        "TOTAL_IO_READ_MB": 0.0,
        "TOTAL_LOG_FILES_SIZE": float(log_bytes),
        "TOTAL_IO_WRITE_MB": write_mb,
    }
    base_file = None if base_token is None else f"{file_id}_{base_token}_{base}.hfile"
    logs = tuple(f".{file_id}_{base}.log.{v}_{t}" for v, t in enumerate(tokens, 1))
    return CompactionOperation(partition, file_id, base, base_file, logs, metrics)


B1, B2, B3 = "20261126071243531001", "20261126071256978001", "20261126071311759010"
BLOOM, STATS = "bloom_filters", "column_stats"
JAVA_OPERATIONS = {
    "20261126071256978001": [
        java_op("files", "files-0000-0", B1, "0-117-245", "4-144-301 4-156-341 4-186-399 4-198-439", 53673),
        java_op(BLOOM, "bloom-filters-0000-0", B1, "1-117-246", "0-198-435", 13372),
        java_op(BLOOM, "bloom-filters-0003-0", B1, "2-117-247", "0-156-337 0-186-395", 29135),
        java_op(BLOOM, "bloom-filters-0002-0", B1, "3-117-248", "0-144-297 1-186-396 1-198-436", 49640),
        java_op(BLOOM, "bloom-filters-0001-0", B1, "4-117-249", "1-144-298 1-156-338", 29169),
        java_op(STATS, "col-stats-0000-0", B1, "5-117-250", "2-144-299 2-156-339 2-186-397 2-198-437", 55780),
        java_op(STATS, "col-stats-0001-0", B1, "6-117-251", "3-144-300 3-156-340 3-186-398 3-198-438", 55799),
    ],
    "20261126071311759011001": [
        java_op("files", "files-0000-0", B2, "0-206-458", "4-236-511 4-248-551 4-265-609 4-277-649 1-0-1", 53786),
        java_op(BLOOM, "bloom-filters-0000-0", B3, "0-301-699", "0-0-0", 83),
        java_op(BLOOM, "bloom-filters-0003-0", B3, None, "0-0-0", 83, 120.0),
        java_op(BLOOM, "bloom-filters-0002-0", B3, None, "0-0-0", 83, 120.0),
        java_op(BLOOM, "bloom-filters-0001-0", B3, None, "0-0-0", 83, 120.0),
    ],
}


def bare(schema: Any) -> Any:
    """A schema without what leaves the data alone: docs, Java's string-class hints, namespaces (names are unique)."""
    if isinstance(schema, list):
        return [bare(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bare(v) for k, v in schema.items() if k not in ("doc", "avro.java.string", "namespace")}
    return out["type"] if set(out) == {"type"} and isinstance(out["type"], str) else out


def header_schema(data: bytes) -> dict:
    return json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"])


# -- the format


@pytest.mark.parametrize("time", sorted(JAVA_PLANS))
def test_the_schema_is_the_one_java_writes(time):
    written = header_schema(java_plan(time))
    assert written["namespace"] == COMPACTION_PLAN["namespace"] == "org.apache.hudi.avro.model"
    assert bare(written) == bare(COMPACTION_PLAN)


@pytest.mark.parametrize("time", sorted(JAVA_PLANS))
def test_java_written_plans_decode_to_their_operations(time):
    plan = decode(java_plan(time), f"{time}.compaction.requested")
    fields = ("version", "extraMetadata", "strategy", "preserveHoodieMetadata")
    assert {f: plan[f] for f in fields} == dict(zip(fields, (2, None, None, False), strict=True))
    assert [op["bootstrapFilePath"] for op in plan["operations"]] == [None] * len(plan["operations"])
    assert compaction_operations(plan) == JAVA_OPERATIONS[time]
    # what Tandem would write for the same operations holds the same plan
    assert decode(encode("HoodieCompactionPlan", compaction_plan(compaction_operations(plan))), "again") == plan


@pytest.mark.parametrize("op", [op for ops in JAVA_OPERATIONS.values() for op in ops], ids=lambda op: op.file_id)
def test_slice_metrics_are_javas(op):
    """Bases and logs under 1 MiB: Java's whole-MiB I/O is 0, or the 120 MiB default write of a slice without base."""
    logs = [int(op.metrics["TOTAL_LOG_FILES_SIZE"])] + [0] * (len(op.log_files) - 1)
    metrics = slice_metrics(None if op.base_file is None else 4096, logs)
    assert list(metrics.items()) == list(op.metrics.items())  # the same keys in the same order


def test_slice_metrics_count_whole_mebibytes():
    assert slice_metrics(3 * MIB - 1, [MIB, 5]) == {
        "TOTAL_LOG_FILES": 2.0,
        "TOTAL_IO_MB": 6.0,
        "TOTAL_IO_READ_MB": 4.0,
        "TOTAL_LOG_FILES_SIZE": MIB + 5.0,
        "TOTAL_IO_WRITE_MB": 2.0,
    }
    assert slice_metrics(None, [], default_base_file_size=7 * MIB)["TOTAL_IO_WRITE_MB"] == 7.0


# -- round trips

_NAME = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=+-", min_size=1, max_size=12)
_INSTANT = st.builds(
    str.__add__, st.from_regex(r"20[0-9]{12}([0-9]{3})?", fullmatch=True), st.sampled_from(["", "001", "010", "011001"])
)
_NUMBER = st.integers(0, 10**6).map(str)
_TOKEN = st.builds(lambda a, b, c: f"{a}-{b}-{c}", _NUMBER, _NUMBER, _NUMBER)
_STRINGS = st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=4)


@st.composite
def operations(draw: st.DrawFn) -> CompactionOperation:
    file_id = draw(st.uuids().map(lambda u: f"{u}-0") | _NAME.filter(lambda n: n not in (".", "..")))
    base = draw(_INSTANT)
    versions = draw(st.lists(st.integers(1, 10**6), max_size=6, unique=True))
    logs = tuple(f".{file_id}_{base}.log.{v}_{draw(_TOKEN)}{draw(st.sampled_from(['', '.cdc']))}" for v in versions)
    ext = draw(st.sampled_from(["parquet", "hfile", "orc"]))
    base_file = draw(st.none() | _TOKEN.map(lambda token: f"{file_id}_{token}_{base}.{ext}"))
    metrics = draw(st.dictionaries(st.text(max_size=20), st.floats(allow_nan=False), max_size=6))
    bootstrap = draw(st.none() | st.builds("s3://bucket/{}/{}.parquet".format, _NAME, _NAME))
    partition = "/".join(draw(st.lists(_NAME, max_size=3)))
    return CompactionOperation(partition, file_id, base, base_file, logs, metrics, bootstrap)


PLANS = st.lists(operations(), max_size=8, unique_by=lambda op: (op.partition, op.file_id))


@settings(max_examples=80, deadline=None)
@given(ops=PLANS, extra=st.none() | _STRINGS)
def test_round_trip(ops, extra):
    plan = compaction_plan(ops, extra)
    data = encode("HoodieCompactionPlan", plan)
    assert data[:4] == b"Obj\x01"
    assert fastavro.reader(io.BytesIO(data)).codec == "null"
    decoded = decode(data, "plan")
    assert decoded == plan
    assert compaction_operations(decoded) == ops


@settings(max_examples=40, deadline=None)
@given(
    ops=PLANS,
    extra=st.none() | _STRINGS,
    strategy=st.none()
    | st.fixed_dictionaries(
        {"compactorClassName": st.none() | st.text(max_size=30), "strategyParams": st.none() | _STRINGS},
        optional={"version": st.none() | st.integers(-(2**31), 2**31 - 1)},
    ),
    preserve=st.sampled_from([True, False, None]),
    null_list=st.booleans(),
)
def test_round_trip_of_every_field(ops, extra, strategy, preserve, null_list):
    """Fields Tandem does not set itself (a strategy, preserveHoodieMetadata, a null operation list) survive too."""
    plan = compaction_plan(ops, extra) | {"strategy": strategy, "preserveHoodieMetadata": preserve}
    if null_list and not ops:
        plan["operations"] = None
    decoded = decode(encode("HoodieCompactionPlan", plan), "plan")
    if strategy is not None:
        strategy = {"version": 1} | strategy  # the schema's default
    assert decoded == plan | {"strategy": strategy}
    assert compaction_operations(decoded) == ops


# -- checks


def good_plan() -> dict:
    return compaction_plan(JAVA_OPERATIONS["20261126071256978001"][:2])


FID, LOG = "files-0000-0", f".files-0000-0_{B1}.log.1_4-144-301"
OPERATION_BAD = {  # an operation's field -> values Java could not use
    "fileId": ["files_0000", None, ".."],
    "baseInstantTime": ["2024", None],
    "partitionPath": [None, "a/../b"],
    "deltaFilePaths": [
        None,
        [LOG.replace("0000", "0001")],  # another file group's
        [LOG.replace(B1, B2)],  # another slice's
        [LOG.replace(".log.1_", ".log.0_")],  # versions start at 1
        [LOG.replace("_4-", "_04-")],  # Java's %d writes no leading zero
        [f"files/{LOG}"],  # a path (version 1's kind), not a name
    ],
    "dataFilePath": [
        f"{FID}_0-117-245_{B2}.hfile",
        f"/t/.hoodie/metadata/files/{FID}_0-1-2_{B1}.hfile",
        f"{FID}_0-117-245_{B1}.log",
    ],
    "bootstrapFilePath": ["../src/x.parquet"],
}


@pytest.mark.parametrize(("field", "value"), [(f, v) for f, values in OPERATION_BAD.items() for v in values])
def test_an_operation_java_could_not_use_is_refused(field, value):
    plan = good_plan()
    plan["operations"][0][field] = value
    with pytest.raises(CorruptInstantError, match=re.escape(f"7001.compaction.requested: operations[0].{field}")):
        decode(encode("HoodieCompactionPlan", plan), "7001.compaction.requested")


@pytest.mark.parametrize("version", [1, 3, None])
def test_only_version_2_is_read(version):
    """Java upgrades version 1 (absolute paths where 2 has names); Hudi 0.15 and Tandem write only version 2."""
    plan = good_plan() | {"version": version}
    with pytest.raises(CorruptInstantError, match=re.escape(f"p: version: {version!r}, expected 2")):
        decode(encode("HoodieCompactionPlan", plan), "p")


def test_two_operations_on_one_file_group_are_refused():
    """CompactionUtils refuses them when Java builds a file-system view."""
    plan = good_plan()
    plan["operations"].append(plan["operations"][0] | {"dataFilePath": None})
    with pytest.raises(CorruptInstantError, match=re.escape("p: operations[2]: a second operation")):
        decode(encode("HoodieCompactionPlan", plan), "p")


def test_a_plan_whose_schema_lost_a_field_is_refused():
    """A damaged field name in the file's own schema would otherwise read as a plan without that field."""
    schema = json.loads(json.dumps(COMPACTION_PLAN))
    schema["fields"][0]["type"][1]["items"]["fields"][5]["name"] = "metricz"
    plan = good_plan()
    for op in plan["operations"]:
        op["metricz"] = op.pop("metrics")
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [plan])
    with pytest.raises(CorruptInstantError, match=r"operations\[0\]: no field 'metrics'"):
        decode(buf.getvalue(), "p")


@pytest.mark.parametrize(
    "change",
    [
        {"deltaFilePaths": [LOG + ".cdc"]},
        {"deltaFilePaths": [f".{FID}_{B1}.log.12"]},  # before write tokens
        {"deltaFilePaths": []},
        {"dataFilePath": None},
        {"dataFilePath": f"{FID}_10-0-3_{B1}.parquet", "bootstrapFilePath": "s3://b/src/part/x.parquet"},
        {"partitionPath": "", "metrics": None},
    ],
)
def test_plans_hudi_may_write_are_read(change):
    plan = good_plan()
    plan["operations"][0].update(change)
    assert decode(encode("HoodieCompactionPlan", plan), "p") == plan


def test_empty_and_null_operation_lists_are_read():
    for operations_list in ([], None):
        plan = compaction_plan([]) | {"operations": operations_list}
        assert compaction_operations(decode(encode("HoodieCompactionPlan", plan), "p")) == []


# -- damage


def masked(plan: dict) -> dict:
    """The plan without what damage may change unseen (_check_compaction_plan's docstring says why): metric values,
    extraMetadata, strategy, preserveHoodieMetadata, write tokens and log versions, partition paths."""
    ops = [
        op
        | {
            "metrics": None,
            "partitionPath": None,
            "deltaFilePaths": [re.sub(r"\.log\..*", ".log.#", name) for name in op["deltaFilePaths"]],
            "dataFilePath": op["dataFilePath"] and re.sub(r"_[^_]*_", "_#_", op["dataFilePath"], count=1),
        }
        for op in plan["operations"] or []
    ]
    return plan | {"operations": ops, "extraMetadata": None, "strategy": None, "preserveHoodieMetadata": None}


def tandem_plan() -> bytes:
    ops = JAVA_OPERATIONS["20261126071311759011001"]
    return encode("HoodieCompactionPlan", compaction_plan(ops, {"k": "v"}))


@pytest.mark.parametrize("source", ["java-1", "java-2", "tandem"])
def test_a_flipped_byte_is_refused_or_changes_only_what_nothing_repeats(source):
    data = tandem_plan() if source == "tandem" else java_plan(sorted(JAVA_PLANS)[int(source[-1]) - 1])
    original = decode(data, "p")
    rng = random.Random(source)
    refused = unseen = 0
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] ^= rng.randrange(1, 256)
        try:
            plan = decode(bytes(damaged), "p")
        except CorruptInstantError:
            refused += 1
            continue
        assert masked(plan) == masked(original), f"byte {at}"
        unseen += plan != original
    assert refused > 5 * unseen  # most damage to the record is seen


def test_a_truncated_plan_is_refused():
    data = java_plan("20261126071311759011001")
    for size in range(len(data)):
        with pytest.raises(CorruptInstantError):
            decode(data[:size], "p")


def test_damage_to_a_file_id_or_base_instant_is_refused():
    """Each is written up to three times in an operation (its field, its logs' names, its base file's name): a
    flipped byte in any one of them no longer matches the others."""
    data = tandem_plan()
    op = JAVA_OPERATIONS["20261126071311759011001"][1]  # the first operation with this base instant
    log, base_file = op.log_files[0], op.base_file
    field = [bytes([2, 2 * len(value)]) + value.encode() for value in (op.base_instant, op.file_id)]  # union 1, size
    spans = [
        (field[0], range(2, len(field[0]))),
        (field[1], range(2, len(field[1]))),
        (log.encode(), range(len(f".{op.file_id}_{op.base_instant}.log."))),
        (base_file.encode(), [*range(len(op.file_id) + 1), *range(base_file.index(op.base_instant), len(base_file))]),
    ]
    for text, offsets in spans:
        at = data.index(text)
        for offset in offsets:
            damaged = bytearray(data)
            damaged[at + offset] ^= 0x01
            with pytest.raises(CorruptInstantError):
                decode(bytes(damaged), "p")
