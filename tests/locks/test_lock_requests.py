"""Requests per acquire+release against the real servers: the lock's cost is its round trips.

DynamoDB: the AWS lock client's conditional PutItem of the lock item and an
unconditional ADD to Tandem's counter item to acquire, the lock client's
conditional DeleteItem to release; no table checks once the table exists. It
was two UpdateItems on one item before the lock item took the lock client's
layout (so that Hudi's DynamoDBBasedLockProvider and Tandem exclude each
other): the lock client replaces that item whole and deletes it on release, so
the fencing counter lives on an item of its own, and binding both writes in one
TransactWriteItems would make the lock client's plain writes to the lock item
fail with TransactionConflict while it runs (and return no counter).
ZooKeeper: the Lock recipe's own create, children listing and delete, nothing more.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

from locks.config import open_lock

ROUNDS = 3


def record_dynamodb(client) -> list[tuple[str, bool]]:
    """Every HTTP request the boto3 client sends, as (operation, carries a ConditionExpression)."""
    sent: list[tuple[str, bool]] = []

    def on_send(request, **_) -> None:
        target = request.headers["X-Amz-Target"]
        target = target.decode() if isinstance(target, bytes) else target
        body = json.loads(request.body or b"{}")
        sent.append((target.rsplit(".", 1)[-1], "ConditionExpression" in body))

    client.meta.events.register("before-send.dynamodb", on_send)
    return sent


def record_zookeeper(client) -> list[str]:
    """Every request the kazoo client queues for the server (its `_call`), by request type."""
    sent: list[str] = []
    call: Callable = client._call

    def counting(request, async_object):
        sent.append(type(request).__name__)
        return call(request, async_object)

    client._call = counting
    return sent


def acquire_release(lock) -> None:
    lock.acquire(timeout_s=10)
    lock.release()


LOCK_WRITES = [("PutItem", True), ("UpdateItem", False), ("DeleteItem", True)]


def test_dynamodb_acquire_release_is_the_lock_clients_writes_and_one_counter_bump(moto, aws_env, tmp_path):
    uri = f"dynamodb://locks-{uuid.uuid4().hex[:10]}?region=us-east-1&endpoint={moto.url}"
    first = open_lock(uri, str(tmp_path), "t")
    first_sent = record_dynamodb(first.client)
    acquire_release(first)  # the table does not exist yet: created when the first write says so
    assert ("CreateTable", False) in first_sent, first_sent
    # A new provider on the existing table checks nothing, even on its first acquisition.
    second = open_lock(uri, str(tmp_path), "t")
    for lock, sent in ((second, record_dynamodb(second.client)), (first, first_sent)):
        for _ in range(ROUNDS):
            sent.clear()
            acquire_release(lock)
            assert sent == LOCK_WRITES, sent
        lock.close()


def test_zookeeper_acquire_release_is_the_recipes_round_trips(zookeeper, tmp_path):
    lock = open_lock(f"zk://{zookeeper.hosts}/requests-{uuid.uuid4().hex[:8]}", str(tmp_path), "t")
    try:
        acquire_release(lock)  # connects and ensures the base path, once
        sent = record_zookeeper(lock.client)
        for _ in range(ROUNDS):
            sent.clear()
            acquire_release(lock)
            assert sent == ["Create", "GetChildren", "Delete"], sent
    finally:
        lock.close()


def test_dynamodb_table_dropped_between_holds_is_made_again(moto, aws_env, tmp_path):
    uri = f"dynamodb://locks-{uuid.uuid4().hex[:10]}?region=us-east-1&endpoint={moto.url}"
    lock = open_lock(uri, str(tmp_path), "t")
    try:
        acquire_release(lock)
        lock.client.delete_table(TableName=lock.table)
        assert lock.acquire(timeout_s=10) == 1  # a new table starts a new counter
        assert lock.owner().token == 1
    finally:
        lock.release()
        lock.close()


def test_zookeeper_base_path_dropped_between_holds_is_made_again(zookeeper, tmp_path):
    lock = open_lock(f"zk://{zookeeper.hosts}/requests-{uuid.uuid4().hex[:8]}", str(tmp_path), "t")
    try:
        acquire_release(lock)
        lock.client.delete(lock.path, recursive=True)
        token = lock.acquire(timeout_s=10)
        assert lock.owner().token == token
    finally:
        lock.close()
