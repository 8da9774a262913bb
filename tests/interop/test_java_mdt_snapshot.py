"""Tandem's reader of Hudi-format metadata tables against Java Hudi 0.15's own (`HoodieBackedTableMetadata`) on a
metadata table Java wrote (tests/hudi_reference/java_mdt.py: compactions, a clean, a rollback with its command
blocks, partitions rebuilt): the same partitions, files and sizes, column statistics and bloom filters, and the
same listing as storage's. Then damage: a flipped byte in a log block or a base file is reported or refused,
never answered from.
"""

from __future__ import annotations

import shutil

import pytest

from tests.hudi_reference.java_mdt import snapshot, storage_files
from timeline.errors import CorruptInstantError
from timeline.index.hudi_bloom import from_mdt
from timeline.mdt import hudi_values
from timeline.mdt.slice_records import forget_files

JAVA_VIEW = """
J = jvm
base = args["base"]
storage = J.org.apache.hudi.storage.HoodieStorageUtils.getStorage(
    base, J.org.apache.hudi.storage.hadoop.HadoopStorageConfiguration(J.org.apache.hadoop.conf.Configuration()))
# Avro finds Hudi's generated classes through the thread's class loader: make it the bundle's (py4j threads
# start with the application's)
J.java.lang.Thread.currentThread().setContextClassLoader(storage.getClass().getClassLoader())
engine = J.org.apache.hudi.common.engine.HoodieLocalEngineContext(storage.getConf())
config = J.org.apache.hudi.common.config.HoodieMetadataConfig.newBuilder().enable(True).build()
meta = J.org.apache.hudi.metadata.HoodieTableMetadata.create(engine, storage, config, base)
partitions = list(meta.getAllPartitionPaths())
listed = meta.getAllFilesInPartitions(J.java.util.ArrayList([base + "/" + p if p else base for p in partitions]))
files = {}
for path, infos in listed.items():
    part = str(path)[len(base):].lstrip("/")
    files[part] = {str(i.getPath().getName()): int(i.getLength()) for i in infos}
pairs = J.java.util.ArrayList([J.org.apache.hudi.common.util.collection.Pair.of(p, n)
                               for p, names in files.items() for n in names])
stats = {}
for column in args["columns"]:
    for pair, s in meta.getColumnStats(pairs, column).items():
        stats[f"{pair.getLeft()}|{pair.getRight()}|{column}"] = [
            str(s.getMinValue()), str(s.getMaxValue()), s.getValueCount(), s.getNullCount(), s.getTotalSize()]
blooms = {f"{pair.getLeft()}|{pair.getRight()}": str(b.serializeToString())
          for pair, b in meta.getBloomFilters(pairs).items()}
meta.close()
result = {"partitions": partitions, "files": files, "stats": stats, "blooms": blooms}
"""
COLUMNS = ["id", "amount", "name", "day", "_hoodie_record_key"]


@pytest.fixture(scope="module")
def java_view(java_hudi, java_mdt_table) -> dict:
    return java_hudi.jvm(JAVA_VIEW, base=str(java_mdt_table.path), columns=COLUMNS)


def test_partitions_and_files_as_java_lists_them(java_mdt_table, java_view):
    base = str(java_mdt_table.path)
    view = snapshot(base)
    partitions = view.partitions()
    assert partitions == sorted(java_view["partitions"])
    files = view.files(partitions)
    assert files == java_view["files"]
    assert files == storage_files(base, partitions)  # the clean left exactly the latest versions
    assert view.corrupt == []


def test_column_stats_and_bloom_filters_as_java_reads_them(java_mdt_table, java_view):
    view = snapshot(str(java_mdt_table.path))
    listed = [(p, n) for p, names in java_view["files"].items() for n in names]
    names = {n: p for p, n in listed}
    ours = {}
    for stats in view.column_stats(COLUMNS):
        if stats.file_name in names and not stats.is_deleted:
            ours[f"{names[stats.file_name]}|{stats.file_name}|{stats.column_name}"] = stats
    assert set(ours) == set(java_view["stats"])
    for key, (low, high, values, nulls, size) in java_view["stats"].items():
        stats = ours[key]
        assert (stats.value_count, stats.null_count, stats.total_size) == (values, nulls, size), key
        assert (
            str(hudi_values.to_python(stats.min_value)) in low and str(hudi_values.to_python(stats.max_value)) in high
        )
    blooms = view.bloom_filters(listed)
    assert {f"{p}|{n}": b.bloom_filter.decode() for (p, n), b in blooms.items()} == java_view["blooms"]
    for (partition, name), record in blooms.items():
        assert (
            from_mdt(record.type, record.bloom_filter).serialize_to_string()
            == java_view["blooms"][f"{partition}|{name}"]
        )


def test_damaged_metadata_files_are_never_answered_from(java_mdt_table, tmp_path):
    """A byte flipped anywhere in the newest log or base file of `files` (a sweep): the snapshot refuses, or
    reports the damage, or still answers exactly what the healthy table says (a flip in bytes no answer reads,
    such as the log header's schema). Hudi's log header has no checksum of its own, so a flip in a block's
    instant time makes the block another instant's: skipped here, and caught by the health check, which
    finds the log each completed delta commit names without its block."""
    base = tmp_path / "table"
    shutil.copytree(java_mdt_table.path, base)
    healthy = snapshot(str(base))
    partitions = healthy.partitions()
    expected = healthy.files(partitions)
    mdt_files = base / ".hoodie" / "metadata" / "files"
    logs = sorted((p for p in mdt_files.iterdir() if ".log." in p.name and not p.name.endswith(".crc")), key=_order)
    bases = sorted(
        (p for p in mdt_files.iterdir() if p.name.endswith(".hfile")), key=lambda p: p.name.rsplit("_", 1)[1]
    )
    outcomes = {"refused": 0, "reported": 0, "unchanged": 0}
    for victim in (logs[-1], bases[-1]):
        original = victim.read_bytes()
        for offset in range(0, len(original), 61):
            damaged = bytearray(original)
            damaged[offset] ^= 0x5A
            victim.write_bytes(bytes(damaged))
            forget_files()
            try:
                view = snapshot(str(base))
                files = view.files(view.partitions())
            except CorruptInstantError:
                outcomes["refused"] += 1
                continue
            finally:
                victim.write_bytes(original)
            if view.corrupt:
                outcomes["reported"] += 1
            else:
                instant = _instant_header(original)
                hit_instant = original.find(instant.encode()) <= offset < original.find(instant.encode()) + len(instant)
                assert files == expected or hit_instant, f"a flipped byte at {offset} of {victim.name} went unnoticed"
                outcomes["unchanged"] += 1
    assert outcomes["refused"] and outcomes["reported"], outcomes


def _order(path):
    from timeline.hudi_log import parse_log_name

    return parse_log_name(path.name).order_key


def _instant_header(log: bytes) -> str:
    from timeline.hudi_log import read_blocks

    blocks = read_blocks(log)
    return blocks[0].header.get("INSTANT_TIME", "") if blocks else "\x00"
