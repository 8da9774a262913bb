"""Know the store: an S3 endpoint that ignores `If-None-Match: *` is refused before anything is written.

The store under test is moto's S3 behind a small HTTP proxy that forwards
every request but drops the `If-None-Match` header — exactly what an old
MinIO or Ceph release, or a gateway in between, does: every conditional
`PutObject` then answers 200 and overwrites.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

import boto3
import pytest

import timeline.io.storage as storage_module
from chaos.servers import relay
from tests.conftest import tandem
from timeline.errors import BadInputError
from timeline.io import store_probe
from timeline.io.storage import Storage
from timeline.table import Table

MISSING_WRITE = "PutObject If-None-Match"
NOT_IMPLEMENTED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided '
    b"implies functionality that is not implemented</Message><Header>If-None-Match</Header></Error>"
)


class _Forward(BaseHTTPRequestHandler):
    """Forward one request to the upstream, without its `If-None-Match` header."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        return

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self) -> None:
        body = self._read_body()
        if self.server.reject and "If-None-Match" in self.headers:  # a store that refuses the header outright
            self.send_response_only(501, "Not Implemented")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(NOT_IMPLEMENTED)))
            self.end_headers()
            self.wfile.write(NOT_IMPLEMENTED)
            return
        headers = {}
        for key, value in self.headers.items():
            if key.lower() == "if-none-match":
                self.server.stripped.append(f"{self.command} {self.path}")
                continue
            headers[key] = value
        relay(self, self.server.upstream_port, body, headers, timeout=60)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class DropIfNoneMatchProxy:
    """A threaded HTTP proxy on 127.0.0.1 in front of moto that strips `If-None-Match`
    (or, with `reject`, answers 501 NotImplemented to a request that carries it)."""

    def __init__(self, upstream_port: int, reject: bool = False) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Forward)
        self.server.daemon_threads = True
        self.server.upstream_port = upstream_port
        self.server.reject = reject
        self.server.stripped = []
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def stripped(self) -> list[str]:
        return self.server.stripped

    def start(self) -> DropIfNoneMatchProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def proxy(moto):
    server = DropIfNoneMatchProxy(moto.port).start()
    yield server
    server.stop()


def _use_endpoint(monkeypatch, url: str) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
    monkeypatch.setattr(storage_module, "_s3_client", None)


class Proxied(NamedTuple):
    bucket: str
    base: str  # s3://bucket/table
    url: str  # the proxy's endpoint


