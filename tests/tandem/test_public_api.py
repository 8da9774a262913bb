"""`import tandem`: the everyday API runs what the layers below run, with the embedded defaults."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import tandem
from timeline.format.instant import CLEAN


def test_a_first_write_and_read_take_one_import(tmp_path):
    table = tandem.create_table(str(tmp_path / "trips"), "trips", record_key=["id"], partition_by=["city"])
    first = tandem.write(table, pa.table({"id": [1, 2], "city": ["lisbon", "oslo"], "fare": [9.5, 20.0]}), "insert")
    tandem.write(str(tmp_path / "trips"), pa.table({"id": [2], "city": ["oslo"], "fare": [7.0]}), "upsert")

    rows = tandem.read(table).sort_by("id")
    assert rows.column("fare").to_pylist() == [9.5, 7.0]
    assert tandem.read(table, where="fare > 8").column("id").to_pylist() == [1]
    assert sorted(tandem.read(table, as_of=first.instant).column("fare").to_pylist()) == [9.5, 20.0]
    assert tandem.read(table, since=first.instant).column("id").to_pylist() == [2]
    plan = tandem.scan(table, "city = 'lisbon'")
    assert plan.num_splits == 1 and "lisbon" in plan.files.column("partition")[0].as_py()
    assert plan.residual == "city = 'lisbon'"  # the plan carries its filter to whoever reads it
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.files = plan.files.slice(0, 0)  # type: ignore[misc]


def test_the_table_services_run_under_the_configured_lock(tmp_path):
    config = tandem.CoordinatorConfig(commits_retained=1, file_versions_retained=1)
    table = tandem.create_table(str(tmp_path / "t"), "t", record_key=["id"])
    for fare in (1.0, 2.0, 3.0):
        tandem.write(table, pa.table({"id": [1], "fare": [fare]}), "upsert", config=config)
    cleaned = tandem.clean(table, config)
    assert cleaned is not None and any(
        i.time == cleaned and i.action == CLEAN and i.is_completed for i in table.timeline().instants
    )
    assert tandem.compact(table, config, force=True).compacted
    assert not tandem.recover(table, config).rolled_back
    tandem.archive(table, config)
    assert tandem.read(table).column("fare").to_pylist() == [3.0]


def test_anything_but_a_pyarrow_table_or_a_dataframe_is_bad_input(tmp_path):
    table = tandem.create_table(str(tmp_path / "t"), "t", record_key=["id"])
    with pytest.raises(tandem.BadInputError, match="pyarrow Table or a Spark DataFrame"):
        tandem.write(table, [{"id": 1}], "insert")
    with pytest.raises(tandem.BadInputError):
        tandem.open_table(str(tmp_path / "nothing-here"))
