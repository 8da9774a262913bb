"""Build a lock provider from a lock URI (DESIGN §10) or Hudi's `hoodie.write.lock.*` keys.

URIs: `file`, `memory`, `zk://HOST:PORT[,HOST:PORT]/BASE_PATH`,
`dynamodb://TABLE?region=REGION&endpoint=URL`. Every URI also takes
`wait_time_ms`, `num_retries` and `lock_key`; `file` and `dynamodb` take
`lease_ms`; `zk` takes `session_timeout_ms`, `connection_timeout_ms` and
`digest=user:password`.
"""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qsl, urlsplit

from locks.base import LockProvider, RetryPolicy, redact
from timeline.errors import BadInputError

ZK_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
DYNAMODB_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
FILE_PROVIDER = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
MEMORY_PROVIDER = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"

_COMMON = {"wait_time_ms", "num_retries", "lock_key"}
_ALLOWED = {
    "file": _COMMON | {"lease_ms"},
    "memory": _COMMON,
    "zk": _COMMON | {"session_timeout_ms", "connection_timeout_ms", "digest"},
    "dynamodb": _COMMON | {"lease_ms", "region", "endpoint"},
}
_HOST_PORT = re.compile(r"^([A-Za-z0-9_.\-\[\]:]+):([0-9]+)$")
_ZK_NODE = re.compile(r"[^\x00-\x1f\x7f-\x9f/]+")  # ZooKeeper refuses control characters in node names


def _bad(uri: str, detail: str) -> BadInputError:
    """Bad input naming the URI, with every password in it redacted."""
    return BadInputError(redact(f"lock URI {uri!r}: {detail}"))


def _number(params: dict[str, str], key: str, uri: str, default: float) -> float:
    if key not in params:
        return default
    try:
        value = float(params[key])
    except ValueError:
        raise _bad(uri, f"{key}={params[key]!r} is not a number") from None
    if value < 0:
        raise _bad(uri, f"{key} must not be negative")
    if not math.isfinite(value):
        raise _bad(uri, f"{key} must be a finite number")
    return value


def _retry(params: dict[str, str], uri: str) -> RetryPolicy:
    return RetryPolicy(
        wait_time_s=_number(params, "wait_time_ms", uri, 60_000) / 1000,
        num_retries=int(_number(params, "num_retries", uri, 10_000)),
    )


def open_lock(uri: str, table_base: str, table_name: str) -> LockProvider:
    """A provider for `uri`; a bad URI is a BadInputError naming the bad part."""
    uri = (uri or "file").strip()
    if "://" not in uri:  # `file` and `memory` are written without `://`
        name, sep, query = uri.partition("?")
        parts = urlsplit(f"{name}://" + (f"?{query}" if sep else ""))
    else:
        parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in _ALLOWED:
        raise _bad(uri, f"unknown scheme {scheme or uri!r} (file, memory, zk://, dynamodb://)")
    try:
        params = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query)))
    except ValueError:
        raise _bad(uri, f"malformed query {parts.query!r}") from None
    unknown = set(params) - _ALLOWED[scheme]
    if unknown:
        raise _bad(uri, f"unknown parameter(s) {', '.join(sorted(unknown))}")
    retry = _retry(params, uri)
    lock_key = params.get("lock_key") or table_name
    if scheme == "file":
        from locks.file_lock import FileLock

        return FileLock(table_base, _number(params, "lease_ms", uri, 60_000) / 1000, retry)
    if scheme == "memory":
        from locks.memory_lock import MemoryLock

        return MemoryLock(f"{table_base}#{lock_key}", retry)
    if scheme == "zk":
        return _zookeeper(uri, parts, params, lock_key, retry)
    return _dynamodb(uri, parts, params, lock_key, retry)


