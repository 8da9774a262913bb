"""Every create-if-absent decision on S3, raced by real processes against the moto endpoint.

Two spawned worker processes (kept for the whole module, so each round costs
requests, not interpreter start-ups) prepare a round, meet at a barrier placed
immediately before the conditional `PutObject` of the decision, add a random
0-4 ms of jitter so the order varies, and race. Each round checks exactly one
winner, a loser that gets False or its error, and the winner's bytes in the
store. A `tandem init` race runs the real command line in two subprocesses.

What the race can and cannot show: the endpoint is `chaos/moto_serial.py`,
which serves one request at a time, so two conditional PUTs of one key are
serialised by the server, as S3 serialises them. The race exercises
everything on the client side under real concurrency (two processes'
listings, reads and claims interleaving at request granularity, the 412
mapped to "lost", the loser's path). It does not test a store's atomicity
under concurrent PUTs: that is the store's guarantee (AWS documents it); the
probe (`timeline/io/store_probe.py`) only checks that a store honours the header
at all, sequentially. moto's threaded server is no better arbiter:
its `If-None-Match` check and the write are separate steps without a lock,
atomic only as far as thread scheduling happens to allow. The last test is
the negative control: through the proxy that drops the header, the same
harness sees two winners.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path

import pytest

from coordinator.mdt import deltacommit
from timeline.format import outcome, properties
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.instant import COMMIT, Instant, State
from timeline.io.storage import Storage
from timeline.mdt import layout
from timeline.mdt import records as mdt_records
from timeline.mdt.log import DATA, LogBlock, decode_log
from timeline.table import Table

ROUNDS = 5
RACERS = 2  # the machine has two cores
REPO = Path(__file__).resolve().parents[2]


# in the worker processes ------------------------------------------------------------------------------------------
_armed: dict = {}  # {"uri": target, "barrier": barrier} while a race is set up
_met: list[bool] = []  # set when this process waited at the barrier in the current task


def _install_barrier() -> None:
    """Make `Storage.create_if_absent` wait at the barrier (plus jitter) before the armed target's claim."""
    original = Storage.create_if_absent

    def create_if_absent(self, rel, data, durable=True):
        if _armed and self.uri(rel) == _armed["uri"]:
            barrier = _armed.pop("barrier")
            _armed.clear()
            barrier.wait(timeout=60)
            _met.append(True)
            time.sleep(random.uniform(0, 0.004))
        return original(self, rel, data, durable)

    Storage.create_if_absent = create_if_absent


def _arm(uri: str, barrier) -> None:
    _armed.update(uri=uri, barrier=barrier)


def _race_complete(task: dict, barrier) -> dict:
    table = Table.open(task["base"])
    timeline = table.timeline()
    inflight = Instant(task["time"], COMMIT, State.INFLIGHT)
    _arm(table.storage.uri(timeline.path(inflight.with_state(State.COMPLETED))), barrier)
    try:
        timeline.complete(inflight, task["payload"])
        return {"won": True}
    except Exception as err:
        return {"won": False, "detail": f"{type(err).__name__}: {err}"}


def _race_mdt_log(task: dict, barrier) -> dict:
    mdt = Table.open(task["base"]).metadata()
    _arm(task["target"], barrier)
    records = [mdt_records.file_list("", {f"racer-{task['racer']}.parquet": 10})]
    try:
        return {"won": True, "detail": deltacommit.apply(mdt, task["time"], records)}
    except Exception as err:
        return {"won": False, "detail": f"{type(err).__name__}: {err}"}


def _race_append_block(task: dict, barrier) -> dict:
    mdt = Table.open(task["base"]).metadata()
    _arm(task["target"], barrier)
    version = deltacommit.append_block(mdt, LogBlock(task["time"], DATA, []))
    return {"won": True, "version": version}


def _race_claim(task: dict, barrier) -> dict:
    storage = Storage(task["base"])
    _arm(storage.uri(outcome.outcome_path(task["time"])), barrier)
    stood = outcome.claim(storage, task["time"], task["decision"], task["payload"])
    mine = outcome._encode(task["decision"], task["payload"])  # the bytes this process's claim wrote (or tried to)
    return {"won": stood.mine, "decision": stood.decision, "payload": stood.payload, "bytes": mine}


def _race_create(task: dict, barrier) -> dict:
    _arm(Storage(task["base"]).uri(".hoodie/hoodie.properties"), barrier)
    try:
        Table.create(task["base"], task["name"], ["id"])
        return {"won": True}
    except Exception as err:
        return {"won": False, "detail": f"{type(err).__name__}: {err}"}


RACES = {
    "complete": _race_complete,
    "mdt_log": _race_mdt_log,
    "append_block": _race_append_block,
    "claim": _race_claim,
    "create": _race_create,
}


