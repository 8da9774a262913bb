"""Random histories of Tandem operations, read back by Apache Hudi's own Spark reader, by Tandem's reader, and
checked against an independent model.

One seed makes one history on one layout: `Sequence(seed, ...).run()` writes with Tandem's library API
(LocalWriter; clean, MDT compaction and archival as the CLI runs them), keeps a model of the table after each
instant, and asks the reference session (tests/hudi_reference/client.py) in batches for: the snapshot, time travel
to every completed instant, to a time between two instants, to an instant in the `yyyy-MM-dd HH:mm:ss.SSS` form
and to a time before the first instant, and incremental reads between instants. Every answer is compared with the
model, and with Tandem's own reader. Disagreements are collected, not raised, so that a run
reports all of them with the history that produced them.

The model follows Hudi's semantics under Tandem's default (non-global) index: a record is (record key, partition
path); upsert replaces every copy of the record or adds it; delete removes every copy; insert and bulk_insert add
rows without looking up keys (a key inserted twice is there twice, whether the insert topped up a small file group
or started a new one, as Hudi's writer with its default `hoodie.merge.allow.duplicate.on.inserts=true`);
insert_overwrite drops every record of the partitions its rows touch, then adds its rows.

Merge-on-read (`Sequence(..., table_type="MERGE_ON_READ")`): the table has a precombine field `pc` (an int64 whose
values go up and down), Tandem's writer a random `small_file_limit` (0: updates always go to logs; the default:
a small file group without logs takes an upsert's new records and is rewritten), and the history mixes
upserts, deletes and inserts with repeated keys, deletes of absent keys and re-inserts of deleted ones.
`MorModel` keeps every file group's base file versions and log files and merges them as Hudi 0.15's Spark
reader does with its default payload (OverwriteWithLatestAvroPayload; docs/hudi-mor-format.md §4-5); where the
writer put each record (which group, a base file or a log) is read from the commit's write stats and the new
base files' key columns (the Hudi format, not Tandem's code). Their service steps (`Sequence._mor_service`):
data compaction (a completed one is a base file per planned group holding its slice merged as of the compaction
instant, records keeping their commit times; a pending one lets readers merge the slice it starts with the one
before it, so completing it can change what a snapshot reads), clean, archival and writes killed at a commit
step then recovered; what they leave out is `MOR_SERVICES_LEFT_OUT`. A merge-on-read history's expected
answers are taken from the model when it is read, not when the instant completed.
"""

from __future__ import annotations

import bisect
import json
import math
import random
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from tests.hudi_reference.client import HudiError, HudiReference, Read

UTC = timezone.utc
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path"]
FILE_META = "_hoodie_file_name"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
FULL_SCAN_FALLBACK = "hoodie.datasource.read.incr.fallback.fulltablescan.enable"
# Hudi's refusals of time travel before what the last clean kept: "Cleaner cleaned up the timestamp of interest.
# Please ensure sufficient commits are retained ..." (KEEP_LATEST_COMMITS: before its earliestCommitToRetain) and
# "Please ensure sufficient commits are retained (uncleaned and un-archived) ..." (no earliest commit recorded)
CLEANED_UP = "Please ensure sufficient commits are retained"


@dataclass(frozen=True)
class Layout:
    name: str
    key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool = False


LAYOUTS = [
    Layout("nonpartitioned", ("id",), ()),
    Layout("one_field", ("id",), ("p1",)),
    Layout("two_fields", ("id",), ("p1", "p2")),
    Layout("hive_one_field", ("id",), ("p1",), True),
    Layout("hive_two_fields", ("id",), ("p1", "p2"), True),
    Layout("complex_key", ("id", "k2"), ("p1",)),
    Layout("complex_key_hive_two_fields", ("id", "k2"), ("p1", "p2"), True),
    Layout("complex_key_nonpartitioned", ("id", "k2"), ()),
]

STRUCT = pa.struct([("a", pa.int64()), ("b", pa.string())])
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("k2", pa.string()),
        ("p1", pa.string()),
        ("p2", pa.int64()),
        ("s", pa.string()),
        ("d", pa.float64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dt", pa.date32()),
        ("dec", pa.decimal128(10, 2)),
        ("st", STRUCT),
    ]
)
DATA_COLUMNS = [f.name for f in SCHEMA]

WRITE_OPS = ["upsert", "upsert", "upsert", "insert", "bulk_insert", "delete", "delete", "insert_overwrite"]
SERVICE_OPS = ["clean", "compact", "archive"]

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
PRECOMBINE = "pc"  # merge-on-read histories' precombine (ordering) field
MOR_SCHEMA = SCHEMA.append(pa.field(PRECOMBINE, pa.int64()))
MOR_WRITE_OPS = [*["upsert"] * 5, "insert", "bulk_insert", *["delete"] * 3, "insert_overwrite"]
# a merge-on-read history's service steps (`Sequence._mor_service`), a share of its steps
MOR_SERVICE_OPS = ["schedule", "schedule", "compact", "compact", "clean", "clean", "archive", "failed"]
MOR_SERVICE_SHARE = 0.35
# What merge-on-read histories still leave out. They run compaction (planned with writes before it completes,
# executed and left pending, the compact service, recovery's), clean (both policies), archival and killed writes
# (rolled back or forward), with the reads of copy-on-write histories.
MOR_SERVICES_LEFT_OUT = (
    "compaction planned by a writer (hoodie.compact.schedule.inline): the same plan, scheduled by a commit",
    "compaction abandoned (a log landing in a planned slice from a writer without a valid lock): Tandem's own check",
    "table services killed midway (compaction, clean, rollback) and resumed by recovery; a compaction executed "
    "and not completed is the state a kill after its base files leaves, and it is read",
    "insert_overwrite of a partition a pending compaction plans: Tandem refuses it (recorded, nothing committed)",
    "Hudi 1.x histories keep no compaction pending across a step (test_java_hudi_1x_drops_log_slices_after_a_"
    "pending_compaction)",
    "incremental ranges reaching archived instants are not asked of Tandem (it reads every file group there, Hudi "
    "the active commits' files: the copy-on-write gap) nor of Hudi's full-scan fallback (it reads no log)",
    "time travel to a compaction that completed after a clean that followed its plan (the clean may have taken "
    "what the read needs, as for every instant read before it)",
)


# -- values


def random_row(rng: random.Random, ident: tuple) -> dict:
    """A row with the identity (id, k2, p1, p2) and random data columns, nulls included."""
    rid, k2, p1, p2 = ident

    def maybe(value, p_null=0.15):
        return None if rng.random() < p_null else value

    doubles = [0.5, -1.25, 1e10, 3.0, 0.0, float(rng.randint(-1000, 1000)) / 8]
    return {
        "id": rid,
        "k2": k2,
        "p1": p1,
        "p2": p2,
        "s": maybe(rng.choice(["", "x", "héllo", "a,b", "line\nbreak", f"v{rng.randint(0, 99)}"])),
        "d": maybe(rng.choice(doubles)),
        "ts": maybe(
            datetime(2020, 1, 1, tzinfo=UTC)
            + timedelta(seconds=rng.randint(-(10**8), 10**9), microseconds=rng.randint(0, 999_999))
        ),
        "dt": maybe(date(1970, 1, 1) + timedelta(days=rng.randint(-20_000, 40_000))),
        "dec": maybe(Decimal(rng.randint(-(10**9), 10**9)).scaleb(-2)),
        "st": maybe({"a": maybe(rng.randint(-5, 5)), "b": maybe(rng.choice(["p", "q", ""]))}),
    }


