"""Is the metadata table fit to serve a read, or to take a write?

The MDT's listing is only as good as its files. A completed deltacommit whose
log is missing or corrupt, a completed compaction whose base file is gone, or a
data instant that completed without a deltacommit each make the listing
silently stale, and a writer that plans from a stale listing makes the loss
permanent. So a reader checks the slices it is about to merge and lists storage
instead, and a writer refuses until `tandem metadata repair` rebuilds the MDT.
Logs of instants that never completed (crashed or rolled-back writers) may be
absent or torn, and versions may have gaps: readers ignore those instants anyway.
"""

from __future__ import annotations

import json
import re
import zlib
from concurrent.futures import ThreadPoolExecutor

from timeline.errors import BadInputError, CorruptInstantError
from timeline.errors import MetadataFallbackWarning as MetadataFallbackWarning  # re-exported for readers
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMPACTION, DELTA_COMMIT, RESTORE, Instant, State
from timeline.format.table_config import (
    JAVA_METADATA_PARTITIONS,
    JAVA_METADATA_PARTITIONS_INFLIGHT,
    TableConfig,
    read_config,
)
from timeline.mdt import hudi_health, hudi_layout, layout
from timeline.mdt.log import DATA, DecodedLog, LogBlock
from timeline.mdt.slice_records import valid_instants
from timeline.mdt.table import MetadataTable

# Commit metadata of deltacommits is read in parallel on S3 (one round trip, not dozens); a local read
# costs less than starting a thread.
READ_THREADS = 16
_SLICE_OF_LOG = re.compile(rf"\.{layout.FILE_ID}_(\d{{17}})\.log\.\d+_")


class MetadataUnhealthyError(BadInputError):
    """Files of completed MDT instants are missing or damaged: a write would make the loss permanent."""


def repair_hint(uri: str) -> str:
    return f"run `tandem metadata repair {uri}`"


def fallback_message(reason: str, uri: str) -> str:
    return f"metadata table unhealthy ({reason}); listing storage instead — {repair_hint(uri)}"


def summary(found: list[str]) -> str:
    """The first problem, and how many more there are."""
    return found[0] + (f"; and {len(found) - 1} more problem(s)" if len(found) > 1 else "")


def problems(
    mdt: MetadataTable,
    data_timeline: ActiveTimeline,
    recorded: bool,
    writing: bool = False,
    config: TableConfig | None = None,
) -> list[str]:
    """What makes the MDT unfit; empty when it is healthy (or the table has none).

    `recorded`: the table's properties say it has an MDT. `writing`: a writer asks,
    and an initialization a crash left pending is then no problem: the writer's
    housekeeping finishes it before its deltacommit. `config`: the properties as the
    caller just read them (else read here: a Java writer may have changed them since
    the table was opened).
    """
    mdt_timeline = mdt.timeline_if_exists()
    if mdt_timeline is None:
        return [f"{layout.MDT_PROPERTIES} is missing, but the table records a metadata table"] if recorded else []
    config = config or read_config(mdt.data_storage)
    if mdt.is_hudi_format(config):
        return _hudi_format_problems(mdt, mdt_timeline, data_timeline, writing, config)
    slices = mdt.slices()
    base = layout.latest_completed_compaction(mdt_timeline)
    read = {base} | {i.time for i in layout.pending_compactions(mdt_timeline) if i.time > base}
    found = _unmirrored(mdt_timeline, data_timeline)
    found += _base_problems(mdt_timeline, slices, base)
    found += _log_problems(mdt, mdt_timeline, data_timeline, slices, read)
    if not writing:
        found += _pending_initialization(mdt_timeline, base)
    return found


def _hudi_format_problems(
    mdt: MetadataTable,
    mdt_timeline: ActiveTimeline,
    data_timeline: ActiveTimeline,
    writing: bool,
    config: TableConfig,
) -> list[str]:
    """An MDT in Hudi's own format: readers need its `files` partition whole; a writer needs every partition
    it keeps in sync whole, and none it cannot keep (it would fall behind what Java's readers trust)."""
    partitions = config.java_metadata_partitions
    if hudi_layout.FILES not in partitions:
        return [f"{JAVA_METADATA_PARTITIONS} does not list the files partition: its initialization did not complete"]
    found = _unmirrored(mdt_timeline, data_timeline)
    is_valid = valid_instants(data_timeline, mdt_timeline)
    if not writing:
        return found + hudi_health.problems(mdt.storage, mdt_timeline, is_valid)
    foreign = [p for p in partitions if p not in hudi_layout.KEPT_BY_TANDEM]
    if foreign:
        found.append(
            f"metadata partition(s) {', '.join(foreign)} ({JAVA_METADATA_PARTITIONS}) are not kept by Tandem; "
            "a Tandem write would leave them behind"
        )
    if config.raw.get(JAVA_METADATA_PARTITIONS_INFLIGHT):
        found.append(f"metadata partition(s) {config.raw[JAVA_METADATA_PARTITIONS_INFLIGHT]} are being initialized")
    for partition in (p for p in hudi_layout.KEPT_BY_TANDEM if p in partitions):
        found += hudi_health.problems(mdt.storage, mdt_timeline, is_valid, partition)
    return found


