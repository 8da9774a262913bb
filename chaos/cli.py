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

from timeline.crash_points import REGISTRY

console = Console(stderr=True)
SCHEDULE_SCENARIOS = {
    "lost-lock": "a holder frozen at each locked crash point past its lease (or force-released) "
    "while another writer commits the same file groups",
    "mdt-corruption": "bit flip, torn tail or deletion of an MDT log, or deletion of the MDT hoodie.properties; "
    "then read and upsert",
    "junk": "generated junk in .hoodie/ (stray markers, crafted rollback, clean and MDT rollback plans, shadow "
    "instants), then recover, write, clean and compact; no committed row may be lost",
    "mdt-fuzz": "a random bit or byte flipped, a truncation or a deletion in a random file of every MDT file kind; "
    "then read and upsert; each seed on an MDT of each format (Tandem's previous one, then Hudi's)",
}
CRASH_STATES = "crash-states"  # every single-writer scenario of the enumerator, and nothing else
SCENARIO_HELP = (
    f"A scenario name (see `tandem chaos list`), a comma list of them, all, or {CRASH_STATES} "
    "(the single-writer ones only)."
)


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
        "scenarios": {**{name: s.doc for name, s in SCENARIOS.items()}, **SCHEDULE_SCENARIOS},
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
    import coordinator.mdt.compaction  # noqa: F401
    import coordinator.protocol.archival  # noqa: F401
    import coordinator.protocol.clean  # noqa: F401
    import coordinator.protocol.rollback  # noqa: F401
    import coordinator.protocol.transaction  # noqa: F401
    import timeline.mdt.table  # noqa: F401


