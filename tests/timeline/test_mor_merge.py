"""Merge-on-read file slices (timeline.mor.slice_merge, timeline.format.data_logs) against a plain model of
Hudi 0.15's snapshot merge with OverwriteWithLatestAvroPayload (docs/hudi-mor-format.md §4-5).

- Random slices: a base file's rows, then log files of Avro data, delete and rollback blocks from completed,
  failed and later instants, read through `LogMerge.merged` and compared row for row with the model.
- Damage: a committed log cut short, grown, or with bits flipped is refused as unreadable or read exactly as
  before, never as other rows.
- `slice_logs` / `parse_data_log`: which logs make up a group's latest slice, and in which order.

The model below is written from the Java facts, not from slice_merge: it shares no helper with it. Where
slice_merge departs from a Java fact the test states the fact and fails (the scan's `break` at a block after
the latest instant; the same-class check of a delete's ordering value). Damage that Hudi's format cannot
detect (no checksum over header values or contents) is recorded by strict xfail tests with counts.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import pyarrow as pa
import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from timeline.errors import UnreadableDataFileError, UnsupportedTableError
from timeline.format.avro_schema import arrow_to_avro
from timeline.format.data_logs import DataLog, parse_data_log, slice_logs
from timeline.format.file_names import BaseFile
from timeline.format.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from timeline.hudi_log import DeleteRecord, avro_block, delete_block, log_file_name, rollback_block
from timeline.io.storage import Storage
from timeline.mor.slice_merge import LogMerge, VisibleInstants, merge_slice, merged_log_records, valid_blocks

PARTITION = "p1"
FILE_ID = "6f3c2a9e-1b7d-4c55-9a0e-2d8f4b1c7e90-0"
BASE_INSTANT = "20240101000000"  # the base file's instant: before every log block's
INSTANTS = [f"202401010000{i:02d}" for i in range(1, 9)]
KEYS = [f"k{i}" for i in range(4)]
IS_DELETED = "_hoodie_is_deleted"
NATURAL = ("IntWrapper", 0)

META = [pa.field(name, pa.string()) for name in META_COLUMNS]
DATA = [pa.field("id", pa.string()), pa.field("v", pa.int64()), pa.field("ts", pa.int64())]
BASE_SCHEMA = pa.schema(META + DATA)
LOG_SCHEMA = arrow_to_avro(BASE_SCHEMA, "t")
FLAGGED_LOG_SCHEMA = arrow_to_avro(pa.schema([*META, *DATA, pa.field(IS_DELETED, pa.bool_())]), "t")

SHM = "/dev/shm"  # a tmpfs where there is one: the damage tests rewrite a log thousands of times


def scratch() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="mor-merge-", dir=SHM if os.path.isdir(SHM) else None)


FAST = settings(max_examples=150, deadline=None)


# ---------------------------------------------------------------------------------------------------------
# Slices as plain data, and how they are written


@dataclass(frozen=True)
class Rec:
    key: str
    v: int
    ts: int
    deleted: bool | None = None  # _hoodie_is_deleted, in a block whose schema has the column


@dataclass(frozen=True)
class Block:
    kind: str  # "data", "delete" or "rollback"
    instant: str
    records: tuple[Rec, ...] = ()
    flagged: bool = False  # a data block whose schema carries _hoodie_is_deleted
    deletes: tuple[tuple[str, tuple[str, int] | None], ...] = ()  # (key, ordering)
    target: str = ""  # a rollback's TARGET_INSTANT_TIME


@dataclass(frozen=True)
class Slice:
    base: tuple[tuple[str, int, int], ...]  # (key, v, ts), keys unique
    logs: tuple[tuple[Block, ...], ...]
    completed: frozenset[str]
    as_of: str | None


def data(instant: str, *records: Rec, flagged: bool = False) -> Block:
    return Block("data", instant, records=records, flagged=flagged or any(r.deleted is not None for r in records))


def deletes(instant: str, *entries: tuple[str, tuple[str, int] | None]) -> Block:
    return Block("delete", instant, deletes=entries)


def rollback(instant: str, target: str) -> Block:
    return Block("rollback", instant, target=target)


def meta(instant: str, seq: int, key: str) -> dict:
    return {
        COMMIT_TIME: instant,
        COMMIT_SEQNO: f"{instant}_0_{seq}",
        RECORD_KEY: key,
        PARTITION_PATH: PARTITION,
        FILE_NAME: FILE_ID,
    }


def encode(block: Block) -> bytes:
    if block.kind == "data":
        records = []
        for seq, r in enumerate(block.records):
            record = {**meta(block.instant, seq, r.key), "id": r.key, "v": r.v, "ts": r.ts}
            if block.flagged:
                record[IS_DELETED] = r.deleted
            records.append(record)
        return avro_block(block.instant, FLAGGED_LOG_SCHEMA if block.flagged else LOG_SCHEMA, records)
    if block.kind == "delete":
        return delete_block(block.instant, [DeleteRecord(key, PARTITION, order) for key, order in block.deletes])
    return rollback_block(block.instant, block.target)


def base_table(rows: tuple[tuple[str, int, int], ...], schema: pa.Schema = BASE_SCHEMA) -> pa.Table:
    records = [{**meta(BASE_INSTANT, i, key), "id": key, "v": v, "ts": ts} for i, (key, v, ts) in enumerate(rows)]
    return pa.Table.from_pylist(records, schema=schema)


def write_logs(root: str, blocks_per_log: tuple[tuple[Block, ...], ...]) -> tuple[Storage, list[DataLog]]:
    """Each log as one file of the slice (versions 1, 2, ... in read order), its size as its commit records."""
    storage = Storage(root)
    logs = []
    for version, blocks in enumerate(blocks_per_log, 1):
        raw = b"".join(encode(b) for b in blocks)
        name = log_file_name(FILE_ID, BASE_INSTANT, version, "1-0-1")
        storage.write_bytes(f"{PARTITION}/{name}", raw)
        log = parse_data_log(PARTITION, name, len(raw))
        assert log is not None
        logs.append(log)
    return storage, logs


def visible_of(s: Slice) -> VisibleInstants:
    return VisibleInstants(s.completed, None, frozenset(), s.as_of)


def rows_of(table: pa.Table) -> list[tuple[str, int, int]]:
    return sorted((r[RECORD_KEY], r["v"], r["ts"]) for r in table.to_pylist())


def read_table(storage: Storage, logs: list[DataLog], s: Slice) -> pa.Table:
    """The slice through the entry point readers use."""
    merge = LogMerge({(PARTITION, FILE_ID): logs}, visible_of(s), "ts")
    return merge.merged(storage, base_table(s.base), PARTITION, FILE_ID)


def read_rows(storage: Storage, logs: list[DataLog], s: Slice) -> list[tuple[str, int, int]]:
    return rows_of(read_table(storage, logs, s))


def whole(table: pa.Table) -> tuple[list[str], list[dict]]:
    """Every column of every row, in an order that does not depend on the merge's."""
    return table.schema.names, sorted(table.to_pylist(), key=repr)


