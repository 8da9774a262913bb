"""A metadata-table compaction copies the base cells no log touches instead of decoding and encoding them
again: the new base file must be byte for byte the one encoding every merged record gives, whatever the
sequence of writes, deletes and earlier compactions (whose copied cells are copied again)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.write.writer import LocalWriter
from timeline.mdt import hudi_layout
from timeline.mdt.file_group_writes import base_file_name, base_file_of_cells, encode_base_file
from timeline.mdt.file_slices import TimelineFacts, list_file_groups, slices_to_read
from timeline.mdt.slice_records import compacted_cells, read_group, valid_instants
from timeline.table import Table


def _batch(rng: random.Random, ids: list[int], version: int) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "part": [f"p{i % 4}" for i in ids],
            "v": [version] * len(ids),
            "name": [rng.choice(["a", "b", "\u00e9t\u00e9", ""]) for _ in ids],
        }
    )


def _check_every_group(table: Table, instant: str) -> int:
    """Each file group's cells as a compaction at `instant` would write them, against encoding every merged
    record; returns the number of groups compared."""
    mdt = table.metadata()
    mdt_timeline = mdt.timeline()
    facts = TimelineFacts.of(mdt_timeline)
    is_valid = valid_instants(table.timeline(), mdt_timeline)
    compared = 0
    for partition in hudi_layout.KEPT_BY_TANDEM:
        for group in list_file_groups(mdt.storage, partition):
            slices = slices_to_read(group, facts)
            if not slices:
                continue
            name = base_file_name(group.file_id, instant)
            merged = read_group(mdt.storage, slices, facts, is_valid)
            cells, corrupt = compacted_cells(mdt.storage, slices, facts, is_valid, name)
            assert corrupt == merged.corrupt == []
            expected = encode_base_file(merged.records.values(), name)
            assert base_file_of_cells(cells) == expected, f"{partition}/{group.file_id}"
            compared += 1
    return compared


@pytest.mark.parametrize("seed", range(3))
def test_copied_cells_are_the_cells_encoding_gives(tmp_path, seed):
    rng = random.Random(seed)
    table = Table.create(str(tmp_path / "t"), "t", ["id"], ["part"], hudi_format=True)
    config = CoordinatorConfig(lock_uri="memory", max_delta_commits=rng.choice([2, 3, 4]))
    writer = LocalWriter(table, coordinator=config)
    live: set[int] = set()
    compared = 0
    for version in range(14):
        operation = rng.choice(["insert", "upsert", "upsert", "delete"] if live else ["insert"])
        if operation == "delete":
            ids = rng.sample(sorted(live), min(len(live), rng.randint(1, 4)))
            live -= set(ids)
        else:
            ids = sorted({rng.randrange(60) for _ in range(rng.randint(1, 12))})
            live |= set(ids)
        writer.write(_batch(rng, ids, version), operation)
        compared += _check_every_group(Table.open(table.uri), f"2099010100000{version:02d}")
    assert compared >= 14 * 3  # files, column_stats and bloom_filters every time
    compactions = [i for i in table.metadata().timeline().completed() if i.action in ("commit", "compaction")]
    assert len(compactions) >= 2  # later bases hold cells an earlier compaction copied