def _scenario_names(scenario: str, crash_scenarios: list[str]) -> list[str]:
    known = [*crash_scenarios, *SCHEDULE_SCENARIOS]
    if scenario == "all":
        return known
    if scenario == CRASH_STATES:
        return crash_scenarios
    names = [name.strip() for name in scenario.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise click.BadParameter(
            f"unknown scenario {(unknown or [scenario])[0]!r} (one of {', '.join(known)}, {CRASH_STATES}, all)"
        )
    return names


def _csv(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    values = list(allowed) if text == "all" else [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in values if v not in allowed]
    if unknown or not values:
        raise click.BadParameter(f"unknown {what} {(unknown or [text])[0]!r} (one of {', '.join(allowed)}, all)")
    return values


@chaos.command()
@click.option("--scenario", default="all", show_default=True, help=SCENARIO_HELP)
@click.option("--seed", default=0, show_default=True, help="Orders (and samples) the crash states; replays a run.")
@click.option("--budget", "budget_s", type=float, default=None, help="Stop exploring a scenario after this many s.")
@click.option("--sample", type=int, default=None, help="Every named point once, plus this many other states.")
@click.option("--state", "states", multiple=True, help="Replay only this crash state (from a report), repeatable.")
@click.option("--providers", default="file,zookeeper,dynamodb", show_default=True, help="lost-lock: lock providers.")
@click.option("--points", default="all", show_default=True, help="lost-lock: crash points A is frozen at (comma list).")
@click.option("--variants", default="all", show_default=True, help="lost-lock: expiry, force-release, disjoint.")
@click.option(
    "--table-types",
    default="COPY_ON_WRITE",
    show_default=True,
    help="lost-lock: COPY_ON_WRITE, MERGE_ON_READ or all (data compaction points run on merge-on-read only).",
)
@click.option("--seeds", default=100, show_default=True, help="junk, mdt-fuzz: generated tables from --seed on.")
@click.option("--jobs", default=2, show_default=True, help="Schedules run side by side (they mostly wait on leases).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, help="Write JSON here.")
@click.option("--no-hudi", is_flag=True, help="Skip the hudi package as a second reader (faster).")
@click.option(
    "--s3", "on_s3", is_flag=True, help="Tables on s3:// (loopback moto endpoint), DynamoDB lock; no torn states."
)
@click.option("--break", "broken", default=None, hidden=True, help="Apply a deliberately broken variant first.")
def run(
    scenario: str,
    seed: int,
    budget_s: float | None,
    sample: int | None,
    states: tuple[str, ...],
    providers: str,
    points: str,
    variants: str,
    table_types: str,
    seeds: int,
    jobs: int,
    report_path: str | None,
    no_hudi: bool,
    on_s3: bool,
    broken: str | None,
) -> None:
    """Explore every crash state of the single-writer scenarios and run the schedules; exit 1 on any violation."""
    from chaos.enumerator import CrashState
    from chaos.lost_lock import POINTS, PROVIDERS, TABLE_TYPES, VARIANTS, plan
    from chaos.scenarios import BOOTSTRAP_SCENARIOS, SCENARIOS

    # a bootstrap's source is a local folder beside the tables: on S3 the scenarios are left out
    names = _scenario_names(scenario, [n for n in SCENARIOS if not (on_s3 and n in BOOTSTRAP_SCENARIOS)])
    if on_s3 and not set(names) <= set(SCENARIOS) - set(BOOTSTRAP_SCENARIOS):
        raise click.BadParameter(
            "--s3 runs the crash-state scenarios other than bootstrap's (their source is a local folder), "
            f"not {', '.join([*SCHEDULE_SCENARIOS, *BOOTSTRAP_SCENARIOS])}"
        )
    lost_lock = plan(
        _csv(providers, PROVIDERS, "provider"),
        _csv(points, POINTS, "point"),
        _csv(variants, VARIANTS, "variant"),
        tuple(_csv(table_types if table_types == "all" else table_types.upper(), TABLE_TYPES, "table type")),
    )
    for label in states:
        try:
            parsed = CrashState.parse(label)
        except ValueError as err:
            raise click.BadParameter(str(err)) from err
        if on_s3 and parsed.torn:
            raise click.BadParameter(
                f"{label}: an S3 PutObject stores the whole object or nothing, so --s3 has no torn states"
            )
    if broken is not None:
        from chaos.broken import BROKEN

        if broken not in BROKEN:
            raise click.BadParameter(f"unknown broken variant {broken!r} (one of {', '.join(BROKEN)})")
        BROKEN[broken]()
    started = time.monotonic()
    columns = (TextColumn("{task.description:<17}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        crash = _explore([n for n in names if n in SCENARIOS], progress, seed, budget_s, sample, states, no_hudi, on_s3)
        locks = _lost_lock(lost_lock, progress, jobs, no_hudi) if "lost-lock" in names else []
        corruption = _mdt_corruption(progress, jobs, no_hudi) if "mdt-corruption" in names else []
        generated = _generated([n for n in names if n in GENERATED], progress, seed, seeds, no_hudi)
    if crash:
        _summary(crash)
    if locks:
        _lost_lock_summary(locks)
    if corruption:
        _corruption_summary(corruption)
    for name, results in generated.items():
        _generated_summary(name, results)
    failures = [v for r in crash for v in r.violations]
    errors = [e for r in crash for e in r.errors]
    errors += [f"{r.label}: {r.error}" for r in locks if r.error]
    errors += [f"{r.corruption}: {r.error}" for r in corruption if r.error]
    found = len(failures) + sum(len(r.violations) for r in locks) + sum(len(r.violations) for r in corruption)
    found += sum(len(r.violations) for results in generated.values() for r in results)
    report = {
        "seed": seed,
        "storage": "s3" if on_s3 else "local",
        "broken_variant": broken,
        "seconds": round(time.monotonic() - started, 2),
        "states_explored": sum(r.states_explored for r in crash),
        "violations": found,
        "scenarios": [r.to_dict() for r in crash],
        "lost_lock": [r.to_dict() for r in locks],
        "mdt_corruption": [r.to_dict() for r in corruption],
        **{name.replace("-", "_"): [r.to_dict() for r in results] for name, results in generated.items()},
    }
    if report_path:
        Path(report_path).write_text(json.dumps(report, indent=2))
        console.print(f"report: {report_path}")
    for violation in failures[:5]:
        console.print(
            f"[red]violation[/red] {violation['scenario']} {violation['state']} ({violation['phase']}): "
            f"{violation['invariant']}: {violation['detail']}\n  replay: {violation['replay']}"
        )
    for error in errors[:5]:
        console.print(f"[red]error[/red] {error}")
    if found or errors:
        sys.exit(1)


def _explore(names, progress, seed, budget_s, sample, states, no_hudi, on_s3: bool) -> list:
    """The crash-state scenarios, one progress bar each; with `on_s3` on one moto endpoint started for the run."""
    import tempfile
    from contextlib import ExitStack

    from chaos import s3
    from chaos.enumerator import explore

    results = []
    with ExitStack() as stack:
        place = None
        if on_s3:
            work = stack.enter_context(tempfile.TemporaryDirectory(prefix="tandem-chaos-s3-"))
            place = stack.enter_context(s3.moto_place(Path(work)))
        for name in names:
            task = progress.add_task(name, total=None)

            def advance(result, total: int, task=task) -> None:
                progress.update(task, total=total, completed=result.states_explored)

            result = explore(
                name, seed, budget_s, sample, list(states) or None, not no_hudi, on_state=advance, place=place
            )
            progress.update(task, total=max(result.states_total, 1), completed=result.states_explored or 1)
            results.append(result)
    return results


def _lost_lock(planned: list, progress, jobs: int, no_hudi: bool) -> list:
    """Every planned lost-lock schedule, against lock servers started for the run."""
    import tempfile

    from chaos.lost_lock import lock_services, run_schedules

    task = progress.add_task("lost-lock", total=len(planned))
    providers = sorted({s.provider for s in planned})
    with tempfile.TemporaryDirectory(prefix="tandem-lock-services-") as work:
        with lock_services(providers, Path(work)) as endpoints:
            return run_schedules(
                planned, endpoints, use_hudi=not no_hudi, on_result=lambda _: progress.advance(task), jobs=jobs
            )


def _mdt_corruption(progress, jobs: int, no_hudi: bool) -> list:
    """Each MDT corruption on a copy of one template table."""
    from chaos.mdt_corruption import CORRUPTIONS, run_corruptions

    task = progress.add_task("mdt-corruption", total=len(CORRUPTIONS))
    return run_corruptions(
        list(CORRUPTIONS), use_hudi=not no_hudi, on_result=lambda _: progress.advance(task), jobs=jobs
    )


GENERATED = ("junk", "mdt-fuzz")


def _generated(names: list[str], progress, seed: int, seeds: int, no_hudi: bool) -> dict[str, list]:
    """The generated-input scenarios, `seeds` tables each from `seed` on, in one scratch folder per run."""
    import tempfile
    from functools import partial

    from chaos import junk, mdt_fuzz

    out = {}
    for name in names:
        # mdt-fuzz damages an MDT of each format per seed: Tandem's previous one, then Hudi's
        runs = [junk.run_seed] if name == "junk" else [mdt_fuzz.run_seed, partial(mdt_fuzz.run_seed, hudi_format=True)]
        task = progress.add_task(name, total=seeds * len(runs))
        work = Path(tempfile.mkdtemp(prefix=f"tandem-{name}-"))
        out[name] = [
            result
            for run in runs
            for result in junk.run_seeds(
                run, list(range(seed, seed + seeds)), work, not no_hudi, lambda _, t=task: progress.advance(t)
            )
        ]
    return out


def _generated_summary(name: str, results: list) -> None:
    bad = [r for r in results if r.violations]
    console.print(f"{name}: {len(results)} generated tables, {len(bad)} with violations")
    for r in bad[:10]:
        first = r.violations[0]
        console.print(f"[red]violation[/red] {name} seed {r.seed}: {first['invariant']}: {first['detail'][:200]}")
        console.print(f"  replay: tandem chaos run --scenario {name} --seed {r.seed} --seeds 1; kept: {r.kept_dir}")


def _lost_lock_summary(results: list) -> None:
    columns = ("provider", "variant", "schedules", "A exit 0", "B exit 0", "violations", "errors", "time s")
    table = RichTable(*columns, title="lost-lock schedules")
    for provider, variant in sorted({(r.provider, r.variant) for r in results}):
        group = [r for r in results if (r.provider, r.variant) == (provider, variant)]
        table.add_row(
            provider,
            variant,
            str(len(group)),
            str(sum(r.a_exit == 0 for r in group)),
            str(sum(r.b_exit == 0 for r in group)),
            str(sum(len(r.violations) for r in group)),
            str(sum(r.error is not None for r in group)),
            f"{sum(r.seconds for r in group):.1f}",
        )
    console.print(table)
    for r in [r for r in results if r.violations][:20]:
        first = r.violations[0]
        more = f" (+{len(r.violations) - 1} more)" if len(r.violations) > 1 else ""
        console.print(
            f"[red]violation[/red] {r.label} (A exit {r.a_exit}, B exit {r.b_exit}): "
            f"{first['invariant']}: {first['detail'][:200]}{more}"
        )
        console.print(
            f"  replay: tandem chaos run --scenario lost-lock --providers {r.provider} --points {r.point} "
            f"--variants {r.variant}"
        )
        console.print(f"  kept: {r.kept_dir}")


def _corruption_summary(results: list) -> None:
    table = RichTable("corruption", "read exit", "upsert exit", "read after", "violations", title="mdt-corruption")
    for r in results:
        table.add_row(r.corruption, str(r.read_exit), str(r.write_exit), str(r.reread_exit), str(len(r.violations)))
    console.print(table)
    for r in [r for r in results if r.violations]:
        for violation in r.violations[:3]:
            console.print(f"[red]violation[/red] {r.corruption}: {violation['invariant']}: {violation['detail'][:200]}")
        console.print(f"  kept: {r.kept_dir}")


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
@click.option("--s3", "on_s3", is_flag=True, help="The table on s3:// (a loopback moto endpoint of its own).")
@click.option(
    "--table-type",
    type=click.Choice(["COPY_ON_WRITE", "MERGE_ON_READ"], case_sensitive=False),
    default="COPY_ON_WRITE",
    show_default=True,
    help="MERGE_ON_READ: updates go to logs, which the compaction worker folds beside the writers.",
)
def nemesis(
    lock_service: str, duration_s: float, seed: int, report_path: str | None, on_s3: bool, table_type: str
) -> None:
    """3 writers + clean and compaction workers under kills, pauses and lock-service faults; exit 1 on violations."""
    from chaos.nemesis import run_nemesis

    if on_s3 and lock_service == "file":
        raise click.BadParameter("--s3 needs --lock-service zookeeper or dynamodb (the file lock refuses S3)")
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[faults]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(f"nemesis on {lock_service}", total=duration_s, faults="")

        def tick(elapsed: float, report) -> None:
            faults = f"kills {report.kills} pauses {report.pauses} lock faults {report.lock_service_faults}"
            progress.update(task, completed=min(elapsed, duration_s), faults=faults)

        report = run_nemesis(lock_service, duration_s, seed, on_tick=tick, s3=on_s3, table_type=table_type.upper())
        progress.update(task, completed=duration_s)
    where = f"{report.lock_service}, {report.storage} table"
    table = RichTable("", "count", title=f"nemesis on {where}: {report.seconds:g} s")
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