# ---------------------------------------------------------------------------------------------------------
# The model: Hudi 0.15's scan (AbstractHoodieLogRecordReader.scanInternalV1) and payload rules, on dicts


def model_states(s: Slice, stop_after: str | None = None) -> dict[str, tuple]:
    """Each key's newest state in the logs: ("record", v, ts, is_deleted) or ("delete",).

    `stop_after`: Java's `latestInstantTime`; the scan ends at the first block whose instant is after it."""
    queued: list[Block] = []
    for block in itertools.chain.from_iterable(s.logs):
        if stop_after is not None and block.instant > stop_after:
            break
        if block.kind == "rollback":
            queued = [q for q in queued if q.instant != block.target]
        elif block.instant in s.completed and (s.as_of is None or block.instant <= s.as_of):
            queued.append(block)
    states: dict[str, tuple] = {}
    for block in queued:
        if block.kind == "data":
            for r in block.records:
                old = states.get(r.key)
                # newer.preCombine(older): an older delete loses; else the older wins only when strictly greater
                if old is None or old[0] == "delete" or not old[2] > r.ts:
                    states[r.key] = ("record", r.v, r.ts, bool(r.deleted))
        else:
            for key, ordering in block.deletes:
                old = states.get(key)
                natural = ordering is None or ordering == NATURAL
                kept = old is not None and old[0] == "record" and not natural and old[2] > ordering[1]
                if not kept:
                    states[key] = ("delete",)
    return states


