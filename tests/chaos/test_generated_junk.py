"""Generated junk in `.hoodie/` and random damage to the metadata table: bounded runs of the chaos scenarios.

`tandem chaos run --scenario junk,mdt-fuzz --seeds N` runs more; each guard is broken once on
purpose below and the scenario must then report a violation.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from chaos import junk, mdt_fuzz
from coordinator.protocol import provenance
from timeline.format.active_timeline import ActiveTimeline

MDT_KINDS = ("base:files", "base:column_stats", "base:bloom_filters", "log", "properties", "instant")


def test_generated_junk_never_costs_a_committed_row(tmp_path: Path) -> None:
    results = junk.run_seeds(junk.run_seed, list(range(12)), tmp_path)
    assert {kind for r in results for j in r.junk for kind in junk.JUNK_KINDS if j.startswith(kind)} == set(
        junk.JUNK_KINDS
    )
    assert not [r for r in results if r.violations], junk.summary(results)


@pytest.mark.parametrize("kind", MDT_KINDS)
def test_random_damage_to_any_metadata_file_kind_is_never_believed(tmp_path: Path, kind: str) -> None:
    results = [mdt_fuzz.run_seed(seed, tmp_path, use_hudi=seed % 4 == 0, kind=kind) for seed in range(16)]
    assert all(r.kind.startswith(kind) for r in results), [r.kind for r in results]
    assert not [r for r in results if r.violations], junk.summary(results)
    if kind.startswith("base:"):  # a damaged base is refused by writers, naming the repair
        refused = [r for r in results if r.write != "committed"]
        assert refused and all("tandem metadata repair" in r.write for r in refused)


@pytest.mark.parametrize("kind", MDT_KINDS)
def test_random_damage_to_a_hudi_format_metadata_table_is_never_believed(tmp_path: Path, kind: str) -> None:
    """The same on Hudi's format: HFile blocks, index and trailer, Hudi log blocks, instants, properties."""
    results = [mdt_fuzz.run_seed(seed, tmp_path, use_hudi=False, kind=kind, hudi_format=True) for seed in range(8)]
    assert all(r.kind.startswith(kind) for r in results), [r.kind for r in results]
    assert not [r for r in results if r.violations], junk.summary(results)
    if kind.startswith("base:"):  # a damaged base is refused by writers, naming the repair
        refused = [r for r in results if r.write != "committed"]
        assert refused and all("tandem metadata repair" in r.write for r in refused), [r.write for r in refused]


@pytest.mark.parametrize(
    ("scenario", "broken", "seeds"),
    [
        ("junk", "undo-any-marked-file", 24),  # its seeds under 8 break it only on some clock readings
        ("junk", "rollback-completed-target", 16),
        ("junk", "clean-any-planned-file", 8),
        ("junk", "mdt-rollback-of-completed", 8),
        ("mdt-fuzz", "base-checksums-ignored", 40),
    ],
)
def test_each_guard_breaks_its_scenario_when_removed(tmp_path: Path, scenario: str, broken: str, seeds: int) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "coordinator", "chaos", "run", "--scenario", scenario, "--seeds", str(seeds)]
        + ["--no-hudi", "--break", broken, "--report", str(tmp_path / "report.json")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "violation" in run.stderr


def test_undo_deletes_only_files_named_for_the_instant(tmp_path: Path) -> None:
    table = junk.build(str(tmp_path / "t"), "one", random.Random(1))[0]
    timeline = ActiveTimeline.load(table.storage)
    latest = timeline.completed()[-1].time
    fresh = table.new_instant_time(timeline)
    mine = f"p0/abc-0_0-1-0_{fresh}.parquet"
    theirs = junk._committed_files(table)
    with pytest.warns(UserWarning, match="not written by instant"):
        assert provenance.undoable(timeline, fresh, [mine, *theirs, "../escape.parquet"]) == [mine]
    with pytest.warns(UserWarning, match="is completed"):
        assert provenance.undoable(timeline, latest, [p for p in theirs if latest in p]) == []
