"""Shared fixtures: real S3 endpoint, Hudi fixture tables, reader comparison helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from chaos.servers import MotoServer

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def moto(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto")).start()
    yield server
    server.stop()


@pytest.fixture
def s3_base(moto, monkeypatch):
    """A fresh `s3://` table base on the local S3 endpoint."""
    import boto3

    import timeline.io.storage as storage_module

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(storage_module, "_s3_client", None)
    bucket = f"tandem-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto.url).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/table"


def unzip_fixture(name: str, dest: Path) -> Path:
    """Extract a fixture table (ignoring `__MACOSX`) and return its base path."""
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as archive:
        for member in archive.namelist():
            if not member.startswith("__MACOSX"):
                archive.extract(member, dest)
    return dest / name


FIXTURE_NAMES = sorted(p.stem for p in FIXTURES.glob("*.zip")) if FIXTURES.exists() else []


def rows_by_key(table: pa.Table, keys: list[str]) -> list[dict]:
    """Rows as dicts, sorted by the given columns, for reader-to-reader comparison."""
    if table.num_rows == 0:
        return []
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist()


def hudi_read(path: str | os.PathLike) -> pa.Table:
    """The independent reader: the `hudi` package's snapshot read."""
    import hudi

    batches = hudi.HudiTable(str(path)).read()
    return pa.Table.from_batches(batches) if batches else pa.table({})


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    from chaos.servers import ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def trino(moto, tmp_path_factory):
    """A real Trino (its Hudi connector) reading Glue and S3 at the local endpoint; one JVM for the run."""
    from chaos.servers import TRINO_MANIFEST, TrinoServer

    if not TRINO_MANIFEST.exists() and not os.environ.get("CI"):
        pytest.skip("Trino is not installed: `make trino` (in CI this fails)")
    server = TrinoServer(tmp_path_factory.mktemp("trino"), moto.url).start()
    yield server
    server.stop()


@pytest.fixture
def aws_env(monkeypatch):
    """Dummy credentials for the local endpoints (inherited by child processes)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def lock_uri(request, tmp_path, aws_env):
    """A fresh lock URI for the provider named by the test's `provider` parameter."""
    kind = request.param
    tag = uuid.uuid4().hex[:10]
    if kind == "file":
        return "file?lease_ms=3000"
    if kind == "zk":
        zk = request.getfixturevalue("zookeeper")
        return f"zk://{zk.hosts}/tandem-{tag}?session_timeout_ms=3000"
    if kind == "dynamodb":
        moto = request.getfixturevalue("moto")
        return f"dynamodb://locks-{tag}?region=us-east-1&endpoint={moto.url}&lease_ms=3000"
    raise ValueError(kind)


def wait_until(predicate, deadline_s: float, what: str) -> None:
    """Poll a condition with a deadline (never a bare sleep)."""
    import time

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")


FAST_FILE_LOCK = "file?lease_ms=2000"  # a killed holder's lease passes in 2 s, not the default 60 s


def tandem(*args: str, crash_at: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the `tandem` CLI in its own process; `crash_at` kills it at that crash point."""
    env = {"TANDEM_LOCK": FAST_FILE_LOCK, **os.environ, **(env or {})}
    if crash_at:
        env["TANDEM_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, env=env, timeout=120
    )


def _hudi_reference(reader: str):
    """A started reference session (tests/hudi_reference), or a skip when it is not installed outside CI."""
    from tests.hudi_reference.client import HudiReference, installed_readers

    if reader not in installed_readers() and not os.environ.get("CI"):
        pytest.skip(f"the Hudi reference {reader} is not installed: `make hudi-reference` (in CI this fails)")
    return HudiReference(reader)  # in CI a missing reference raises here: the test errors, never skips


@pytest.fixture(scope="session")
def java_hudi():
    """Apache Hudi 0.15's Spark reader and writer in one long-lived JVM, shared by the whole run."""
    reference = _hudi_reference("hudi-0.15")
    yield reference
    reference.close()


@pytest.fixture(scope="session")
def java_hudi_1x():
    """Apache Hudi 1.x's Spark reader (a second judge; see scripts/install-hudi-reference.sh)."""
    reference = _hudi_reference("hudi-1.x")
    yield reference
    reference.close()


@pytest.fixture(scope="session")
def java_mdt_table(java_hudi, tmp_path_factory):
    """A table whose metadata table Java Hudi 0.15 wrote (tests/hudi_reference/java_mdt.py), once per run."""
    from tests.hudi_reference.java_mdt import write

    return write(java_hudi, tmp_path_factory.mktemp("java-mdt") / "table")
