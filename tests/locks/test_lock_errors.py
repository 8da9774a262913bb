"""Lock errors: bounded when the service is down, naming the cause, never showing a secret."""

from __future__ import annotations

import socket
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locks.base import LockServiceUnreachable, connection_cause, redact
from locks.config import open_lock
from tests.conftest import tandem
from timeline.errors import BadInputError, LockError
from timeline.table import Table

SECRET = "s3cr3t-pw"
BOUND_S = 3.0


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _zk(port: int) -> str:
    return f"zk://127.0.0.1:{port}/tandem?wait_time_ms={BOUND_S * 1000:g}&digest=writer:{SECRET}"


def _dynamodb(port: int) -> str:
    return f"dynamodb://locks?region=us-east-1&endpoint=http://AKID:{SECRET}@127.0.0.1:{port}&wait_time_ms=3000"


@pytest.mark.parametrize("kind", ["zk", "dynamodb"])
def test_unreachable_service_gives_up_within_the_bound_and_names_the_cause(kind, closed_port, tmp_path, aws_env):
    lock = open_lock(_zk(closed_port) if kind == "zk" else _dynamodb(closed_port), str(tmp_path), "t")
    started = time.monotonic()
    try:
        with pytest.raises(LockError) as failure:
            lock.acquire()
        elapsed = time.monotonic() - started
    finally:
        lock.close()
    message = str(failure.value)
    assert elapsed <= BOUND_S * 1.1, f"gave up after {elapsed:.2f}s for a {BOUND_S:g}s bound"
    assert failure.value.exit_code == 4
    assert f"127.0.0.1:{closed_port}" in message and "connection refused" in message
    assert SECRET not in message


def test_cli_lock_failures_show_no_secret(closed_port, tmp_path, aws_env):
    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": [1]}), rows)
    write = tandem("write", table.uri, "--input", str(rows), "--operation", "insert", "--lock", _zk(closed_port))
    assert write.returncode == 4, write.stderr
    assert "connection refused" in write.stderr and SECRET not in write.stderr + write.stdout
    status = tandem("lock", "status", table.uri, "--lock", _dynamodb(closed_port))
    assert status.returncode == 4, status.stderr
    assert f"127.0.0.1:{closed_port}" in status.stderr and SECRET not in status.stderr + status.stdout


@pytest.mark.parametrize(
    "uri, message",
    [
        ("zk://127.0.0.1:99999/locks", "port 99999"),
        ("zk://127.0.0.1:0/locks", "port 0"),
        ("zk://127.0.0.1:abc/locks", "HOST:PORT"),
        ("zk://writer:pw@127.0.0.1:2181/locks", "must not carry credentials"),
        ("zk://127.0.0.1:2181/a/../b", "base path '/a/../b'"),
        ("zk://127.0.0.1:2181/a//b", "base path '/a//b'"),
        ("zk://127.0.0.1:2181//a", "base path '//a'"),
        ("zk://127.0.0.1:2181/a/.", "base path '/a/.'"),
        ("zk://127.0.0.1:2181/a?lock_key=x/y", "lock key 'x/y'"),
        ("zk://127.0.0.1:2181/a?wait_time_ms=soon", "is not a number"),
        ("dynamodb://locks?endpoint=http://AKID:pw@h:1&lease_ms=nan", "must be a finite number"),
        ("dynamodb://locks?endpoint=http://AKID:pw@h:1&lease_ms=-5", "must not be negative"),
    ],
)
def test_bad_lock_uris_are_bad_input_without_secrets(uri, message, tmp_path):
    if uri.startswith("zk"):
        uri += ("&" if "?" in uri else "?") + f"digest=writer:{SECRET}"
    with pytest.raises(BadInputError, match=message) as failure:
        open_lock(uri, str(tmp_path), "t")
    assert SECRET not in str(failure.value) and ":pw@" not in str(failure.value)


def test_bad_lock_uri_exits_2_from_the_cli(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", ["id"])
    result = tandem("lock", "status", table.uri, "--lock", f"zk://127.0.0.1:99999/locks?digest=writer:{SECRET}")
    assert result.returncode == 2 and "port 99999" in result.stderr and SECRET not in result.stderr


@pytest.mark.parametrize(
    "text, shown",
    [
        ("zk://h:1/p?digest=bob:pw&x=1", "zk://h:1/p?digest=bob:***&x=1"),
        ("'zk://h:1/p?digest=bob%3Apw'", "'zk://h:1/p?digest=bob%3A***'"),
        ("endpoint=http://AKID:pw@host:4566/", "endpoint=http://AKID:***@host:4566/"),
        ("endpoint=http%3A%2F%2FAKID%3Apw%40host", "endpoint=http%3A%2F%2FAKID%3A***%40host"),
        ("zk://h1:2181,h2:2181/base@x", "zk://h1:2181,h2:2181/base@x"),
    ],
)
def test_redact_hides_passwords_only(text, shown):
    assert redact(text) == shown


def test_connection_causes_are_named():
    assert connection_cause(ConnectionRefusedError(111, "Connection refused")) == "connection refused"
    assert connection_cause(TimeoutError("timed out")) == "timed out"
    wrapped = LockServiceUnreachable("outer")
    wrapped.__cause__ = ConnectionRefusedError(111, "refused")
    assert connection_cause(wrapped) == "connection refused"
    assert connection_cause(ValueError(f"digest=bob:{SECRET}")) == "ValueError: digest=bob:***"