def model_rows(s: Slice, stop_after: str | None = None) -> list[tuple[str, int, int]]:
    """Log against base: the log's newest state wins whatever the ordering; deletes and flagged records drop."""
    states = model_states(s, stop_after)
    rows = [row for row in s.base if row[0] not in states]
    rows += [(key, st[1], st[2]) for key, st in states.items() if st[0] == "record" and not st[3]]
    return sorted(rows)


# ---------------------------------------------------------------------------------------------------------
# Random slices

TS = st.integers(0, 4)  # few values: ties are common
VALUES = st.integers(0, 999)
VALUED = st.tuples(st.just("LongWrapper"), TS)  # the long precombine column's class
ORDERINGS = st.one_of(st.none(), st.just(NATURAL), VALUED, VALUED)  # half of deletes carry a value


@st.composite
def slices(draw) -> Slice:
    base_keys = draw(st.lists(st.sampled_from(KEYS), unique=True))
    base = tuple((key, draw(VALUES), draw(TS)) for key in base_keys)
    failed = draw(st.sets(st.sampled_from(INSTANTS), max_size=3))  # inflight or failed: most blocks count
    completed = frozenset(INSTANTS) - failed
    as_of = draw(st.none() | st.sampled_from(INSTANTS[2:]))
    written: list[str] = []
    logs = []
    for _ in range(draw(st.integers(1, 5))):
        blocks = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["data", "data", "delete", "rollback"]))
            instant = draw(st.sampled_from(INSTANTS))
            if kind == "data":
                flagged = draw(st.booleans())
                flags = st.sampled_from([None, False, True]) if flagged else st.none()
                records = draw(
                    st.lists(st.builds(Rec, st.sampled_from(KEYS), VALUES, TS, flags), min_size=1, max_size=4)
                )
                blocks.append(Block("data", instant, records=tuple(records), flagged=flagged))
            elif kind == "delete":
                entries = draw(st.lists(st.tuples(st.sampled_from(KEYS), ORDERINGS), min_size=1, max_size=3))
                blocks.append(deletes(instant, *entries))
            else:  # mostly an instant that already wrote to the slice
                blocks.append(rollback(instant, draw(st.sampled_from(written or INSTANTS))))
            if kind != "rollback":
                written.append(instant)
        logs.append(tuple(blocks))
    return Slice(base, tuple(logs), completed, as_of)


def module_states(storage: Storage, logs: list[DataLog], s: Slice) -> dict[str, tuple]:
    latest = merged_log_records(valid_blocks(storage, logs, visible_of(s)), "ts")
    return {
        key: ("delete",)
        if state.record is None
        else ("record", state.record["v"], state.record["ts"], bool(state.record.get(IS_DELETED)))
        for key, state in latest.items()
    }


@FAST
@given(slices())
def test_slice_rows_match_the_model(s: Slice) -> None:
    """Visible blocks only; rollbacks drop earlier blocks of their target; log against log by ordering with
    ties to the later record; deletes by their ordering; log against base always the log's; flagged records
    and deleted keys out; log-only keys in."""
    with scratch() as root:
        storage, logs = write_logs(root, s.logs)
        assert module_states(storage, logs, s) == model_states(s)
        rows = read_rows(storage, logs, s)
    assert rows == model_rows(s)
    assert len({key for key, _, _ in rows}) == len(rows)


