"""First-time initialization of a metadata table from a storage listing, and validation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from coordinator.mdt import hudi_index_build, hudi_initialize
from coordinator.mdt.compaction import execute
from coordinator.mdt.index_build import index_all, live_files
from timeline.errors import BadInputError
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMPACTION, Instant, State
from timeline.format.table_config import (
    METADATA_INDEXES,
    TableConfig,
    clear_java_metadata_record,
    read_config,
    record_metadata_table,
)
from timeline.mdt import health
from timeline.mdt import records as rec
from timeline.mdt.hudi_layout import FILES
from timeline.mdt.reader import MetadataReader
from timeline.mdt.storage_listing import list_storage
from timeline.mdt.table import MetadataTable
from timeline.metrics import INITIALIZE, METRICS, VALIDATE_ERRORS

LOG = logging.getLogger(__name__)


def _refuse_pending(data_timeline: ActiveTimeline, doing: str) -> None:
    """The listing must be final: a pending instant's files are neither in nor out yet."""
    pending = [f"{i.time}.{i.action}" for i in data_timeline.pending()]
    if pending:
        raise BadInputError(
            f"cannot {doing} the metadata table while instants are pending: {', '.join(pending)} "
            "(run `tandem recover` first)"
        )


def initialize(
    mdt: MetadataTable,
    table_name: str,
    data_timeline: ActiveTimeline,
    hudi_format: bool = True,
    progress: Callable[[int], None] | None = None,
) -> str:
    """Build the MDT of an existing table from the storage listing, with the index partitions the table asks
    for: in Hudi's format (`hudi_initialize`) or Tandem's previous one (one base file, as an MDT-only
    compaction; the table records that it asked for it).

    The table records the MDT first (Tandem's flag, or Hudi's record of partitions being built), so a crash
    part-way leaves a recorded MDT that is missing or incomplete (readers list storage, writers refuse,
    `repair` rebuilds it), never one readers silently take as complete. Leftovers of an MDT whose properties
    file is gone are removed, not merged. `progress` is told of each data file read for an index.
    """
    _refuse_pending(data_timeline, "initialize")
    if mdt.exists():
        raise BadInputError("the metadata table already exists (`tandem metadata delete` first)")
    if hudi_format:
        indexes = [p for p in (read_config(mdt.data_storage).raw.get(METADATA_INDEXES) or "").split(",") if p]
        return hudi_initialize.initialize(mdt, table_name, data_timeline, indexes, progress)
    with METRICS.timed(INITIALIZE):
        record_metadata_table(mdt.data_storage, True)
        mdt.delete()
        mdt.create(table_name)
        time = mdt.next_instant(data_timeline)
        plan = json.dumps({"initialize": True, "base_instant": None, "log_files": []}).encode()
        mdt.timeline().create_requested(Instant(time, COMPACTION, State.REQUESTED), plan)
        execute(mdt, data_timeline, time)
        config = read_config(mdt.data_storage)
        if config.metadata_indexes:  # the indexes the table records, for the files it already has
            index_all(mdt, data_timeline, config, config.metadata_indexes, progress)
        return time


def finish_interrupted_initialization(mdt: MetadataTable, table_name: str, data_timeline: ActiveTimeline) -> str | None:
    """Build again what a crash left recorded as being built in Hudi's format: the whole metadata table (as
    Java's next writer does too) or some of its index partitions. Under the lock, once nothing is pending (the
    listing must be final); None when nothing was left half built."""
    if data_timeline.pending():
        return None
    config = read_config(mdt.data_storage)
    inflight = config.java_metadata_partitions_inflight
    if FILES in inflight:
        return hudi_initialize.initialize(mdt, table_name, data_timeline, [p for p in inflight if p != FILES])
    if not inflight or not mdt.exists():
        return None
    return hudi_index_build.finish_interrupted(mdt, data_timeline, live_files(mdt, data_timeline))


def needs_migration(mdt: MetadataTable, config: TableConfig) -> bool:
    """An MDT in Tandem's previous format the table did not ask to keep (every one built before Hudi's format
    became the default): the next write, or `repair`, rebuilds it in Hudi's."""
    return (
        config.metadata_enabled and not config.keeps_tandem_format and mdt.exists() and not mdt.is_hudi_format(config)
    )


def migrate(
    mdt: MetadataTable, table_name: str, data_timeline: ActiveTimeline, progress: Callable[[int], None] | None = None
) -> str:
    """Rebuild an MDT of Tandem's previous format in Hudi's, from storage, with the indexes it kept; under the
    lock, nothing pending. The data table records the new one as being built before the old one is deleted,
    so a crash part-way leaves a table readers list storage for, which the next write builds again."""
    config = read_config(mdt.data_storage)
    LOG.warning(
        "%s: rebuilding the metadata table in Hudi's format (from Tandem's previous format; indexes: %s)",
        mdt.data_storage.uri(""),
        ", ".join(config.metadata_indexes) or "none",
    )
    return hudi_initialize.initialize(mdt, table_name, data_timeline, config.metadata_indexes, progress)


