"""Long differential runs of Java Hudi against Tandem and the model (tests/hudi_reference/differential.py).

    .venv/bin/python -m tests.java_hudi_long --sequences 500
    .venv/bin/python -m tests.java_hudi_long --sequences 100 --reader hudi-1.x --steps 12 --both-metadata
    .venv/bin/python -m tests.java_hudi_long --seed 24          # replay one history
    .venv/bin/python -m tests.java_hudi_long --table-type MERGE_ON_READ --sequences 100

Prints one line per history and every disagreement with its history; exits 1 if any.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from tests.hudi_reference.client import HudiReference
from tests.hudi_reference.differential import COPY_ON_WRITE, MERGE_ON_READ, Sequence


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.java_hudi_long")
    parser.add_argument("--sequences", type=int, default=100, help="how many histories (seeds start..start+N)")
    parser.add_argument("--start", type=int, default=1000, help="first seed (the test files use seeds below 1000)")
    parser.add_argument("--seed", type=int, action="append", help="replay these seeds only")
    parser.add_argument(
        "--steps", type=int, default=None, help="steps per history (default: 4-7 by seed, merge-on-read 6-9)"
    )
    parser.add_argument("--reader", default="hudi-0.15", help="hudi-0.15 or hudi-1.x")
    parser.add_argument("--both-metadata", action="store_true", help="every read with metadata on and off")
    parser.add_argument("--max-disagreements", type=int, default=50, help="stop after this many")
    parser.add_argument(
        "--table-type",
        default=COPY_ON_WRITE,
        choices=[COPY_ON_WRITE, MERGE_ON_READ],
        help="merge-on-read histories: writes, reads and table services (see MOR_SERVICES_LEFT_OUT)",
    )
    args = parser.parse_args(argv)
    seeds = args.seed or list(range(args.start, args.start + args.sequences))
    started = time.monotonic()
    found = []
    coverage: Counter = Counter()
    with HudiReference(args.reader) as java:
        print(f"{args.reader}: Spark {java.spark_version}, {java.spec['artifact']}", flush=True)
        for seed in seeds:
            t0 = time.monotonic()
            sequence = Sequence(
                seed,
                java,
                steps=args.steps,
                both_metadata=args.both_metadata,
                table_type=args.table_type,
                # Hudi 1.x orders log records by commit time alone (see Sequence): ordering values only rise
                rising_ordering=args.reader != "hudi-0.15",
            )
            try:
                disagreements = sequence.run()
            except Exception as err:  # a Tandem failure is a finding too: report it with the history so far
                disagreements = []
                print(f"seed {seed}: {type(err).__name__}: {err}\n  history: {sequence.history}", flush=True)
                found.append(seed)
            finally:
                sequence.close()
            print(
                f"seed {seed} {sequence.layout.name}: {len(sequence.history) - 1} steps, {sequence.reads} reads, "
                f"{time.monotonic() - t0:.1f} s, {len(disagreements)} disagreement(s)",
                flush=True,
            )
            for d in disagreements:
                print(str(d), flush=True)
            coverage.update(getattr(sequence.model, "coverage", {}))
            found += disagreements
            if len(found) >= args.max_disagreements:
                print("stopping: --max-disagreements reached")
                break
    if coverage:
        print("merge-on-read rules exercised: " + ", ".join(f"{rule} {n}" for rule, n in sorted(coverage.items())))
    print(f"{len(seeds)} histories in {time.monotonic() - started:.0f} s: {len(found)} disagreement(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