@FAST
@given(slices())
def test_merge_slice_keeps_base_rows_the_logs_do_not_touch(s: Slice) -> None:
    """The pieces one by one: merge_slice over merged_log_records over valid_blocks, same rows as the model,
    and untouched base rows come through with every column as they were."""
    with scratch() as root:
        storage, logs = write_logs(root, s.logs)
        latest = merged_log_records(valid_blocks(storage, logs, visible_of(s)), "ts")
    base = base_table(s.base)
    merged = merge_slice(base, latest)
    assert rows_of(merged) == model_rows(s)
    untouched = [r for r in base.to_pylist() if r[RECORD_KEY] not in model_states(s)]
    got = {r[RECORD_KEY]: {name: r[name] for name in BASE_SCHEMA.names} for r in merged.to_pylist()}
    assert all(got[r[RECORD_KEY]] == r for r in untouched)


# Hudi 0.15 ends the whole scan at the first block whose instant is after the read's latestInstantTime
# (scanInternalV1: `break`, later files included; docs/hudi-mor-format.md §5). Spark's latestInstantTime is
# the time-travel instant, else the last completed instant. slice_merge skips such blocks and reads on.
I1, I2, I3 = INSTANTS[:3]
BREAK_TIME_TRAVEL = Slice(
    base=(("k0", 1, 0),),
    logs=((data(I2, Rec("k0", 2, 0)),), (data(I1, Rec("k0", 3, 0)),)),  # I1 written after I2 (two writers)
    completed=frozenset({I1, I2}),
    as_of=I1,
)
BREAK_FAILED_LATER_WRITE = Slice(
    base=(("k0", 1, 0),),
    logs=((data(I3, Rec("k0", 2, 0)),), (data(I2, Rec("k0", 3, 0)),)),  # I3 failed after writing its log
    completed=frozenset({I1, I2}),
    as_of=None,
)


@pytest.mark.xfail(
    strict=True,
    reason="a decision (docs/design.md, Merge-on-read tables): Java ends the scan at a block after the latest "
    "instant, hiding committed blocks read after it (a failed or running write's log ordered before a committed "
    "one); Tandem skips that block and reads on, so it returns the committed rows",
)
@settings(max_examples=60, deadline=None, phases=[Phase.explicit, Phase.generate])
@given(slices())
@example(BREAK_TIME_TRAVEL)
@example(BREAK_FAILED_LATER_WRITE)
def test_scan_ends_at_the_first_block_after_the_latest_instant(s: Slice) -> None:
    """Java fact (§5): a block after latestInstantTime ends the scan; blocks read after it never count, in
    this log or later ones. In both examples above Tandem returns k0 = 3 from the committed block read after
    the later instant's, where Hudi returns the base row k0 = 1."""
    latest = s.as_of if s.as_of is not None else max(s.completed, default="")
    with scratch() as root:
        storage, logs = write_logs(root, s.logs)
        assert read_rows(storage, logs, s) == model_rows(s, stop_after=latest)


@pytest.mark.parametrize(
    ("ts_type", "ordering"),
    [(pa.int64(), ("IntWrapper", 5)), (pa.int32(), ("LongWrapper", 5))],
    ids=["long-ts-IntWrapper", "int-ts-LongWrapper"],
)
def test_delete_ordering_of_another_class_always_deletes(ts_type: pa.DataType, ordering: tuple) -> None:
    """Java fact (§4): a delete keeps an earlier record only if `ReflectionUtils.isSameClass(cur, del)`: a
    Long precombine value (Avro long) against an IntWrapper, or an Integer (Avro int) against a LongWrapper,
    is not the same class, so the delete wins whatever the values (here the record's 9 against the delete's 5)."""
    schema = pa.schema([*META, pa.field("id", pa.string()), pa.field("v", pa.int64()), pa.field("ts", ts_type)])
    raw = avro_block(I1, arrow_to_avro(schema, "t"), [{**meta(I1, 0, "k0"), "id": "k0", "v": 1, "ts": 9}])
    raw += delete_block(I2, [DeleteRecord("k0", PARTITION, ordering)])
    visible = VisibleInstants(frozenset({I1, I2}), None, frozenset(), None)
    with scratch() as root:
        storage = Storage(root)
        name = log_file_name(FILE_ID, BASE_INSTANT, 1, "1-0-1")
        storage.write_bytes(f"{PARTITION}/{name}", raw)
        merge = LogMerge({(PARTITION, FILE_ID): [parse_data_log(PARTITION, name, len(raw))]}, visible, "ts")
        assert merge.merged(storage, base_table((), schema), PARTITION, FILE_ID).to_pylist() == []


