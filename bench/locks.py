"""Lock cost against the physical floor of each lock service, in one process, interleaved.

Each lock runs round-robin (A, B, A, B, ...) with its own floor only:

  dynamodb tandem     DynamoDBLock acquire + release
  dynamodb floor      the protocol's three writes (PutItem, fence ADD, DeleteItem) on other items, same client
  zookeeper tandem    ZookeeperLock acquire + release (kazoo's Lock recipe)
  zookeeper floor     an ephemeral sequential create + delete on the same kazoo session
  zookeeper recipe    create + children listing + delete: the least the recipe can do
  file tandem         FileLock acquire + release (the default)
  memory tandem       the in-process lock

Not all services in one round: the moto endpoint keeps a core busy after each
answer, and a fixed round order hands that cost to whatever step comes next
(a ZooKeeper acquire right after a DynamoDB call took 3 ms instead of 1).

Then the requests each lock sends per acquire+release (counted apart from the
timing), the issue's targets, and acquisitions per second with 4 processes
contending for the file, ZooKeeper and DynamoDB locks.

Run: .venv/bin/python -m bench.locks [--quick]
(--quick: few rounds, report written to the work folder, not docs/bench).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.report import interleaved, summarize, write_report
from chaos.servers import MotoServer, ZooKeeperServer
from locks.base import LockProvider
from locks.config import open_lock
from locks.dynamodb_lock import KEY_ATTRIBUTE, DynamoDBLock
from locks.zookeeper_lock import ZookeeperLock

ROUNDS, QUICK_ROUNDS = 500, 30
COUNTED_ROUNDS = 20
CONTENDERS = 4
PER_CONTENDER = 50
# the lock client's PutItem and DeleteItem, and the fence counter the lock client's item cannot hold
TARGET_DYNAMODB_REQUESTS = 3
TARGET_DYNAMODB_RATIO = 1.3
TARGET_ZOOKEEPER_RATIO = 1.2


def hold(lock: LockProvider) -> Callable[[], None]:
    def run() -> None:
        lock.acquire(timeout_s=30)
        lock.release()

    return run


def dynamodb_floor(lock: DynamoDBLock) -> Callable[[], None]:
    """The protocol's three writes, sent bare on the lock's own client, to items no lock uses: the lock client's
    conditional PutItem and DeleteItem (what Hudi's provider sends, less its GetItem) and the fence counter's ADD."""
    client = lock.client
    key, fence = {KEY_ATTRIBUTE: {"S": "bench-floor"}}, {KEY_ATTRIBUTE: {"S": "bench-floor#fence"}}

    def run() -> None:
        rvn = uuid.uuid4().hex
        client.put_item(
            TableName=lock.table,
            Item={
                **key,
                "ownerName": {"S": "floor"},
                "leaseDuration": {"S": "60000"},
                "recordVersionNumber": {"S": rvn},
            },
            ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": KEY_ATTRIBUTE},
        )
        client.update_item(
            TableName=lock.table,
            Key=fence,
            UpdateExpression="ADD fence :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )
        client.delete_item(
            TableName=lock.table,
            Key=key,
            ConditionExpression="recordVersionNumber = :mine",
            ExpressionAttributeValues={":mine": {"S": rvn}},
        )

    return run


def zookeeper_floor(lock: ZookeeperLock, list_children: bool) -> Callable[[], None]:
    """An ephemeral sequential node made and deleted on the lock's own session (listed between, as the recipe does)."""
    client, parent = lock.client, f"{lock.path}-floor"
    client.ensure_path(parent)

    def run() -> None:
        node = client.create(f"{parent}/n-", ephemeral=True, sequence=True)
        if list_children:
            client.get_children(parent)
        client.delete(node)

    return run


def count_dynamodb(lock: DynamoDBLock, rounds: int) -> dict[str, float]:
    """Requests per acquire+release, by operation, over `rounds` of them."""
    sent: Counter = Counter()

    def on_send(request, **_) -> None:
        target = request.headers["X-Amz-Target"]
        sent[(target.decode() if isinstance(target, bytes) else target).rsplit(".", 1)[-1]] += 1

    lock.client.meta.events.register("before-send.dynamodb", on_send)
    try:
        for _ in range(rounds):
            hold(lock)()
    finally:
        lock.client.meta.events.unregister("before-send.dynamodb", on_send)
    return per_round(sent, rounds)


def count_zookeeper(lock: ZookeeperLock, rounds: int) -> dict[str, float]:
    """Round trips per acquire+release, by request type, over `rounds` of them (every request goes through `_call`)."""
    sent: Counter = Counter()
    call = lock.client._call

    def counting(request, async_object):
        sent[type(request).__name__] += 1
        return call(request, async_object)

    lock.client._call = counting
    try:
        for _ in range(rounds):
            hold(lock)()
    finally:
        del lock.client._call
    return per_round(sent, rounds)


def per_round(sent: Counter, rounds: int) -> dict[str, float]:
    return {"total": sum(sent.values()) / rounds, **{op: n / rounds for op, n in sorted(sent.items())}}


def contention(uri: str, base: str, work: Path) -> float:
    counter, log = work / "counter", work / "log"
    counter.write_text("0")
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.lock_worker", uri, base, str(PER_CONTENDER), str(counter), str(log)]
        )
        for _ in range(CONTENDERS)
    ]
    for proc in procs:
        proc.wait(600)
        if proc.returncode != 0:
            raise RuntimeError(f"contender exited with {proc.returncode}")
    elapsed = time.perf_counter() - started
    assert counter.read_text() == str(CONTENDERS * PER_CONTENDER)
    return CONTENDERS * PER_CONTENDER / elapsed


