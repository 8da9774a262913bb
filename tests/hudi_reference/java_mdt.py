"""One table with a metadata table that Java Hudi 0.15 wrote itself, for the tests that judge Tandem's readers
of Hudi's formats (HFile, log blocks, metadata records, bloom filters, slices) by Java's own files.

Written once per run (`java_mdt_table` in tests/conftest.py): partitions `files`, `column_stats` and
`bloom_filters`; inserts, upserts and a delete over three partitions; a compaction every three delta commits
and a clean that leaves tombstones; its last commit rolled back (rollback command blocks in the MDT); then a
commit after it. `history` names every data instant in order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from timeline.format.active_timeline import ActiveTimeline
from timeline.io.storage import Storage
from timeline.mdt.snapshot import MetadataSnapshot

OPTIONS = {
    "hoodie.table.name": "java_mdt",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
    "hoodie.metadata.compact.max.delta.commits": "3",
    "hoodie.clean.commits.retained": "1",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.parquet.small.file.limit": "0",
    "hoodie.embed.timeline.server": "false",  # the same files, a second faster per write
}


@dataclass(frozen=True)
class JavaMdtTable:
    path: Path
    history: list[str]  # completed data instants, oldest first

    @property
    def mdt(self) -> Path:
        return self.path / ".hoodie" / "metadata"


def rows(start: int, count: int, version: int) -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {
            "id": [f"key-{i:05d}" for i in ids],
            "part": [f"p{i % 3}" for i in ids],
            "ts": [version] * count,
            "amount": [float(i) * 1.5 + version for i in ids],
            "name": [f"name-{i}-{version}" for i in ids],
            "day": pa.array([i % 28 for i in ids], pa.int32()),
        }
    )


def completed_commits(path: Path) -> list[str]:
    names = os.listdir(path / ".hoodie")
    return sorted(n.split(".")[0] for n in names if n.endswith(".commit") and n.count(".") == 1)


def write(reference, path: Path) -> JavaMdtTable:
    reference.write(str(path), rows(0, 60, 1), "insert", OPTIONS, mode="overwrite")
    for version in range(2, 6):
        reference.write(str(path), rows(version * 7, 12, version), "upsert", OPTIONS)
    reference.write(str(path), rows(3, 4, 9), "delete", OPTIONS)
    reference.write(str(path), rows(100, 9, 10), "insert", OPTIONS)
    last = completed_commits(path)[-1]
    reference.sql(f"CREATE TABLE IF NOT EXISTS java_mdt USING hudi LOCATION '{path}'")
    reference.sql(f"CALL rollback_to_instant(table => 'java_mdt', instant_time => '{last}')")
    reference.write(str(path), rows(40, 6, 11), "upsert", OPTIONS)
    return JavaMdtTable(path, completed_commits(path))


def snapshot(base: str) -> MetadataSnapshot:
    """Tandem's reader of the Hudi-format metadata table of the table at `base`, as it stands."""
    data = Storage(base)
    mdt = data.sub(".hoodie/metadata")
    return MetadataSnapshot.open(mdt, ActiveTimeline.load(mdt, ".hoodie"), ActiveTimeline.load(data, ".hoodie"))


def storage_files(base: str, partitions: list[str]) -> dict[str, dict[str, int]]:
    """partition -> {data file name: size} as the folders hold them."""
    return {
        p: {
            n: os.path.getsize(os.path.join(base, p, n))
            for n in os.listdir(os.path.join(base, p))
            if n.endswith(".parquet")
        }
        for p in partitions
    }
