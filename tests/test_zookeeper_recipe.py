"""The pipelined ZooKeeper recipe against a real server: one round trip, kazoo's queue, no stray nodes."""

from __future__ import annotations

import threading

import pytest

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

    theirs = kazoo_client.Lock(zk_lock.path, "kazoo")
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
