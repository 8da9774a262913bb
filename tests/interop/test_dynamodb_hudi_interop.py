"""Tandem's DynamoDB lock against Apache Hudi 0.15's DynamoDBBasedLockProvider (the AWS DynamoDB Lock Client 1.2.0),
both given the same `hoodie.write.lock.dynamodb.*` keys: one item in the lock client's layout, one lease protocol
(a holder is stale only once its record version stayed unchanged for its lease on the waiter's own clock), mutual
exclusion both ways, and Tandem's fencing token rising across Java's deletions of the item.

The Java side is the real provider class (hudi-aws 0.15.0 with the lock client and AWS SDK that Hudi 0.15 pins),
driven through py4j in one JVM for the module, on the reference venv's Spark jars and the Hudi bundle. The endpoint is
moto served one request at a time. The last tests need no JVM: items written by hand as a Java holder (dead or
heartbeating) or Tandem's earlier layout would leave them.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from locks.config import open_lock, uri_from_hudi_config
from locks.dynamodb_lock import FENCE_SUFFIX, KEY_ATTRIBUTE, DynamoDBLock
from tests.hudi_reference.client import aws_jars
from tests.hudi_reference.gateway import java_gateway, missing, reference_spec
from timeline.errors import LockError

DDB_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
TABLE = "trips"
LEASE_MS = 3000
LEASE_S = LEASE_MS / 1000
UUID_TEXT = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


@pytest.fixture(scope="module")
def jvm(tmp_path_factory):
    """One JVM with Hudi 0.15's bundle and hudi-aws for every case here; a skip only outside CI when not installed."""
    spec, jars = reference_spec(), aws_jars()
    if spec is None or not jars:
        missing("the Hudi 0.15 reference or its DynamoDB lock jars")
    # Hudi 0.15 builds its DynamoDbClient with an endpoint but no region: the SDK's chain supplies it, and the
    # credentials (its system properties come first in that chain).
    options = ["-Daws.region=us-east-1", "-Daws.accessKeyId=testing", "-Daws.secretAccessKey=testing"]
    with java_gateway(spec, tmp_path_factory.mktemp("jvm"), jars, options) as gateway:
        yield gateway


def hudi_conf(moto, table: str) -> dict[str, str]:
    """What a Java writer and a Tandem writer are both given. Hudi 0.15 uses wait_time_ms as the lock client's
    lease (heartbeat every third of it) and hands tryLock's time to the lock client as milliseconds."""
    return {
        "hoodie.write.lock.provider": DDB_PROVIDER,
        "hoodie.write.lock.dynamodb.table": table,
        "hoodie.write.lock.dynamodb.partition_key": TABLE,
        "hoodie.write.lock.dynamodb.region": "us-east-1",
        "hoodie.write.lock.dynamodb.endpoint_url": moto.url,
        "hoodie.write.lock.wait_time_ms": str(LEASE_MS),
    }


def tandem_lock(conf: dict[str, str], tmp_path: Path) -> DynamoDBLock:
    """Tandem from the same keys, with the same lease as Java's (Tandem's lease is its own `lease_ms`)."""
    lock = open_lock(uri_from_hudi_config(conf) + f"&lease_ms={LEASE_MS}", str(tmp_path), TABLE)
    assert isinstance(lock, DynamoDBLock) and lock.lock_key == TABLE
    return lock


def java_provider(jvm, conf: dict[str, str]):
    props = jvm.jvm.java.util.Properties()
    for key, value in conf.items():
        props.setProperty(key, value)
    lock_conf = jvm.jvm.org.apache.hudi.common.config.LockConfiguration(props)
    return jvm.jvm.org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider(lock_conf, None)


def java_try_lock(jvm, provider, millis: int) -> bool:
    """Hudi's tryLock: True when held; the lock client's LockNotGrantedException is False. Against a held item the
    lock client waits the holder's lease on top of `millis`."""
    from py4j.protocol import Py4JJavaError

    try:
        return bool(provider.tryLock(millis, jvm.jvm.java.util.concurrent.TimeUnit.MILLISECONDS))
    except Py4JJavaError as err:
        assert err.java_exception.getClass().getName() == "org.apache.hudi.exception.HoodieLockException", err
        return False


def private_field(obj, name: str):
    field = obj.getClass().getDeclaredField(name)
    field.setAccessible(True)
    return field.get(obj)


