"""Java Hudi 0.15 judges Tandem's HoodieCompactionPlan files (timeline.format.avro_metadata).

Java reads the plans Tandem writes (random operations, odd strings, extreme metric values, strategies) the way
CompactionUtils.getCompactionPlan does (TimelineMetadataUtils.deserializeCompactionPlan, then
CompactionPlanMigrator) and turns them into the pending operations its file-system views hold; Java's
serializeCompactionPlan writes plans Tandem decodes to the same values; the schema is the bundle's own; and
slice_metrics gives what Java's compaction strategy records. One batched call, no table.
"""

from __future__ import annotations

import base64
import json
import math
import random

import pytest

from tests.timeline.test_compaction_plan import bare
from timeline.format.avro_metadata import (
    COMPACTION_PLAN,
    CompactionOperation,
    compaction_operations,
    compaction_plan,
    decode,
    encode,
    slice_metrics,
)

# Runs in the reference JVM (HudiReference.jvm).
JUDGE = r"""
import base64

J = jvm.org.apache.hudi
model = J.avro.model
utils = J.common.table.timeline.TimelineMetadataUtils
# Avro finds Hudi's generated classes through the thread's class loader: make it the bundle's (py4j threads
# start with the application's)
jvm.java.lang.Thread.currentThread().setContextClassLoader(
    model.HoodieCompactionPlan.newBuilder().build().getClass().getClassLoader())
migrator = J.common.table.timeline.versioning.compaction.CompactionPlanMigrator(None)  # uses no meta client


def pending(time, plan):
    # CompactionUtils.getCompactionPlan's upgrade, then what a file-system view keeps of each pending operation
    plan = migrator.upgradeToLatest(plan, plan.getVersion())
    instant = J.common.table.timeline.HoodieTimeline.getCompactionRequestedInstant(time)
    found = J.common.util.CompactionUtils.getAllPendingCompactionOperationsInPendingCompactionPlans(
        jvm.java.util.ArrayList([J.common.util.collection.Pair.of(instant, plan)]))
    out = []
    for group, pair in found.items():
        converted = J.common.model.CompactionOperation.convertFromAvroRecordInstance(pair.getValue())
        out.append([group.getPartitionPath(), group.getFileId(), pair.getKey(),
                    converted.getDataFileCommitTime().orElse(None), converted.getDeltaFileNames().size()])
    return sorted(out)


def build(spec):
    ops = None
    if spec["operations"] is not None:
        ops = []
        for op in spec["operations"]:
            metrics = op["metrics"]
            ops.append(model.HoodieCompactionOperation.newBuilder()
                       .setBaseInstantTime(op["baseInstantTime"]).setDeltaFilePaths(op["deltaFilePaths"])
                       .setDataFilePath(op["dataFilePath"]).setFileId(op["fileId"])
                       .setPartitionPath(op["partitionPath"])
                       .setMetrics(None if metrics is None else {k: float.fromhex(v) for k, v in metrics.items()})
                       .setBootstrapFilePath(op["bootstrapFilePath"]).build())
    strategy = spec["strategy"]
    if strategy is not None:
        strategy = (model.HoodieCompactionStrategy.newBuilder()
                    .setCompactorClassName(strategy["compactorClassName"])
                    .setStrategyParams(strategy["strategyParams"]).setVersion(strategy["version"]).build())
    return (model.HoodieCompactionPlan.newBuilder().setOperations(ops).setExtraMetadata(spec["extraMetadata"])
            .setVersion(spec["version"]).setStrategy(strategy)
            .setPreserveHoodieMetadata(spec["preserveHoodieMetadata"]).build())


def metrics_of(base_size, log_sizes):
    slice = J.common.model.FileSlice("p", "20240101000000000", "f-0")
    if base_size is not None:
        base = J.common.model.HoodieBaseFile("/t/p/f-0_0-1-0_20240101000000000.parquet")
        base.setFileLen(base_size)
        slice.setBaseFile(base)
    for version, size in enumerate(log_sizes, 1):
        path = J.storage.StoragePath(f"/t/p/.f-0_20240101000000000.log.{version}_0-1-0")
        slice.addLogFile(J.common.model.HoodieLogFile(path, size))
    config = J.config.HoodieWriteConfig.newBuilder().withPath("/t").build()
    captured = J.table.action.compact.strategy.UnBoundedCompactionStrategy().captureMetrics(config, slice)
    return {str(k): float(v) for k, v in captured.items()}


read = []
for time, data in args["tandem"]:
    plan = utils.deserializeCompactionPlan(base64.b64decode(data))
    read.append({"plan": str(plan.toString()), "pending": pending(time, plan)})  # toString: Avro's JSON
written = [base64.b64encode(bytes(utils.serializeCompactionPlan(build(spec)).get())).decode()
           for spec in args["java"]]
result = {
    "schema": str(model.HoodieCompactionPlan.getClassSchema().toString()),
    "read": read,
    "written": written,
    "metrics": [metrics_of(base, logs) for base, logs in args["metrics"]],
}
"""