def test_the_rules_one_by_one() -> None:
    """Small slices for each rule, so a failure of the random test has a named neighbour."""
    c = frozenset(INSTANTS[:6])
    cases = {
        "tie goes to the later record": (data(I1, Rec("k0", 1, 3)), data(I2, Rec("k0", 2, 3))),
        "a strictly greater earlier record stays": (data(I1, Rec("k0", 1, 4)), data(I2, Rec("k0", 2, 3))),
        "after a delete the later record wins": (deletes(I1, ("k0", ("LongWrapper", 4))), data(I2, Rec("k0", 2, 0))),
        "natural delete deletes": (data(I1, Rec("k0", 1, 4)), deletes(I2, ("k0", NATURAL))),
        "delete without ordering deletes": (data(I1, Rec("k0", 1, 4)), deletes(I2, ("k0", None))),
        "greater record survives a delete": (data(I1, Rec("k0", 1, 4)), deletes(I2, ("k0", ("LongWrapper", 3)))),
        "tie deletes": (data(I1, Rec("k0", 1, 4)), deletes(I2, ("k0", ("LongWrapper", 4)))),
        "LongWrapper 0 is compared": (data(I1, Rec("k0", 1, 4)), deletes(I2, ("k0", ("LongWrapper", 0)))),
        "flagged record wins and drops": (data(I1, Rec("k0", 1, 4, True)), data(I2, Rec("k0", 2, 3))),
        "failed instant unseen": (data(INSTANTS[7], Rec("k0", 9, 0)),),
        "rollback drops its target": (data(I1, Rec("k0", 5, 0)), rollback(I3, I1)),
        "rollback spares later blocks": (rollback(I3, I1), data(I1, Rec("k0", 5, 0))),
        "log beats base whatever ts": (data(I1, Rec("k0", 5, 0)),),
        "log-only key": (data(I1, Rec("k3", 5, 0)),),
    }
    for name, blocks in cases.items():
        s = Slice((("k0", 1, 4),), (blocks,), c, None)
        with scratch() as root:
            storage, logs = write_logs(root, s.logs)
            assert read_rows(storage, logs, s) == model_rows(s), name


# ---------------------------------------------------------------------------------------------------------
# Damage: a committed log refused or read exactly as before


def committed(s: Slice) -> Slice:
    """The slice with every block instant completed and no as_of: every block counts."""
    return Slice(s.base, s.logs, frozenset(INSTANTS), None)


def outcome(root: str, s: Slice, logs: list[DataLog], index: int, damaged: bytes, expected: tuple) -> str:
    """How a read of the slice goes with log `index` replaced by `damaged`; `expected` is the undamaged
    read's `whole` (every column counts: a flipped commit time is other rows too)."""
    storage = Storage(root)
    storage.write_bytes(logs[index].path, damaged)
    try:
        rows = whole(read_table(storage, logs, s))
    except UnreadableDataFileError:
        return "refused"
    except Exception as err:  # any other exception is a finding, named by its type
        return f"raised {type(err).__name__}"
    return "same" if rows == expected else "different"


@dataclass(frozen=True)
class Target:
    """A committed slice written to a scratch folder, its undamaged read, and the log a test damages."""

    root: str
    slice: Slice
    logs: list[DataLog]
    index: int
    raw: bytes  # the log's bytes as written
    expected: tuple

    def outcome(self, damaged: bytes) -> str:
        return outcome(self.root, self.slice, self.logs, self.index, damaged, self.expected)


