"""Time travel as Hudi's `as.of.instant` answers it: any time, in any of Hudi's formats, reads the table as of
the latest commit at or before it."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from chaos.junk import KEY, build
from timeline.errors import BadInputError
from timeline.format.instant import parse_instant_time, query_instant
from timeline.query.reader import read_plan
from timeline.query.scan import plan_scan
from timeline.table import Table


def _rows(table: Table, as_of: str) -> dict:
    return {r[KEY]: r["v"] for r in read_plan(plan_scan(table, None, as_of=as_of)).to_pylist()}


def _spellings(moment: datetime) -> list[str]:
    """One moment in each of Hudi's query formats (the coarser ones round it down)."""
    return [
        moment.strftime("%Y%m%d%H%M%S%f")[:17],
        moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:23],
        moment.strftime("%Y-%m-%d %H:%M:%S"),
        moment.strftime("%Y%m%d%H%M%S"),
        moment.strftime("%Y-%m-%d"),
    ]


@pytest.mark.parametrize("seed", range(3))
def test_any_time_reads_the_latest_commit_at_or_before_it(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    table = build(str(tmp_path / "t"), rng.choice(["none", "one"]), rng)[0]
    commits = [i.time for i in table.timeline().completed_writes()]
    exact = {t: _rows(table, t) for t in commits}
    moments = [parse_instant_time(t) + timedelta(milliseconds=d) for t in commits for d in (-1, 0, 1)]
    moments += [parse_instant_time(commits[0]) - timedelta(days=1), datetime.now(timezone.utc) + timedelta(days=1)]
    for moment in moments:
        for text in _spellings(moment):
            normalized = query_instant(text, "as of")
            at = [t for t in commits if t <= normalized]  # Hudi compares instant times as strings
            assert _rows(table, text) == (exact[at[-1]] if at else {}), text


@pytest.mark.parametrize("text", ["yesterday", "2024-02-30", "2024-01-01T10:00:00", "2024010110", "20241301000000000"])
def test_times_in_no_hudi_format_are_bad_input(text: str) -> None:
    with pytest.raises(BadInputError, match="is not a time"):
        query_instant(text, "as of")
