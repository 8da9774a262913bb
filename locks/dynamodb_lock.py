"""DynamoDB (boto3): a lease with a heartbeat and a record version number.

Every write is conditional: acquire only if the item is free or its lease has
passed; heartbeat and release only if the record version is still ours, so a
holder that was paused past its lease cannot renew or free its successor's
lock. The item is never deleted: its `fence` counter is the fencing token,
incremented atomically by each acquisition. Acquire and release are one
request each: nothing checks the table first, a write that finds it missing
creates it. Credentials come from the standard AWS chain and are never logged.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from locks.base import LockProvider, LockServiceUnreachable, OwnerInfo, RetryPolicy, connection_cause, redact
from timeline.errors import BadInputError

KEY_ATTRIBUTE = "key"
T = TypeVar("T")


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
        self.lease_s = lease_s
        config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 1})
        self.client = boto3.client("dynamodb", region_name=region, endpoint_url=endpoint_url, config=config)
        self.rvn: str | None = None

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

    def try_acquire(self) -> int | None:
        rvn = uuid.uuid4().hex
        sent_at = time.monotonic()
        now_ms = int(time.time() * 1000)
        try:
            result = self._request(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key={KEY_ATTRIBUTE: {"S": self.lock_key}},
                    UpdateExpression="SET rvn = :rvn, expires_at = :exp, owner_info = :owner ADD fence :one",
                    ConditionExpression="attribute_not_exists(rvn) OR expires_at < :now",
                    ExpressionAttributeValues={
                        ":rvn": {"S": rvn},
                        ":exp": {"N": str(now_ms + int(self.lease_s * 1000))},
                        ":owner": {"S": OwnerInfo(instant=self.instant).to_json()},
                        ":one": {"N": "1"},
                        ":now": {"N": str(now_ms)},
                    },
                    ReturnValues="UPDATED_NEW",
                )
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return None
        self.rvn = rvn
        self.valid_until = self.lease_deadline(sent_at, self.lease_s)
        if time.monotonic() >= self.valid_until:
            # The answer came too late to trust the lease: give it back and try again.
            self._conditional_update("REMOVE rvn, owner_info SET expires_at = :zero", {":zero": {"N": "0"}})
            self.rvn = None
            return None
        self.start_heartbeat(self.lease_s, self._renew)
        return int(result["Attributes"]["fence"]["N"])

    def _conditional_update(self, expression: str, values: dict) -> bool:
        """Apply an update only while the record version is ours."""
        try:
            self._request(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key={KEY_ATTRIBUTE: {"S": self.lock_key}},
                    UpdateExpression=expression,
                    ConditionExpression="rvn = :mine",
                    ExpressionAttributeValues={**values, ":mine": {"S": self.rvn or ""}},
                )
            )
            return True
        except self.client.exceptions.ConditionalCheckFailedException:
            return False

    def _renew(self) -> bool | None:
        expires = str(int((time.time() + self.lease_s) * 1000))
        try:
            return self._conditional_update("SET expires_at = :exp", {":exp": {"N": expires}})
        except Exception:  # endpoint unreachable: keep trying until the lease says otherwise
            return None

    def release(self) -> None:
        self.stop_heartbeat()
        if self.token is not None and self.rvn is not None:
            try:
                self._conditional_update("REMOVE rvn, owner_info SET expires_at = :zero", {":zero": {"N": "0"}})
            except Exception:  # unreachable: the lease frees it
                pass
        self.rvn = None
        self.token = None
        self.valid_until = None

    def owner(self) -> OwnerInfo | None:
        key = {KEY_ATTRIBUTE: {"S": self.lock_key}}
        item = self._request(lambda: self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True))
        item = item.get("Item")
        if not item or "rvn" not in item or int(item["expires_at"]["N"]) < time.time() * 1000:
            return None
        holder = OwnerInfo.from_json(item["owner_info"]["S"])
        # Only acquisitions move the counter, and the one that wrote this record moved it last.
        holder.token = int(item["fence"]["N"])
        return holder

    def force_release(self) -> None:
        self._request(
            lambda: self.client.update_item(
                TableName=self.table,
                Key={KEY_ATTRIBUTE: {"S": self.lock_key}},
                UpdateExpression="REMOVE rvn, owner_info SET expires_at = :zero",
                ExpressionAttributeValues={":zero": {"N": "0"}},
            )
        )