def _serve(env: dict, barrier, conn) -> None:
    """A worker: run each task it is sent, racing the others at the barrier."""
    os.environ.update(env)
    import timeline.io.storage as storage_module

    _install_barrier()
    while True:
        task = conn.recv()
        if task is None:
            return
        saved = dict(os.environ)
        try:
            os.environ.update(task.get("env", {}))
            storage_module._s3_client = None  # the endpoint may differ per task
            Storage(task["base"]).require_fencing()  # the probe, once per bucket, outside the race
            _met.clear()
            result = RACES[task["race"]](task, barrier)
            result["met"] = bool(_met)
        except BaseException:
            _armed.clear()
            result = {"error": traceback.format_exc()}
        finally:
            os.environ.clear()
            os.environ.update(saved)
        conn.send(result)


# in the test process ----------------------------------------------------------------------------------------------
class Racers:
    """`RACERS` spawned processes that race one task each per round."""

    def __init__(self, env: dict) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.barrier = ctx.Barrier(RACERS)
        self.pipes = []
        self.procs = []
        for _ in range(RACERS):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(env, self.barrier, theirs), daemon=True)
            proc.start()
            self.pipes.append(mine)
            self.procs.append(proc)

    def race(self, tasks: list[dict]) -> list[dict]:
        for pipe, task in zip(self.pipes, tasks, strict=True):
            pipe.send(task)
        results = []
        for pipe in self.pipes:
            assert pipe.poll(120), "a racer did not answer within 120 s"
            results.append(pipe.recv())
        errors = [r["error"] for r in results if "error" in r]
        if errors:
            self.barrier.reset()
            raise AssertionError("\n".join(errors))
        assert all(r["met"] for r in results), f"a racer never reached its claim: {results}"
        return results

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.terminate()


@pytest.fixture(scope="module")
def racers(moto):
    env = {
        "AWS_ENDPOINT_URL_S3": moto.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "TANDEM_ALLOW_UNFENCED_STORE": "0",
    }
    pool = Racers(env)
    yield pool
    pool.close()
    print(f"\nwinning racer per round: {WINS}")


WINS: dict[str, list[int]] = {}  # race -> winning racer per round, shown when a check fails


def one_winner(race: str, results: list[dict]) -> int:
    winners = [i for i, r in enumerate(results) if r["won"]]
    WINS.setdefault(race, []).extend(winners)
    assert len(winners) == 1, f"{race}: {len(winners)} winners: {results}"
    return winners[0]


def _time(n: int) -> str:
    return f"2025010100000{n:04d}"


def test_completing_the_same_instant(s3_base, racers):
    for r in range(ROUNDS):
        base = f"{s3_base}{r}"
        table = Table.create(base, "t", ["id"], with_metadata=False)
        timeline = table.timeline()
        instant = timeline.create_requested(Instant(_time(1), COMMIT, State.REQUESTED))
        timeline.transition_to_inflight(instant, b"{}")
        payloads = [
            CommitMetadata(operation_type="INSERT", extra_metadata={"racer": str(i), "round": str(r)}).to_json_bytes()
            for i in range(RACERS)
        ]
        results = racers.race([{"race": "complete", "base": base, "time": _time(1), "payload": p} for p in payloads])
        winner = one_winner("complete", results)
        for i, result in enumerate(results):
            if i != winner:
                assert "is already completed" in result["detail"]
        done = Instant(_time(1), COMMIT, State.COMPLETED)
        assert table.storage.read_bytes(timeline.path(done)) == payloads[winner]


def test_claiming_the_same_mdt_log_version(s3_base, racers):
    for r in range(ROUNDS):
        base = f"{s3_base}{r}"
        table = Table.create(base, "t", ["id"], hudi_format=False)
        mdt = table.metadata()
        current = mdt.slices().get(layout.writer_slice(mdt.timeline()))
        target = layout.log_path(layout.writer_slice(mdt.timeline()), (current.max_version if current else 0) + 1)
        times = [_time(10 + i) for i in range(RACERS)]
        results = racers.race(
            [
                {"race": "mdt_log", "base": base, "racer": i, "time": t, "target": mdt.storage.uri(target)}
                for i, t in enumerate(times)
            ]
        )
        winner = one_winner("mdt_log", results)
        assert results[winner]["detail"] == target
        for i, result in enumerate(results):
            if i != winner:
                assert (
                    result["detail"].startswith("ConflictError: metadata log")
                    and "claimed by another" in result["detail"]
                )
        blocks = decode_log(mdt.storage.read_bytes(target)).blocks
        assert [b.instant for b in blocks if b.block_type == DATA][0] == times[winner]
        assert f"racer-{winner}.parquet" in str(blocks[0].records)
        states = {i.time: i.state for i in mdt.timeline().instants}
        assert states[times[winner]] == State.COMPLETED
        assert all(states[t] == State.INFLIGHT for i, t in enumerate(times) if i != winner)