def measure(uris: dict[str, str], work: Path, rounds: int) -> dict[str, Any]:
    locks = {name: open_lock(uri, str(work / f"table-{name}"), "bench") for name, uri in uris.items()}
    dynamodb, zookeeper = locks["dynamodb"], locks["zookeeper"]
    assert isinstance(dynamodb, DynamoDBLock) and isinstance(zookeeper, ZookeeperLock)
    try:
        # The first acquisition connects and makes the DynamoDB table and the ZooKeeper path: counted, not timed.
        requests = {
            "dynamodb first": count_dynamodb(dynamodb, 1),
            "dynamodb": count_dynamodb(dynamodb, COUNTED_ROUNDS),
            "zookeeper first": count_zookeeper(zookeeper, 1),
            "zookeeper": count_zookeeper(zookeeper, COUNTED_ROUNDS),
        }
        for lock in (locks["file"], locks["memory"]):
            hold(lock)()
        comparisons = {
            "dynamodb": {"dynamodb tandem": hold(dynamodb), "dynamodb floor": dynamodb_floor(dynamodb)},
            "zookeeper": {
                "zookeeper tandem": hold(zookeeper),
                "zookeeper floor": zookeeper_floor(zookeeper, list_children=False),
                "zookeeper recipe": zookeeper_floor(zookeeper, list_children=True),
            },
            "local": {"file tandem": hold(locks["file"]), "memory tandem": hold(locks["memory"])},
        }
        latency = {}
        for systems in comparisons.values():
            interleaved(systems, 3)  # warm every path before the measured rounds
            samples, _ = interleaved(systems, rounds)
            latency.update({name: summarize(s) for name, s in samples.items()})
    finally:
        for lock in locks.values():
            lock.close()
    return {"requests_per_acquire_release": requests, "latency": latency}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds; report kept in the work folder")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    work = Path(tempfile.mkdtemp(prefix="tandem-lock-bench-"))
    (work / "zk").mkdir()
    zk = ZooKeeperServer(work / "zk").start()
    moto = MotoServer(work).start()
    uris = {
        "dynamodb": f"dynamodb://bench-locks?region=us-east-1&endpoint={moto.url}",
        "zookeeper": f"zk://{zk.hosts}/bench",
        "file": "file",
        "memory": "memory",
    }
    for name in uris:
        (work / f"table-{name}").mkdir()
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    started = time.perf_counter()
    try:
        results: dict[str, Any] = {"quick": args.quick, "rounds": rounds, **measure(uris, work, rounds)}
        results["acquisitions_per_s_4way"] = {}
        for name in ("file", "zookeeper", "dynamodb"):
            (work / name).mkdir()
            results["acquisitions_per_s_4way"][name] = contention(uris[name], str(work / f"table-{name}"), work / name)
    finally:
        zk.stop()
        moto.stop()
    results["total_s"] = round(time.perf_counter() - started, 1)
    report(results, work if args.quick else None)
    if not args.quick:
        shutil.rmtree(work, ignore_errors=True)


