"""Does an S3 endpoint honour create-if-absent? Asked once per (endpoint, bucket) per process.

Every decision Tandem makes on S3 — a completed instant, a claimed MDT log
version, a commit or rollback decision, a new table — is a `PutObject` with
`If-None-Match: *` that storage must refuse (412) when the key exists. A store
that ignores the header (S3-compatible servers older than AWS's August 2024
conditional writes, gateways and proxies that drop it) answers 200 and
overwrites: every such decision would silently have two winners. So before
the first write to a bucket a process probes it: it creates
`<base>/.hoodie/.tandem-probe/create-if-absent` with the header; on a table
that has been probed before the object exists and the create must be refused
(a HEAD and one PUT); on a fresh one the first create succeeds and a second
must be refused. The object is left in place on a store that fences. The answer is cached for the life of
the process. The probe is sequential: it shows that the store
honours the header, not that its check-and-write is atomic under concurrent
requests; that part is the store's documented guarantee (AWS S3: one of two
racing creates gets 412, or 409 ConditionalRequestConflict).

A store that fails the probe is refused (`BadInputError`, exit 2), unless
`TANDEM_ALLOW_UNFENCED_STORE=1` is set in the environment of every process
that writes the table. The override is accepted only together with a lock that
is not a lease on that same store (zk:// or dynamodb://; the file lock already
refuses S3, the in-process lock keeps only one process's threads apart), and
it gives up the storage fence: a writer whose lock lapsed (a paused process, an
expired session, a forced release) is no longer stopped by storage and can
overwrite another writer's decision. The lock is then all there is.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from timeline.errors import BadInputError

ALLOW_UNFENCED_ENV = "TANDEM_ALLOW_UNFENCED_STORE"
PROBE_DIR = ".hoodie/.tandem-probe"
PROBE_OBJECT = "create-if-absent"
EXTERNAL_LOCKS = ("zk", "dynamodb")  # lock services that are not a lease on the table's own store
DOCS = 'docs/design.md, "Stores without conditional writes"'
SUPPORTING_STORES = "e.g. AWS S3 since August 2024, MinIO, Cloudflare R2"

# Answers of a store that lost a create-if-absent race (412; 409 while a conflicting write is in flight).
LOST = ("PreconditionFailed", "412", "ConditionalRequestConflict")
# Answers of a store that refuses the header itself instead of ignoring it.
UNSUPPORTED = ("NotImplemented", "501", "InvalidArgument", "InvalidRequest", "NotSupported")

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    """What the probe of one bucket found."""

    endpoint: str
    bucket: str
    fenced: bool
    detail: str  # what the second create did

    @property
    def where(self) -> str:
        return f"s3://{self.bucket} at {self.endpoint}"


_verdicts: dict[tuple[str, str], Verdict] = {}
_warned: set[tuple[str, str]] = set()
_probing = threading.Lock()


def _code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))


def put_if_absent(client, bucket: str, key: str, data: bytes) -> bool:
    """`PutObject` with `If-None-Match: *`: True if this call created the object, False if it existed."""
    from botocore.exceptions import ClientError

    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as err:
        if _code(err) in LOST:
            return False
        raise


def probe(client, bucket: str, probe_dir: str) -> Verdict:
    """Create the bucket's probe object with `If-None-Match: *` until the store refuses; always asks the store.

    On a store that fences the object stays, so a later probe is a HEAD and one
    refused create. A store that ignores the header never refuses: a create that
    succeeds is repeated once and must then fail. The store is left as it was
    found (an object this probe made on a store that does not fence is deleted).
    """
    from botocore.exceptions import ClientError

    endpoint = client.meta.endpoint_url
    key = f"{probe_dir.strip('/')}/{PROBE_OBJECT}"
    body = b"tandem create-if-absent probe: a second create of this object must fail with 412\n"
    try:
        existed = _exists(client, bucket, key)
        if not (existed or put_if_absent(client, bucket, key, body)) or not put_if_absent(client, bucket, key, body):
            return Verdict(endpoint, bucket, True, "failed with 412 on an existing object")
    except ClientError as err:
        if _code(err) not in UNSUPPORTED:
            raise
        return Verdict(endpoint, bucket, False, f"was refused ({_code(err)}: {err})")
    if not existed:
        try:
            client.delete_object(Bucket=bucket, Key=key)
        except ClientError as err:
            LOG.warning("could not delete the probe object s3://%s/%s: %s", bucket, key, err)
    return Verdict(endpoint, bucket, False, "overwrote an existing object instead of failing with 412")


def _exists(client, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as err:
        if _code(err) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


def verdict(client, bucket: str, probe_dir: str) -> Verdict:
    """The cached verdict for the client's endpoint and `bucket`, probing on first use."""
    cache_key = (client.meta.endpoint_url, bucket)
    found = _verdicts.get(cache_key)
    if found is not None:
        return found
    with _probing:
        found = _verdicts.get(cache_key)
        if found is None:
            found = _verdicts[cache_key] = probe(client, bucket, probe_dir)
    return found


def override_enabled() -> bool:
    """`TANDEM_ALLOW_UNFENCED_STORE`: 1/true/yes on, unset/0/false/no off, anything else bad input."""
    value = os.environ.get(ALLOW_UNFENCED_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise BadInputError(f"{ALLOW_UNFENCED_ENV}={value!r}: use 1 to allow a store without conditional writes, or 0")


def lock_scheme(lock_uri: str) -> str:
    """`zk`, `dynamodb`, `file`, `memory`, ... of a lock URI (as `locks.config.open_lock` reads it)."""
    uri = (lock_uri or "file").strip()
    return (uri.split("://", 1)[0] if "://" in uri else uri.partition("?")[0]).lower()


def refusal(found: Verdict) -> str:
    """The one line a refused store gets."""
    return (
        f"{found.where} does not honour conditional writes: PutObject If-None-Match: * {found.detail}, "
        f"and every commit decision on S3 rests on it; use a store that supports it ({SUPPORTING_STORES}) "
        f"or set {ALLOW_UNFENCED_ENV}=1 with a zk:// or dynamodb:// lock ({DOCS})"
    )


def require_fencing(client, bucket: str, probe_dir: str, lock_uri: str | None = None) -> Verdict:
    """Refuse a bucket whose store ignores `If-None-Match`, unless overridden (then only with an external lock).

    `lock_uri` None means the caller does not know the lock (a storage call):
    the override alone lets it through; the lock is checked where it is opened.
    """
    found = verdict(client, bucket, probe_dir)
    if found.fenced:
        return found
    if not override_enabled():
        raise BadInputError(refusal(found))
    if lock_uri is not None and lock_scheme(lock_uri) not in EXTERNAL_LOCKS:
        raise BadInputError(
            f"{ALLOW_UNFENCED_ENV}=1 runs {found.where} without the storage fence (it ignores PutObject "
            f"If-None-Match), which is allowed only under a zk:// or dynamodb:// lock, not {lock_scheme(lock_uri)!r}"
        )
    cache_key = (found.endpoint, found.bucket)
    if cache_key not in _warned:
        _warned.add(cache_key)
        LOG.warning(
            "%s ignores PutObject If-None-Match; %s=1: no storage fence, only the lock keeps writers apart",
            found.where,
            ALLOW_UNFENCED_ENV,
        )
    return found


def forget() -> None:
    """Drop every cached verdict (tests)."""
    with _probing:
        _verdicts.clear()
        _warned.clear()