ODD = ["", "a=b", "é", "😀 ünïcode", "x" * 300, "key with spaces"]
METRICS = [0.0, -0.0, 1.5, 120.0, 1e308, 5e-324, math.inf, -math.inf]


def random_operation(rng: random.Random, partition: str, file_id: str) -> CompactionOperation:
    base = f"2026{rng.randrange(10**13):013d}" + rng.choice(["", "001", "010", "011001"])
    token = f"{rng.randrange(20)}-{rng.randrange(500)}-{rng.randrange(3)}"
    logs = tuple(
        f".{file_id}_{base}.log.{v}_{token}{rng.choice(['', '', '.cdc'])}"
        for v in sorted(rng.sample(range(1, 50), rng.randrange(5)))
    )
    base_file = rng.choice([None, f"{file_id}_{token}_{base}.{rng.choice(['hfile', 'parquet', 'orc'])}"])
    metrics = {rng.choice(ODD + ["TOTAL_IO_MB"]): rng.choice(METRICS + [rng.uniform(-1e9, 1e9)]) for _ in range(3)}
    bootstrap = rng.choice([None, None, f"s3://bucket/source/{partition}/part-0.parquet"])
    return CompactionOperation(partition, file_id, base, base_file, logs, metrics, bootstrap)


def random_plan(rng: random.Random) -> dict:
    partitions = ["files", "column_stats", "", "year=2024/month=01", "é/😀"]
    groups = {
        (rng.choice(partitions), rng.choice([f"files-{i:04d}-0", f"{rng.getrandbits(64):016x}-0"])) for i in range(6)
    }
    ops = [random_operation(rng, p, f) for p, f in sorted(groups)[: rng.randrange(7)]]
    plan = compaction_plan(ops, rng.choice([None, {}, {rng.choice(ODD): rng.choice(ODD) for _ in range(3)}]))
    if rng.random() < 0.4:
        params = rng.choice([None, {"compactionType": "LOG_COMPACT"}, {o: o for o in ODD}])
        compactor, version = rng.choice([None, "org.example.Compactor"]), rng.choice([1, None, 7])
        plan["strategy"] = {"compactorClassName": compactor, "strategyParams": params, "version": version}
    plan["preserveHoodieMetadata"] = rng.choice([False, True, None])
    if not ops and rng.random() < 0.5:
        plan["operations"] = None
    return plan


def hexed(plan: dict) -> dict:
    """The plan with metric values as float.hex (exact in JSON, -0.0 and infinities included)."""
    ops = plan["operations"]
    if ops is not None:
        ops = [op | {"metrics": op["metrics"] and {k: v.hex() for k, v in op["metrics"].items()}} for op in ops]
    return plan | {"operations": ops}


def java_json(text: str) -> dict:
    """A plan as Avro's toString renders it (JSON, a non-finite double as a string), its metrics float.hex."""
    plan = json.loads(text)
    for op in plan["operations"] or []:
        op["metrics"] = op["metrics"] and {k: float(v).hex() for k, v in op["metrics"].items()}
    return plan


def expected_pending(time: str, plan: dict) -> list:
    """What Java's view keeps of each operation: its group, the plan's instant, the base's instant, the logs."""
    return sorted(
        [op.partition, op.file_id, time, op.base_file and op.base_instant, len(op.log_files)]
        for op in compaction_operations(plan)
    )


PLANS = [random_plan(random.Random(seed)) for seed in range(40)]
TIMES = [f"2026{i:013d}001" for i in range(len(PLANS))]
SLICES = [(None, []), (None, [83]), (4096, [53673, 1, 2]), (3 * 2**20 - 1, [2**20, 5]), (10**10, [10**9] * 3)]


@pytest.fixture(scope="module")
def judged(java_hudi) -> dict:
    tandem = [
        [t, base64.b64encode(encode("HoodieCompactionPlan", p)).decode()] for t, p in zip(TIMES, PLANS, strict=True)
    ]
    return java_hudi.jvm(JUDGE, tandem=tandem, java=[hexed(p) for p in PLANS], metrics=SLICES)


def test_the_schema_is_the_bundles(judged):
    schema = json.loads(judged["schema"])
    assert schema["namespace"] == COMPACTION_PLAN["namespace"]
    assert bare(schema) == bare(COMPACTION_PLAN)


def test_java_reads_tandems_plans(judged):
    assert any(p["operations"] for p in PLANS) and any(p["strategy"] for p in PLANS)  # the plans are not trivial
    for time, plan, read in zip(TIMES, PLANS, judged["read"], strict=True):
        assert java_json(read["plan"]) == hexed(plan), time
        assert read["pending"] == expected_pending(time, plan), time


def test_tandem_reads_javas_plans(judged):
    for time, plan, written in zip(TIMES, PLANS, judged["written"], strict=True):
        decoded = decode(base64.b64decode(written), f"{time}.compaction.requested")
        assert hexed(decoded) == hexed(plan), time
        assert compaction_operations(decoded) == compaction_operations(plan)


def test_slice_metrics_are_what_javas_strategy_records(judged):
    for (base, logs), java in zip(SLICES, judged["metrics"], strict=True):
        assert slice_metrics(base, logs) == java, (base, logs)