def canon(value):
    """A comparable, hashable form of a value as pyarrow returns it from either reader."""
    if value is None:
        return None
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - datetime(1970, 1, 1, tzinfo=UTC)
        return ("ts", delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds)
    if isinstance(value, date):
        return ("date", value.isoformat())
    if isinstance(value, Decimal):
        return ("dec", str(value.normalize()) if value == value else "nan")
    if isinstance(value, dict):
        return tuple(sorted((k, canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canon(v) for v in value)
    return value


def canon_rows(rows: list[dict], columns: list[str]) -> Counter:
    return Counter(tuple((c, canon(row.get(c))) for c in columns) for row in rows)


def table_rows(table: pa.Table) -> list[dict]:
    return table.to_pylist() if table.num_rows else []


# -- the model


@dataclass
class Model:
    layout: Layout
    records: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # (key, partition) -> copies

    def key(self, row: dict) -> str:
        fields = self.layout.key_fields
        if len(fields) == 1:
            return str(row[fields[0]])
        return ",".join(f"{f}:{'__empty__' if row[f] == '' else row[f]}" for f in fields)

    def partition(self, row: dict) -> str:
        parts = []
        for f in self.layout.partition_fields:
            value = row[f]
            text = DEFAULT_PARTITION if value is None or value == "" else str(value)
            parts.append(f"{f}={text}" if self.layout.hive_style else text)
        return "/".join(parts)

    def ident(self, row: dict) -> tuple[str, str]:
        return self.key(row), self.partition(row)

    def apply(self, op: str, rows: list[dict], instant: str) -> None:
        stamped = [{**r, "_hoodie_commit_time": instant} for r in rows]
        if op == "upsert":
            last: dict[tuple[str, str], dict] = {}
            for r in stamped:  # duplicates in one batch: the last row wins (no precombine field)
                last[self.ident(r)] = r
            for ident, r in last.items():
                copies = len(self.records.get(ident, [])) or 1
                self.records[ident] = [r] * copies
        elif op == "delete":
            for r in rows:
                self.records.pop(self.ident(r), None)
        elif op in ("insert", "bulk_insert"):
            for r in stamped:
                self.records.setdefault(self.ident(r), []).append(r)
        elif op == "insert_overwrite":
            touched = {self.partition(r) for r in rows}
            self.records = {i: c for i, c in self.records.items() if i[1] not in touched}
            for r in stamped:
                self.records.setdefault(self.ident(r), []).append(r)
        else:
            raise ValueError(op)

    def snapshot(self) -> list[dict]:
        out = []
        for (key, partition), copies in self.records.items():
            for r in copies:
                out.append({**r, "_hoodie_record_key": key, "_hoodie_partition_path": partition})
        return out


# -- the merge-on-read model

DELETED = None  # a log entry that deletes its record
LATEST = "99999999999999999"  # a read time after every instant
ABSENT = object()  # no log entry yet


@dataclass
class FileGroup:
    """One file group as the writer left it: its base file versions and its log files, each with the records
    the model put there."""

    file_id: str
    partition: str
    bases: list[tuple[str, dict]] = field(default_factory=list)  # (instant, {ident: row}), oldest first
    logs: list[tuple[str, str, dict]] = field(default_factory=list)  # (instant, slice base instant, {ident: row})
    replaced: str | None = None  # the insert_overwrite that replaced the group
    pending: set[str] = field(default_factory=set)  # compactions planned for the group, not completed

    def base_at(self, time: str) -> tuple[str, dict] | None:
        """The latest base file version committed at or before `time` (None: the group did not exist)."""
        found = [b for b in self.bases if b[0] <= time]
        return found[-1] if found else None

    def live_at(self, time: str) -> bool:
        return self.base_at(time) is not None and (self.replaced is None or self.replaced > time)

    def slices(self, base_time: str) -> set[str]:
        """The slice of the base file written at `base_time` as a reader takes it: its own logs, and those of
        the slice a pending compaction planned after it starts (Hudi's mergeCompactionPendingFileSlices)."""
        return {base_time} | {c for c in self.pending if c > base_time}

    def current_slice(self) -> str:
        """The base instant a new log of the group names: a pending compaction's, else the latest base's."""
        return max(self.pending) if self.pending else self.bases[-1][0]


def combine(older, newer):
    """Two log records of one key, the older read first (OverwriteWithLatestAvroPayload.preCombine through
    HoodieMergedLogRecordScanner): a delete with the natural ordering, as the delete operation writes, always
    deletes; after a delete the newer record wins; otherwise the older one stays only if its ordering value is
    strictly greater."""
    if newer is DELETED or older is DELETED:
        return newer
    return older if older[PRECOMBINE] > newer[PRECOMBINE] else newer


class MorModel(Model):
    """Hudi's semantics on a merge-on-read table with OverwriteWithLatestAvroPayload, per file group.

    A group's slice at a time T is its latest base version at or before T with the logs of that slice up to T.
    Its log records of one key are combined oldest first (`combine`); the result replaces the base row
    whatever the ordering values (a log record always wins over the base), a delete drops it. A base rewrite
    (Hudi's merge handle) replaces a record whatever the ordering too.

    An incremental read (b, e] (Hudi 0.15's MergeOnReadIncrementalRelation without the full-scan fallback)
    builds its file system view from the files the commits in the range wrote: a group whose base at e was
    written in the range is merged whole, a group whose base is older contributes only its logs written in the
    range, combined among themselves (deletes dropped, no base); rows are then kept if their commit time is
    in the range.

    Upserts and deletes are combined first (Hudi's combine before upsert): one record per (key, partition),
    the one with the largest ordering value, the last of those on a tie.

    Compaction C (`schedule`, then `compact`): while pending, the logs of the slice it starts (written after
    its plan) are read with the slice before it; once completed, each planned group has a base file at C holding
    its slice merged as of C, and counts as written at C: an incremental range holding C reads it whole (with
    the logs of the slice it starts), one after C reads those logs alone.
    """

    def __init__(self, layout: Layout) -> None:
        super().__init__(layout)
        self.groups: dict[str, FileGroup] = {}
        self.coverage: Counter = Counter()  # which rules the history exercised (reported by tests.java_hudi_long)

    def _note(self, ident: tuple[str, str], group: FileGroup, new) -> None:
        """Count the rule a new log entry of `ident` in `group` meets (coverage only, nothing is decided here)."""
        base = group.bases[-1][1].get(ident)
        chain = ABSENT
        slices = group.slices(group.bases[-1][0])
        for _, slice_time, records in group.logs:
            if slice_time in slices and ident in records:
                chain = records[ident] if chain is ABSENT else combine(chain, records[ident])
        if new is DELETED:
            self.coverage["delete of a stored key" if chain is not DELETED else "delete of a deleted key"] += 1
        elif chain is DELETED:
            self.coverage["update after a delete (re-insert)"] += 1
        elif chain is not ABSENT:
            earlier = chain[PRECOMBINE] > new[PRECOMBINE]
            self.coverage["log over log, the earlier kept (greater ordering)" if earlier else "log over log"] += 1
        elif base is not None and base[PRECOMBINE] > new[PRECOMBINE]:
            self.coverage["log over base, smaller ordering than the base"] += 1
        else:
            self.coverage["log over base"] += 1

    def combined(self, op: str, rows: list[dict]) -> dict[tuple[str, str], dict]:
        out: dict[tuple[str, str], dict] = {}
        for r in rows:
            ident = self.ident(r)
            if op == "delete" or ident not in out or r[PRECOMBINE] >= out[ident][PRECOMBINE]:
                out[ident] = r
        return out

    def holders(self, ident: tuple[str, str], time: str) -> list[FileGroup]:
        """The live groups whose latest base file holds the key (what a simple index finds), at `time`."""
        found = []
        for g in self.groups.values():
            base = g.base_at(time)
            if g.partition == ident[1] and g.live_at(time) and ident in base[1]:
                found.append(g)
        return found

    def apply_mor(self, op: str, rows: list[dict], instant: str, placed: list[dict]) -> list[str]:
        """Apply one write, given where its commit put records (`Sequence._placed`): each entry a base file
        ({file_id, partition, kind: "base", written: idents committed at `instant`, keys: every ident}) or a log
        ({file_id, partition, kind: "log", slice}). Returns what did not fit the model (a writer anomaly)."""
        anomalies: list[str] = []
        stamped = [{**r, "_hoodie_commit_time": instant} for r in rows]
        if op in ("upsert", "delete"):
            batch = self.combined(op, stamped)
        else:
            batch = {}
            for r in stamped:
                batch.setdefault(self.ident(r), r)
        for r in stamped:
            self.records[self.ident(r)] = [r]
        before = {i: [g.file_id for g in self.holders(i, instant)] for i in batch}
        if op == "insert_overwrite":
            touched = {i[1] for i in batch}
            for g in self.groups.values():
                if g.partition in touched and g.replaced is None:
                    g.replaced = instant
        written_to: dict[tuple[str, str], set[str]] = {}  # ident -> the groups whose new base holds its record
        for f in (p for p in placed if p["kind"] == "base"):
            group = self.groups.setdefault(f["file_id"], FileGroup(f["file_id"], f["partition"]))
            previous = group.bases[-1][1] if group.bases else {}
            content = {}
            for ident in f["keys"]:
                if ident in f["written"]:
                    if ident not in batch or op == "delete":
                        anomalies.append(f"{ident} committed in base file of {f['file_id']} but not written")
                        continue
                    content[ident] = batch[ident]
                    written_to.setdefault(ident, set()).add(f["file_id"])
                    if ident in previous:
                        self.coverage["base rewrite replaced a row"] += 1
                    elif group.bases:
                        self.coverage["base rewrite took a new record"] += 1
                elif ident in previous:
                    content[ident] = previous[ident]
                else:
                    anomalies.append(f"{ident} carried into {f['file_id']}, which did not hold it")
            for ident in previous:
                if ident not in content:
                    anomalies.append(f"{ident} dropped by the rewrite of {f['file_id']}")
            group.bases.append((instant, content))
        logged = {p["file_id"]: p for p in placed if p["kind"] == "log"}
        entries: dict[str, dict] = {fid: {} for fid in logged}
        for ident, r in batch.items():
            if op in ("insert", "bulk_insert", "insert_overwrite"):
                if ident not in written_to:
                    anomalies.append(f"{ident} ({op}) is in no new base file")
                if op != "insert_overwrite" and before[ident]:
                    self.coverage["insert of a stored key (another copy)"] += 1
                continue
            held = before[ident]
            if not held:
                self.coverage["upsert of a new key" if op == "upsert" else "delete of an absent key"] += 1
            for fid in held:
                if fid in logged:
                    entries[fid][ident] = DELETED if op == "delete" else r
                    self._note(ident, self.groups[fid], entries[fid][ident])
                elif fid not in written_to.get(ident, ()):
                    anomalies.append(f"{ident} ({op}) held by {fid}, which this write left alone")
            if op == "upsert" and not held and ident not in written_to:
                anomalies.append(f"{ident} (a new record) is in no new base file")
            if held and written_to.get(ident, set()) - set(held):
                anomalies.append(f"{ident} ({op}) held by {held} also written to {written_to[ident] - set(held)}")
        for fid, log in logged.items():
            if fid not in self.groups:
                anomalies.append(f"log {log['path']} of an unknown file group")
                continue
            if not entries[fid]:
                anomalies.append(f"log {log['path']} holds no record the model sends there")
            expected = self.groups[fid].current_slice()
            if log["slice"] != expected:
                anomalies.append(f"log {log['path']} names slice {log['slice']}, the group's slice is {expected}")
            self.groups[fid].logs.append((instant, log["slice"], entries[fid]))
        return anomalies

    def schedule(self, time: str, file_ids: list[str]) -> list[str]:
        """Compaction `time` planned for these groups (read from its plan): their new logs name its slice, and
        readers take those logs with the slice before it until it completes. (A planned slice may hold no
        committed log: the log of a rolled-back write and the rollback's command block are logs too.)"""
        anomalies = []
        for fid in file_ids:
            group = self.groups.get(fid)
            if group is None:
                anomalies.append(f"compaction {time} plans an unknown file group {fid}")
                continue
            group.pending.add(time)
            self.coverage["compaction planned"] += 1
        return anomalies

    def compact(self, time: str, file_ids: list[str]) -> dict[str, dict]:
        """Compaction `time` completed for these groups (read from its commit): each gets a base file at `time`
        holding its slice merged as of `time` (the records keep their commit times); returns those contents."""
        contents = {}
        for fid in file_ids:
            group = self.groups[fid]
            content = self._slice(group, time)
            before = self._slice(group, LATEST)
            group.pending.discard(time)
            group.bases.append((time, content))
            group.bases.sort(key=lambda b: b[0])
            contents[fid] = content
            self.coverage["compaction completed"] += 1
            if any(s == time for _, s, _ in group.logs):
                self.coverage["compaction completed after writes to the slice it starts"] += 1
            if self._slice(group, LATEST) != before:  # a log record of the new slice now wins over the base
                self.coverage["compaction completed, a snapshot reads another version"] += 1
        return contents

    def _slice(self, group: FileGroup, time: str, since: str | None = None) -> dict[tuple[str, str], dict]:
        """The group's rows read at `time` by (key, partition); with `since`, its part of an incremental read
        (since, time], before the commit-time filter. The base is the latest completed one at or before `time`
        (a completed compaction's counts from its instant time on; a pending one's never)."""
        if not group.live_at(time):
            return {}
        base_time, base = group.base_at(time)
        log_only = since is not None and base_time <= since
        slices = group.slices(base_time)
        chain: dict[tuple[str, str], dict | None] = {}
        for log_time, slice_time, records in group.logs:
            if slice_time not in slices or log_time > time or (log_only and log_time <= since):
                continue
            for ident, r in records.items():
                chain[ident] = combine(chain[ident], r) if ident in chain else r
        merged = {} if log_only else dict(base)
        for ident, r in chain.items():
            if r is DELETED:
                merged.pop(ident, None)
            else:
                merged[ident] = r
        return merged

    def _merged(self, group: FileGroup, time: str, since: str | None = None) -> list[dict]:
        merged = self._slice(group, time, since)
        return [{**r, "_hoodie_record_key": i[0], "_hoodie_partition_path": i[1]} for i, r in merged.items()]

    def snapshot_at(self, time: str) -> list[dict]:
        return [r for g in self.groups.values() for r in self._merged(g, time)]

    def incremental(self, since: str, until: str, listed_since: str | None = None) -> list[dict]:
        """Rows an incremental read (since, until] returns. `listed_since`: the files it reads are those of the
        commits after it (Hudi reads only the active timeline's commits of a range that reaches archived ones:
        `listed_since` is then the last archived instant), the commit-time filter is still (since, until]."""
        listed = since if listed_since is None else listed_since
        rows = [r for g in self.groups.values() for r in self._merged(g, until, listed)]
        return [r for r in rows if since < r["_hoodie_commit_time"] <= until]


# -- one history


MODEL_COLUMNS = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path", *DATA_COLUMNS]
READER_COLUMNS = [*META, FILE_META, *DATA_COLUMNS]


@dataclass
class Check:
    """One read asked of both readers, with what the model expects (None: compare the readers only)."""

    label: str
    read: Read
    expected: Counter | None
    tandem: dict | None  # plan_scan arguments for Tandem's reader, None: Tandem is not asked (a known gap)
    pinned_error: str | None = None  # a Java refusal that is a known disagreement, pinned by a test of its own


@dataclass
class Disagreement:
    seed: int
    layout: str
    label: str
    against: str  # "model" or "tandem"
    detail: str
    history: list[str]

    def __str__(self) -> str:
        steps = "\n    ".join(self.history)
        sides = "Tandem's writer vs the model" if self.against == "writer" else f"Java Hudi vs {self.against}"
        return f"seed {self.seed} layout {self.layout}: {self.label}: {sides}: {self.detail}\n  history:\n    {steps}"


def diff(java: Counter, other: Counter, limit: int = 4) -> str:
    only_java = list((java - other).elements())
    only_other = list((other - java).elements())
    shown = [f"{len(only_java)} row(s) only in Java, {len(only_other)} only in the other"]
    shown += [f"  java : {dict(r)}" for r in only_java[:limit]]
    shown += [f"  other: {dict(r)}" for r in only_other[:limit]]
    return "\n".join(shown)


def between(a: str, b: str) -> str | None:
    """An instant time strictly between two instants (millisecond steps), or None."""
    ta = datetime.strptime(a, "%Y%m%d%H%M%S%f")
    tb = datetime.strptime(b, "%Y%m%d%H%M%S%f")
    mid = ta + (tb - ta) / 2
    text = mid.strftime("%Y%m%d%H%M%S%f")[:17]
    return text if a < text < b else None


def dashed(instant: str) -> str:
    """`yyyyMMddHHmmssSSS` -> `yyyy-MM-dd HH:mm:ss.SSS`."""
    t = instant
    return f"{t[0:4]}-{t[4:6]}-{t[6:8]} {t[8:10]}:{t[10:12]}:{t[12:14]}.{t[14:17]}"


class Sequence:
    def __init__(
        self,
        seed: int,
        java: HudiReference,
        root: Path | None = None,
        steps: int | None = None,
        both_metadata: bool = False,
        layout: Layout | None = None,
        hudi_format: bool | None = None,
        table_type: str = COPY_ON_WRITE,
        small_file_limit: int | str | None = "random",
        script: list[tuple[str, list[tuple[int, int]]]] | None = None,
        rising_ordering: bool = False,
    ) -> None:
        """`table_type` MERGE_ON_READ: a merge-on-read history (see the module's docstring), its writer's
        `small_file_limit` 0 or the default (None) at random, unless given. `script`: the writes to make instead of
        random ones, each (operation, [(id, precombine value), ...]), every record in partition "a".
        `rising_ordering`: each write's precombine values above every earlier write's (ties and falls only
        inside one batch), for Hudi 1.x: it reads OverwriteWithLatestAvroPayload as COMMIT_TIME_ORDERING
        (HoodieTableConfig.inferRecordMergeModeFromPayloadClass), so between log records the later always wins
        where 0.15 keeps an earlier one with a greater value (pinned by test_java_mor_reads.py).
        A merge-on-read script may hold service steps too, each (name, []): "schedule" (plan a compaction, forced),
        "compact" (complete the pending one, else the compact service), "clean", "archive", "failed" (a write
        killed at a commit step, then recovered) and "read" (read every instant so far, and the snapshot)."""
        self.seed = seed
        self.rng = random.Random(seed)
        self.layout = layout or LAYOUTS[seed % len(LAYOUTS)]
        self.java = java
        # Hudi 1.x judges: it drops the logs of a slice whose base file came after a pending compaction from an
        # incremental read that starts after that base (test_java_hudi_1x_drops_log_slices_after_a_pending_
        # compaction), where 0.15, the table's writer, and Tandem read them: its histories complete each
        # compaction in the step that plans it
        self.hudi_1x = getattr(java, "name", "hudi-0.15") != "hudi-0.15"
        self.own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix=f"java-hudi-{seed}-"))
        self.path = str(self.root / "t")
        self.mor = table_type == MERGE_ON_READ
        self.table_type = table_type
        self.script = script
        self.rising_ordering = rising_ordering
        if script is not None:
            self.steps = len(script)
        elif steps is not None:
            self.steps = steps
        else:  # merge-on-read histories: more steps, since their services need logs to act on
            self.steps = self.rng.randint(9, 13) if self.mor else self.rng.randint(4, 7)
        self.both_metadata = both_metadata
        # every other seed keeps its metadata table in Hudi's format: Java's reads with the metadata table on
        # then list from Tandem's metadata table (a merge-on-read table always keeps it in Hudi's format)
        self.hudi_format = True if self.mor else seed % 2 == 1 if hudi_format is None else hudi_format
        self.model = MorModel(self.layout) if self.mor else Model(self.layout)
        self.schema = MOR_SCHEMA if self.mor else SCHEMA
        data_columns = [f.name for f in self.schema]
        self.model_columns = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path", *data_columns]
        self.reader_columns = [*META, FILE_META, *data_columns]
        self.states: dict[str, Counter] = {}  # instant -> the model's snapshot once it completed
        self.instants: list[str] = []  # completed instants, in time order (a compaction completes after later writes)
        self.read_instants: set[str] = set()  # instants read already
        self.history: list[str] = []
        self.disagreements: list[Disagreement] = []
        self.next_id = 0
        self.flip = self.rng.random() < 0.5
        self.reads = 0
        self.cleans: list[str] = []  # completed clean instants
        self.archived: list[str] = []  # data instants archival moved
        self.java_snapshots: list[pa.Table] = []  # Java's answer to each snapshot read (metadata on), in order
        if self.mor:  # None: the writer's default (a small group without logs takes new records)
            random_limit = small_file_limit == "random"
            self.small_file_limit = self.rng.choice([0, None]) if random_limit else small_file_limit

    # -- Tandem side

    def _config(self):
        from coordinator.config import CoordinatorConfig

        retained = self.rng.choice([1, 2])
        return CoordinatorConfig(
            lock_uri="memory",
            commits_retained=retained,
            archive_min_commits=retained + 1,
            archive_max_commits=retained + 2,
            max_delta_commits=self.rng.choice([2, 3]),
            auto_archive=False,
        )

    def _identities(self, n: int, fresh_share: float) -> list[tuple]:
        """(id, k2, p1, p2): existing records (any partition) and new ones."""
        existing = [copies[0] for copies in self.model.records.values()]
        out = []
        seen = set()
        for _ in range(n):
            if existing and self.rng.random() > fresh_share:
                r = self.rng.choice(existing)
                ident = (r["id"], r["k2"], r["p1"], r["p2"])
                if self.rng.random() < 0.1 and self.layout.partition_fields:  # the same key in another partition
                    ident = (ident[0], ident[1], self.rng.choice(["a", "b"]), ident[3])
            else:
                self.next_id += 1
                ident = (self.next_id, self.rng.choice(["x", "y", ""]) if len(self.layout.key_fields) > 1 else "x")
                ident += (self._p1(), self.rng.choice([1, 2]))
            if self.model.ident(dict(zip(("id", "k2", "p1", "p2"), ident, strict=True))) in seen:
                continue
            seen.add(self.model.ident(dict(zip(("id", "k2", "p1", "p2"), ident, strict=True))))
            out.append(ident)
        return out

    def _p1(self) -> str | None:
        if not self.layout.partition_fields:
            return self.rng.choice(["a", "b"])
        roll = self.rng.random()
        return None if roll < 0.05 else ("a" if roll < 0.5 else "b" if roll < 0.85 else "c")

    def _batch(self, op: str) -> list[dict]:
        n = self.rng.randint(1, 8)
        if op == "delete":
            idents = self._identities(n, fresh_share=0.15)
        elif op in ("insert", "bulk_insert"):
            idents = self._identities(n, fresh_share=0.9)
            # a key twice in one insert: Hudi keeps both. Not on merge-on-read: both rows would share one base
            # file, and Hudi 0.15's RecordMergingFileIterator merges a later log record into the first of them
            # only (it removes the key from its log records), which this model does not follow
            if not self.mor and idents and self.rng.random() < 0.15:
                idents.append(idents[0])
        else:
            idents = self._identities(n, fresh_share=0.4)
        rows = [self._row(i) for i in idents]
        if self.mor and op in ("upsert", "delete") and rows and self.rng.random() < 0.4:
            for _ in range(self.rng.randint(1, 3)):  # a record again in the batch, another ordering value
                rows.insert(self.rng.randint(0, len(rows)), self._row(self.rng.choice(idents)))
        return rows

    def _row(self, ident: tuple) -> dict:
        row = random_row(self.rng, ident)
        if self.mor:
            row[PRECOMBINE] = self.rng.randint(0, 6)  # few values: ties, rises and falls
            if self.rising_ordering:
                row[PRECOMBINE] += 10 * len(self.instants)
        return row

    def _scripted(self, step: int) -> tuple[str, list[dict]]:
        op, records = self.script[step]
        rows = []
        for rid, ordering in records:
            self.next_id = max(self.next_id, rid)
            row = random_row(self.rng, (rid, "x", "a", 1))
            rows.append({**row, PRECOMBINE: ordering} if self.mor else row)
        return op, rows

    def _arrow(self, rows: list[dict]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=self.schema)

    def run(self) -> list[Disagreement]:
        from coordinator.write.writer import LocalWriter, WriteOptions
        from timeline.table import Table

        config = self._config()
        mor = {"precombine_field": PRECOMBINE, "table_type": MERGE_ON_READ} if self.mor else {}
        table = Table.create(
            self.path,
            "t",
            list(self.layout.key_fields),
            list(self.layout.partition_fields),
            hive_style=self.layout.hive_style,
            hudi_format=self.hudi_format,
            **mor,
        )
        self.table = table
        self.history.append(
            f"Table.create(key={list(self.layout.key_fields)}, partition_by={list(self.layout.partition_fields)}, "
            f"hive_style={self.layout.hive_style}, hudi_format={self.hudi_format}"
            + (f", precombine_field={PRECOMBINE!r}, table_type={MERGE_ON_READ!r}" if self.mor else "")
            + f"); config commits_retained={config.commits_retained}"
            + (f"; WriteOptions(small_file_limit={self._limit_text()})" if self.mor else "")
            + ("; rising ordering values" if self.rising_ordering else "")
        )
        options = None
        if self.mor and self.small_file_limit is not None:
            options = WriteOptions(small_file_limit=self.small_file_limit)
        writer = LocalWriter(table, options=options, coordinator=config)
        first = True
        for step in range(self.steps):
            if self.script is not None:
                op, rows = self._scripted(step)
                if op == "read":  # a script's read of every instant so far (and of the snapshot) at this point
                    self.flush(final=False)
                    continue
                if op in MOR_SERVICE_OPS:
                    self._mor_service(op, table, config, writer)
                    continue
            else:
                if first:
                    op = "upsert"
                elif self.mor:
                    op = self.rng.choice(MOR_SERVICE_OPS if self.rng.random() < MOR_SERVICE_SHARE else MOR_WRITE_OPS)
                else:
                    op = self.rng.choice(SERVICE_OPS if self.rng.random() < 0.25 else WRITE_OPS)
                if self.mor and op in MOR_SERVICE_OPS:
                    self._mor_service(op, table, config, writer)
                    continue
                if op in SERVICE_OPS:
                    self._service(op, table, config)
                    continue
                rows = self._batch(op)
            first = False
            if self.mor:
                self._write_mor(writer, op, rows)
                continue
            result = writer.write(self._arrow(rows), op)
            self.model.apply(op, rows, result.instant)
            self._completed(result.instant, f"{op} {len(rows)} row(s) {self._describe(rows)} -> {result.instant}")
        self.flush(final=True)
        return self.disagreements

    def _write_mor(self, writer, op: str, rows: list[dict]) -> None:
        from timeline.errors import ConflictError

        try:
            result = writer.write(self._arrow(rows), op)
        except ConflictError as err:
            self._refused(op, rows, err)
            return
        self._apply_mor(op, rows, result.instant)

    def _refused(self, op: str, rows: list[dict], err: Exception) -> None:
        """A write Tandem refused with a conflict: only an insert_overwrite of a partition holding a file group
        a pending compaction plans may be (Tandem's rule; Hudi would let the replace through, and the
        compaction complete on a replaced group). Nothing was committed; anything else is raised again."""
        touched = {self.model.partition(r) for r in rows}
        planned = [g for g in self.model.groups.values() if g.pending and g.partition in touched]
        if op != "insert_overwrite" or not planned:
            raise err
        self.history.append(f"{op} {len(rows)} row(s) {self._describe(rows)} -> refused: {err}")
        self.model.coverage["insert_overwrite refused over a pending compaction"] += 1

    def _limit_text(self) -> str:
        return "default" if self.small_file_limit is None else str(self.small_file_limit)

    def _describe(self, rows: list[dict]) -> str:
        def one(r: dict) -> str:
            text = f"{self.model.key(r)}@{self.model.partition(r) or '-'}"
            return f"{text} pc={r[PRECOMBINE]}" if self.mor else text

        return "[" + ", ".join(one(r) for r in rows) + "]"

    def _completed(self, instant: str, what: str) -> None:
        bisect.insort(self.instants, instant)
        if not self.mor:  # merge-on-read: read off the model when the instant is read (`flush`), since what
            # a read as of an instant returns can change later: a compaction that completes turns the logs of
            # the slice it starts from a continuation of the slice before it into logs over its base file
            self.states[instant] = canon_rows(self.model.snapshot(), self.model_columns)
        self.history.append(what)

    # -- merge-on-read: where the writer put each record

    def _apply_mor(self, op: str, rows: list[dict], instant: str) -> None:
        placed = self._placed(instant)
        anomalies = self.model.apply_mor(op, rows, instant, placed)
        routes = []
        for f in placed:
            group = self.model.groups.get(f["file_id"])
            if group is None:
                continue
            keys = sorted(f["written"]) if f["kind"] == "base" else sorted(group.logs[-1][2])
            if f["kind"] == "base":
                kind = "new base" if len(group.bases) == 1 else "rewritten base"
            else:
                kind = f"log {f['path'].rsplit('/', 1)[-1].split('.log.')[1]}"
            records = ", ".join(f"{key}@{partition or '-'}" for key, partition in keys)
            routes.append(f"{f['file_id'][:8]} {kind} {records}")
        where = "; ".join(routes) or "no file"
        self._completed(instant, f"{op} {len(rows)} row(s) {self._describe(rows)} -> {instant} ({where})")
        for anomaly in anomalies:
            self._record(f"write {instant}", "writer", anomaly)

    def _placed(self, instant: str) -> list[dict]:
        """The files a commit wrote, from its write stats (`.hoodie/<instant>.<action>`): each log with the slice it
        extends, each base file with the (key, partition) of every row in it and of the rows committed now."""
        import json

        import pyarrow.parquet as pq

        root = Path(self.path)
        found = [p for p in (root / ".hoodie").glob(f"{instant}.*") if p.suffix in (".deltacommit", ".replacecommit")]
        if len(found) != 1:
            raise AssertionError(f"no completed instant file for {instant}: {found}")
        stats = json.loads(found[0].read_text()).get("partitionToWriteStats") or {}
        placed = []
        for partition_stats in stats.values():
            for stat in partition_stats:
                path, file_id, partition = stat["path"], stat["fileId"], stat["partitionPath"] or ""
                name = path.rsplit("/", 1)[-1]
                if name.startswith(".") and ".log." in name:
                    slice_time = name[len(file_id) + 2 :].split(".log.", 1)[0]
                    placed.append(
                        {"kind": "log", "file_id": file_id, "partition": partition, "path": path, "slice": slice_time}
                    )
                    continue
                columns = ["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_commit_time"]
                keys = pq.read_table(root / path, columns=columns).to_pylist()
                idents = [(r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in keys]
                written = {i for i, r in zip(idents, keys, strict=True) if r["_hoodie_commit_time"] == instant}
                placed.append(
                    {
                        "kind": "base",
                        "file_id": file_id,
                        "partition": partition,
                        "path": path,
                        "keys": idents,
                        "written": written,
                    }
                )
        return placed

    # -- merge-on-read: table services

    def _mor_service(self, op: str, table, config, writer) -> None:
        """A service step of a merge-on-read history:

        - schedule: compaction C planned under the lock (forced), then (random histories) a write, whose logs
          start the slice C plans, and C executed and completed (as a worker would), or only executed (its base
          files written, C inflight), or left planned: a later `compact` or a recovery completes it, or the
          history ends with it pending;
        - compact: the pending compaction executed and completed under the lock as a worker does, or the
          `compact` service (`steps.compact`: pending compactions, then a new one forced, then the MDT's);
        - failed: a write killed at a commit step, maybe read before recovery, then recovered (rolled back, or
          rolled forward once its commit was decided);
        - clean and archive as on copy-on-write tables."""
        from coordinator.protocol import compaction_plan
        from coordinator.protocol.locking import held, table_lock
        from coordinator.services import data_compaction
        from coordinator.services.steps import compact

        if op == "failed":
            self._failed_write(table, config, writer)
            return
        if op in ("clean", "archive"):
            before = len(self.cleans), len(self.archived)
            self._service(op, table, config)
            if (len(self.cleans), len(self.archived)) != before:
                self.model.coverage[f"{op} (something to do)"] += 1
            return
        lock = table_lock(table, config)
        try:
            if op == "schedule":
                with held(lock):
                    time = compaction_plan.schedule(table, force=True)
                if time is None:
                    self.history.append("schedule compaction -> nothing (no slice with logs outside a plan)")
                    return
                planned = self._plan_groups(time)
                for anomaly in self.model.schedule(time, planned):
                    self._record(f"compaction {time}", "writer", anomaly)
                self.history.append(f"schedule compaction -> {time} plans {', '.join(f[:8] for f in planned)}")
                if self.script is None:
                    op = self.rng.choice(["upsert", "upsert", "upsert", "delete", "insert"])
                    self._write_mor(writer, op, self._batch(op))
                    roll = self.rng.random()
                    if roll < 0.4 or self.hudi_1x:  # Hudi 1.x: no compaction stays pending (see __init__)
                        staged = data_compaction.execute(table, time)
                        with held(lock, time):
                            data_compaction.complete(table, staged, config.max_delta_commits)
                        self._compacted(time, "execute + complete, after the write")
                    elif roll < 0.7:
                        data_compaction.execute(table, time)
                        self.history.append(f"execute compaction {time} (base files written, not completed)")
                        self.model.coverage["compaction executed, left pending"] += 1
                return
            pending = data_compaction.pending(table)
            if pending and (self.script is not None or self.rng.random() < 0.5):
                time = pending[0]
                staged = data_compaction.execute(table, time)
                with held(lock, time):
                    data_compaction.complete(table, staged, config.max_delta_commits)
                self._compacted(time, "execute + complete")
                return
            report = compact(table, config, lock, force=True)
            self.history.append(f"compact service: data {report.data_compacted}, metadata {report.compacted}")
            for time in report.data_compacted:
                self._compacted(time, "the compact service")
        finally:
            lock.close()

    def _plan_groups(self, time: str) -> list[str]:
        """The file groups compaction `time` plans, from `.hoodie/<time>.compaction.requested` (a
        HoodieCompactionPlan in an Avro container)."""
        import fastavro

        with open(Path(self.path) / ".hoodie" / f"{time}.compaction.requested", "rb") as f:
            (plan,) = list(fastavro.reader(f))
        return sorted(op["fileId"] for op in plan["operations"] or [])

    def _compacted(self, time: str, how: str) -> None:
        """Compaction `time` completed: the model gives each compacted group its merged slice as a base file at
        `time`; the base files the commit names must hold exactly those rows, named for `time`."""
        import pyarrow.parquet as pq

        root = Path(self.path)
        commit = json.loads((root / ".hoodie" / f"{time}.commit").read_text())
        stats = [stat for partition in (commit.get("partitionToWriteStats") or {}).values() for stat in partition]
        file_ids = sorted(stat["fileId"] for stat in stats)
        planned = self._plan_groups(time)
        anomalies = []
        if not commit.get("compacted") or commit.get("operationType") != "COMPACT":
            anomalies.append(f"{time}.commit is no compaction: compacted={commit.get('compacted')}")
        if file_ids != planned:
            anomalies.append(f"compaction {time} wrote groups {file_ids}, its plan names {planned}")
        contents = self.model.compact(time, [f for f in file_ids if f in self.model.groups])
        for stat in stats:
            name = stat["path"].rsplit("/", 1)[-1]
            if not (name.startswith(f"{stat['fileId']}_") and name.endswith(f"_{time}.parquet")):
                anomalies.append(f"compaction {time} wrote {stat['path']}, not a base file of its instant")
            content = contents.get(stat["fileId"])
            if content is None:
                continue
            stored = pq.read_table(root / stat["path"]).to_pylist()
            expected = [{**r, "_hoodie_record_key": i[0], "_hoodie_partition_path": i[1]} for i, r in content.items()]
            got, want = canon_rows(stored, self.model_columns), canon_rows(expected, self.model_columns)
            if got != want:
                anomalies.append(f"compaction {time} base file {stat['path']}: file vs model: {diff(got, want)}")
        where = ", ".join(f"{f[:8]} {len(c)} row(s)" for f, c in contents.items())
        self._completed(time, f"compaction {time} completed ({how}): {where}")
        if any(clean > time for clean in self.cleans):
            # a clean since C was planned may have taken file versions a read as of C needs, as it may for
            # every instant read before it: C is not read as of either
            self.read_instants.add(time)
            self.history[-1] += " (not read as of: a clean came after its plan)"
        for anomaly in anomalies:
            self._record(f"compaction {time}", "writer", anomaly)

    def _failed_write(self, table, config, writer) -> None:
        """A write killed at a commit step (files written; MDT deltacommit written; commit decided), read half the
        time before recovery (Java must not read its blocks or files), then `recover_table` with EAGER (every
        pending write is an orphan: this process is its writer, alive): rolled back, or rolled forward."""
        from dataclasses import replace

        from coordinator.protocol.locking import table_lock
        from coordinator.services.steps import recover_table
        from timeline.crash_points import SimulatedCrash, simulate
        from timeline.errors import ConflictError

        point = self.rng.choice(["commit.write.file", "commit.mdt", "commit.decided"])
        op = self.rng.choice(MOR_WRITE_OPS)
        rows = self._batch(op)
        began: list[str] = []
        try:
            with simulate(point):
                result = writer.write(self._arrow(rows), op, on_begin=began.append)
        except SimulatedCrash:
            pass
        except ConflictError as err:  # refused before it got to the point
            self._refused(op, rows, err)
            return
        else:  # it never got to the point (a write without files): a plain write
            self._apply_mor(op, rows, result.instant)
            return
        failed = began[0]
        self.history.append(f"{op} {len(rows)} row(s) {self._describe(rows)} -> {failed} killed at {point}")
        self.model.coverage[f"write killed at {point}"] += 1
        if self.rng.random() < 0.5:
            self.history.append(f"read with {failed} pending")
            self.model.coverage["reads with a killed write pending"] += 1
            self.flush(final=False)
        lock = table_lock(table, config)
        try:
            report = recover_table(table, replace(config, failed_writes_policy="EAGER"), lock)
        finally:
            lock.close()
        if failed in report.rolled_forward:
            self.history.append(f"recover: {failed} rolled forward")
            self.model.coverage["killed write rolled forward"] += 1
            self._apply_mor(op, rows, failed)
        elif failed in report.rolled_back:
            rollback = report.rolled_back[failed]
            self.model.coverage["killed write rolled back"] += 1
            self._completed(rollback, f"recover: {failed} rolled back by {rollback}")
        else:
            raise AssertionError(f"recovery left {failed} alone: {report}")
        for time in report.compactions:
            self._compacted(time, "by recovery")

    def _service(self, op: str, table, config) -> None:
        from coordinator.protocol.locking import table_lock

        if op == "compact":
            from coordinator.services.steps import compact

            lock = table_lock(table, config)
            try:
                report = compact(table, config, lock, force=True)
            finally:
                lock.close()
            self.history.append(f"compact -> {report.compacted}")
            return
        self.flush(final=False)  # clean and archival make old instants unreadable: read them before
        if op == "clean":
            from coordinator.services.steps import clean

            policy = self.rng.choice(["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"])
            from dataclasses import replace

            cfg = replace(config, clean_policy=policy)
            time = clean(table, cfg)
            if time is not None:
                self.cleans.append(time)
                self._completed(time, f"clean {policy} retained {cfg.retained} -> {time}")
            else:
                self.history.append(f"clean {policy} retained {cfg.retained} -> nothing")
        else:
            from coordinator.services.steps import archive_table

            lock = table_lock(table, config)
            try:
                report = archive_table(table, config, lock)
            finally:
                lock.close()
            self.archived += report.data
            self.history.append(f"archive -> data {report.data} metadata {report.metadata}")

    # -- reading

    def _md(self) -> list[bool]:
        if self.both_metadata:
            return [True, False]
        self.flip = not self.flip
        return [self.flip]

    def flush(self, final: bool) -> None:
        """Read every instant completed since the last flush, the snapshot, and incremental ranges."""
        new = [i for i in self.instants if i not in self.read_instants]
        if not new and not final:
            return
        first_flush = not self.read_instants
        if self.mor:  # what each instant reads as now (see `_completed`)
            self.states = {i: canon_rows(self.model.snapshot_at(i), self.model_columns) for i in self.instants}
            if any(g.pending for g in self.model.groups.values()):
                self.model.coverage["reads with a compaction pending"] += 1
        checks: list[Check] = []
        current = self.states[self.instants[-1]] if self.instants else Counter()
        for md in [True, False]:
            checks.append(Check(f"snapshot md={md}", Read(self.path, metadata=md), current, {}))
        for instant in new:
            for md in self._md():
                checks.append(
                    Check(
                        f"as.of.instant={instant} md={md}",
                        Read(self.path, "as_of", as_of=instant, metadata=md),
                        self.states[instant],
                        {"as_of": instant},
                    )
                )
        start = max((self.instants.index(new[0]) if new else len(self.instants)) - 1, 0)
        window = self.instants[start:]
        pairs = list(zip(window, window[1:], strict=False))
        if pairs:
            a, b = self.rng.choice(pairs)
            mid = between(a, b)
            if mid is not None:
                for md in self._md():
                    checks.append(
                        Check(
                            f"as.of.instant={mid} (between {a} and {b}) md={md}",
                            Read(self.path, "as_of", as_of=mid, metadata=md),
                            self.states[a],
                            {"as_of": mid},
                        )
                    )
        if new:
            pick = self.rng.choice(new)
            for md in self._md():
                checks.append(
                    Check(
                        f"as.of.instant='{dashed(pick)}' md={md}",
                        Read(self.path, "as_of", as_of=dashed(pick), metadata=md),
                        self.states[pick],
                        {"as_of": dashed(pick)},
                    )
                )
        if first_flush and self.instants:
            before = self.before_first()
            for md in self._md():
                checks.append(
                    Check(
                        f"as.of.instant={before} (before the first instant) md={md}",
                        Read(self.path, "as_of", as_of=before, metadata=md),
                        Counter(),
                        {"as_of": before},
                    )
                )
        for a, b in pairs:
            for md in self._md():
                checks.append(self._incremental(a, b, md))
        if len(window) > 2:
            for md in self._md():
                checks.append(self._incremental(window[0], window[-1], md))
        if first_flush and self.instants:
            for md in self._md():
                checks.append(self._incremental(self.before_first(), self.instants[-1], md))
        if final and self.archived:  # time travel past archival: the files are there unless a clean came after
            for instant in self.archived:
                intact = not any(c > instant for c in self.cleans)
                for md in self._md():
                    checks.append(
                        Check(
                            f"as.of.instant={instant} (archived) md={md}",
                            Read(self.path, "as_of", as_of=instant, metadata=md),
                            self.states[instant] if intact else None,
                            {"as_of": instant},
                            # Hudi refuses time travel before the last clean's earliest retained commit; Tandem
                            # answers: pinned by test_tandem_refuses_time_travel_before_the_cleaned_instants
                            None if intact else CLEANED_UP,
                        )
                    )
            if not self.cleans:
                for md in self._md():
                    checks.append(self._incremental(self.before_first(), self.instants[-1], md))
        self.read_instants.update(self.instants)
        self._verify(checks)

    def before_first(self) -> str:
        """A valid instant time an hour before the first instant (Hudi 1.x refuses `000...`)."""
        first = datetime.strptime(self.instants[0], "%Y%m%d%H%M%S%f") - timedelta(hours=1)
        return first.strftime("%Y%m%d%H%M%S%f")[:17]

    def _incremental(self, begin: str, end: str, md: bool) -> Check:
        if self.mor:
            # A range that reaches archived instants: Hudi 0.15 reads the files of its active commits only (the
            # model's `listed_since`), as on copy-on-write tables, where Tandem reads every file group (pinned by
            # test_java_hudi_reads.py::test_java_hudi_default_incremental_across_archived_instants), so Tandem
            # is not asked. Hudi's full-scan fallback would read the latest base files only, no log
            # (test_java_mor_reads.py::test_java_hudi_full_scan_incremental_reads_no_log).
            listed = max([begin, *self.archived])
            label = f"incremental ({begin}, {end}] md={md}"
            tandem: dict | None = {"since": begin, "until": end}
            if listed != begin:
                label += f" (the range holds archived instants: Hudi reads the commits after {listed})"
                tandem = None
            return Check(
                label,
                Read(self.path, "incremental", begin=begin, end=end, metadata=md),
                canon_rows(self.model.incremental(begin, end, listed), self.model_columns),
                tandem,
            )
        state = self.states[end]
        expected = Counter({row: n for row, n in state.items() if begin < dict(row)["_hoodie_commit_time"] <= end})
        options = {}
        label = f"incremental ({begin}, {end}] md={md}"
        tandem: dict | None = {"since": begin, "until": end}
        if self.archived and begin < max(self.archived):
            # Two known disagreements, each pinned by an xfail test in tests/interop/test_java_hudi_reads.py:
            # Hudi's default leaves out rows of archived commits (so ask for its full-scan fallback, which is the
            # model), and Tandem leaves out file groups only archived commits wrote (so Tandem is not compared here)
            options[FULL_SCAN_FALLBACK] = "true"
            label += " with full-scan fallback (the range holds archived instants)"
            tandem = None
        return Check(
            label,
            Read(self.path, "incremental", begin=begin, end=end, metadata=md, options=options),
            expected,
            tandem,
        )

    def _tandem(self, args: dict) -> pa.Table:
        from timeline.query.reader import read_plan
        from timeline.query.scan import plan_scan
        from timeline.table import Table

        table = Table.open(self.path)
        return read_plan(plan_scan(table, **args))

    def _verify(self, checks: list[Check]) -> None:
        self.reads += len(checks)
        answers = self.java.read_many([c.read for c in checks])
        for check, answer in zip(checks, answers, strict=True):
            tandem_rows = None
            tandem_error = None
            if check.tandem is not None:
                try:
                    tandem_rows = table_rows(self._tandem(check.tandem))
                except Exception as err:  # reported beside Java's answer
                    tandem_error = f"{type(err).__name__}: {err}"
            if isinstance(answer, HudiError) and check.pinned_error and check.pinned_error in str(answer):
                continue
            if isinstance(answer, HudiError):
                self._record(check.label, "model" if check.expected is not None else "tandem", f"Java failed: {answer}")
                continue
            java_rows = table_rows(answer)
            if check.label == "snapshot md=True":
                self.java_snapshots.append(answer)
            if check.expected is not None:
                got = canon_rows(java_rows, self.model_columns)
                if got != check.expected:
                    self._record(check.label, "model", diff(got, check.expected))
            if tandem_error is not None:
                self._record(check.label, "tandem", f"Tandem failed: {tandem_error}")
            elif tandem_rows is not None:
                got = canon_rows(java_rows, self.reader_columns)
                theirs = canon_rows(tandem_rows, self.reader_columns)
                if got != theirs:
                    self._record(check.label, "tandem", diff(got, theirs))

    def _record(self, label: str, against: str, detail: str) -> None:
        self.disagreements.append(Disagreement(self.seed, self.layout.name, label, against, detail, list(self.history)))

    def close(self) -> None:
        if self.own_root:
            shutil.rmtree(self.root, ignore_errors=True)