def _zookeeper(uri, parts, params, lock_key, retry) -> LockProvider:
    from locks.zookeeper_lock import ZookeeperLock

    hosts = parts.netloc
    if "@" in hosts:
        raise _bad(uri, "hosts must not carry credentials (put them in the digest parameter)")
    for host in hosts.split(",") if hosts else [""]:
        m = _HOST_PORT.match(host)
        if not m:
            raise _bad(uri, f"hosts {hosts!r} must be HOST:PORT[,HOST:PORT]")
        if not 1 <= int(m.group(2)) <= 65535:
            raise _bad(uri, f"port {m.group(2)} of {host!r} is not between 1 and 65535")
    base_path = parts.path
    if not base_path or base_path == "/":
        raise _bad(uri, "a base path is required (zk://HOST:PORT/BASE_PATH)")
    if not all(_is_zk_node(node) for node in base_path[1:].removesuffix("/").split("/")):
        raise _bad(uri, f"base path {base_path!r} has an empty, '.', '..' or control-character node name")
    if not _is_zk_node(lock_key):
        raise _bad(uri, f"lock key {lock_key!r} is not one ZooKeeper node name (set lock_key=NAME)")
    digest = None
    if "digest" in params:
        user, sep, password = params["digest"].partition(":")
        if not sep or not user:
            raise _bad(uri, "digest must be user:password")
        digest = (user, password)
    return ZookeeperLock(
        hosts,
        base_path,
        lock_key,
        session_timeout_s=_number(params, "session_timeout_ms", uri, 10_000) / 1000,
        connection_timeout_s=_number(params, "connection_timeout_ms", uri, 5_000) / 1000,
        digest=digest,
        retry=retry,
    )


def _is_zk_node(name: str) -> bool:
    return name not in (".", "..") and bool(_ZK_NODE.fullmatch(name))


def _dynamodb(uri, parts, params, lock_key, retry) -> LockProvider:
    from locks.dynamodb_lock import DynamoDBLock

    table = parts.netloc
    if not re.fullmatch(r"[A-Za-z0-9_.\-]{3,255}", table or ""):
        raise _bad(uri, f"{table!r} is not a DynamoDB table name")
    endpoint = params.get("endpoint") or None
    if endpoint and not re.match(r"^https?://[^/]+", endpoint):
        raise _bad(uri, f"endpoint {endpoint!r} must be an http(s) URL")
    return DynamoDBLock(
        table,
        lock_key,
        region=params.get("region") or "us-east-1",
        endpoint_url=endpoint,
        lease_s=_number(params, "lease_ms", uri, 60_000) / 1000,
        retry=retry,
    )


def uri_from_hudi_config(conf: dict[str, str]) -> str:
    """Translate Hudi's `hoodie.write.lock.*` keys into a lock URI."""
    provider = conf.get("hoodie.write.lock.provider", FILE_PROVIDER)
    common = {}
    for hudi_key, ours in (
        ("hoodie.write.lock.wait_time_ms", "wait_time_ms"),
        ("hoodie.write.lock.client.wait_time_ms", "wait_time_ms"),
        ("hoodie.write.lock.num_retries", "num_retries"),
        ("hoodie.write.lock.client.num_retries", "num_retries"),
    ):
        if hudi_key in conf:
            common[ours] = conf[hudi_key]
    if provider == ZK_PROVIDER:
        url = conf.get("hoodie.write.lock.zookeeper.url")
        port = conf.get("hoodie.write.lock.zookeeper.port")
        base = conf.get("hoodie.write.lock.zookeeper.base_path")
        if not url or not base:
            raise BadInputError("zookeeper lock needs hoodie.write.lock.zookeeper.url and .base_path")
        hosts = ",".join(h if ":" in h else f"{h}:{port or 2181}" for h in url.split(","))
        for key in ("session_timeout_ms", "connection_timeout_ms", "lock_key"):
            if f"hoodie.write.lock.zookeeper.{key}" in conf:
                common[key] = conf[f"hoodie.write.lock.zookeeper.{key}"]
        return _with_query(f"zk://{hosts}/{base.strip('/')}", common)
    if provider == DYNAMODB_PROVIDER:
        table = conf.get("hoodie.write.lock.dynamodb.table")
        if not table:
            raise BadInputError("dynamodb lock needs hoodie.write.lock.dynamodb.table")
        for hudi_key, ours in (
            ("hoodie.write.lock.dynamodb.region", "region"),
            ("hoodie.write.lock.dynamodb.endpoint_url", "endpoint"),
            ("hoodie.write.lock.dynamodb.partition_key", "lock_key"),
        ):
            if hudi_key in conf:
                common[ours] = conf[hudi_key]
        return _with_query(f"dynamodb://{table}", common)
    if provider == MEMORY_PROVIDER:
        return _with_query("memory", common)
    if provider == FILE_PROVIDER:
        return _with_query("file", common)
    raise BadInputError(f"hoodie.write.lock.provider {provider} is not supported")


def _with_query(base: str, params: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return f"{base}?{urlencode(params)}" if params else base
