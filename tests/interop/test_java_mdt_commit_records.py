"""Tandem builds the metadata-table records of a data commit as Java Hudi 0.15 built them: for every commit of
the Java-written table (tests/hudi_reference/java_mdt.py) whose delta commit logs are still in its metadata
table, the `files`, `column_stats` and `bloom_filters` records Tandem derives from the commit's metadata and
its files' Parquet footers equal the records Java wrote for that commit, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from timeline.format.active_timeline import ActiveTimeline
from timeline.format.instant import COMMIT, Instant, State
from timeline.hudi_log import BlockType, hfile_records, read_blocks
from timeline.io.storage import Storage
from timeline.mdt import hudi_keys, hudi_records
from timeline.mdt.hudi_commit_records import bloom_filter_records, column_stats_records, files_records

PARTITIONS = ("files", "column_stats", "bloom_filters")


def _java_records(mdt: Path) -> dict[str, dict[str, list[dict]]]:
    """instant -> MDT partition -> the records of that instant's data blocks, from every log still there."""
    out: dict[str, dict[str, list[dict]]] = {}
    for partition in PARTITIONS:
        for log in sorted((mdt / partition).glob(".*.log.*")):
            if log.name.endswith(".crc"):
                continue
            for block in read_blocks(log.read_bytes()):
                if block.corrupt or block.kind != BlockType.HFILE_DATA_BLOCK:
                    continue
                records = [hudi_records.decode_cell(k, v) for k, v in hfile_records(block)]
                out.setdefault(block.header["INSTANT_TIME"], {}).setdefault(partition, []).extend(records)
    return out


def _encoded(records: list[dict]) -> list[bytes]:
    return sorted(hudi_records.encode(r) for r in records)


def _files(records: list[dict]) -> dict[str, dict[str, tuple[int, bool]]]:
    return {r["key"]: {n: (i.size, i.is_deleted) for n, i in hudi_records.files_of(r).items()} for r in records}


def test_tandem_builds_the_records_java_wrote_for_each_commit(java_mdt_table):
    base = java_mdt_table.path
    data = Storage(str(base))
    timeline = ActiveTimeline.load(data, ".hoodie")
    java = _java_records(base / ".hoodie" / "metadata")
    compared = {partition: 0 for partition in PARTITIONS}
    for time in java_mdt_table.history:
        if time not in java:
            continue  # its logs were compacted and cleaned away
        meta = timeline.commit_metadata(Instant(time, COMMIT, State.COMPLETED))
        written = java[time]
        assert _files(files_records(meta)) == _files(written["files"]), time
        compared["files"] += 1
        present = [
            (stat.partition_path, stat.path.rsplit("/", 1)[-1], pq.read_metadata(base / stat.path))
            for stat in meta.write_stats()
            if stat.path and (base / stat.path).exists()
        ]
        names = {name for _, name, _ in present}
        if "column_stats" in written:  # else a rebuild of the partition since holds them in its base file
            java_stats = [r for r in written["column_stats"] if r["ColumnStatsMetadata"]["fileName"] in names]
            ours = [r for partition, name, footer in present for r in column_stats_records(partition, name, footer)]
            assert _encoded(ours) == _encoded(java_stats), time
            compared["column_stats"] += len(ours)
        if "bloom_filters" in written:
            keys = {hudi_keys.bloom_filter_key(partition, name) for partition, name, _ in present}
            java_blooms = [r for r in written["bloom_filters"] if r["key"] in keys]
            assert _encoded(bloom_filter_records(time, present)) == _encoded(java_blooms), time
            compared["bloom_filters"] += len(java_blooms)
    assert compared["files"] >= 3 and compared["column_stats"] >= 30 and compared["bloom_filters"] >= 3, compared
