"""The README's library example runs as written (on a temporary path instead of /data/trips)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_library_example_runs(tmp_path):
    text = README.read_text()
    section = text[text.index("## As a library") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "import tandem" in code
    scope: dict = {}
    exec(compile(code.replace("/data/trips", str(tmp_path / "trips")), "README.md", "exec"), scope)
    assert scope["rows"].column("trip_id").to_pylist() == [1]
