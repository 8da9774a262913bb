"""Lock providers against real servers: mutual exclusion, fencing, and faults."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from chaos.servers import MotoServer
from locks.base import RetryPolicy
from locks.config import open_lock, uri_from_hudi_config
from tests.conftest import tandem, wait_until
from timeline.errors import BadInputError, LockError

PROVIDERS = ["file", "zk", "dynamodb"]


def worker(uri: str, base: str, n: int, counter, log, hold: float = 0.0) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.lock_worker", uri, base, str(n), str(counter), str(log), str(hold)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def start_holder(uri: str, base: str, tmp_path) -> tuple[subprocess.Popen, int]:
    proc = worker(uri, base, 0, tmp_path / "c", tmp_path / "l")
    line = proc.stdout.readline()
    assert line.startswith("READY"), proc.stderr.read()
    return proc, int(line.split()[1])


@pytest.mark.parametrize("lock_uri", PROVIDERS, indirect=True)
def test_mutual_exclusion_8_processes_x_50(lock_uri, tmp_path):
    base = str(tmp_path / "table")
    os.makedirs(base)
    counter, log = tmp_path / "counter", tmp_path / "tokens"
    counter.write_text("0")
    procs = [worker(lock_uri, base, 50, counter, log) for _ in range(8)]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    assert counter.read_text() == "400"
    tokens = [int(t) for t in log.read_text().split()]
    assert len(tokens) == 400
    assert all(a < b for a, b in zip(tokens, tokens[1:], strict=False)), "tokens must increase in acquisition order"


def test_memory_lock_threads_exclusive():
    shared = {"n": 0, "tokens": []}

    def run() -> None:
        lock = open_lock("memory", "/tables/x", "x")
        for _ in range(50):
            token = lock.acquire(timeout_s=30)
            value = shared["n"]
            time.sleep(0)
            shared["n"] = value + 1
            shared["tokens"].append(token)
            lock.release()

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shared["n"] == 400
    assert shared["tokens"] == sorted(shared["tokens"]) and len(set(shared["tokens"])) == 400


@pytest.mark.parametrize("lock_uri", PROVIDERS, indirect=True)
def test_killed_holder_frees_after_lease_not_before(lock_uri, tmp_path):
    base = str(tmp_path)
    holder, token = start_holder(lock_uri, base, tmp_path)
    contender = open_lock(lock_uri, base, "locktest")
    try:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        killed_at = time.monotonic()
        with pytest.raises(LockError):
            contender.acquire(timeout_s=0.5)
        assert time.monotonic() - killed_at < 2.5, "the probe itself must fit inside the lease"
        new_token = contender.acquire(timeout_s=20)
        assert new_token > token
        assert contender.owner().token == new_token
    finally:
        contender.release()
        contender.close()


@pytest.mark.parametrize("lock_uri", ["file", "dynamodb"], indirect=True)
def test_paused_holder_loses_and_its_late_release_frees_nothing(lock_uri, tmp_path):
    base = str(tmp_path)
    # The holder holds for 4 s then releases; we pause it past its 3 s lease meanwhile.
    holder = worker(lock_uri, base, 1, tmp_path / "c", tmp_path / "l", hold=4)
    (tmp_path / "c").write_text("0")
    wait_until(lambda: (tmp_path / "l").exists(), 30, "the holder to take the lock")
    holder.send_signal(signal.SIGSTOP)
    successor = open_lock(lock_uri, base, "locktest")
    try:
        old_token = int((tmp_path / "l").read_text())
        new_token = successor.acquire(timeout_s=30)
        assert new_token > old_token
        holder.send_signal(signal.SIGCONT)
        holder.wait(30)
        assert holder.returncode == 0
        # The late release must not have freed the successor's lock.
        assert successor.owner() is not None and successor.owner().token == new_token
        probe = open_lock(lock_uri, base, "locktest")
        with pytest.raises(LockError):
            probe.acquire(timeout_s=0.3)
        successor.check()
    finally:
        successor.release()
        successor.close()


def test_file_lock_holder_paused_inside_its_fence_bump_never_repeats_a_token(tmp_path, monkeypatch):
    """A holder whose lease passes between reading the fencing counter and writing it back (a nemesis found one)
    must not write an old value over its successor's: the successor's bump waits for the paused one."""
    import locks.file_lock as file_lock

    base = str(tmp_path)
    paused, resume, successor_bumping = threading.Event(), threading.Event(), threading.Event()
    first, successor = file_lock.FileLock(base, lease_s=0.5), file_lock.FileLock(base, lease_s=30)
    store = first._store_fence

    def store_after_a_pause(token: int) -> None:
        paused.set()
        assert resume.wait(30)
        store(token)

    def flock(handle, operation):
        if threading.current_thread().name == "successor":
            successor_bumping.set()
        real_flock(handle, operation)

    read_fence = successor._fence

    def successor_reads_fence() -> int:
        successor_bumping.set()
        return read_fence()

    real_flock = file_lock.fcntl.flock
    monkeypatch.setattr(file_lock.fcntl, "flock", flock)
    first._store_fence, successor._fence = store_after_a_pause, successor_reads_fence
    tokens: dict[str, int] = {}
    threads = [
        threading.Thread(target=lambda: tokens.__setitem__("first", first.acquire(timeout_s=30)), name="first"),
        threading.Thread(target=lambda: tokens.__setitem__("successor", successor.acquire(30)), name="successor"),
    ]
    threads[0].start()
    assert paused.wait(30)
    threads[1].start()  # breaks the stale lock file once the 0.5 s lease has passed, then bumps the counter
    assert successor_bumping.wait(30)
    resume.set()
    for thread in threads:
        thread.join(60)
    try:
        assert sorted(tokens.values()) == [1, 2], tokens
        assert successor._fence() == 2
        with pytest.raises(LockError):
            first.check()
    finally:
        successor.release()


def test_file_lock_counter_held_elsewhere_or_failing_leaves_no_lock_file(tmp_path, monkeypatch):
    """An acquire whose counter bump cannot run (its guard held by a paused process, or the bump failing) gives
    its lock file back and is bounded by its timeout; the lock is free again afterwards."""
    import fcntl

    import locks.file_lock as file_lock

    lock = file_lock.FileLock(str(tmp_path), lease_s=30)
    os.makedirs(lock.dir, exist_ok=True)
    guard = os.open(lock.fence_guard_path, os.O_RDONLY | os.O_CREAT, 0o644)
    fcntl.flock(guard, fcntl.LOCK_EX)  # as a holder paused inside its bump
    try:
        with pytest.raises(LockError):
            lock.acquire(timeout_s=0.5)
        assert not os.path.exists(lock.path)
    finally:
        os.close(guard)

    def failing(token: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(lock, "_store_fence", failing)
    with pytest.raises(LockError, match="disk full"):
        lock.acquire(timeout_s=5)
    assert not os.path.exists(lock.path)
    monkeypatch.undo()
    other = file_lock.FileLock(str(tmp_path), lease_s=30)
    assert other.acquire(timeout_s=5) == 1
    other.release()


def test_zookeeper_restart_while_held_suspends_then_reconnects(zookeeper, tmp_path):
    # The longest session the server grants: a JVM restart on a loaded two-core machine can take 20 s.
    lock = open_lock(f"zk://{zookeeper.hosts}/restart?session_timeout_ms=60000", str(tmp_path), "t")
    try:
        lock.acquire(timeout_s=10)
        zookeeper.stop()
        wait_until(lambda: not lock.connected.is_set(), 20, "SUSPENDED")
        assert not lock.lost.is_set()
        zookeeper.start()
        lock.check()  # blocks until RECONNECTED, then passes: the session survived
        assert lock.connected.is_set() and lock.is_held()
    finally:
        lock.close()


def test_zookeeper_down_past_session_timeout_means_lost(zookeeper, tmp_path):
    lock = open_lock(f"zk://{zookeeper.hosts}/down-long?session_timeout_ms=1500", str(tmp_path), "t")
    try:
        lock.acquire(timeout_s=10)
        zookeeper.stop()
        wait_until(lambda: not lock.connected.is_set(), 20, "SUSPENDED")
        with pytest.raises(LockError, match="longer than the session timeout"):
            lock.check()
        assert lock.lost.is_set() and not lock.is_held()
    finally:
        zookeeper.start()
        lock.close()


def test_zookeeper_session_expiry_tells_the_holder(zookeeper, tmp_path):
    from kazoo.client import KazooClient

    lock = open_lock(f"zk://{zookeeper.hosts}/expiry?session_timeout_ms=4000", str(tmp_path), "t")
    try:
        lock.acquire(timeout_s=10)
        session_id, password = lock.client.client_id
        # The standard trick: a second client on the same session closes it.
        twin = KazooClient(hosts=zookeeper.hosts, client_id=(session_id, password))
        twin.start(10)
        twin.stop()
        twin.close()
        wait_until(lock.lost.is_set, 30, "LOST after session expiry")
        assert not lock.is_held()
        other = open_lock(f"zk://{zookeeper.hosts}/expiry", str(tmp_path), "t")
        assert other.acquire(timeout_s=10) > lock.token
        other.close()
    finally:
        lock.close()


def test_zookeeper_digest_acl_protects_the_lock_node(zookeeper, tmp_path):
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    lock = open_lock(f"zk://{zookeeper.hosts}/acl?digest=tandem:secret", str(tmp_path), "t")
    intruder = KazooClient(hosts=zookeeper.hosts)
    try:
        lock.acquire(timeout_s=10)
        intruder.start(10)
        with pytest.raises(NoAuthError):
            intruder.delete("/acl/t", recursive=True)
        assert lock.owner().token == lock.token
    finally:
        intruder.stop()
        lock.close()


def test_dynamodb_endpoint_down_then_up(tmp_path, aws_env):
    server = MotoServer(tmp_path).start()
    uri = f"dynamodb://locks-updown?region=us-east-1&endpoint={server.url}&lease_ms=3000"
    lock = open_lock(uri, str(tmp_path), "t")
    lock.acquire(timeout_s=10)
    lock.release()
    server.stop()
    started = time.monotonic()
    with pytest.raises(LockError) as failure:
        open_lock(uri, str(tmp_path), "t").acquire(timeout_s=2)
    assert failure.value.exit_code == 4
    assert time.monotonic() - started < 10
    from timeline.table import Table

    table = Table.create(str(tmp_path / "table"), "t", ["id"])
    status = tandem("lock", "status", table.uri, "--lock", uri)
    assert status.returncode == 4 and "cannot reach the dynamodb lock service" in status.stderr
    # Down, then back up while an acquire is retrying: it succeeds within its bound.
    result: dict = {}
    retrying = open_lock(uri, str(tmp_path), "t")
    thread = threading.Thread(target=lambda: result.update(token=retrying.acquire(timeout_s=60)))
    thread.start()
    restarted = MotoServer(tmp_path)
    restarted.port = server.port
    restarted.start()
    try:
        thread.join(70)
        assert result.get("token", 0) >= 1
    finally:
        retrying.release()
        restarted.stop()


def test_dynamodb_table_with_wrong_key_schema_is_refused(moto, aws_env, tmp_path):
    import boto3

    client = boto3.client("dynamodb", endpoint_url=moto.url, region_name="us-east-1")
    client.create_table(
        TableName="wrongkeys",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    lock = open_lock(f"dynamodb://wrongkeys?endpoint={moto.url}", str(tmp_path), "t")
    with pytest.raises(BadInputError, match="single hash key 'key'"):
        lock.owner()


@pytest.mark.parametrize(
    "uri, message",
    [
        ("redis://x", "unknown scheme"),
        ("zk://", "hosts"),
        ("zk://host/path", "hosts"),
        ("zk://h:1", "base path is required"),
        ("zk://h:1/p?digest=nocolon", "digest must be user:password"),
        ("zk://h:1/p?bogus=1", "unknown parameter"),
        ("dynamodb://x", "not a DynamoDB table name"),
        ("dynamodb://tbl?endpoint=ftp://x", "must be an http"),
        ("file?lease_ms=abc", "is not a number"),
        ("file?lease_ms=-1", "must not be negative"),
    ],
)
def test_bad_lock_uris_name_the_bad_part(uri, message, tmp_path):
    with pytest.raises(BadInputError, match=message):
        open_lock(uri, str(tmp_path), "t")


def test_hudi_lock_keys_translate_to_uris():
    zk = uri_from_hudi_config(
        {
            "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider",
            "hoodie.write.lock.zookeeper.url": "a,b:2182",
            "hoodie.write.lock.zookeeper.port": "2181",
            "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
            "hoodie.write.lock.zookeeper.session_timeout_ms": "5000",
            "hoodie.write.lock.wait_time_ms": "1000",
        }
    )
    assert zk == "zk://a:2181,b:2182/hudi/locks?wait_time_ms=1000&session_timeout_ms=5000"
    ddb = uri_from_hudi_config(
        {
            "hoodie.write.lock.provider": "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider",
            "hoodie.write.lock.dynamodb.table": "locks",
            "hoodie.write.lock.dynamodb.region": "eu-west-1",
        }
    )
    assert ddb == "dynamodb://locks?region=eu-west-1"
    assert uri_from_hudi_config({}) == "file"
    with pytest.raises(BadInputError, match="not supported"):
        uri_from_hudi_config({"hoodie.write.lock.provider": "com.example.Nope"})


def test_retry_policy_bounds_attempts(tmp_path):
    holder = open_lock("memory", str(tmp_path), "bounded")
    holder.acquire()
    contender = open_lock("memory", str(tmp_path), "bounded")
    contender.retry = RetryPolicy(wait_time_s=30, num_retries=3)
    started = time.monotonic()
    with pytest.raises(LockError, match="could not acquire"):
        contender.acquire()
    assert time.monotonic() - started < 5, "stops after 4 attempts, long before the 30 s bound"
    holder.release()


def test_lock_cli_status_and_forced_release(tmp_path):
    from timeline.table import Table

    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    holder = open_lock("file?lease_ms=1500", table.uri, "t")
    token = holder.acquire(instant="20260101000000000")
    status = tandem("lock", "status", table.uri, "--json")
    assert status.returncode == 0, status.stderr
    assert f'"token": {token}' in status.stdout and '"held": true' in status.stdout
    refused = tandem("lock", "release", table.uri)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert holder.owner() is not None
    forced = tandem("lock", "release", table.uri, "--force")
    assert forced.returncode == 0 and f"pid {os.getpid()}" in forced.stdout
    assert holder.owner() is None
    wait_until(holder.lost.is_set, 30, "the holder to find its lock gone")
    holder.release()


def test_lease_renewer_renews_while_held_and_never_after_stop():
    """One idle thread serves successive holds; a stopped hold's renew is never called again."""
    from locks.lease_renewal import LeaseRenewer

    renewed_at: list[float] = []
    lost = threading.Event()
    renewer = LeaseRenewer("test", renewed_at.append, lost.set)
    first_calls: list[int] = []
    renewer.start(0.03, lambda: first_calls.append(1) or True)
    wait_until(lambda: len(first_calls) >= 3, 5, "three renewals of the first hold")
    renewer.stop()
    stopped_at = len(first_calls)
    second_calls: list[int] = []
    renewer.start(0.03, lambda: second_calls.append(1) or len(second_calls) < 2)
    wait_until(lost.is_set, 5, "the second hold to report its lock lost")
    renewer.close()
    assert len(first_calls) == stopped_at
    assert len(second_calls) == 2
    assert len(renewed_at) == stopped_at + 1