@contextmanager
def one_log_of(s: Slice, draw) -> Iterator[Target]:
    """Slice `s` with every block committed, written out, and one of its logs (drawn) to damage."""
    s = committed(s)
    with scratch() as root:
        storage, logs = write_logs(root, s.logs)
        index = draw.draw(st.integers(0, len(logs) - 1))
        yield Target(root, s, logs, index, storage.read_bytes(logs[index].path), whole(read_table(storage, logs, s)))


@FAST
@given(slices(), st.data())
def test_a_cut_or_grown_log_is_refused(s: Slice, draw) -> None:
    """A log shorter or longer than its commit recorded, cut at a block boundary or anywhere, never reads."""
    with one_log_of(s, draw) as target:
        raw = target.raw
        ends = list(itertools.accumulate(len(encode(b)) for b in target.slice.logs[target.index]))
        cut = draw.draw(st.sampled_from([0, *ends[:-1]]) | st.integers(0, len(raw) - 1))
        grown = raw + draw.draw(st.sampled_from([b"", raw]) | st.binary(min_size=1, max_size=8))
        assert target.outcome(raw[:cut]) == "refused"
        if grown != raw:
            assert target.outcome(grown) == "refused"


def regions(raw: bytes) -> list[str]:
    """What each byte of a log is, by an independent walk of the block layout (framing.py's docstring)."""
    names: list[str] = []
    pos = 0

    def take(n: int, name: str) -> int:
        nonlocal pos
        names.extend([name] * n)
        pos += n
        return int.from_bytes(raw[pos - n : pos], "big", signed=True)

    while pos < len(raw):
        take(6, "envelope")  # magic
        take(8, "envelope")  # block size
        take(4, "envelope")  # format version
        kind = take(4, "block type")
        header_keys = []
        for _ in range(take(4, "envelope")):
            header_keys.append(take(4, "header key"))
            take(take(4, "envelope"), f"header value {header_keys[-1]}")
        length = take(8, "envelope")
        if kind == 3:  # Avro data: version, count, then (length, record) pairs
            take(4, "content framing")
            for _ in range(take(4, "content framing")):
                take(take(4, "content framing"), "Avro record")
        elif kind == 1:  # delete: version, length, HoodieDeleteRecordList
            take(8, "content framing")
            take(length - 8, "delete record list")
        else:
            take(length, "command content")
        take(4, "envelope")  # footer count: 0
        take(8, "envelope")  # trailing length
    assert pos == len(raw)
    header_names = {"header value 0": "INSTANT_TIME", "header value 1": "TARGET_INSTANT_TIME"}
    header_names |= {"header value 2": "SCHEMA", "header value 3": "COMMAND_BLOCK_TYPE"}
    return [f"header value {header_names[n]}" if n in header_names else n for n in names]


# One committed log of every block kind over a base: what every single-bit flip of it reads as.
CENSUS_SLICE = Slice(
    base=(("k0", 10, 2), ("k1", 11, 2), ("k2", 12, 2), ("k3", 13, 2)),
    logs=(
        (
            data(I1, Rec("k0", 20, 1), Rec("k4", 24, 3), Rec("k1", 21, 0, True)),
            deletes(I2, ("k2", NATURAL), ("k3", ("LongWrapper", 1)), ("k4", ("LongWrapper", 5))),
            deletes(INSTANTS[7], ("k0", NATURAL)),  # a failed write, then its rollback
            rollback(INSTANTS[6], INSTANTS[7]),
            data(I3, Rec("k3", 33, 4), Rec("k5", 35, 0)),
        ),
    ),
    completed=frozenset(INSTANTS[:7]),
    as_of=None,
)
FRAMING = ("envelope", "content framing")
KEYS_AND_KINDS = ("block type", "header key")
UNCHECKED = ("Avro record", "delete record list", "header value INSTANT_TIME", "header value SCHEMA")
UNCHECKED += ("header value TARGET_INSTANT_TIME", "header value COMMAND_BLOCK_TYPE")


