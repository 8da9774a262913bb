"""`tandem chaos run|list|nemesis`: explore crash states and fault runs, print a summary, write a report."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from chaos.crash_points import REGISTRY

console = Console(stderr=True)


@click.group()
def chaos() -> None:
    """Crash the protocols at every step and check the invariants after recovery."""


@chaos.command(name="list")
@click.option("--json", "as_json", is_flag=True)
def list_cmd(as_json: bool) -> None:
    """Every scenario and every named crash point."""
    from chaos.nemesis import LOCK_SERVICES
    from chaos.scenarios import SCENARIOS

    _load_all_points()
    doc = {
        "scenarios": {name: s.doc for name, s in SCENARIOS.items()},
        "crash_points": dict(sorted(REGISTRY.items())),
        "nemesis_lock_services": list(LOCK_SERVICES),
    }
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    scenarios = RichTable("scenario", "what it does", title="scenarios (tandem chaos run --scenario NAME)")
    for name, doc_line in doc["scenarios"].items():
        scenarios.add_row(name, doc_line)
    points = RichTable("crash point", "state the process dies in", title="named crash points")
    for name, doc_line in doc["crash_points"].items():
        points.add_row(name, doc_line)
    out = Console()
    out.print(scenarios)
    out.print(points)
    out.print(f"nemesis lock services: {', '.join(LOCK_SERVICES)} (tandem chaos nemesis --lock-service NAME)")


def _load_all_points() -> None:
    """Import every module that registers crash points, so the registry is complete."""
    import coordinator.archival  # noqa: F401
    import coordinator.clean  # noqa: F401
    import coordinator.rollback  # noqa: F401
    import coordinator.transaction  # noqa: F401
    import timeline.mdt.compaction  # noqa: F401
    import timeline.mdt.table  # noqa: F401


@chaos.command()
@click.option("--scenario", default="all", show_default=True, help="A scenario name (see `tandem chaos list`) or all.")
@click.option("--seed", default=0, show_default=True, help="Orders (and samples) the crash states; replays a run.")
@click.option("--budget", "budget_s", type=float, default=None, help="Stop exploring a scenario after this many s.")
@click.option("--sample", type=int, default=None, help="Every named point once, plus this many other states.")
@click.option("--state", "states", multiple=True, help="Replay only this crash state (from a report), repeatable.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, help="Write JSON here.")
@click.option("--no-hudi", is_flag=True, help="Skip the hudi package as a second reader (faster).")
@click.option("--break", "broken", default=None, hidden=True, help="Apply a deliberately broken variant first.")
def run(
    scenario: str,
    seed: int,
    budget_s: float | None,
    sample: int | None,
    states: tuple[str, ...],
    report_path: str | None,
    no_hudi: bool,
    broken: str | None,
) -> None:
    """Explore every crash state of the single-writer scenarios; exit 1 on any violation."""
    from chaos.enumerator import CrashState, explore
    from chaos.scenarios import SCENARIOS

    names = list(SCENARIOS) if scenario == "all" else [scenario]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise click.BadParameter(f"unknown scenario {unknown[0]!r} (one of {', '.join(SCENARIOS)}, all)")
    for label in states:
        try:
            CrashState.parse(label)
        except ValueError as err:
            raise click.BadParameter(str(err)) from err
    if broken is not None:
        from chaos.broken import BROKEN

        if broken not in BROKEN:
            raise click.BadParameter(f"unknown broken variant {broken!r} (one of {', '.join(BROKEN)})")
        BROKEN[broken]()
    started = time.monotonic()
    results = []
    columns = (TextColumn("{task.description:<17}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        for name in names:
            task = progress.add_task(name, total=None)

            def advance(result, total: int, task=task) -> None:
                progress.update(task, total=total, completed=result.states_explored)

            result = explore(name, seed, budget_s, sample, list(states) or None, use_hudi=not no_hudi, on_state=advance)
            progress.update(task, total=max(result.states_total, 1), completed=result.states_explored or 1)
            results.append(result)
    _summary(results)
    report = {
        "seed": seed,
        "broken_variant": broken,
        "seconds": round(time.monotonic() - started, 2),
        "states_explored": sum(r.states_explored for r in results),
        "violations": sum(len(r.violations) for r in results),
        "scenarios": [r.to_dict() for r in results],
    }
    if report_path:
        Path(report_path).write_text(json.dumps(report, indent=2))
        console.print(f"report: {report_path}")
    failures = [v for r in results for v in r.violations]
    errors = [e for r in results for e in r.errors]
    for violation in failures[:5]:
        console.print(
            f"[red]violation[/red] {violation['scenario']} {violation['state']} ({violation['phase']}): "
            f"{violation['invariant']}: {violation['detail']}\n  replay: {violation['replay']}"
        )
    for error in errors[:5]:
        console.print(f"[red]error[/red] {error}")
    if failures or errors:
        sys.exit(1)


def _summary(results: list) -> None:
    table = RichTable("scenario", "mutations", "crash states", "recoveries", "violations", "time s", title="chaos run")
    for r in results:
        table.add_row(
            r.scenario,
            str(r.mutations),
            f"{r.states_explored}/{r.states_total}",
            str(r.recoveries),
            str(len(r.violations)),
            f"{r.seconds:.1f}",
        )
    table.add_row(
        "total",
        str(sum(r.mutations for r in results)),
        str(sum(r.states_explored for r in results)),
        str(sum(r.recoveries for r in results)),
        str(sum(len(r.violations) for r in results)),
        f"{sum(r.seconds for r in results):.1f}",
    )
    console.print(table)


@chaos.command()
@click.option("--lock-service", type=click.Choice(["file", "zookeeper", "dynamodb"]), default="file", show_default=True)
@click.option("--duration", "duration_s", type=float, default=300, show_default=True, help="Seconds of faults.")
@click.option("--seed", default=0, show_default=True, help="Seeds the fault schedule.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, help="Write JSON here.")
def nemesis(lock_service: str, duration_s: float, seed: int, report_path: str | None) -> None:
    """3 writers + clean and compaction workers under kills, pauses and lock-service faults; exit 1 on violations."""
    from chaos.nemesis import run_nemesis

    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[faults]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(f"nemesis on {lock_service}", total=duration_s, faults="")

        def tick(elapsed: float, report) -> None:
            faults = f"kills {report.kills} pauses {report.pauses} lock faults {report.lock_service_faults}"
            progress.update(task, completed=min(elapsed, duration_s), faults=faults)

        report = run_nemesis(lock_service, duration_s, seed, on_tick=tick)
        progress.update(task, completed=duration_s)
    table = RichTable("", "count", title=f"nemesis on {report.lock_service}: {report.seconds:g} s")
    for label, value in (
        ("commits", report.commits),
        ("aborted by a conflict", report.aborts_conflict),
        ("aborted otherwise", report.aborts_other),
        ("killed mid-write", report.killed_mid_write),
        ("rollbacks", report.rollbacks),
        ("SIGKILLs", report.kills),
        ("pauses past lease and heartbeat", report.pauses),
        ("lock-service faults", report.lock_service_faults),
        ("process crashes", report.process_crashes),
        ("violations", len(report.violations)),
    ):
        table.add_row(label, str(value))
    console.print(table)
    for reason, count in sorted(report.abort_reasons.items(), key=lambda item: -item[1]):
        console.print(f"  aborted otherwise x{count}: {reason}")
    if report_path:
        Path(report_path).write_text(json.dumps(report.to_dict(), indent=2))
        console.print(f"report: {report_path}")
    if report.kept_dir:
        console.print(f"kept for inspection: {report.kept_dir}")
    for violation in report.violations[:5]:
        console.print(f"[red]violation[/red] {violation['invariant']}: {violation['detail']}")
    if report.violations:
        sys.exit(1)