def kill_java_heartbeat(provider) -> None:
    """Stop the lock client's heartbeat thread as close() does, but without releasing: a holder that died."""
    client = private_field(provider, "client")
    shutting_down = client.getClass().getDeclaredField("shuttingDown")
    shutting_down.setAccessible(True)
    shutting_down.setBoolean(client, True)
    thread = private_field(client, "backgroundThread").get()
    thread.interrupt()
    thread.join(20_000)
    assert not thread.isAlive()


def lock_item(client, table: str, key: str = TABLE) -> dict | None:
    answer = client.get_item(TableName=table, Key={KEY_ATTRIBUTE: {"S": key}}, ConsistentRead=True)
    return answer.get("Item")


def boto_client(moto):
    import boto3

    return boto3.client("dynamodb", endpoint_url=moto.url, region_name="us-east-1")


@pytest.fixture
def shared(moto, aws_env, jvm, tmp_path):
    """A Java provider (it creates the table, as Hudi does) and a Tandem provider from the same Hudi keys."""
    conf = hudi_conf(moto, f"hudi_locks_{uuid.uuid4().hex[:10]}")
    java = java_provider(jvm, conf)
    tandem = tandem_lock(conf, tmp_path)
    yield conf, java, tandem, boto_client(moto)
    java.close()
    tandem.close()


def test_java_and_tandem_take_turns_on_one_item_and_the_token_keeps_rising(shared, jvm):
    import re

    conf, java, tandem, client = shared
    table = conf["hoodie.write.lock.dynamodb.table"]
    described = client.describe_table(TableName=table)["Table"]["KeySchema"]
    assert described == [{"AttributeName": "key", "KeyType": "HASH"}]  # the table Hudi made, used as it is
    first = tandem.acquire(timeout_s=10)
    tandem.release()
    assert lock_item(client, table) is None  # released as the lock client releases: the item is deleted

    assert java_try_lock(jvm, java, 5000)
    java_item = lock_item(client, table)
    assert java_item["leaseDuration"] == {"S": str(LEASE_MS)}
    assert re.match(UUID_TEXT, java_item["recordVersionNumber"]["S"])
    with pytest.raises(LockError):
        tandem.acquire(timeout_s=1)
    holder = tandem.owner()
    assert holder is not None and (holder.host, holder.pid) == (java_item["ownerName"]["S"], 0)
    java.unlock()
    assert lock_item(client, table) is None  # Java deleted the item, and Tandem's counter with it were it there

    second = tandem.acquire(timeout_s=10)
    assert second > first
    ours = lock_item(client, table)
    assert ours["ownerName"] == {"S": tandem.owner_name} and ours["leaseDuration"] == {"S": str(LEASE_MS)}
    assert not java_try_lock(jvm, java, 500)  # waits Tandem's lease and more; Tandem heartbeats throughout
    assert lock_item(client, table)["recordVersionNumber"] != ours["recordVersionNumber"]
    tandem.check()
    assert tandem.owner().token == second
    tandem.release()

    assert java_try_lock(jvm, java, 5000)
    with pytest.raises(LockError):
        tandem.acquire(timeout_s=1)
    java.unlock()
    third = tandem.acquire(timeout_s=10)
    assert third > second
    tandem.release()


def test_java_holder_without_heartbeat_is_taken_over_after_its_lease_on_tandems_clock(shared, jvm):
    conf, java, tandem, client = shared
    table = conf["hoodie.write.lock.dynamodb.table"]
    assert java_try_lock(jvm, java, 5000)
    kill_java_heartbeat(java)
    dead = lock_item(client, table)["recordVersionNumber"]
    started = time.monotonic()
    token = tandem.acquire(timeout_s=4 * LEASE_S)
    waited = time.monotonic() - started
    assert waited > LEASE_S, f"took over after {waited:.2f}s, before the {LEASE_S}s lease"
    assert lock_item(client, table)["ownerName"] == {"S": tandem.owner_name}
    java.unlock()  # the dead holder's late release is conditioned on its record version: it frees nothing
    item = lock_item(client, table)
    assert item["ownerName"] == {"S": tandem.owner_name} and item["recordVersionNumber"]["S"] != dead
    tandem.check()
    assert tandem.owner().token == token
    tandem.release()


def test_tandem_holder_without_renewal_is_taken_over_by_java(shared, jvm):
    conf, java, tandem, client = shared
    table = conf["hoodie.write.lock.dynamodb.table"]
    token = tandem.acquire(timeout_s=10)
    tandem.stop_heartbeat()  # a paused Tandem holder: no renewal, its process still alive
    assert java_try_lock(jvm, java, 4 * LEASE_MS)
    java_owner = lock_item(client, table)["ownerName"]
    assert java_owner != {"S": tandem.owner_name}
    with pytest.raises(LockError, match="lost"):
        tandem.check()  # Java waited out the lease Tandem counts from its send time: Tandem knows it lost
    tandem.release()  # conditioned on Tandem's record version: Java's lock stays
    assert lock_item(client, table)["ownerName"] == java_owner
    java.unlock()
    assert tandem.acquire(timeout_s=10) > token
    tandem.release()


