"""Write a benchmark's figures to docs/bench/ as JSON and a PNG bar chart.

`write_report(name, results, chart, ylabel, title)` draws one bar per entry of
`chart`. Passing `groups` (group -> {series -> value}) instead draws grouped
bars, one colour per series, optionally on a log scale (`log=True`).
`summarize` turns timing samples into the median / p90 figures every
benchmark reports; `interleaved` runs several systems round-robin.
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "docs" / "bench"
COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974"]


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks (numpy's default)."""
    ordered = sorted(samples)
    if not ordered:
        return math.nan
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(samples: list[float]) -> dict[str, Any]:
    """Median, p90, min and the samples themselves (milliseconds in, milliseconds out)."""
    return {
        "median_ms": round(statistics.median(samples), 3),
        "p90_ms": round(percentile(samples, 90), 3),
        "min_ms": round(min(samples), 3),
        "samples_ms": [round(s, 3) for s in samples],
    }


def interleaved(systems: dict[str, Callable[[], Any]], repeats: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Run every system once per round, round-robin (A, B, C, A, B, C, ...), `repeats` rounds.

    Returns the samples in milliseconds per system and the last value each returned.
    """
    samples: dict[str, list[float]] = {name: [] for name in systems}
    last: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in systems.items():
            started = time.perf_counter()
            last[name] = fn()
            samples[name].append((time.perf_counter() - started) * 1000)
    return samples, last


def write_report(
    name: str,
    results: dict,
    chart: dict[str, float] | None,
    ylabel: str,
    title: str,
    groups: dict[str, dict[str, float]] | None = None,
    log: bool = False,
    out: Path | None = None,
) -> Path:
    """`name`.json and `name`.png in docs/bench (or `out`); returns the JSON's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out) if out is not None else OUT
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": name,
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "results": results,
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if groups:
        fig = _grouped(plt, groups, ylabel, title, log)
    else:
        chart = chart or {}
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(list(chart), list(chart.values()), color="#4c72b0")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        for i, value in enumerate(chart.values()):
            ax.annotate(f"{value:.3g}", (i, value), ha="center", va="bottom")
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=100)
    plt.close(fig)
    return path


def _grouped(plt, groups: dict[str, dict[str, float]], ylabel: str, title: str, log: bool):
    """Grouped bars: each group shows the series it has, side by side; one colour per series throughout."""
    series = list(dict.fromkeys(s for values in groups.values() for s in values))
    if len(series) <= len(COLOURS):
        colour = {s: COLOURS[k] for k, s in enumerate(series)}
    else:
        palette = plt.get_cmap("tab20").colors
        colour = {s: palette[k % len(palette)] for k, s in enumerate(series)}
    widest = max((len(v) for v in groups.values()), default=1)
    width = 0.8 / max(widest, 1)
    fig, ax = plt.subplots(figsize=(min(14.0, max(7.0, 0.9 * len(groups) * max(1, widest / 4) + 2) + 2.5), 4.8))
    labelled: set[str] = set()
    for g, values in enumerate(groups.values()):
        present = [(s, v) for s, v in values.items() if v is not None and not (log and v <= 0)]
        left = g - width * len(present) / 2
        for k, (serie, value) in enumerate(present):
            x = left + width * (k + 0.5)
            label = serie if serie not in labelled else None
            labelled.add(serie)
            ax.bar([x], [value], width, label=label, color=colour[serie])
            ax.annotate(f"{value:.3g}", (x, value), ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(list(groups), fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig
