"""The chaos suite, bounded: every crash state of the single-writer scenarios, the
broken variants it must catch, and one short nemesis run on a real ZooKeeper.

Each run is a `tandem chaos` subprocess: the enumerator forks, which must not
happen inside pytest's own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.nemesis import abort_reason
from chaos.scenarios import BOOTSTRAP_SCENARIOS, HUDI_FORMAT_SCENARIOS, MOR_SCENARIOS

COMMIT_AND_ROLLBACK = (
    "commit.",
    "rollback.",
    "mdt.deltacommit.",
    "mdt.rollback.",
    "bootstrap.",
    "savepoint.",
    "restore.",
)


def _tandem(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=timeout)


def _registered_points() -> list[str]:
    listing = _tandem("chaos", "list", "--json", timeout=120)
    assert listing.returncode == 0, listing.stderr
    return list(json.loads(listing.stdout)["crash_points"])


# The crash-state scenarios in two halves of about equal work, run side by side: one `tandem chaos run` uses
# one core (a forked child per state), and nothing else in the suite runs meanwhile.
HALVES = (
    ("insert", "delete", "rollback", "mdt_compaction", "archival"),
    ("upsert", "insert_overwrite", "clean", "mdt_clean", "index_build"),
)
# The same protocol on a metadata table in Hudi's format: in the suite, the first hit of every crash point of each
# scenario and a seeded sample of its other crash states, a third run beside the halves; `make chaos` explores
# every state of every scenario
# merge-on-read and bootstrapped tables keep their MDT in Hudi's format
HUDI_FORMAT = HUDI_FORMAT_SCENARIOS + MOR_SCENARIOS + BOOTSTRAP_SCENARIOS
HUDI_SAMPLE = 16


def run_side_by_side(
    folder: Path,
    halves: tuple[tuple[str, ...], ...],
    *args: str,
    timeout: float,
    group_args: tuple[tuple[str, ...], ...] | None = None,
) -> dict:
    """`tandem chaos run` of each group of scenarios at once (`group_args`: more arguments for each group);
    one report of them all, in the groups' order."""
    reports = [folder / f"report-{i}.json" for i in range(len(halves))]
    extra = group_args or tuple(() for _ in halves)
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coordinator",
                "chaos",
                "run",
                "--scenario",
                ",".join(half),
                *args,
                *more,
                "--report",
                str(report),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for half, more, report in zip(halves, extra, reports, strict=True)
    ]
    outputs = [run.communicate(timeout=timeout)[0] for run in runs]
    for run, output in zip(runs, outputs, strict=True):
        assert run.returncode == 0, output[-6000:]
    parts = [json.loads(report.read_text()) for report in reports]
    merged = dict(parts[0])
    merged["scenarios"] = [s for part in parts for s in part["scenarios"]]
    merged["violations"] = sum(part["violations"] for part in parts)
    return merged


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> dict:
    groups = (*HALVES, HUDI_FORMAT)
    more = ((), (), ("--sample", str(HUDI_SAMPLE)))
    return run_side_by_side(tmp_path_factory.mktemp("chaos"), groups, timeout=900, group_args=more)


def test_every_crash_state_of_every_scenario_recovers_with_no_violation(full_run: dict) -> None:
    scenarios = {s["scenario"]: s for s in full_run["scenarios"]}
    assert set(scenarios) == {
        "insert", "upsert", "delete", "insert_overwrite", "clean", "rollback", "mdt_compaction", "mdt_clean",
        "archival", "index_build", "hudi_upsert", "hudi_rollback", "hudi_mdt_clean", "hudi_index_build",
        "hudi_metadata_create", "hudi_migration", "hudi_savepoint", "hudi_restore", "mor_upsert", "mor_delete",
        "mor_rollback", "mor_compaction", "mor_clean", "mor_restore", "bootstrap_metadata_only",
        "bootstrap_full_record",
    }  # fmt: skip
    assert full_run["violations"] == 0
    for name, result in scenarios.items():
        assert result["mutations"] > 0, name
        if name in HUDI_FORMAT:
            assert result["states_explored"] == result["states_total"] >= HUDI_SAMPLE, name  # every point, and more
        else:
            assert result["states_explored"] == result["states_total"] > result["mutations"], name
        assert result["recoveries"] == result["states_explored"], name
        assert not result["errors"], result["errors"]


def test_every_commit_and_rollback_crash_point_is_hit(full_run: dict) -> None:
    hit = {point for s in full_run["scenarios"] for point in s["point_hits"]}
    protocol_points = [p for p in _registered_points() if p.startswith(COMMIT_AND_ROLLBACK)]
    assert protocol_points
    assert sorted(set(protocol_points) - hit) == []


def test_every_registered_crash_point_is_hit_by_some_scenario(full_run: dict) -> None:
    hit = {point for s in full_run["scenarios"] for point in s["point_hits"]}
    assert sorted(set(_registered_points()) - hit) == []


@pytest.mark.parametrize(
    ("variant", "scenario", "invariant"),
    [
        ("data-before-metadata", "insert", "2-mdt-equals-storage"),
        ("no-completed-instant-filter", "insert", "1-committed-rows"),
        ("clean-keeps-index-records", "clean", "7-column_stats-exact"),
        ("index-records-of-orphans", "upsert", "7-bloom_filters-exact"),
    ],
)
def test_a_broken_variant_is_caught(tmp_path: Path, variant: str, scenario: str, invariant: str) -> None:
    report = tmp_path / "broken.json"
    done = _tandem(
        "chaos", "run", "--scenario", scenario, "--sample", "8", "--no-hudi", "--break", variant,
        "--report", str(report), timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    violations = json.loads(report.read_text())["scenarios"][0]["violations"]
    assert violations
    assert invariant in {v["invariant"] for v in violations}
    assert all(v["replay"].startswith("tandem chaos run") for v in violations)


def test_short_nemesis_on_zookeeper_has_no_violation(tmp_path: Path) -> None:
    report = tmp_path / "nemesis.json"
    done = _tandem(
        "chaos", "nemesis", "--lock-service", "zookeeper", "--duration", "25", "--seed", "7",
        "--report", str(report), timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["violations"] == []
    assert result["commits"] > 0
    assert result["kills"] + result["pauses"] > 0
    assert result["lock_service_faults"] > 0
    assert result["process_crashes"] == 0
    assert sum(result["abort_reasons"].values()) == result["aborts_other"]


def test_short_nemesis_on_a_merge_on_read_table_has_no_violation(tmp_path: Path) -> None:
    """Writers' logs and the compaction worker folding them, under kills and pauses past the lease."""
    report = tmp_path / "nemesis.json"
    done = _tandem(
        "chaos", "nemesis", "--lock-service", "file", "--duration", "20", "--seed", "3",
        "--table-type", "MERGE_ON_READ", "--report", str(report), timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["table_type"] == "MERGE_ON_READ"
    assert result["violations"] == []
    assert result["commits"] > 0 and result["kills"] + result["pauses"] > 0
    assert result["process_crashes"] == 0


def test_aborts_with_different_instants_count_as_one_reason() -> None:
    first = abort_reason("instant 20261122172758123 is no longer inflight: another process rolled it back")
    second = abort_reason("instant 20261122172801007 is no longer inflight: another process rolled it back\ntrace")
    assert first == second == "instant N is no longer inflight: another process rolled it back"
    assert abort_reason("") == "unknown"