def _shown(path: str) -> str:
    """An MDT path as a path below the table base."""
    return f"{layout.MDT_DIR}/{path}"


def _unmirrored(mdt_timeline: ActiveTimeline, data_timeline: ActiveTimeline) -> list[str]:
    """Data instants that completed after the MDT began without a deltacommit of their own.

    Every data action is mirrored before it completes, and MDT archival never
    takes an instant still on the data timeline, so after the MDT's earliest
    instant each completed data instant has one. One that does not was written
    around the MDT (while it was missing, or by another engine) and is invisible in it.
    """
    earliest = mdt_timeline.earliest_time()
    mirrored = {i.time for i in mdt_timeline.completed() if i.action == DELTA_COMMIT}
    # Java mirrors a data restore R by restoring the MDT itself (its own restore instant, after R) and a resync
    restored = [i.time for i in mdt_timeline.completed() if i.action == RESTORE]
    lost = [
        i.time
        for i in data_timeline.completed()
        if i.time > earliest
        and i.time not in mirrored
        and not (i.action == RESTORE and any(t > i.time for t in restored))
    ]
    if not lost:
        return []
    shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
    return [f"data instant(s) {shown} completed without a metadata deltacommit"]


def _base_problems(mdt_timeline: ActiveTimeline, slices: dict[str, layout.Slice], base: str) -> list[str]:
    """The base file of the latest completed compaction: present, and as large as the compaction wrote it."""
    if base == layout.INITIAL_SLICE:
        return []
    path = layout.base_path(base)
    current = slices.get(base)
    if current is None or current.base_file is None:
        return [f"base file {_shown(path)} of completed compaction {base} is missing"]
    try:
        stats = mdt_timeline.commit_metadata(Instant(base, COMPACTION, State.COMPLETED)).write_stats()
    except CorruptInstantError as err:
        return [f"metadata compaction {base} is unreadable: {err}"]
    written = {s.file_size_in_bytes for s in stats if s.path == path}
    if written and current.base_size not in written:
        return [f"base file {_shown(path)} is {current.base_size} bytes, compaction {base} wrote {written.pop()}"]
    return _checksum_problems(mdt_timeline, base, {s.path: s.file_size_in_bytes for s in stats})


_VERIFIED: set[tuple[str, str, int, int]] = set()  # (MDT uri, path, size, CRC32) whose bytes matched once


def _checksum_problems(mdt_timeline: ActiveTimeline, base: str, sizes: dict[str, int]) -> list[str]:
    """Each base file of compaction `base` whose bytes do not match the CRC32 it recorded.

    Read whole once per process (base files are immutable: each compaction writes new
    names); a compaction that predates the checksums recorded none.
    """
    meta = mdt_timeline.commit_metadata(Instant(base, COMPACTION, State.COMPLETED))
    try:
        recorded = json.loads(meta.extra_metadata.get(layout.BASE_CHECKSUMS_KEY) or "{}")
    except ValueError:
        return [f"metadata compaction {base} records unreadable base checksums"]
    storage = mdt_timeline.storage
    found = []
    for path, crc in sorted(recorded.items()):
        key = (storage.base_uri, path, sizes.get(path, -1), crc)
        if key in _VERIFIED:
            continue
        try:
            data = storage.read_bytes(path)
        except FileNotFoundError:
            found.append(f"base file {_shown(path)} of completed compaction {base} is missing")
            continue
        if zlib.crc32(data) != crc or len(data) != key[2]:
            found.append(f"base file {_shown(path)} is damaged (its bytes do not match compaction {base}'s checksum)")
            continue
        _VERIFIED.add(key)
    return found


