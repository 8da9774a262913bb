"""Tandem's ZooKeeper lock against Apache Hudi 0.15's ZookeeperBasedLockProvider (Curator's InterProcessMutex),
both given the same `hoodie.write.lock.*` keys: one znode, one queue, mutual exclusion both ways.

The Java side is the real provider class from the Hudi bundle, driven through py4j in one JVM for the module
(classpath: the reference venv's Spark jars, then the bundle, as `spark.jars` would load it). A last test needs
no JVM: a Curator-named node made by hand with kazoo is respected.
"""

from __future__ import annotations

import re
import threading
import uuid

import pytest

from locks.config import open_lock, uri_from_hudi_config
from locks.zookeeper_recipe import CONTENDER
from tests.conftest import wait_until
from tests.hudi_reference.gateway import java_gateway, missing, reference_spec
from timeline.errors import LockError

ZK_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
CURATOR_NODE = re.compile(r"^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-(\d{10})$")
TABLE = "trips"


@pytest.fixture(scope="module")
def jvm(tmp_path_factory):
    """One JVM with Hudi 0.15's bundle for every case here; a skip only outside CI when it is not installed."""
    spec = reference_spec()
    if spec is None:
        missing("the Hudi 0.15 reference")
    with java_gateway(spec, tmp_path_factory.mktemp("jvm")) as gateway:
        yield gateway


def hudi_conf(zookeeper, base_path: str) -> dict[str, str]:
    """What a Java writer and a Tandem writer are both given. The url carries the port: Hudi 0.15's provider
    hands `url` to Curator as the connect string and never reads `.port`."""
    return {
        "hoodie.write.lock.provider": ZK_PROVIDER,
        "hoodie.write.lock.zookeeper.url": zookeeper.hosts,
        "hoodie.write.lock.zookeeper.port": str(zookeeper.port),
        "hoodie.write.lock.zookeeper.base_path": base_path,
        "hoodie.write.lock.zookeeper.lock_key": TABLE,
        "hoodie.write.lock.zookeeper.session_timeout_ms": "10000",
        "hoodie.write.lock.zookeeper.connection_timeout_ms": "5000",
        "hoodie.write.lock.wait_time_ms": "20000",
        "hoodie.write.lock.num_retries": "3",
        "hoodie.write.lock.wait_time_ms_between_retry": "200",
        "hoodie.write.lock.max_wait_time_ms_between_retry": "1000",
    }


def java_provider(jvm, conf: dict[str, str]):
    props = jvm.jvm.java.util.Properties()
    for key, value in conf.items():
        props.setProperty(key, value)
    lock_conf = jvm.jvm.org.apache.hudi.common.config.LockConfiguration(props)
    return jvm.jvm.org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider(lock_conf, None)


def java_try_lock(jvm, provider, seconds: int) -> bool:
    """Hudi's tryLock: True when held; a timeout is a HoodieLockException (FAILED_TO_ACQUIRE), here False."""
    from py4j.protocol import Py4JJavaError

    try:
        return bool(provider.tryLock(seconds, jvm.jvm.java.util.concurrent.TimeUnit.SECONDS))
    except Py4JJavaError as err:
        assert err.java_exception.getClass().getName() == "org.apache.hudi.exception.HoodieLockException", err
        return False


@pytest.fixture
def shared(zookeeper, jvm, tmp_path, request):
    """A Java provider and a Tandem provider built from the same Hudi keys, and a kazoo client to look."""
    from kazoo.client import KazooClient

    conf = hudi_conf(zookeeper, f"/hudi/interop-{uuid.uuid4().hex[:8]}")
    java = java_provider(jvm, conf)
    tandem = open_lock(uri_from_hudi_config(conf), str(tmp_path), TABLE)
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(10)
    yield conf, java, tandem, client
    java.close()
    tandem.close()
    client.stop()
    client.close()


def lock_path(conf: dict[str, str]) -> str:
    return f"{conf['hoodie.write.lock.zookeeper.base_path']}/{conf['hoodie.write.lock.zookeeper.lock_key']}"