def report(results: dict[str, Any], out: Path | None) -> None:
    latency, requests = results["latency"], results["requests_per_acquire_release"]

    def ratio(system: str, floor: str, figure: str) -> float:
        return latency[system][figure] / latency[floor][figure]

    results["ratios"] = {
        f"{system} / {floor} {figure}": round(ratio(system, floor, f"{figure}_ms"), 3)
        for system, floor in (
            ("dynamodb tandem", "dynamodb floor"),
            ("zookeeper tandem", "zookeeper floor"),
            ("zookeeper tandem", "zookeeper recipe"),
        )
        for figure in ("median", "p90")
    }
    dynamodb_ratio = ratio("dynamodb tandem", "dynamodb floor", "median_ms")
    zookeeper_ratio = ratio("zookeeper tandem", "zookeeper floor", "median_ms")
    results["targets"] = {
        "dynamodb_requests_per_acquire_release": {
            "value": requests["dynamodb"]["total"],
            "target": f"<= {TARGET_DYNAMODB_REQUESTS}",
            "met": requests["dynamodb"]["total"] <= TARGET_DYNAMODB_REQUESTS,
        },
        "dynamodb_median_vs_its_three_writes": {
            "value": round(dynamodb_ratio, 3),
            "target": f"<= {TARGET_DYNAMODB_RATIO}x",
            "met": dynamodb_ratio <= TARGET_DYNAMODB_RATIO,
        },
        "zookeeper_median_vs_ephemeral_create_delete": {
            "value": round(zookeeper_ratio, 3),
            "target": f"<= {TARGET_ZOOKEEPER_RATIO}x",
            "met": zookeeper_ratio <= TARGET_ZOOKEEPER_RATIO,
        },
    }
    print(f"acquire+release, {results['rounds']} interleaved rounds")
    print(f"{'system':<18} {'median ms':>10} {'p90 ms':>9}")
    for name, figures in latency.items():
        print(f"{name:<18} {figures['median_ms']:>10.3f} {figures['p90_ms']:>9.3f}")
    for name, value in results["ratios"].items():
        print(f"ratio {name}: {value:.2f}x")
    for name, counted in requests.items():
        print(f"requests per acquire+release, {name}: {json.dumps(counted)}")
    for name, rate in results["acquisitions_per_s_4way"].items():
        print(f"acquisitions/s, {CONTENDERS} processes contending, {name}: {rate:.1f}")
    for name, t in results["targets"].items():
        print(f"target {name}: {t['value']:g} (target {t['target']}): {'met' if t['met'] else 'NOT met'}")
    groups = {
        "DynamoDB": {
            "tandem": latency["dynamodb tandem"]["median_ms"],
            "raw floor": latency["dynamodb floor"]["median_ms"],
        },
        "ZooKeeper": {
            "tandem": latency["zookeeper tandem"]["median_ms"],
            "raw floor": latency["zookeeper floor"]["median_ms"],
            "raw recipe floor": latency["zookeeper recipe"]["median_ms"],
        },
        "file": {"tandem": latency["file tandem"]["median_ms"]},
        "in-process": {"tandem": latency["memory tandem"]["median_ms"]},
    }
    path = write_report(
        "locks",
        results,
        None,
        "acquire+release median ms (log scale)",
        "Lock acquire+release against each service's floor (interleaved)",
        groups=groups,
        log=True,
        out=out,
    )
    print(f"wrote {path} and {path.with_suffix('.png')} (total {results['total_s']} s)")


if __name__ == "__main__":
    main()
