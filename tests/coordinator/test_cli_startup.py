"""Start-up: `tandem --help` and `tandem <cmd> --help` import nothing heavy (no timing, only which modules load)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coordinator.cli import cli

HEAVY = (
    "pyarrow",
    "numpy",
    "pandas",
    "fastavro",
    "rich",
    "coordinator.write.writer",
    "coordinator.protocol.transaction",
    "chaos",
)


def imported(*args: str) -> set[str]:
    """The modules `python -X importtime -m coordinator ARGS` imports."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "coordinator", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return set(lines[1:])  # the first line is the header


COMMANDS = [[]] + [[name] for name in sorted(cli.commands) if name != "chaos"]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) or "tandem" for c in COMMANDS])
def test_help_imports_nothing_heavy(command: list[str]) -> None:
    modules = imported(*command, "--help")
    assert "click" in modules  # the output is what -X importtime prints
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"tandem {' '.join([*command, '--help'])} imports {heavy}"


def test_the_chaos_stand_in_matches_its_source() -> None:
    from chaos.cli import chaos

    stand_in = cli.commands["chaos"]
    assert (stand_in.help, stand_in.params) == (chaos.help, chaos.params)