def _log_problems(
    mdt: MetadataTable,
    mdt_timeline: ActiveTimeline,
    data_timeline: ActiveTimeline,
    slices: dict[str, layout.Slice],
    read: set[str],
) -> list[str]:
    """Corrupt logs of completed instants, and completed deltacommits whose log was lost.

    A deltacommit with an intact block in the slices being read needs no further
    read; for the others (mostly those a compaction absorbed) the commit metadata
    names the log, which must be in a slice being read, or in the plan of the
    compaction that merged its slice (else the loss was compacted in).
    """
    decoded = {p: mdt.read_log(p) for b in sorted(read) if b in slices for p in slices[b].log_paths()}
    completed_mdt = mdt_timeline.completed_times()

    def completed(block: LogBlock) -> bool:
        if block.block_type == DATA:
            return data_timeline.is_completed_or_archived(block.instant)
        return block.instant in completed_mdt

    found = [
        f"corrupt block in {_shown(path)}: {_detail(mdt, path, log)}"
        for path, log in decoded.items()
        if log.corrupt and any(completed(b) for b in log.blocks)
    ]
    held = {b.instant for log in decoded.values() for b in log.blocks if b.block_type == DATA}
    unheld = [i for i in mdt_timeline.completed() if i.action == DELTA_COMMIT and i.time not in held]
    merged: dict[str, tuple[str, set[str], set[str]]] | None = None
    if unheld:  # absorbed ones first: asking the data timeline about an old one lists its archive
        merged = _merged_logs(mdt_timeline)
        absorbed = {t for _, _, instants in merged.values() for t in instants}
        unheld = [i for i in unheld if i.time not in absorbed and data_timeline.is_completed_or_archived(i.time)]
    for instant, named in zip(unheld, _named_logs(mdt_timeline, unheld), strict=True):
        if isinstance(named, CorruptInstantError):
            found.append(f"metadata deltacommit {instant.time} is unreadable: {named}")
            continue
        for path in named:
            match = _SLICE_OF_LOG.search(path)
            if match is None:
                continue
            of = f"log {_shown(path)} of completed deltacommit {instant.time}"
            if match.group(1) in read:
                log = decoded.get(path)
                found.append(f"{of} is missing" if log is None else f"{of} is corrupt: {_detail(mdt, path, log)}")
                continue
            merged = _merged_logs(mdt_timeline) if merged is None else merged
            compaction, planned, _ = merged.get(match.group(1), ("", {path}, set()))
            if path not in planned:
                found.append(f"{of} was missing when compaction {compaction} merged its slice")
    return found


def _merged_logs(mdt_timeline: ActiveTimeline) -> dict[str, tuple[str, set[str], set[str]]]:
    """Slice -> (the completed compaction that merged it, the logs its plan names: those present then,
    the instants whose blocks those logs held; none for a plan that predates that field)."""
    merged = {}
    for instant in layout.compactions(mdt_timeline):
        if not instant.is_completed:
            continue
        try:
            plan = json.loads(mdt_timeline.read(instant.with_state(State.REQUESTED)))
        except (ValueError, FileNotFoundError):
            continue  # no evidence either way; the reader does not need the plan
        if isinstance(plan, dict) and plan.get("base_instant"):
            logs, instants = set(plan.get("log_files") or []), set(plan.get("block_instants") or [])
            merged[plan["base_instant"]] = (instant.time, logs, instants)
    return merged


def _detail(mdt: MetadataTable, path: str, log: DecodedLog) -> str:
    if not log.corrupt:
        return "no intact block"
    return log.corrupt[0].removeprefix(f"{mdt.storage.uri(path)}: ")


def _named_logs(mdt_timeline: ActiveTimeline, instants: list[Instant]) -> list[list[str] | CorruptInstantError]:
    """The log paths each deltacommit's commit metadata names (none if archived meanwhile)."""

    def named(instant: Instant) -> list[str] | CorruptInstantError:
        try:
            return [s.path for s in mdt_timeline.commit_metadata(instant).write_stats()]
        except FileNotFoundError:
            return []
        except CorruptInstantError as err:
            return err

    if not mdt_timeline.storage.is_s3 or len(instants) < 2:
        return [named(i) for i in instants]
    with ThreadPoolExecutor(min(READ_THREADS, len(instants))) as pool:
        return list(pool.map(named, instants))


def _pending_initialization(mdt_timeline: ActiveTimeline, base: str) -> list[str]:
    """An initialization a crash left pending: until it completes, the MDT lists nothing."""
    if base != layout.INITIAL_SLICE:
        return []
    for instant in layout.pending_compactions(mdt_timeline):
        try:
            plan = json.loads(mdt_timeline.read(instant.with_state(State.REQUESTED)))
        except (ValueError, FileNotFoundError) as err:
            return [f"metadata compaction plan {instant.time} is unreadable: {err}"]
        if isinstance(plan, dict) and plan.get("initialize"):
            return [f"its initialization {instant.time} did not complete"]
    return []
