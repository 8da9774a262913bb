"""A completed instant with impossible metadata is named, and the rest of the table stays readable."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chaos.junk import KEY, build
from tests.conftest import tandem
from timeline.errors import CorruptInstantError
from timeline.query.reader import read_view
from timeline.table import Table


def _break_stat(stat: dict, rng: random.Random) -> str:
    """One impossible value in a write stat; returns what was done."""
    how = rng.choice(["escape", "other-partition", "negative", "absolute", "not-a-number"])
    if how == "escape":
        stat["path"] = "../../outside/" + stat["path"].rpartition("/")[2]
    elif how == "other-partition":
        stat["path"] = "elsewhere/" + stat["path"].rpartition("/")[2]
    elif how == "negative":
        stat[rng.choice(["numWrites", "fileSizeInBytes", "totalWriteBytes", "numInserts"])] = -rng.randint(1, 10**9)
    elif how == "absolute":
        stat["path"] = "/etc/" + stat["path"].rpartition("/")[2]
    else:
        stat["numWrites"] = "many"
    return how


@pytest.mark.parametrize("seed", range(4))
def test_an_instant_with_impossible_metadata_is_named_and_the_rest_is_read(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    table, model = build(str(tmp_path / "t"), rng.choice(["none", "one", "two"]), rng)
    expected = model.expected()
    victim = table.timeline().completed_writes()[-1]  # the newest: every schema lookup meets it first
    path = Path(table.storage.full(f".hoodie/{victim.file_name}"))
    doc = json.loads(path.read_bytes())
    stats = [s for group in doc["partitionToWriteStats"].values() for s in group]
    how = _break_stat(rng.choice(stats), rng)
    path.write_text(json.dumps(doc))
    fresh = Table.open(table.uri)
    with pytest.raises(CorruptInstantError):
        fresh.timeline().commit_metadata(victim)
    rows = read_view(fresh, fresh.view()).to_pylist()
    assert {r[KEY]: {c: r.get(c) for c in model.schema().names} for r in rows} == expected, how
    read = tandem("read", table.uri, "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["rows"] == len(expected)
    validate = tandem("metadata", "validate", table.uri)
    assert validate.returncode == 1
    assert f"damaged_instants: {victim.time}" in validate.stdout, how
    batch = model.batch([1, 2, 40])
    pq.write_table(batch, tmp_path / "batch.parquet")
    write = tandem("write", table.uri, "--input", str(tmp_path / "batch.parquet"), "--operation", "upsert")
    if write.returncode != 0:  # a writer may refuse, naming the instant; it may not write a wrong table
        assert write.returncode == 2 and victim.time in write.stderr, write.stderr
        return
    model.apply(batch, "upsert")
    expected = model.expected()
    fresh = Table.open(table.uri)
    rows = read_view(fresh, fresh.view()).to_pylist()
    assert {r[KEY]: {c: r.get(c) for c in model.schema().names} for r in rows} == expected, how
