"""Write a benchmark's figures to docs/bench/ as JSON and a PNG bar chart."""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "bench"


def write_report(name: str, results: dict, chart: dict[str, float], ylabel: str, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": name,
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "results": results,
    }
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(list(chart), list(chart.values()), color="#4c72b0")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    for i, value in enumerate(chart.values()):
        ax.annotate(f"{value:.3g}", (i, value), ha="center", va="bottom")
    fig.tight_layout()
    fig.savefig(OUT / f"{name}.png", dpi=100)
    plt.close(fig)
    return path
