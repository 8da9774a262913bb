"""DynamoDB (boto3): the AWS DynamoDB Lock Client's item, so that Hudi's DynamoDBBasedLockProvider and Tandem exclude
each other when given the same `hoodie.write.lock.dynamodb.*` keys.

Hudi 0.15's provider (com.amazonaws:dynamodb-lock-client 1.2.0) keeps one item per lock key in a table whose hash
key is `key`: `ownerName`, `leaseDuration` (milliseconds, as a string) and `recordVersionNumber` (a UUID written
anew by every acquisition and heartbeat). No clock is written: a waiter takes a held lock over only after it has
watched the same record version for `leaseDuration` on its own monotonic clock, and release deletes the item.
Tandem writes and reads that item with the same conditions, so either side waits for the other.

The fencing token cannot live on that item (the lock client replaces it whole when it acquires and deletes it when it
releases), so it is a counter on a second item, `<lock_key>#tandem-fence`, that only Tandem writes: bumped by the
holder right after its lock write, and trusted only if that answer arrives within the lease counted from the lock
write's send time, so a paused holder's late bump is given back. Acquire is two requests, release one; nothing
checks the table first, a write that finds it missing creates it. Credentials come from the standard AWS chain and
are never logged.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from locks.base import LockProvider, LockServiceUnreachable, OwnerInfo, RetryPolicy, connection_cause, redact
from timeline.errors import BadInputError

KEY_ATTRIBUTE = "key"
# The lock client's attribute names (AmazonDynamoDBLockClient 1.2.0) and its "released" marker.
OWNER_NAME = "ownerName"
LEASE_DURATION = "leaseDuration"
RECORD_VERSION = "recordVersionNumber"
IS_RELEASED = "isReleased"
RELEASED = "1"
TANDEM_OWNER = "tandemOwner"  # Tandem's owner record; the lock client keeps unknown attributes as "additional"
FENCE = "fence"
FENCE_SUFFIX = "#tandem-fence"
KEEP_VERSIONS = 8  # record versions a heartbeat may have written unanswered; 8 renewals span more than a lease
T = TypeVar("T")
Values = dict[str, dict[str, str]]


@dataclass
class _Watched:
    """Someone else's record version, and since when (our monotonic clock, after the answer) it has been seen."""

    version: str
    lease_s: float
    since: float