def repair(
    mdt: MetadataTable, table_name: str, data_timeline: ActiveTimeline, progress: Callable[[int], None] | None = None
) -> str:
    """Rebuild the MDT (and the indexes the table keeps) from storage, filtered by the data timeline: in
    Hudi's format, unless the table asked for Tandem's previous one.

    Call under the lock. The MDT is derived data: deleting it and initializing
    again loses nothing the data table holds. Refused while data instants are pending.
    `progress` is told of each data file read for an index.
    """
    if not mdt.exists() and not read_config(mdt.data_storage).metadata_enabled:
        raise BadInputError(
            f"{mdt.data_storage.uri('')} has no metadata table to repair (`tandem metadata create` builds one)"
        )
    _refuse_pending(data_timeline, "repair")
    config = read_config(mdt.data_storage)
    if mdt.is_hudi_format(config):  # rebuilt in Hudi's format, with the partitions it had: Java continues it
        wanted = set(config.java_metadata_partitions) | set(config.java_metadata_partitions_inflight)
        # records the partitions as being built before it deletes anything
        return hudi_initialize.initialize(mdt, table_name, data_timeline, sorted(wanted), progress)
    if not config.keeps_tandem_format:
        return migrate(mdt, table_name, data_timeline, progress)
    mdt.delete()
    # A stale record of Java's goes too, before Tandem builds its own MDT there: the record decides the format
    # for Java and Tandem alike
    clear_java_metadata_record(mdt.data_storage)
    return initialize(mdt, table_name, data_timeline, hudi_format=False, progress=progress)


@dataclass
class ValidationReport:
    missing_in_metadata: list[tuple[str, str]] = field(default_factory=list)
    extra_in_metadata: list[tuple[str, str]] = field(default_factory=list)
    size_mismatch: list[tuple[str, str, int, int]] = field(default_factory=list)
    partitions_missing: list[str] = field(default_factory=list)
    partitions_extra: list[str] = field(default_factory=list)
    corrupt_blocks: list[str] = field(default_factory=list)
    unhealthy: list[str] = field(default_factory=list)
    damaged_instants: list[str] = field(default_factory=list)  # completed, with unreadable or impossible metadata
    storage_listing: pa.Table | None = None

    @property
    def errors(self) -> int:
        return (
            len(self.missing_in_metadata)
            + len(self.extra_in_metadata)
            + len(self.size_mismatch)
            + len(self.partitions_missing)
            + len(self.partitions_extra)
            + len(self.unhealthy)
            + len(self.damaged_instants)
        )

    def to_json(self) -> dict:
        return {
            "in_sync": self.errors == 0,
            "errors": self.errors,
            "missing_in_metadata": [f"{p}/{f}" if p else f for p, f in self.missing_in_metadata],
            "extra_in_metadata": [f"{p}/{f}" if p else f for p, f in self.extra_in_metadata],
            "size_mismatch": [
                {"file": f"{p}/{f}" if p else f, "storage": s, "metadata": m} for p, f, s, m in self.size_mismatch
            ],
            "partitions_missing": self.partitions_missing,
            "partitions_extra": self.partitions_extra,
            "corrupt_blocks": self.corrupt_blocks,
            "unhealthy": self.unhealthy,
            "damaged_instants": self.damaged_instants,
        }


def validate(mdt: MetadataTable, data_timeline: ActiveTimeline) -> ValidationReport:
    """Compare the MDT with a storage listing; every difference is reported (the seed's validate).

    What would make readers fall back to storage (`health.problems`) counts as a difference too.
    """
    reader = MetadataReader(mdt, data_timeline)
    ours = {(r["partition"], r["file"]): r["size"] for r in reader.listing().to_pylist()}
    listing = list_storage(mdt.data_storage, data_timeline)
    theirs = {(r["partition"], r["file"]): r["size"] for r in listing.to_pylist()}
    report = ValidationReport(storage_listing=listing)
    report.missing_in_metadata = sorted(set(theirs) - set(ours))
    report.extra_in_metadata = sorted(set(ours) - set(theirs))
    report.size_mismatch = sorted(
        (p, f, theirs[(p, f)], ours[(p, f)]) for (p, f) in set(ours) & set(theirs) if ours[(p, f)] != theirs[(p, f)]
    )
    stored_partitions = {p for p, _ in theirs}
    listed_partitions = set(reader.all_partitions())
    report.partitions_missing = sorted(stored_partitions - listed_partitions)
    report.partitions_extra = sorted(p for p in listed_partitions - stored_partitions if p in {pp for pp, _ in ours})
    report.corrupt_blocks = reader.merged([rec.ALL_PARTITIONS]).corrupt
    report.unhealthy = health.problems(mdt, data_timeline, recorded=True)
    report.damaged_instants = data_timeline.damaged_instants()
    METRICS.incr(VALIDATE_ERRORS, report.errors)
    return report
