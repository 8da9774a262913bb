"""The pipelined ZooKeeper recipe against a real server: one round trip, kazoo's queue, no stray nodes."""

from __future__ import annotations

import threading
import time

import pytest

from locks.base import RetryPolicy
from locks.config import open_lock
from tests.conftest import wait_until
from timeline.errors import LockError


@pytest.fixture
def zk_lock(zookeeper, tmp_path, request):
    lock = open_lock(f"zk://{zookeeper.hosts}/recipe-{request.node.name[-40:]}", str(tmp_path), "t")
    yield lock
    lock.close()


@pytest.fixture
def kazoo_client(zookeeper):
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.hosts)
    client.start(10)
    yield client
    client.stop()
    client.close()


def test_the_listing_is_sent_before_the_create_is_answered(zk_lock):
    zk_lock.acquire(timeout_s=10)
    zk_lock.release()
    client, events = zk_lock.client, []
    call, create_async = client._call, client.create_async

    def sending(request, async_object):
        events.append(f"send {type(request).__name__}")
        return call(request, async_object)

    def creating(*args, **kwargs):
        result = create_async(*args, **kwargs)
        get = result.get

        def awaited(*a, **k):
            events.append("await Create")
            return get(*a, **k)

        result.get = awaited
        return result

    client._call, client.create_async = sending, creating
    try:
        zk_lock.acquire(timeout_s=10)
        zk_lock.release()
    finally:
        del client._call, client.create_async
    assert events == ["send Create", "send GetChildren", "await Create", "send Delete"]


def test_kazoo_recipe_and_the_pipelined_one_exclude_each_other(zk_lock, kazoo_client):
    from kazoo.exceptions import LockTimeout

    theirs = kazoo_client.Lock(zk_lock.path, "kazoo", extra_lock_patterns=["-lock-"])  # sees Curator-named nodes
    assert theirs.acquire(timeout=10)
    with pytest.raises(LockError):
        zk_lock.acquire(timeout_s=0.5)
    theirs.release()
    token = zk_lock.acquire(timeout_s=10)
    with pytest.raises(LockTimeout):
        theirs.acquire(timeout=0.5)
    assert zk_lock.owner().token == token
    zk_lock.release()
    assert theirs.acquire(timeout=10)
    theirs.release()
    assert kazoo_client.get_children(zk_lock.path) == []


def test_a_waiting_contender_takes_the_lock_when_the_holder_lets_go(zookeeper, zk_lock, tmp_path):
    zk_lock.acquire(timeout_s=10)
    other = open_lock(f"zk://{zookeeper.hosts}{zk_lock.path.rsplit('/', 1)[0]}", str(tmp_path), "t")
    queued, tokens = threading.Event(), []

    def contend() -> None:
        other.attempt_wait_s = 30  # one attempt: it must wake on the holder's delete, not retry
        queued.set()
        tokens.append(other.acquire(timeout_s=30))

    waiter = threading.Thread(target=contend)
    waiter.start()
    try:
        queued.wait(10)
        wait_until(lambda: len(zk_lock.client.get_children(zk_lock.path)) == 2, 10, "the contender queued")
        zk_lock.release()
        waiter.join(30)
        assert tokens and tokens[0] > 0 and other.owner().token == tokens[0]
    finally:
        waiter.join(30)
        other.close()


def test_a_node_left_by_a_lost_session_is_removed_before_the_next_create(zk_lock):
    zk_lock.acquire(timeout_s=10)
    left = zk_lock.client.get_children(zk_lock.path)
    zk_lock.lost.set()  # as after a suspension past the session timeout, when the session in fact survived
    zk_lock.release()
    assert zk_lock.client.get_children(zk_lock.path) == left
    token = zk_lock.acquire(timeout_s=2)
    children = zk_lock.client.get_children(zk_lock.path)
    assert len(children) == 1 and children != left and int(children[0][-10:]) == token


def drop_connection(client) -> None:
    """A network blip: kazoo's own hook closes the socket, and the client reconnects on the same session."""
    from kazoo.protocol.connection import _CONNECTION_DROP

    client._call(_CONNECTION_DROP, client.handler.async_result())


def test_a_release_whose_delete_gets_no_answer_sends_it_again(zk_lock):
    """The first delete's answer is lost (as when the connection drops with it in flight): the node must
    not stay and block every other contender until this provider acquires again."""
    from kazoo.exceptions import ConnectionLoss

    zk_lock.acquire(timeout_s=10)
    client, delete_async, sent = zk_lock.client, zk_lock.client.delete_async, []

    def losing_the_first(*args, **kwargs):
        sent.append(args[0])
        if len(sent) > 1:
            return delete_async(*args, **kwargs)
        lost = client.handler.async_result()
        lost.set_exception(ConnectionLoss())
        return lost

    client.delete_async = losing_the_first
    try:
        zk_lock.release()
    finally:
        del client.delete_async
    assert len(sent) == 2 and client.get_children(zk_lock.path) == []


def test_a_create_whose_answer_is_lost_leaves_no_node_behind(zk_lock):
    zk_lock.acquire(timeout_s=10)
    zk_lock.release()
    client, create_async = zk_lock.client, zk_lock.client.create_async

    def create_then_drop(*args, **kwargs):
        result = create_async(*args, **kwargs)
        drop_connection(client)
        return result

    zk_lock.retry = RetryPolicy(wait_time_s=5, num_retries=0)
    client.create_async = create_then_drop
    try:
        zk_lock.acquire(timeout_s=5)
        zk_lock.release()  # the answer arrived before the drop: held, then released
    except LockError:
        pass
    finally:
        del client.create_async
    assert client.get_children(zk_lock.path) == []


def test_a_holder_gone_before_its_watch_is_set_leaves_no_watch(zk_lock):
    zk_lock.acquire(timeout_s=10)
    gone = f"{zk_lock.path}/{'0' * 32}__lock__0000000000"
    assert zk_lock._lock._wait_gone(gone, time.monotonic() + 5, until=time.monotonic() + 5)
    assert not zk_lock.client._data_watchers.get(gone), "a watch for a name that never comes back"


def test_an_acquire_while_the_server_is_down_gives_up_within_its_bound(zookeeper, zk_lock):
    zk_lock.acquire(timeout_s=10)
    zk_lock.release()
    zookeeper.stop()
    outcome = []

    def contend() -> None:
        started = time.monotonic()
        try:
            zk_lock.acquire(timeout_s=2)
            outcome.append("acquired")
        except LockError as err:
            outcome.append((str(err), time.monotonic() - started))

    try:
        wait_until(lambda: not zk_lock.connected.is_set(), 20, "SUSPENDED")
        contender = threading.Thread(target=contend, daemon=True)
        contender.start()
        contender.join(15)
        assert outcome, "an acquire bounded by 2 s still waits for the server after 15 s"
        message, took = outcome[0]
        assert "timed out" in message and took < 4
    finally:
        zookeeper.start()
