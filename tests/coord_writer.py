"""A writer process for the multi-process coordinator tests.

`loop`: upsert batches until a deadline; each batch has fresh keys of its own
plus a few hot keys shared by all writers (so writers conflict). One JSON line
per attempt on stdout: {"instant", "outcome": committed|conflict|error, "keys"}.

`paused`: begin a transaction, print "begun <instant>", wait for a line on
stdin (the test SIGSTOPs and SIGCONTs us meanwhile), then write and commit.
"""

from __future__ import annotations

import json
import sys
import time
import zlib

import pyarrow as pa

from coordinator.config import CoordinatorConfig
from coordinator.write.writer import LocalWriter
from timeline.errors import ConflictError, TandemError
from timeline.table import Table

PARTITIONS = ["p0", "p1"]
HOT_KEYS = [f"hot-{i}" for i in range(4)]


def partition_of(key: str) -> str:
    return PARTITIONS[0] if key.startswith("hot") else PARTITIONS[zlib.crc32(key.encode()) % 2]


def batch(name: str, seq: int) -> pa.Table:
    keys = [f"{name}-{seq}-{i}" for i in range(3)] + HOT_KEYS[seq % 2 :: 2]
    return pa.table(
        {
            "id": keys,
            "part": [partition_of(k) for k in keys],
            "writer": [name] * len(keys),
            "seq": [seq] * len(keys),
        }
    )


def loop(base: str, name: str, seconds: float, config: CoordinatorConfig) -> None:
    table = Table.open(base)
    writer = LocalWriter(table, coordinator=config)
    deadline = time.monotonic() + seconds
    seq = 0
    while time.monotonic() < deadline:
        data = batch(name, seq)
        record = {"writer": name, "seq": seq, "keys": data.column("id").to_pylist()}
        try:
            result = writer.write(data, "upsert")
            record.update(instant=result.instant, outcome="committed")
        except ConflictError as err:
            record.update(outcome="conflict", error=str(err))
        except TandemError as err:
            record.update(outcome="error", error=str(err))
        print(json.dumps(record), flush=True)
        seq += 1


def paused(base: str, config: CoordinatorConfig) -> None:
    from coordinator.protocol.transaction import Transaction

    table = Table.open(base)
    writer = LocalWriter(table, coordinator=config)
    txn = Transaction(table, config=config)
    txn.begin()
    print(f"begun {txn.time}", flush=True)
    sys.stdin.readline()
    try:
        with_meta = writer._prepare(batch("paused", 0), "upsert", None)
        for task, write in enumerate(writer.split_new("p0", with_meta)):
            txn.metadata.add(writer.write_file(txn, write, task))
        txn.commit()
        print("committed", flush=True)
    except TandemError as err:
        txn.abort()
        print(f"aborted: {err}", flush=True)


def main() -> None:
    mode, base = sys.argv[1], sys.argv[2]
    settings = json.loads(sys.argv[-1])
    config = CoordinatorConfig(**settings)
    if mode == "loop":
        loop(base, sys.argv[3], float(sys.argv[4]), config)
    else:
        paused(base, config)


if __name__ == "__main__":
    main()