class DynamoDBLock(LockProvider):
    name = "dynamodb"

    def __init__(
        self,
        table: str,
        lock_key: str,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        lease_s: float = 60.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(retry)
        import boto3
        from botocore.config import Config

        self.table = table
        self.where = redact(endpoint_url) if endpoint_url else f"region {region}"
        self.lock_key = lock_key
        self.fence_key = lock_key + FENCE_SUFFIX
        self.lease_s = lease_s
        # Like the lock client's default (host name + UUID): one name per provider, checked by heartbeat and release.
        self.owner_name = f"tandem-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4()}"
        config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 1})
        self.client = boto3.client("dynamodb", region_name=region, endpoint_url=endpoint_url, config=config)
        self.versions: list[str] = []  # our record version; more than one while a heartbeat's answer is unknown
        self.abandoned: list[str] = []  # versions we wrote but could not give back: ours to take over
        self.watched: _Watched | None = None
        self.legacy_seeded = False  # an item of Tandem's earlier layout was seen and its counter carried over

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        """Turn a connection failure into LockServiceUnreachable naming the endpoint (without credentials)."""
        from botocore.exceptions import ConnectionError, HTTPClientError

        try:
            yield
        except (ConnectionError, HTTPClientError) as err:
            cause = connection_cause(err)
            raise LockServiceUnreachable(f"cannot reach the dynamodb lock service at {self.where}: {cause}") from err

    def _request(self, send: Callable[[], T]) -> T:
        """Send one request; only when it fails for want of the table, create the table and send it again.

        Checking the table up front would cost a request on every acquisition;
        a missing table is the rare case, so it is found by the write itself.
        """
        from botocore.exceptions import ClientError

        with self._reaching():
            try:
                try:
                    return send()
                except self.client.exceptions.ResourceNotFoundException:
                    self._create_table()
                    return send()
            except ClientError as err:
                if err.response["Error"]["Code"] == "ValidationException":
                    self._refuse_other_key_schema()
                raise

    def _create_table(self) -> None:
        """The table Hudi's provider creates itself: hash key `key` (a string), on-demand billing."""
        try:
            self.client.create_table(
                TableName=self.table,
                KeySchema=[{"AttributeName": KEY_ATTRIBUTE, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": KEY_ATTRIBUTE, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        except self.client.exceptions.ResourceInUseException:
            pass  # another process created it first
        self.client.get_waiter("table_exists").wait(TableName=self.table)

    def _refuse_other_key_schema(self) -> None:
        """A key that does not match the table's schema means the table is not ours: say so."""
        described = self.client.describe_table(TableName=self.table)["Table"]
        schema = [(k["AttributeName"], k["KeyType"]) for k in described["KeySchema"]]
        if schema != [(KEY_ATTRIBUTE, "HASH")]:
            raise BadInputError(
                f"DynamoDB table {self.table} has key schema {schema}; "
                f"the lock needs a single hash key '{KEY_ATTRIBUTE}'"
            )

    def _key(self, key: str) -> dict[str, dict[str, str]]:
        return {KEY_ATTRIBUTE: {"S": key}}

    def _get(self, key: str) -> dict[str, Any] | None:
        answer = self._request(
            lambda: self.client.get_item(TableName=self.table, Key=self._key(key), ConsistentRead=True)
        )
        return answer.get("Item")

    def try_acquire(self) -> int | None:
        version = str(uuid.uuid4())
        condition, names, values = self._takeable()
        item = {
            **self._key(self.lock_key),
            OWNER_NAME: {"S": self.owner_name},
            LEASE_DURATION: {"S": str(self._lease_ms())},
            RECORD_VERSION: {"S": version},
            TANDEM_OWNER: {"S": OwnerInfo(instant=self.instant).to_json()},
        }
        sent_at = time.monotonic()
        try:
            self._request(
                lambda: self.client.put_item(
                    TableName=self.table,
                    Item=item,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            )
        except self.client.exceptions.ConditionalCheckFailedException as err:
            # The refusal carries the holder's item (an endpoint that leaves it out costs one read).
            self._watch(err.response["Item"] if "Item" in err.response else self._get(self.lock_key))
            return None
        self.versions = [version]
        self.watched = None
        self.abandoned.clear()
        try:
            token = self._bump_fence()
        except Exception:
            self._give_back()
            raise
        self.valid_until = self.lease_deadline(sent_at, self.lease_s)
        if time.monotonic() >= self.valid_until:
            # The answers came too late to trust the lease: give it back and try again.
            self._give_back()
            return None
        self.start_heartbeat(self.lease_s, self._renew)
        return token

    def _lease_ms(self) -> int:
        return max(int(self.lease_s * 1000), 1)

    def _takeable(self) -> tuple[str, dict[str, str], Values]:
        """The condition of an acquiring write: the item is absent or released (the lock client's two "free"
        cases), or carries a record version we may take over: one watched unchanged for its lease, or our own
        that we could not give back. Only after an item of the earlier layout was seen (and its counter carried
        over): also that item, when its wall-clock lease has passed."""
        clauses = ["attribute_not_exists(#pk)", "#ir = :released"]
        names = {"#pk": KEY_ATTRIBUTE, "#ir": IS_RELEASED}
        values: Values = {":released": {"S": RELEASED}}
        takeable = list(self.abandoned)
        watched = self.watched
        if watched is not None and time.monotonic() - watched.since > watched.lease_s:
            takeable.append(watched.version)
        if takeable:
            names["#rvn"] = RECORD_VERSION
            keys = [f":take{i}" for i in range(len(takeable))]
            clauses.append(f"#rvn IN ({', '.join(keys)})")
            values.update({k: {"S": v} for k, v in zip(keys, takeable, strict=True)})
        if self.legacy_seeded:
            names.update({"#rvn": RECORD_VERSION, "#old": "rvn", "#exp": "expires_at"})
            clauses.append("(attribute_not_exists(#rvn) AND (attribute_not_exists(#old) OR #exp < :now))")
            values[":now"] = {"N": str(int(time.time() * 1000))}
        return " OR ".join(clauses), names, values

    def _watch(self, item: dict[str, Any] | None) -> None:
        """Note the holder's record version; the watch restarts whenever it changes (the holder heartbeat)."""
        if item is None or IS_RELEASED in item:
            self.watched = None
            return
        if RECORD_VERSION not in item:
            self._seed_fence(int(item.get(FENCE, {}).get("N", "0")))
            return
        version = item[RECORD_VERSION]["S"]
        if self.watched is None or self.watched.version != version:
            try:
                lease_s = int(item[LEASE_DURATION]["S"]) / 1000
            except (KeyError, ValueError):
                lease_s = self.lease_s
            self.watched = _Watched(version, lease_s, time.monotonic())

    def _seed_fence(self, floor: int) -> None:
        """Tandem's earlier layout kept its counter on the lock item: carry it to the fence item before that item
        is ever replaced, so that the token does not go back across the upgrade."""
        try:
            self._request(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key=self._key(self.fence_key),
                    UpdateExpression="SET #f = :floor",
                    ConditionExpression="attribute_not_exists(#f) OR #f < :floor",
                    ExpressionAttributeNames={"#f": FENCE},
                    ExpressionAttributeValues={":floor": {"N": str(floor)}},
                )
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            pass  # already at least there
        self.legacy_seeded = True

    def _bump_fence(self) -> int:
        answer = self._request(
            lambda: self.client.update_item(
                TableName=self.table,
                Key=self._key(self.fence_key),
                UpdateExpression="ADD #f :one",
                ExpressionAttributeNames={"#f": FENCE},
                ExpressionAttributeValues={":one": {"N": "1"}},
                ReturnValues="UPDATED_NEW",
            )
        )
        return int(answer["Attributes"][FENCE]["N"])

    def _ours(self) -> tuple[str, dict[str, str], Values]:
        """The lock client's condition for heartbeat and release: the item exists, with our owner name and our
        record version (any of those a heartbeat may have written without an answer)."""
        keys = [f":mine{i}" for i in range(len(self.versions))] or [":mine0"]
        values: Values = {k: {"S": v} for k, v in zip(keys, self.versions or [""], strict=True)}
        values[":me"] = {"S": self.owner_name}
        names = {"#pk": KEY_ATTRIBUTE, "#on": OWNER_NAME, "#rvn": RECORD_VERSION}
        return f"attribute_exists(#pk) AND #on = :me AND #rvn IN ({', '.join(keys)})", names, values

    def _delete_ours(self) -> bool:
        condition, names, values = self._ours()
        try:
            self._request(
                lambda: self.client.delete_item(
                    TableName=self.table,
                    Key=self._key(self.lock_key),
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
            )
            return True
        except self.client.exceptions.ConditionalCheckFailedException:
            return False

    def _give_back(self) -> None:
        """Delete the item we wrote; if that fails, our next attempt may take the item over at once."""
        try:
            self._delete_ours()
        except Exception:
            self.abandoned.extend(self.versions)
        self.versions = []

    def _renew(self) -> bool | None:
        """The lock client's heartbeat: a new record version (what waiters watch) and our lease duration."""
        version = str(uuid.uuid4())
        condition, names, values = self._ours()
        try:
            self._request(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key=self._key(self.lock_key),
                    UpdateExpression="SET #ld = :ld, #rvn = :new",
                    ConditionExpression=condition,
                    ExpressionAttributeNames={**names, "#ld": LEASE_DURATION},
                    ExpressionAttributeValues={**values, ":ld": {"S": str(self._lease_ms())}, ":new": {"S": version}},
                )
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        except Exception:  # unreachable, or no answer: it may have been written, so accept either next time
            self.versions = (self.versions + [version])[-KEEP_VERSIONS:]
            return None
        self.versions = [version]
        return True

    def release(self) -> None:
        self.stop_heartbeat()
        if self.token is not None and self.versions:
            self._give_back()  # unreachable: the lease frees it for others, and it stays ours to take back
        self.versions = []
        self.token = None
        self.valid_until = None

    def owner(self) -> OwnerInfo | None:
        """The recorded holder, or None when the lock is free or this provider has watched the holder's record
        version unchanged for its lease (what an acquisition would take over). One read cannot tell a stale
        lease, so a first look reports the holder."""
        item = self._get(self.lock_key)
        if not item or IS_RELEASED in item:
            return None
        if RECORD_VERSION not in item:  # Tandem's earlier layout: a wall-clock lease, the counter on the item
            if "rvn" not in item or int(item["expires_at"]["N"]) < time.time() * 1000:
                return None
            holder = OwnerInfo.from_json(item["owner_info"]["S"]) if "owner_info" in item else OwnerInfo("?", 0)
            holder.token = int(item.get(FENCE, {}).get("N", "0"))
            return holder
        self._watch(item)
        watched = self.watched
        if watched is not None and time.monotonic() - watched.since > watched.lease_s:
            return None
        if TANDEM_OWNER not in item:  # a lock client holder (Java Hudi): its owner name, no token
            return OwnerInfo(host=item.get(OWNER_NAME, {}).get("S", "?"), pid=0)
        holder = OwnerInfo.from_json(item[TANDEM_OWNER]["S"])
        # The holder bumped the counter right after its lock write; a later bump would have replaced the item.
        fence = self._get(self.fence_key) or {}
        holder.token = int(fence.get(FENCE, {}).get("N", "0"))
        return holder

    def force_release(self) -> None:
        self._request(lambda: self.client.delete_item(TableName=self.table, Key=self._key(self.lock_key)))