def test_both_lock_the_same_znode_with_curator_names(shared, jvm):
    conf, java, tandem, client = shared
    assert tandem.path == lock_path(conf)
    assert java_try_lock(jvm, java, 10)
    [java_node] = client.get_children(tandem.path)  # Curator's node is a child of Tandem's lock path
    assert CURATOR_NODE.match(java_node), java_node
    java.unlock()
    token = tandem.acquire(timeout_s=10)
    [ours] = client.get_children(tandem.path)
    assert CURATOR_NODE.match(ours) and int(CURATOR_NODE.match(ours).group(1)) == token > int(java_node[-10:])
    tandem.release()


def test_java_holds_then_tandem_waits_and_gets_it_on_unlock(shared, jvm):
    conf, java, tandem, client = shared
    assert java_try_lock(jvm, java, 10)
    java_sequence = int(client.get_children(tandem.path)[0][-10:])
    with pytest.raises(LockError):
        tandem.acquire(timeout_s=1)
    assert tandem.owner().token == java_sequence
    tokens: list[int] = []
    waiter = threading.Thread(target=lambda: tokens.append(tandem.acquire(timeout_s=20)))
    waiter.start()
    try:
        wait_until(lambda: len(client.get_children(tandem.path)) == 2, 10, "Tandem queued behind Java")
        assert not tokens
        java.unlock()
        waiter.join(20)
        assert tokens and tokens[0] > java_sequence and tandem.owner().token == tokens[0]
    finally:
        waiter.join(20)
    tandem.release()
    assert client.get_children(tandem.path) == []


def test_tandem_holds_then_java_times_out_and_gets_it_on_release(shared, jvm):
    conf, java, tandem, client = shared
    token = tandem.acquire(timeout_s=10)
    assert not java_try_lock(jvm, java, 1)
    assert client.get_children(tandem.path) == [f"{tandem._lock.node}"]  # Curator left the queue on timeout
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(java_try_lock(jvm, java, 20)))
    waiter.start()
    try:
        wait_until(lambda: len(client.get_children(tandem.path)) == 2, 10, "Java queued behind Tandem")
        assert not got
        tandem.check()
        tandem.release()
        waiter.join(20)
        assert got == [True]
        [java_node] = client.get_children(tandem.path)
        assert int(java_node[-10:]) > token
        with pytest.raises(LockError):
            tandem.acquire(timeout_s=1)
    finally:
        waiter.join(20)
    java.unlock()
    assert tandem.acquire(timeout_s=10) > token
    tandem.release()


def test_a_curator_named_node_made_by_hand_is_respected(zookeeper, tmp_path):
    """No JVM: the node Curator's protected-mode InterProcessMutex makes, created with kazoo."""
    from kazoo.client import KazooClient

    base = f"/hudi/by-hand-{uuid.uuid4().hex[:8]}"
    tandem = open_lock(f"zk://{zookeeper.hosts}{base}", str(tmp_path), TABLE)  # lock_key defaults to the table
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(10)
    try:
        made = client.create(
            f"{base}/{TABLE}/_c_{uuid.uuid4()}-lock-", b"10.0.0.7", ephemeral=True, sequence=True, makepath=True
        )
        sequence = int(made[-10:])
        with pytest.raises(LockError):
            tandem.acquire(timeout_s=1)
        holder = tandem.owner()
        assert (holder.token, holder.host) == (sequence, "10.0.0.7")
        client.delete(made)
        token = tandem.acquire(timeout_s=5)
        assert token > sequence
        # Curator's order (StandardLockInternalsDriver: the text after the last "lock-") puts Tandem first
        # ahead of a Java contender that came later, and Tandem's own order agrees.
        later = client.create(f"{base}/{TABLE}/_c_{uuid.uuid4()}-lock-", b"", ephemeral=True, sequence=True)
        children = client.get_children(f"{base}/{TABLE}")
        curator_order = sorted(children, key=lambda c: c[c.rfind("lock-") + len("lock-") :])
        tandem_order = sorted(children, key=lambda c: CONTENDER.search(c).group(1))
        assert curator_order == tandem_order == [tandem._lock.node, later.rsplit("/", 1)[1]]
        tandem.release()
    finally:
        tandem.close()
        client.stop()
        client.close()
