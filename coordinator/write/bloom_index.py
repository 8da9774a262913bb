"""Hudi's bloom index over the MDT's `bloom_filters` partition: which files may hold a batch's keys, from
Tandem's records (a key range and Tandem's filter) or Hudi's own (Hudi's filter only).

A file is ruled out only by its own record: no incoming key falls in its
[min, max] record-key range, or its bloom filter answers "no" for every key
(bloom filters have false positives, never false negatives). A file without a
record, or a record that does not decode, stays a candidate, as does every file
when the index cannot be read: the index only ever saves reads.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from coordinator.write.rows import KEY, PARTITION, split_by
from timeline.errors import TandemError
from timeline.format.file_names import BaseFile
from timeline.format.table_config import TableConfig
from timeline.index.bloom import BloomFilter
from timeline.index.hadoop_hash import batches
from timeline.index.hudi_bloom import HudiBloomFilter, from_mdt, might_contain_any_of
from timeline.index.murmur3 import hash128
from timeline.mdt.hudi_records import BloomFilter as HudiBloomRecord
from timeline.mdt.log import BLOOM_FILTERS
from timeline.mdt.reader import MetadataReader
from timeline.table import TableView

LOG = logging.getLogger(__name__)


def bloom_candidates(
    config: TableConfig,
    view: TableView,
    files: list[BaseFile],
    keys: pa.ChunkedArray | pa.Array,
    partitions: pa.ChunkedArray | pa.Array | None = None,
) -> list[BaseFile]:
    """The files of `files` that may hold one of `keys` (of the key's own partition, when `partitions` is given:
    the non-global index); every key is hashed once, whatever the number of files."""
    mdt = getattr(view, "mdt", None)
    if mdt is None:
        return files
    hudi_format = mdt.is_hudi_format()
    if BLOOM_FILTERS not in (mdt.hudi_partitions() if hudi_format else config.metadata_indexes):
        return files
    if hudi_format:
        return _hudi_candidates(view, files, keys, partitions)
    try:
        records = MetadataReader(mdt, view.timeline).index(BLOOM_FILTERS, sorted({f.partition for f in files}))
        by_file = {(r["partition"], r["fileName"]): r for r in records.to_pylist()}
    except (TandemError, OSError, pa.ArrowException, ValueError, KeyError) as err:
        LOG.warning("bloom_filters index unreadable, tagging opens every candidate file: %s", err)
        return files
    batches = _batches(keys, partitions)
    everywhere = batches.get(None)
    return [f for f in files if _may_hold(by_file.get((f.partition, f.name)), everywhere or batches.get(f.partition))]


def _hudi_candidates(
    view: TableView,
    files: list[BaseFile],
    keys: pa.ChunkedArray | pa.Array,
    partitions: pa.ChunkedArray | pa.Array | None,
) -> list[BaseFile]:
    """The same over Hudi's `bloom_filters` records (Java's filters, or the SIMPLE ones Tandem's writer builds):
    they hold no key range, so each file's filter is asked for every key of its batch."""
    try:
        snapshot = MetadataReader(view.mdt, view.timeline).snapshot
        filters = snapshot.bloom_filters([(f.partition, f.name) for f in files])
    except (TandemError, OSError, ValueError, KeyError) as err:
        LOG.warning("bloom_filters index unreadable, tagging opens every candidate file: %s", err)
        return files
    if snapshot.corrupt:
        LOG.warning("bloom_filters index has corrupt blocks, tagging opens every candidate file")
        return files
    prepared = {  # each key hashed once (the seed-free half), whatever the number of filters asked
        p: [batch for _, batch in batches(pc.unique(k.drop_null()))]
        for p, k in _keys_by_partition(keys, partitions).items()
    }
    everywhere = prepared.get(None)
    held: set[int] = set()
    asked: dict[str | None, list[tuple[int, HudiBloomFilter]]] = {}  # the filters each key batch is asked of
    for index, file in enumerate(files):
        group = None if everywhere is not None else file.partition
        if not prepared.get(group):
            continue
        bloom = _hudi_filter(filters.get((file.partition, file.name)))
        if bloom is None:
            held.add(index)
        else:
            asked.setdefault(group, []).append((index, bloom))
    for group, found in asked.items():
        answers = might_contain_any_of([bloom for _, bloom in found], prepared[group])
        held.update(index for (index, _), may in zip(found, answers, strict=True) if may)
    return [file for index, file in enumerate(files) if index in held]


def _keys_by_partition(
    keys: pa.ChunkedArray | pa.Array, partitions: pa.ChunkedArray | pa.Array | None
) -> dict[str | None, pa.Array | pa.ChunkedArray]:
    if partitions is None:
        return {None: keys}
    by_partition = pa.table({KEY: keys, PARTITION: partitions})
    return {partition: part.column(KEY) for partition, part in split_by(by_partition, PARTITION)}


def _hudi_filter(record: HudiBloomRecord | None) -> HudiBloomFilter | None:
    """The filter of a file's record; None (the file stays a candidate) without a live, decodable one."""
    if record is None or record.is_deleted:
        return None
    try:
        return from_mdt(record.type, record.bloom_filter)
    except ValueError:
        return None


class _Batch:
    """Incoming keys sorted (for the key-range check) with their hashes and, per filter shape, their probes:
    files sized alike (the usual case) share one computation of every key's bit positions."""

    def __init__(self, keys: pa.Array | pa.ChunkedArray) -> None:
        unique = pc.unique(keys.drop_null())
        ordered = unique.take(pc.sort_indices(unique))  # bytewise, as the files' min and max keys compare
        self.keys = ordered.to_pylist()
        self.hashes = hash128(ordered)
        self._probes: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def may_be_in(self, bloom: BloomFilter, start: int, end: int) -> bool:
        probes = self._probes.get(bloom.shape())
        if probes is None:
            probes = self._probes[bloom.shape()] = bloom.probes(self.hashes)
        offsets, shifts = probes
        return bloom.might_contain_any_probed((offsets[start:end], shifts[start:end]))


def _batches(keys: pa.ChunkedArray | pa.Array, partitions: pa.ChunkedArray | pa.Array | None) -> dict:
    return {partition: _Batch(part) for partition, part in _keys_by_partition(keys, partitions).items()}


def _may_hold(record: dict | None, batch: _Batch | None) -> bool:
    if batch is None:
        return False
    if record is None:
        return True
    low, high = record["minRecordKey"], record["maxRecordKey"]
    if low is None or high is None:
        return True
    start, end = bisect_left(batch.keys, low), bisect_right(batch.keys, high)
    if start == end:
        return False
    try:
        bloom = BloomFilter.from_bytes(record["bloomFilter"])
    except ValueError:
        return True
    return batch.may_be_in(bloom, start, end)