@cache
def census() -> dict[str, Counter]:
    """region -> outcome counts over single-bit flips: every bit of a framing, block type or header key
    byte; one bit (by offset) of every content and header value byte, of every fourth byte of the long
    SCHEMA values, to keep the run short."""
    s = CENSUS_SLICE
    found: dict[str, Counter] = {}
    with scratch() as root:
        storage, logs = write_logs(root, s.logs)
        raw = storage.read_bytes(logs[0].path)
        expected = whole(read_table(storage, logs, s))
        assert rows_of(read_table(storage, logs, s)) == model_rows(s)
        for at, region in enumerate(regions(raw)):
            if region in FRAMING + KEYS_AND_KINDS:
                bits = range(8)
            else:
                bits = [at % 8] if region != "header value SCHEMA" or at % 4 == 0 else []
            for bit in bits:
                damaged = bytearray(raw)
                damaged[at] ^= 1 << bit
                result = outcome(root, s, logs, 0, bytes(damaged), expected)
                found.setdefault(region, Counter())[result] += 1
    return found


def test_census_covers_every_region() -> None:
    assert set(census()) == set(FRAMING + KEYS_AND_KINDS + UNCHECKED)


def test_flips_in_the_framing_are_refused() -> None:
    """Magic, sizes, lengths, counts, versions: Hudi's envelope check and the content decoders catch them."""
    bad = {region: counts for region, counts in census().items() if region in FRAMING}
    assert all(set(counts) <= {"refused", "same"} for counts in bad.values()), bad


def test_flips_of_block_types_and_header_keys_are_refused() -> None:
    found = {region: counts for region, counts in census().items() if region in KEYS_AND_KINDS}
    assert all(set(counts) <= {"refused", "same"} for counts in found.values()), found


@pytest.mark.xfail(
    strict=True,
    reason="Hudi's log format has no checksum over header values or block content. Single-bit census of "
    "CENSUS_SLICE: 212 of 464 flips in Avro records read as other rows (16 change key/v/ts, 196 only meta "
    "columns); 6 of 44 in the delete record list; 36 of 70 in INSTANT_TIME values (another or no instant); of "
    "309 in SCHEMA values, 52 read as other rows or columns (the rest are refused)",
)
def test_flips_in_unchecked_bytes_are_refused() -> None:
    found = {region: counts for region, counts in census().items() if region in UNCHECKED}
    assert all(set(counts) <= {"refused", "same"} for counts in found.values()), found


@settings(max_examples=80, deadline=None)
@given(slices(), st.data())
def test_random_framing_flips_are_refused_or_harmless(s: Slice, draw) -> None:
    """Random slices, one to three random flips among a log's framing bytes (not types, keys or contents)."""
    with one_log_of(s, draw) as target:
        framing = [at for at, region in enumerate(regions(target.raw)) if region in FRAMING]
        flips = draw.draw(st.lists(st.tuples(st.sampled_from(framing), st.integers(1, 255)), min_size=1, max_size=3))
        damaged = bytearray(target.raw)
        for at, mask in flips:
            damaged[at] ^= mask
        assert target.outcome(bytes(damaged)) in ("refused", "same")


