"""Java Hudi 0.15's data skipping prunes with a `column_stats` partition Tandem built in Hudi's format.

On a table Java wrote without a metadata table, Tandem initializes `files` and `column_stats`
(timeline/mdt/hudi_commit_records.py from each file's Parquet footer; coordinator/mdt/file_group_writes.py)
and records both in `hoodie.table.metadata.partitions`. With `hoodie.enable.data.skipping=true`, Java's
filtered reads return what they return without it. That Java did consult Tandem's records is shown on a copy
where one file's statistics are false (its range moved off the filter): Java then skips that file, and its
matching rows go missing, which only pruning with those records can do. Hudi 1.2 reads the same rows with
skipping on and off on both copies: it does not skip with this partition on a version-6 table.
"""

from __future__ import annotations

import dataclasses
import shutil

import pyarrow.parquet as pq
import pytest

from tests.interop.test_java_uses_tandem_mdt import WITHOUT_MDT, initialize, rows
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.table_config import record_metadata_partitions
from timeline.io.storage import Storage
from timeline.mdt import hudi_records
from timeline.mdt.file_group_writes import complete_delta_commit, initialize_partition
from timeline.mdt.hudi_commit_records import column_stats
from timeline.mdt.hudi_layout import COLUMN_STATS, FILES, partition_init_instant
from timeline.mdt.hudi_values import wrap
from timeline.mdt.storage_listing import list_storage

COUNT = """
frame = spark.read.format("hudi").options(**args["options"]).load(args["path"])
result = frame.filter(args["where"]).count()
"""
WHERES = ["v >= 300", "v < 50", "v BETWEEN 120 AND 140", "id = 'k0007'", "v > 100000"]


def filtered_count(java_hudi, base: str, where: str, skipping: bool) -> int:
    options = {
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.enable.data.skipping": str(skipping).lower(),
    }
    return int(java_hudi.jvm(COUNT, path=base, where=where, options=options))


def _stats_partition(base: str, lie_about: str | None = None) -> None:
    """Tandem's `column_stats` partition from the footers of every file the table lists; `lie_about`: that
    file's `v` range is moved below every value (so no filter on large `v` can match it)."""
    data = Storage(base)
    timeline = ActiveTimeline.load(data, ".hoodie")
    records = []
    for partition, name in zip(*(list_storage(data, timeline).column(c).to_pylist() for c in ("partition", "file")),
                               strict=True):  # fmt: skip
        footer = pq.read_metadata(f"{base}/{partition}/{name}")
        schema = footer.schema.to_arrow_schema()
        for stats in column_stats(name, footer, schema):
            if name == lie_about and stats.column_name == "v":
                below = wrap(-9, schema.field("v").type), wrap(-1, schema.field("v").type)
                stats = dataclasses.replace(stats, min_value=below[0], max_value=below[1])
            records.append(hudi_records.column_stats_record(partition, stats))
    mdt = data.sub(".hoodie/metadata")
    instant = partition_init_instant(timeline.last_time(), 1)
    written = initialize_partition(mdt, COLUMN_STATS, instant, records)
    complete_delta_commit(ActiveTimeline.load(mdt, ".hoodie"), instant, written, "BULK_INSERT")
    record_metadata_partitions(data, [FILES, COLUMN_STATS])


@pytest.fixture(scope="module")
def java_table(java_hudi, tmp_path_factory) -> str:
    base = str(tmp_path_factory.mktemp("skipping") / "table")
    for version, ids in enumerate((range(0, 12), range(12, 24), range(24, 36), range(30, 40)), start=1):
        java_hudi.write(base, rows(ids, version), "upsert" if version > 1 else "insert", WITHOUT_MDT,
                        mode="append" if version > 1 else "overwrite")  # fmt: skip
    initialize(base)
    return base


def test_java_filtered_reads_with_tandems_stats_equal_reads_without_skipping(
    java_hudi, java_hudi_1x, java_table, tmp_path
):
    base = str(tmp_path / "truthful")
    shutil.copytree(java_table, base)
    _stats_partition(base)
    for reference in (java_hudi, java_hudi_1x):
        for where in WHERES:
            skipped = filtered_count(reference, base, where, skipping=True)
            full = filtered_count(reference, base, where, skipping=False)
            assert skipped == full, (where, reference)
    assert filtered_count(java_hudi, base, "v >= 300", skipping=False) > 0


def test_java_prunes_by_tandems_stats(java_hudi, java_hudi_1x, java_table, tmp_path):
    base = str(tmp_path / "lying")
    shutil.copytree(java_table, base)
    data = Storage(base)
    listing = list_storage(data, ActiveTimeline.load(data, ".hoodie"))
    names = [(p, n) for p, n in zip(*(listing.column(c).to_pylist() for c in ("partition", "file")), strict=True)]
    values = {pn: pq.read_table(f"{base}/{pn[0]}/{pn[1]}", columns=["v"]).column("v").to_pylist() for pn in names}
    partition, victim = max(names, key=lambda pn: max(values[pn]))
    assert max(values[(partition, victim)]) >= 300
    _stats_partition(base, lie_about=victim)
    full = filtered_count(java_hudi, base, "v >= 300", skipping=False)
    assert filtered_count(java_hudi, base, "v >= 300", skipping=True) < full
    # Hudi 1.2 reading this version-6 table does not skip with its column_stats partition (observed): it reads
    # every file, so the false range costs it nothing
    on, off = (filtered_count(java_hudi_1x, base, "v >= 300", skipping) for skipping in (True, False))
    assert on == off
