"""The README's main job, small: the Spark pipeline with its workers ends in a consistent table."""

from __future__ import annotations

from pathlib import Path

from chaos.checker import check_table
from tests.conftest import tandem
from timeline.table import Table


def test_the_main_job_runs_and_leaves_a_consistent_table(tmp_path: Path) -> None:
    base = tmp_path / "trips"
    done = tandem("demo", str(base), "--batches", "4", "--rows", "600", env={"COLUMNS": "200"})  # no wrapping
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for expected in ("Spark write jobs", "worker clean stopped", "worker compact stopped", "read back through Spark"):
        assert expected in done.stdout
    assert "the two listings differ" not in done.stdout
    table = Table.open(str(base))
    assert table.config.merge_on_read
    assert [i.action for i in table.timeline().completed_writes()].count("deltacommit") == 4
    assert check_table(table, "trip_id", use_hudi=True) == []
