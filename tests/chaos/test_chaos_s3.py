"""The chaos suite on `s3://` tables, bounded to a few minutes on two cores.

Crash states: every named crash point of a representative subset (insert for
the whole commit path, clean, MDT compaction, archival) is crashed once on a
table on a moto S3 endpoint under a DynamoDB lock, recovered (each recovery
runs a rollback or a roll-forward on S3), and checked with every invariant,
the `hudi` package reading the S3 table as the second reader. Crashes inside
a rollback, and after each storage mutation, are in the long `--s3` run. A broken variant proves
the checks can fail on S3, and a short nemesis runs writers and workers under
kills and pauses. Each run is a `tandem chaos` subprocess that starts its own
serial moto endpoint: the enumerator forks, which must not happen inside
pytest's own process. The long versions are in `make chaos`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chaos.test_chaos import _registered_points, _tandem, run_side_by_side

SUBSET = ("insert", "clean", "mdt_compaction", "archival")
# Every registered point under these prefixes must be crashed by the subset.
COVERED = ("commit.", "mdt.deltacommit.", "clean.", "mdt.compaction.", "archive.")


@pytest.fixture(scope="module")
def s3_run(tmp_path_factory) -> dict:
    halves = (SUBSET[0::2], SUBSET[1::2])  # each run starts its own moto endpoint
    run = run_side_by_side(tmp_path_factory.mktemp("chaos-s3"), halves, "--s3", "--sample", "0", timeout=600)
    order = {name: i for i, name in enumerate(SUBSET)}
    run["scenarios"].sort(key=lambda s: order[s["scenario"]])
    return run


def test_each_crash_point_of_the_subset_recovers_on_s3_with_no_violation(s3_run: dict) -> None:
    assert s3_run["storage"] == "s3"
    assert s3_run["violations"] == 0
    scenarios = {s["scenario"]: s for s in s3_run["scenarios"]}
    assert tuple(scenarios) == SUBSET
    for name, result in scenarios.items():
        assert result["mutations"] > 0, name
        # `--sample 0`: the first hit of every point the action reaches, each one crashed and recovered
        assert result["states_explored"] == result["states_total"] == len(result["point_hits"]) > 0, name
        assert result["recoveries"] == result["states_explored"], name
        assert not result["errors"], result["errors"]


def test_every_commit_path_and_service_crash_point_is_crashed_on_s3(s3_run: dict) -> None:
    crashed = {point for s in s3_run["scenarios"] for point in s["point_hits"]}
    expected = [p for p in _registered_points() if p.startswith(COVERED)]
    assert len(expected) > 25
    assert sorted(set(expected) - crashed) == []


def test_a_broken_variant_is_caught_on_s3_by_both_readers(tmp_path: Path, monkeypatch) -> None:
    """Readers that ignore the completed-instant filter show a write killed after its MDT deltacommit."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the run keeps the violating table: here, not in /tmp
    report = tmp_path / "broken.json"
    done = _tandem(
        "chaos", "run", "--scenario", "insert", "--s3", "--state", "point:commit.mdt:1",
        "--break", "no-completed-instant-filter", "--report", str(report), timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    violations = json.loads(report.read_text())["scenarios"][0]["violations"]
    assert "1-committed-rows" in {v["invariant"] for v in violations}
    # the hudi package read the s3:// table and, applying Hudi's own filter, disagreed with the broken reader
    assert any(v["detail"].startswith("the hudi package reads other rows") for v in violations), violations
    assert all(v["replay"].endswith("--s3") for v in violations)


def test_short_nemesis_on_s3_with_a_dynamodb_lock_has_no_violation(tmp_path: Path) -> None:
    report = tmp_path / "nemesis.json"
    done = _tandem(
        "chaos", "nemesis", "--lock-service", "dynamodb", "--s3", "--duration", "25", "--seed", "7",
        "--report", str(report), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["storage"] == "s3"
    assert result["violations"] == []
    assert result["commits"] > 0
    assert result["kills"] > 0 and result["pauses"] > 0
    assert result["process_crashes"] == 0
    assert sum(result["abort_reasons"].values()) == result["aborts_other"]
