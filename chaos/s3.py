"""Chaos on `s3://` tables: a loopback endpoint (S3 and DynamoDB), tables as prefixes, time passing.

The endpoint is moto served one request at a time (`chaos/moto_serial.py`),
so create-if-absent and DynamoDB's conditional writes are atomic, as on AWS.
A crash state needs a fresh copy of a template table: on S3 that is a
server-side copy of every object under the template's prefix (templates are
built locally and uploaded once; building is not under test). Two things
differ from a local folder, and both are handled here rather than in the
protocol code:
  * S3 sets an object's Last-Modified itself, so a dead writer's heartbeat
    cannot be aged; it is deleted instead, which the protocol treats exactly as
    an expired one (`coordinator/protocol/heartbeat.py`: a missing heartbeat is expired);
  * the `hudi` package (the checker's independent reader) reads S3 through
    object_store, which refuses a plain-HTTP endpoint unless `AWS_ALLOW_HTTP`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from chaos.servers import MotoServer
from locks.file_lock import LOCK_DIR
from timeline.io.storage import Storage
from timeline.table import HEARTBEAT_DIR

REGION = "us-east-1"


@dataclass(frozen=True)
class S3Place:
    """Where a chaos run keeps its tables on S3, and the DynamoDB lock they share (one item per table)."""

    bucket: str
    lock_uri: str

    def base(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *parts])


def _client():
    import boto3

    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"], region_name=REGION)


def use_endpoint(url: str) -> None:
    """Point this process and its children (forked or spawned) at `url` for S3, with dummy credentials."""
    import timeline.io.storage as storage_module

    os.environ["AWS_ENDPOINT_URL_S3"] = url
    os.environ["AWS_DEFAULT_REGION"] = REGION
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "chaos")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "chaos")
    if urlparse(url).scheme == "http":
        os.environ["AWS_ALLOW_HTTP"] = "true"  # the hudi package (object_store) refuses http otherwise
    storage_module._s3_client = None  # Storage's boto3 client is made for the endpoint of its first use


@contextmanager
def moto_place(work: Path, lock_table: str = "tandem_chaos") -> Iterator[S3Place]:
    """A serial moto server on loopback for the block, with one fresh bucket and a DynamoDB lock URI on it."""
    server = MotoServer(work).start()
    try:
        use_endpoint(server.url)
        bucket = f"chaos-{uuid.uuid4().hex[:12]}"
        _client().create_bucket(Bucket=bucket)
        yield S3Place(bucket, f"dynamodb://{lock_table}?region={REGION}&endpoint={server.url}")
    finally:
        server.stop()


def after_fork() -> None:
    """In a forked child: a boto3 client of its own, since the parent's pooled connections are not its to use."""
    import timeline.io.storage as storage_module

    storage_module._s3_client = None


def copy_table(src: str, dst: str) -> None:
    """Copy every object under `src`'s prefix to `dst`'s (server-side CopyObject, one per object)."""
    source, target = Storage(src), Storage(dst)
    client = _client()
    for entry in source.list_files():
        client.copy_object(
            Bucket=target.bucket,
            Key=target.key(entry.path),
            CopySource={"Bucket": source.bucket, "Key": source.key(entry.path)},
        )


def delete_table(base: str) -> None:
    """Delete every object under `base`'s prefix (one DeleteObjects per 1,000)."""
    storage = Storage(base)
    keys = [storage.key(entry.path) for entry in storage.list_files()]
    client = _client()
    for start in range(0, len(keys), 1000):
        chunk = [{"Key": key} for key in keys[start : start + 1000]]
        client.delete_objects(Bucket=storage.bucket, Delete={"Objects": chunk, "Quiet": True})


def upload_table(folder: Path, base: str) -> None:
    """Put a local table's files under `base`, all but its file lock (the S3 table has a lock service)."""
    storage = Storage(base)
    client = _client()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if not rel.startswith(f"{LOCK_DIR}/"):
            client.put_object(Bucket=storage.bucket, Key=storage.key(rel), Body=path.read_bytes())


def download_table(base: str, folder: Path) -> None:
    """A local copy of an S3 table, kept for inspection after the endpoint (and its memory) is gone."""
    storage = Storage(base)
    for entry in storage.list_files():
        target = folder / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(storage.read_bytes(entry.path))


def expire_heartbeats(storage: Storage) -> None:
    """Delete every heartbeat: Last-Modified cannot be backdated, and a missing heartbeat counts as expired."""
    for entry in storage.list_files(HEARTBEAT_DIR):
        storage.discard(entry.path)
