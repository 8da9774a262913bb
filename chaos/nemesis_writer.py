"""One writer process of a nemesis run: upserts until SIGTERM, recording a history.

Each batch has keys of its own plus hot keys every writer shares, so writers
conflict. Every step goes to `<history>/<name>.jsonl` as it happens (appended
and flushed, so a SIGKILL loses nothing written before it): `attempt` (keys),
`begin` (instant), then `commit` (instant, fencing token) or `abort` (reason).
Usage: python -m chaos.nemesis_writer BASE NAME LOCK_URI HISTORY_DIR SETTINGS_JSON
"""

from __future__ import annotations

import json
import signal
import sys
import time
import zlib
from pathlib import Path

import pyarrow as pa

from coordinator.config import CoordinatorConfig
from coordinator.protocol.transaction import TOKEN_KEY
from coordinator.write.writer import LocalWriter
from timeline.errors import ConflictError, TandemError
from timeline.table import Table

PARTITIONS = ("p0", "p1")
HOT_KEYS = tuple(f"hot-{i}" for i in range(4))


def partition_of(key: str) -> str:
    return PARTITIONS[0] if key.startswith("hot") else PARTITIONS[zlib.crc32(key.encode()) % 2]


def batch(name: str, seq: int) -> pa.Table:
    keys = [f"{name}-{seq}-{i}" for i in range(3)] + list(HOT_KEYS[seq % 2 :: 2])
    return pa.table(
        {"id": keys, "part": [partition_of(k) for k in keys], "writer": [name] * len(keys), "seq": [seq] * len(keys)}
    )


def main() -> None:
    base, name, lock_uri, history_dir, settings = sys.argv[1:6]
    config = CoordinatorConfig(**{**json.loads(settings), "lock_uri": lock_uri})
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    history = open(Path(history_dir) / f"{name}.jsonl", "a", encoding="utf-8")

    def record(event: str, **fields) -> None:
        history.write(json.dumps({"writer": name, "event": event, "t": time.time(), **fields}) + "\n")
        history.flush()

    writer = LocalWriter(Table.open(base), coordinator=config)
    seq = 0
    while not stopping:
        data = batch(name, seq)
        record("attempt", seq=seq, keys=data.column("id").to_pylist())
        try:
            result = writer.write(data, "upsert", on_begin=lambda t, seq=seq: record("begin", seq=seq, instant=t))
            record("commit", seq=seq, instant=result.instant, token=int(result.metadata.extra_metadata[TOKEN_KEY]))
        except ConflictError as err:
            record("abort", seq=seq, reason="conflict", error=str(err))
        except TandemError as err:
            record("abort", seq=seq, reason="error", error=str(err))
        seq += 1
    history.close()


if __name__ == "__main__":
    main()