def put_java_item(client, table: str, version: str, owner: str = "java-host-0d3f") -> None:
    """The item the lock client's PutItem leaves for a holder (no data, deleteLockOnRelease)."""
    client.put_item(
        TableName=table,
        Item={
            KEY_ATTRIBUTE: {"S": TABLE},
            "ownerName": {"S": owner},
            "leaseDuration": {"S": str(LEASE_MS)},
            "recordVersionNumber": {"S": version},
        },
    )


def test_a_heartbeating_java_item_keeps_tandem_out_and_a_still_one_is_taken_after_the_lease(moto, aws_env, tmp_path):
    """No JVM: a holder written by hand whose record version changes every third of the lease, as the lock client's
    heartbeat does, is never stale however long Tandem waits; once it stops changing, a lease later it is."""
    conf = hudi_conf(moto, f"hudi_locks_{uuid.uuid4().hex[:10]}")
    tandem = tandem_lock(conf, tmp_path)
    table = conf["hoodie.write.lock.dynamodb.table"]
    client = boto_client(moto)
    try:
        tandem.acquire(timeout_s=10)  # makes the table; a first token
        first = tandem.token
        tandem.release()
        put_java_item(client, table, str(uuid.uuid4()))
        stop = threading.Event()
        last_sent = [time.monotonic()]

        def heartbeat() -> None:
            while not stop.wait(LEASE_S / 3):
                last_sent[0] = time.monotonic()
                put_java_item(client, table, str(uuid.uuid4()))

        beating = threading.Thread(target=heartbeat)
        beating.start()
        try:
            with pytest.raises(LockError):
                tandem.acquire(timeout_s=2 * LEASE_S)  # twice the lease, the version moving all the while
        finally:
            stop.set()
            beating.join()
        still = lock_item(client, table)["recordVersionNumber"]
        token = tandem.acquire(timeout_s=4 * LEASE_S)
        # Tandem may have seen the last version during the failed acquisition already: the lease counts from there.
        assert time.monotonic() - last_sent[0] > LEASE_S
        assert token > first and lock_item(client, table)["recordVersionNumber"] != still
        tandem.release()
    finally:
        tandem.close()


def test_a_released_but_kept_java_item_is_free_at_once(moto, aws_env, tmp_path):
    """No JVM: the lock client with deleteLockOnRelease=false marks the item isReleased instead of deleting it."""
    conf = hudi_conf(moto, f"hudi_locks_{uuid.uuid4().hex[:10]}")
    tandem = tandem_lock(conf, tmp_path)
    table = conf["hoodie.write.lock.dynamodb.table"]
    client = boto_client(moto)
    try:
        first = tandem.acquire(timeout_s=10)
        tandem.release()
        put_java_item(client, table, str(uuid.uuid4()))
        client.update_item(
            TableName=table,
            Key={KEY_ATTRIBUTE: {"S": TABLE}},
            UpdateExpression="SET isReleased = :one",
            ExpressionAttributeValues={":one": {"S": "1"}},
        )
        assert tandem.owner() is None
        assert tandem.acquire(timeout_s=0.5) > first
        tandem.release()
    finally:
        tandem.close()


def test_the_counter_of_tandems_earlier_layout_carries_over(moto, aws_env, tmp_path):
    """No JVM: before this layout Tandem kept `fence` on the lock item itself; the first acquisition continues it."""
    conf = hudi_conf(moto, f"hudi_locks_{uuid.uuid4().hex[:10]}")
    tandem = tandem_lock(conf, tmp_path)
    table = conf["hoodie.write.lock.dynamodb.table"]
    client = boto_client(moto)
    try:
        tandem.force_release()  # makes the table
        client.put_item(
            TableName=table,
            Item={KEY_ATTRIBUTE: {"S": TABLE}, "fence": {"N": "41"}, "expires_at": {"N": "0"}},
        )
        assert tandem.acquire(timeout_s=5) == 42
        fence = lock_item(client, table, TABLE + FENCE_SUFFIX)
        assert fence["fence"] == {"N": "42"}
        tandem.release()
        assert tandem.acquire(timeout_s=5) == 43
        tandem.release()
        assert lock_item(client, table) is None
    finally:
        tandem.close()
