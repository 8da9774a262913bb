"""The differential filter test at length: `python -m tests.filter_differential_long --examples N [--seed S]`.

The suite runs `tests/timeline/test_filter_differential.py` on a few examples to stay
within its time budget and does not shrink a failure; this runs the same check
on as many examples as asked, and Hypothesis shrinks a failure to a small
table and filter.
"""

from __future__ import annotations

import argparse
import time

from hypothesis import HealthCheck, given, seed, settings

from coordinator.spark.session import local_session
from tests.timeline.test_filter_differential import Example, check_example, configure, examples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Tandem's filtered reads against DuckDB, at length.")
    parser.add_argument("--examples", type=int, default=200, help="random examples (each: 2 tables x 10 filters)")
    parser.add_argument("--seed", type=int, default=None, help="Hypothesis seed, to repeat a run")
    args = parser.parse_args(argv)
    spark = local_session("tandem-filter-differential-long")
    configure(spark)
    checked: list[int] = []
    started = time.monotonic()

    @settings(
        max_examples=args.examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(examples())
    def run(example: Example) -> None:
        checked.append(check_example(spark, example))

    try:
        (seed(args.seed)(run) if args.seed is not None else run)()
    finally:
        spark.stop()
    elapsed = time.monotonic() - started
    print(f"{len(checked)} examples, {sum(checked)} (table, filter) pairs, all as DuckDB, in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
