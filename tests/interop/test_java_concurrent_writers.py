"""Java Hudi and Tandem writing one table at the same time, both given the same `hoodie.write.lock.*` keys
(ZooKeeper, and DynamoDB through the AWS DynamoDB Lock Client; Hudi's optimistic concurrency control with LAZY
rollback of failed writes on the Java side), both with
`hoodie.metadata.enable=false`: a metadata table is one engine's own (docs/design.md, "Sharing a table with Java
Hudi"), so mixed writers share the table without one.

Rounds: disjoint partitions at once (both must commit), the same file group at once (whatever commits must be a
serial order of the acknowledged writes), Tandem killed holding the lock, Tandem frozen holding the lock past its
ZooKeeper session or DynamoDB lease (4 s here, given by `--lock`: Hudi's keys carry no lease for Tandem) while
Java commits over the same file group (Tandem must not commit), a Java driver frozen
while it writes its files while Tandem commits the same file group (Java must not commit), and a Java driver
SIGKILLed mid-write. A Java driver frozen while it *holds* the lock is not tested: Java writes no fencing token, so
nothing can stop its commit after it resumes (docs/design.md). After every round Tandem's reader and Java's
(metadata on and off) read a state some serial order of the acknowledged writes produces; the killed and refused
ones leave nothing.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest

from tests.conftest import wait_until
from tests.hudi_reference.client import HudiError, HudiReference
from tests.hudi_reference.shared_table import (
    canon,
    data_files,
    expected,
    java_both,
    jsonl,
    ok,
    rows,
    tandem_rows,
    upsert,
)

ZK_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
DDB_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
LOCK = "--lock"  # a settings entry passed to Tandem as `--lock URI`, not `--set`
CONFLICT_EXIT, LOCK_EXIT = 3, 4
TRIPS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.hive_style_partitioning": "true",
}


def key(row: dict) -> object:
    return row["id"]


# The suite runs the rounds on ZooKeeper; `make chaos` on DynamoDB too (TANDEM_INTEROP_ALL_LOCKS=1). Java and
# Tandem sharing a DynamoDB lock item, lease and all, is in the suite by test_dynamodb_hudi_interop.py.
LOCKS = ["zookeeper", "dynamodb"] if os.environ.get("TANDEM_INTEROP_ALL_LOCKS") == "1" else ["zookeeper"]


@pytest.fixture(params=LOCKS)
def shared(request, tmp_path):
    """The table (no metadata table) and the settings each side is given, for one lock service."""
    from coordinator.config import CoordinatorConfig
    from coordinator.write.writer import LocalWriter
    from timeline.table import Table

    path = str(tmp_path / "trips")
    table = Table.create(path, "trips", ["id"], ["city"], hive_style=True, precombine_field="ts", with_metadata=False)
    first = rows(*[(i, "x", "ab"[i % 2], float(i), 1) for i in range(8)])
    LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory", metadata_enabled=False)).write(first, "upsert")
    model: dict = {}
    upsert(model, key, first)
    common = {
        "hoodie.metadata.enable": "false",
        "hoodie.cleaner.policy.failed.writes": "LAZY",
        "hoodie.client.heartbeat.interval_in_ms": "2000",  # expired after 4 s: a loaded machine's writes outlive 2
        "hoodie.client.heartbeat.tolerable.misses": "1",
        "hoodie.write.lock.wait_time_ms": "60000",  # DynamoDB: also Java's own lease
    }
    tag = uuid.uuid4().hex[:8]
    if request.param == "zookeeper":
        lock = {
            "hoodie.write.lock.provider": ZK_PROVIDER,
            "hoodie.write.lock.zookeeper.url": request.getfixturevalue("zookeeper").hosts,  # Hudi never reads .port
            "hoodie.write.lock.zookeeper.base_path": f"/hudi/mixed-{tag}",
            "hoodie.write.lock.zookeeper.lock_key": "trips",
            "hoodie.write.lock.zookeeper.session_timeout_ms": "4000",
            "hoodie.write.lock.zookeeper.connection_timeout_ms": "3000",
        }
        tandem = {**common, **lock}
    else:
        request.getfixturevalue("aws_env")
        endpoint = request.getfixturevalue("moto").url
        lock = {
            "hoodie.write.lock.provider": DDB_PROVIDER,
            "hoodie.write.lock.dynamodb.table": f"locks-{tag}",
            "hoodie.write.lock.dynamodb.partition_key": "trips",
            "hoodie.write.lock.dynamodb.region": "us-east-1",
            "hoodie.write.lock.dynamodb.endpoint_url": endpoint,
        }
        uri = f"dynamodb://locks-{tag}?region=us-east-1&endpoint={endpoint}&lock_key=trips&lease_ms=4000"
        # The lock table exists before the writers race: Hudi 0.15's provider creates a missing table and fails
        # on `ResourceInUseException` when another writer created it meanwhile (docs/design.md).
        boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1").create_table(
            TableName=f"locks-{tag}",
            KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        tandem = {**common, LOCK: uri}
    java = {**TRIPS, **common, **lock, "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
    return path, model, java, tandem


def _tandem_write(tmp_path: Path, path: str, settings: dict, changed, name: str, env: dict | None = None):
    args = [sys.executable, "-m", "coordinator", "write", path, "--input", jsonl(tmp_path, name, changed)]
    args += ["--operation", "upsert"]
    args += _sets(settings)
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )


def _sets(settings: dict) -> list[str]:
    return [
        arg
        for setting, value in settings.items()
        for arg in ((LOCK, value) if setting == LOCK else ("--set", f"{setting}={value}"))
    ]


def _java_outcome(java_hudi) -> bool:
    """True if Java committed; False if it refused to: it lost a conflict, or its heartbeat had expired (another
    writer may then have rolled it back, as LAZY allows). Anything else fails the test."""
    try:
        java_hudi.finish_write()
        return True
    except HudiError as err:
        refused = "ConflictException" in str(err.java_class) or "conflict" in str(err).lower()
        assert refused or "Heartbeat for instant" in str(err), (err, err.error.get("java_causes"))
        return False


def _serial_orders(model: dict, acknowledged: list) -> list[dict]:
    """The states every serial order of the acknowledged writes leaves."""
    states = []
    for order in itertools.permutations(acknowledged):
        state = dict(model)
        for changed in order:
            upsert(state, key, changed)
        states.append(state)
    return states


def _settle(java_hudi, tmp_path: Path, path: str, model: dict, acknowledged: list, name: str) -> dict:
    """Every reader reads one state, and it is one a serial order of the acknowledged writes leaves."""
    java = java_both(java_hudi, path)
    assert java[False] == java[True], name
    assert tandem_rows(tmp_path, path, name) == java[False], name
    matches = [s for s in _serial_orders(model, acknowledged) if expected(s) == java[False]]
    assert matches, f"{name}: {java[False]} is no serial order of the acknowledged writes"
    return matches[0]


def _stopped(proc: subprocess.Popen) -> bool:
    return Path(f"/proc/{proc.pid}/stat").read_text().split(")")[1].split()[0] == "T"


def test_java_and_tandem_write_one_table_at_once(java_hudi, shared, tmp_path):
    path, model, java_opts, settings = shared

    # 1. disjoint partitions at once: both commit
    java_rows, tandem_rows_ = rows((0, "x", "a", 100.0, 2)), rows((1, "x", "b", 101.0, 2))
    java_hudi.start_write(path, java_rows, "upsert", java_opts)
    proc = _tandem_write(tmp_path, path, settings, tandem_rows_, "r1")
    _, err = proc.communicate(timeout=180)
    assert _java_outcome(java_hudi) and proc.returncode == 0, err
    model = _settle(java_hudi, tmp_path, path, model, [java_rows, tandem_rows_], "disjoint")

    # 2. one file group at once: what commits is serializable, the loser refused (Hudi's exception, exit 3)
    java_rows, tandem_rows_ = rows((2, "x", "a", 200.0, 3)), rows((2, "x", "a", 202.0, 3), (4, "x", "a", 204.0, 3))
    java_hudi.start_write(path, java_rows, "upsert", java_opts)
    proc = _tandem_write(tmp_path, path, settings, tandem_rows_, "r2")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode in (0, CONFLICT_EXIT), err
    acknowledged = [
        w for w, done in ((java_rows, _java_outcome(java_hudi)), (tandem_rows_, proc.returncode == 0)) if done
    ]
    assert acknowledged, "both writers refused"
    model = _settle(java_hudi, tmp_path, path, model, acknowledged, "same group")

    # 3. Tandem killed holding the lock: Java waits out its ZooKeeper session (DynamoDB lease) and commits
    doomed = _tandem_write(
        tmp_path, path, settings, rows((3, "x", "b", 300.0, 4)), "r3", {"TANDEM_PAUSE_AT": "commit.locked"}
    )
    wait_until(lambda: _stopped(doomed), 120, "Tandem frozen holding the lock")
    doomed.kill()
    doomed.communicate(timeout=30)
    java_rows = rows((5, "x", "b", 500.0, 4))
    java_hudi.write(path, java_rows, "upsert", java_opts)
    ok("recover", path, *_sets(settings))
    model = _settle(java_hudi, tmp_path, path, model, [java_rows], "tandem killed")

    # 4. Tandem frozen holding the lock past its session (lease); Java commits the same file group; Tandem resumes
    frozen = _tandem_write(
        tmp_path, path, settings, rows((6, "x", "a", 600.0, 5)), "r4", {"TANDEM_PAUSE_AT": "commit.locked"}
    )
    wait_until(lambda: _stopped(frozen), 120, "Tandem frozen holding the lock")
    java_rows = rows((6, "x", "a", 606.0, 5))
    java_hudi.write(path, java_rows, "upsert", java_opts)
    frozen.send_signal(signal.SIGCONT)
    _, err = frozen.communicate(timeout=180)
    assert frozen.returncode in (CONFLICT_EXIT, LOCK_EXIT), (frozen.returncode, err)
    model = _settle(java_hudi, tmp_path, path, model, [java_rows], "tandem paused")

    # 5. a Java driver frozen while it writes its files (not holding the lock), its heartbeat still fresh to both
    #    sides; Tandem commits the same file group; resumed, Java's conflict check refuses its commit
    victim = HudiReference()
    try:
        slow_beat = {"hoodie.client.heartbeat.interval_in_ms": "60000"}
        before = data_files(path)
        bulk = [(2000 + i, "x", "a", 1.0, 6) for i in range(50_000)]
        victim.start_write(path, rows((2, "x", "a", 222.0, 6), *bulk), "upsert", {**java_opts, **slow_beat})
        wait_until(lambda: data_files(path) - before, 240, "the Java write's first file")
        victim.freeze()
        tandem_rows_ = rows((2, "x", "a", 2000.0, 6))
        proc = _tandem_write(tmp_path, path, {**settings, **slow_beat}, tandem_rows_, "r5")
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        victim.freeze(stop=False)
        assert not _java_outcome(victim), "Java committed over Tandem's commit of the same file group"
        model = _settle(java_hudi, tmp_path, path, model, [tandem_rows_], "java paused")

        # 6. a Java driver SIGKILLed mid-write while Tandem writes; Tandem's recover rolls Java's write back
        before = data_files(path)
        victim.start_write(
            path, rows(*[(1000 + i, "x", "c", 1.0, 6) for i in range(100_000)]), "bulk_insert", java_opts
        )
        wait_until(lambda: data_files(path) - before, 240, "the Java write's first file")
    finally:
        victim.kill()
        victim.close()
    tandem_rows_ = rows((7, "x", "b", 700.0, 7))
    proc = _tandem_write(tmp_path, path, settings, tandem_rows_, "r6")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err

    def recovered() -> bool:  # once Java's heartbeat has expired, recover rolls its write back
        ok("recover", path, *_sets(settings))
        return not list(Path(path, "city=c").glob("*.parquet"))

    wait_until(recovered, 60, "Tandem's recover to roll the killed Java write back")
    model = _settle(java_hudi, tmp_path, path, model, [tandem_rows_], "java killed")
    assert canon(java_hudi.read(path, metadata=False)) == expected(model)
