"""Queries: SQL filters as an engine-neutral tree, partition and file skipping, the one scan planner, and the
reader of its plans."""

from timeline.query.predicate import parse_sql
from timeline.query.reader import read_plan, read_view
from timeline.query.scan import ScanPlan, Split, plan_scan

__all__ = ["ScanPlan", "Split", "parse_sql", "plan_scan", "read_plan", "read_view"]