@pytest.fixture
def proxied(moto, proxy, monkeypatch) -> Proxied:
    """A fresh bucket, reached through the proxy (the S3 endpoint of this process and its children)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv(store_probe.ALLOW_UNFENCED_ENV, raising=False)
    _use_endpoint(monkeypatch, proxy.url)
    bucket = f"fence-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto.url).create_bucket(Bucket=bucket)
    return Proxied(bucket, f"s3://{bucket}/table", proxy.url)


def snapshot(moto, bucket: str) -> dict[str, bytes]:
    """Every object of the bucket with its bytes, read from moto directly."""
    client = boto3.client("s3", endpoint_url=moto.url)
    keys = [
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])
    ]
    return {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


def dynamodb_lock(moto) -> str:
    return f"dynamodb://locks-{uuid.uuid4().hex[:10]}?region=us-east-1&endpoint={moto.url}&lease_ms=3000"


def _rows(tmp_path, ids: list[int]) -> str:
    path = tmp_path / f"rows-{uuid.uuid4().hex[:6]}.jsonl"
    path.write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n" for i in ids))
    return str(path)


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


# the probe -----------------------------------------------------------------------------------------------------
def test_moto_honours_create_if_absent_and_the_probe_leaves_one_object(s3_base, moto, monkeypatch):
    storage = Storage(s3_base)
    client = storage_module._s3()
    probe_dir = storage.key(store_probe.PROBE_DIR)
    found = store_probe.probe(client, storage.bucket, probe_dir)
    assert found.fenced, found
    kept = f"{probe_dir}/{store_probe.PROBE_OBJECT}"
    assert set(snapshot(moto, storage.bucket)) == {kept}
    sent = []

    def record(**call) -> None:
        sent.append(call["model"].name)

    client.meta.events.register("before-call.s3.*", record)
    try:
        assert store_probe.probe(client, storage.bucket, probe_dir).fenced  # it exists: one refused create
    finally:
        client.meta.events.unregister("before-call.s3.*", record)
    assert sent == ["HeadObject", "PutObject"]
    assert set(snapshot(moto, storage.bucket)) == {kept}
    storage.require_fencing()

    def no_second_probe(*args):
        raise AssertionError("the verdict is cached per (endpoint, bucket)")

    monkeypatch.setattr(store_probe, "probe", no_second_probe)
    storage.sub(".hoodie/metadata").require_fencing()
    assert storage.create_if_absent("x", b"1") and not storage.create_if_absent("x", b"2")


def test_the_proxy_drops_if_none_match(proxied, proxy):
    bucket = proxied.bucket
    client = storage_module._s3()
    assert store_probe.put_if_absent(client, bucket, "k", b"first")
    assert store_probe.put_if_absent(client, bucket, "k", b"second")  # a second winner: the store is unfenced
    assert any(entry.startswith("PUT ") for entry in proxy.stripped)


def test_a_store_that_drops_if_none_match_is_refused_before_any_write(proxied, moto):
    bucket, base = proxied.bucket, proxied.base
    boto3.client("s3", endpoint_url=moto.url).put_object(Bucket=bucket, Key="table/p/a.parquet", Body=b"old")
    before = snapshot(moto, bucket)
    storage = Storage(base)
    mutations = {
        "create_if_absent": lambda: storage.create_if_absent(".hoodie/1.commit", b"x"),
        "write_bytes": lambda: storage.write_bytes("p/a.parquet", b"new"),
        "open_output": lambda: storage.open_output("p/b.parquet"),
        "makedirs": lambda: storage.makedirs(".hoodie"),
        "delete": lambda: storage.delete("p/a.parquet"),
        "delete_dir": lambda: storage.delete_dir("p"),
        "move": lambda: storage.move("p/a.parquet", "p/c.parquet"),
    }
    for name, call in mutations.items():
        with pytest.raises(BadInputError) as refused:
            call()
        message = str(refused.value)
        assert MISSING_WRITE in message and "overwrote" in message, name
        assert store_probe.ALLOW_UNFENCED_ENV in message and "AWS S3" in message and "\n" not in message
    assert storage.read_bytes("p/a.parquet") == b"old"  # reads are not refused
    assert snapshot(moto, bucket) == before


def test_a_store_that_refuses_the_header_is_refused_too(proxied, moto, monkeypatch):
    rejecting = DropIfNoneMatchProxy(moto.port, reject=True).start()
    try:
        _use_endpoint(monkeypatch, rejecting.url)
        storage = Storage(proxied.base)
        with pytest.raises(BadInputError, match=r"PutObject If-None-Match: \* was refused \(NotImplemented"):
            storage.write_bytes("a", b"x")
        assert snapshot(moto, proxied.bucket) == {}
    finally:
        rejecting.stop()


def test_the_override_needs_a_lock_that_is_not_on_the_store(proxied, monkeypatch):
    storage = Storage(proxied.base)
    monkeypatch.setenv(store_probe.ALLOW_UNFENCED_ENV, "1")
    storage.require_fencing()  # a storage call does not know the lock: the override lets it through
    storage.require_fencing("zk://127.0.0.1:2181/tandem")
    storage.require_fencing("dynamodb://locks?region=us-east-1")
    for local in ("memory", "file", "file?lease_ms=2000"):
        with pytest.raises(BadInputError, match="only under a zk:// or dynamodb:// lock"):
            storage.require_fencing(local)
    monkeypatch.setenv(store_probe.ALLOW_UNFENCED_ENV, "perhaps")
    with pytest.raises(BadInputError, match="TANDEM_ALLOW_UNFENCED_STORE='perhaps'"):
        storage.require_fencing()
    monkeypatch.setenv(store_probe.ALLOW_UNFENCED_ENV, "0")
    with pytest.raises(BadInputError, match=MISSING_WRITE):
        storage.require_fencing("zk://127.0.0.1:2181/tandem")


# the command line ----------------------------------------------------------------------------------------------
def test_init_and_write_on_an_unfenced_store_exit_2_and_change_nothing(proxied, moto, monkeypatch, tmp_path):
    bucket, base = proxied.bucket, proxied.base
    lock = {"TANDEM_LOCK": dynamodb_lock(moto)}
    result = tandem("init", base, "--name", "t", "--record-key", "id", env=lock)
    assert result.returncode == 2, result.stderr
    assert MISSING_WRITE in _one_error_line(result.stderr)
    assert snapshot(moto, bucket) == {}

    _use_endpoint(monkeypatch, moto.url)  # the table made through a store that honours the header
    Table.create(base, "t", ["id"])
    before = snapshot(moto, bucket)
    _use_endpoint(monkeypatch, proxied.url)
    result = tandem("write", base, "--input", _rows(tmp_path, [1, 2]), "--operation", "insert", env=lock)
    assert result.returncode == 2, result.stderr
    assert MISSING_WRITE in _one_error_line(result.stderr)
    assert snapshot(moto, bucket) == before


def test_the_override_with_a_dynamodb_lock_proceeds(proxied, moto, monkeypatch, tmp_path):
    bucket, base = proxied.bucket, proxied.base
    env = {store_probe.ALLOW_UNFENCED_ENV: "1", "TANDEM_LOCK": dynamodb_lock(moto)}
    result = tandem("init", base, "--name", "t", "--record-key", "id", env=env)
    assert result.returncode == 0, result.stderr
    result = tandem("write", base, "--input", _rows(tmp_path, [1, 2, 3]), "--operation", "insert", env=env)
    assert result.returncode == 0, result.stderr
    assert "no storage fence" in result.stderr
    stored = snapshot(moto, bucket)
    assert "table/.hoodie/hoodie.properties" in stored
    assert [k for k in stored if k.startswith("table/.hoodie/") and k.endswith(".commit")]
    assert not [k for k in stored if ".tandem-probe" in k]


def test_the_override_with_an_in_process_lock_is_refused(proxied, moto, monkeypatch, tmp_path):
    bucket, base = proxied.bucket, proxied.base
    _use_endpoint(monkeypatch, moto.url)
    Table.create(base, "t", ["id"])
    before = snapshot(moto, bucket)
    env = {store_probe.ALLOW_UNFENCED_ENV: "1", "TANDEM_LOCK": "memory", "AWS_ENDPOINT_URL_S3": proxied.url}
    result = tandem("write", base, "--input", _rows(tmp_path, [1]), "--operation", "insert", env=env)
    assert result.returncode == 2, result.stderr
    assert "only under a zk:// or dynamodb:// lock" in _one_error_line(result.stderr)
    assert snapshot(moto, bucket) == before


def test_init_with_the_override_but_no_external_lock_is_refused(proxied, moto):
    env = {store_probe.ALLOW_UNFENCED_ENV: "1", "TANDEM_LOCK": "file"}
    result = tandem("init", proxied.base, "--name", "t", "--record-key", "id", env=env)
    assert result.returncode == 2, result.stderr
    assert "only under a zk:// or dynamodb:// lock" in _one_error_line(result.stderr)
    assert snapshot(moto, proxied.bucket) == {}