def test_appending_blocks_at_the_same_version_keeps_both(s3_base, racers):
    """append_block moves up on a lost claim: both racers land, in different versions, nothing overwritten."""
    for r in range(ROUNDS):
        base = f"{s3_base}{r}"
        mdt = Table.create(base, "t", ["id"], hudi_format=False).metadata()
        slice_ = layout.writer_slice(mdt.timeline())
        target = mdt.storage.uri(layout.log_path(slice_, 1))
        times = [_time(20 + i) for i in range(RACERS)]
        results = racers.race([{"race": "append_block", "base": base, "time": t, "target": target} for t in times])
        versions = [res["version"] for res in results]
        assert sorted(versions) == list(range(1, RACERS + 1)), versions
        WINS.setdefault("append_block", []).append(versions.index(1))
        for t, v in zip(times, versions, strict=True):
            assert [b.instant for b in decode_log(mdt.storage.read_bytes(layout.log_path(slice_, v))).blocks] == [t]


def test_claiming_the_decision_on_an_instant(s3_base, racers):
    for r in range(ROUNDS):
        base = f"{s3_base}{r}"
        storage = Storage(base)
        decisions = [(outcome.COMMIT, outcome.ROLLBACK)[(i + r) % 2] for i in range(RACERS)]
        tasks = [
            {"race": "claim", "base": base, "time": _time(30), "decision": d, "payload": f"racer {i}".encode()}
            for i, d in enumerate(decisions)
        ]
        results = racers.race(tasks)
        winner = one_winner("claim", results)
        for result in results:  # everyone sees the decision that stands: the winner's
            assert (result["decision"], result["payload"]) == (decisions[winner], f"racer {winner}".encode())
        assert storage.read_bytes(outcome.outcome_path(_time(30))) == results[winner]["bytes"]
        assert outcome.read(storage, _time(30)).decision == decisions[winner]


def test_creating_the_same_table(s3_base, racers):
    for r in range(ROUNDS):
        base = f"{s3_base}{r}"
        names = [f"racer{i}" for i in range(RACERS)]
        results = racers.race([{"race": "create", "base": base, "name": n} for n in names])
        winner = one_winner("create", results)
        for i, result in enumerate(results):
            if i != winner:
                assert result["detail"] == f"BadInputError: {base} is already a table"
        table = Table.open(base)
        assert table.config.name == names[winner]
        mdt_props = properties.loads(table.metadata().storage.read_bytes(".hoodie/hoodie.properties").decode())
        assert mdt_props["hoodie.table.name"] == f"{names[winner]}_metadata"


CLI_RACER = """
import os, sys, time
from timeline.io.storage import Storage
ready, go, base = sys.argv[1:4]
Storage(base).require_fencing()  # imports, client and probe done before the start line
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.0005)
sys.argv = ["tandem", "init", base, *sys.argv[4:]]
from coordinator.cli import main
main()
"""


def test_tandem_init_raced_by_two_processes(s3_base, tmp_path):
    """The command line itself: two `tandem init` of one path started together, exactly one creates it."""
    for r in range(2):
        base = f"{s3_base}cli{r}"
        go = tmp_path / f"go-{r}"
        ready = [tmp_path / f"ready-{r}-{i}" for i in range(RACERS)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CLI_RACER, str(ready[i]), str(go), base]
                + ["--name", f"cli{i}", "--record-key", "id"],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(RACERS)
        ]
        deadline = time.monotonic() + 60
        while not all(p.exists() for p in ready):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a racer died early"
            time.sleep(0.01)
        go.touch()
        outs = [p.communicate(timeout=60) for p in procs]
        codes = [p.returncode for p in procs]
        assert sorted(codes) == [0] + [2] * (RACERS - 1), (codes, outs)
        winner = codes.index(0)
        for i, (_, err) in enumerate(outs):
            if i != winner:
                assert err.strip() == f"error: {base} is already a table", err
        assert Table.open(base).config.name == f"cli{winner}"


def test_negative_control_a_store_without_the_fence_gives_two_winners(s3_base, racers, moto):
    """The same harness through the header-dropping proxy (override set): two winners, the first one's bytes lost."""
    from tests.timeline.test_store_fencing import DropIfNoneMatchProxy

    proxy = DropIfNoneMatchProxy(moto.port).start()
    try:
        base = f"{s3_base}-unfenced-{uuid.uuid4().hex[:6]}"
        table = Table.create(base, "t", ["id"], with_metadata=False)
        timeline = table.timeline()
        instant = timeline.create_requested(Instant(_time(1), COMMIT, State.REQUESTED))
        timeline.transition_to_inflight(instant, b"{}")
        env = {"AWS_ENDPOINT_URL_S3": proxy.url, "TANDEM_ALLOW_UNFENCED_STORE": "1"}
        payloads = [f'{{"racer": {i}}}'.encode() for i in range(RACERS)]
        results = racers.race(
            [{"race": "complete", "base": base, "time": _time(1), "payload": p, "env": env} for p in payloads]
        )
        assert [r["won"] for r in results] == [True] * RACERS
        stored = table.storage.read_bytes(timeline.path(Instant(_time(1), COMMIT, State.COMPLETED)))
        assert stored in payloads  # one racer's completed instant was silently overwritten
    finally:
        proxy.stop()