@pytest.mark.xfail(
    strict=False,  # random: the census tests above are the strict, deterministic record
    reason="as test_flips_in_unchecked_bytes_are_refused: Hudi's log format has no checksum over header values "
    "or block content, so some flips read as other rows",
)
@settings(max_examples=80, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(slices(), st.data(), st.randoms(use_true_random=False))
def test_random_flips_anywhere_are_refused_or_harmless(s: Slice, draw, rnd) -> None:
    """One to three random bytes of a committed log XORed with random masks, anywhere in the file."""
    with one_log_of(s, draw) as target:
        damaged = bytearray(target.raw)
        for _ in range(rnd.randint(1, 3)):  # positions uniform over the file, not shrunk towards its start
            damaged[rnd.randrange(len(damaged))] ^= rnd.randint(1, 255)
        assert target.outcome(bytes(damaged)) in ("refused", "same")


# ---------------------------------------------------------------------------------------------------------
# slice_logs and parse_data_log

TOKENS = ["1-0-1", "0-1-0", "10-0-1", "2-5-3", "1-0-10"]
PARTITIONS = ["p1", "p2/x"]
GROUP_IDS = ["a1b2-0", "c3d4-0"]


@st.composite
def listings(draw):
    """Groups with or without a visible base, some replaced; logs of assorted base instants, versions and
    tokens; an as_of."""
    groups = [(p, f) for p in PARTITIONS for f in GROUP_IDS]
    bases = {}
    replaced = set()
    for group in groups:
        base = draw(st.none() | st.sampled_from(INSTANTS[1:4]))
        if base is not None:
            bases[group] = base
        elif draw(st.booleans()):
            replaced.add(group)
    names = st.tuples(
        st.sampled_from(groups), st.sampled_from(INSTANTS[:5]), st.integers(1, 12), st.sampled_from(TOKENS)
    )
    specs = draw(st.lists(names, unique=True, max_size=16))
    logs = []
    for (partition, file_id), instant, version, token in specs:
        log = parse_data_log(partition, log_file_name(file_id, instant, version, token), version * 100)
        assert log is not None
        logs.append(log)
    instants = sorted({log.base_instant for log in logs}) or INSTANTS  # as_of at a log's instant: the edge
    as_of = draw(st.none() | st.sampled_from(INSTANTS) | st.sampled_from(instants))
    return bases, replaced, draw(st.permutations(logs)), as_of


@settings(max_examples=150, deadline=None)
@given(listings())
def test_slice_logs_match_the_model(listing) -> None:
    bases, replaced, logs, as_of = listing
    latest = [BaseFile(p, f, "0-1-0", instant) for (p, f), instant in bases.items()]
    orphans = [
        log
        for log in logs
        if (log.partition, log.file_id) not in bases
        and (log.partition, log.file_id) not in replaced
        and (as_of is None or log.base_instant <= as_of)
    ]
    if orphans:
        with pytest.raises(UnsupportedTableError):
            slice_logs(latest, logs, as_of, frozenset(replaced))
        return
    expected: dict[tuple[str, str], list[DataLog]] = {}
    for log in logs:
        base = bases.get((log.partition, log.file_id))
        if base is not None and log.base_instant >= base:  # this slice's, or a pending compaction's
            expected.setdefault((log.partition, log.file_id), []).append(log)
    for group in expected.values():  # HoodieLogFile.LogFileComparator: base instant, version, write token
        group.sort(key=lambda log: (log.base_instant, log.log.version, log.log.write_token))
    assert slice_logs(latest, logs, as_of, frozenset(replaced)) == expected


FILE_IDS = st.text("0123456789abcdef-", min_size=1, max_size=12).map(lambda s: f"{s}-0")


@settings(max_examples=150, deadline=None)
@given(FILE_IDS, st.sampled_from(INSTANTS), st.integers(1, 50), st.sampled_from(TOKENS))
def test_only_exact_log_names_parse_as_logs(file_id: str, instant: str, version: int, token: str) -> None:
    name = log_file_name(file_id, instant, version, token)
    log = parse_data_log("p1", name, 7)
    assert log is not None and (log.file_id, log.base_instant, log.log.version) == (file_id, instant, version)
    assert (log.name, log.path, log.size) == (name, f"p1/{name}", 7)
    not_logs = [
        f".{name}.crc",  # Hadoop's checksum sidecar
        f"{name}.0123456789abcdef0123456789abcdef.tmp",  # Storage's temp file before its rename
        log_file_name(file_id, instant, version, token, cdc=True),  # a change-data-capture log
        f".{file_id}_{instant}.log.{version}",  # no write token
        f".{file_id}_{instant}.archive.{version}_{token}",
        f".{file_id}_x{instant}.log.{version}_{token}",  # base instant not a number
    ]
    for other in not_logs:
        assert parse_data_log("p1", other) is None, other
