"""AWS Glue's Data Catalog through boto3: a database, its tables and their partitions, in the batches Glue takes
(`BatchCreatePartition` 100, `BatchDeletePartition` 25, `BatchUpdatePartition` 100 entries a request)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.catalog.catalog_table import OUTPUT_FORMAT, SERDE, CatalogTable, Column
from timeline.errors import BadInputError, TandemError

CREATE_BATCH = 100
DELETE_BATCH = 25
UPDATE_BATCH = 100


class CatalogError(TandemError):
    """The catalog refused or failed a request: nothing of the data table is affected."""


@dataclass(frozen=True)
class StoredTable:
    """What the catalog holds of a table: its columns, partition keys and parameters."""

    columns: list[Column]
    partition_keys: list[Column]
    parameters: dict[str, str]


class GlueCatalog:
    """One Glue Data Catalog (an endpoint and region; AWS_ENDPOINT_URL_GLUE names a local one too)."""

    def __init__(self, endpoint: str | None = None, region: str | None = None, client: Any = None) -> None:
        if client is None:
            try:
                import boto3
            except ModuleNotFoundError as err:
                raise BadInputError("syncing to Glue needs boto3: pip install 'tandem-lake[glue]'") from err
            client = boto3.client("glue", endpoint_url=endpoint, region_name=region or _default_region())
        self.client = client

    def _call(self, what: str, method: str, **kwargs: Any) -> dict:
        try:
            return getattr(self.client, method)(**kwargs)
        except Exception as err:  # botocore raises per-service classes; all are failures of the catalog
            raise CatalogError(f"Glue {what} failed: {_reason(err)}") from err

    def ensure_database(self, database: str, location: str | None = None) -> bool:
        """Create the database when it is missing; True if it was created."""
        try:
            self.client.get_database(Name=database)
            return False
        except self.client.exceptions.EntityNotFoundException:
            pass
        except Exception as err:
            raise CatalogError(f"Glue GetDatabase {database} failed: {_reason(err)}") from err
        spec: dict[str, Any] = {"Name": database, "Description": "Hudi tables registered by tandem sync"}
        if location:
            spec["LocationUri"] = location
        self._call(f"CreateDatabase {database}", "create_database", DatabaseInput=spec)
        return True

    def table(self, database: str, name: str) -> StoredTable | None:
        try:
            found = self.client.get_table(DatabaseName=database, Name=name)["Table"]
        except self.client.exceptions.EntityNotFoundException:
            return None
        except Exception as err:
            raise CatalogError(f"Glue GetTable {database}.{name} failed: {_reason(err)}") from err
        columns = [Column(c["Name"], c["Type"]) for c in found.get("StorageDescriptor", {}).get("Columns", [])]
        keys = [Column(c["Name"], c["Type"]) for c in found.get("PartitionKeys", [])]
        return StoredTable(columns, keys, dict(found.get("Parameters") or {}))

    def put_table(self, database: str, table: CatalogTable, exists: bool) -> None:
        spec = _table_input(table)
        if exists:
            self._call(f"UpdateTable {database}.{table.name}", "update_table", DatabaseName=database, TableInput=spec)
        else:
            self._call(f"CreateTable {database}.{table.name}", "create_table", DatabaseName=database, TableInput=spec)

    def partitions(self, database: str, name: str) -> dict[tuple[str, ...], str]:
        """Every partition of the table: its values -> its location."""
        found: dict[tuple[str, ...], str] = {}
        try:
            pages = self.client.get_paginator("get_partitions").paginate(DatabaseName=database, TableName=name)
            for page in pages:
                for partition in page.get("Partitions", []):
                    found[tuple(partition["Values"])] = partition.get("StorageDescriptor", {}).get("Location", "")
        except Exception as err:
            raise CatalogError(f"Glue GetPartitions {database}.{name} failed: {_reason(err)}") from err
        return found

    def add_partitions(self, database: str, table: CatalogTable, values: Sequence[tuple[tuple[str, ...], str]]) -> None:
        """Register partitions: (values, partition path) each."""
        entries = [_partition_input(table, v, path) for v, path in values]
        self._batched("batch_create_partition", database, table.name, "PartitionInputList", entries, CREATE_BATCH,
                      tolerate="AlreadyExistsException")  # fmt: skip

    def update_partitions(
        self, database: str, table: CatalogTable, values: Sequence[tuple[tuple[str, ...], str]]
    ) -> None:
        entries = [{"PartitionValueList": list(v), "PartitionInput": _partition_input(table, v, p)} for v, p in values]
        self._batched("batch_update_partition", database, table.name, "Entries", entries, UPDATE_BATCH)

    def drop_partitions(self, database: str, name: str, values: Sequence[tuple[str, ...]]) -> None:
        entries = [{"Values": list(v)} for v in values]
        self._batched("batch_delete_partition", database, name, "PartitionsToDelete", entries, DELETE_BATCH,
                      tolerate="EntityNotFoundException")  # fmt: skip

    def _batched(
        self, method: str, database: str, name: str, field: str, entries: list, size: int, tolerate: str = ""
    ) -> None:
        """One Glue batch call (boto3 `method`) per `size` entries; any entry's error but `tolerate` (what a
        repeated request meets) fails the sync."""
        what = f"{method} {database}.{name}"
        for batch in _batches(entries, size):
            answer = self._call(what, method, DatabaseName=database, TableName=name, **{field: list(batch)})
            _check_errors(answer, what, tolerate)


def _table_input(table: CatalogTable) -> dict[str, Any]:
    return {
        "Name": table.name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": dict(table.parameters),
        "PartitionKeys": [{"Name": c.name, "Type": c.type} for c in table.partition_keys],
        "StorageDescriptor": {
            **_storage(table, table.location),
            "Columns": [{"Name": c.name, "Type": c.type} for c in table.columns],
            "SerdeInfo": {"SerializationLibrary": SERDE, "Parameters": dict(table.serde_parameters)},
        },
    }


def _storage(table: CatalogTable, location: str) -> dict[str, Any]:
    return {"Location": location, "InputFormat": table.input_format, "OutputFormat": OUTPUT_FORMAT}


def _partition_input(table: CatalogTable, values: tuple[str, ...], path: str) -> dict[str, Any]:
    return {
        "Values": list(values),
        "StorageDescriptor": {
            **_storage(table, table.partition_location(path)),
            "Columns": [{"Name": c.name, "Type": c.type} for c in table.columns],
            "SerdeInfo": {"SerializationLibrary": SERDE, "Parameters": dict(table.serde_parameters)},
        },
    }


def _check_errors(answer: dict, what: str, tolerate: str = "") -> None:
    """A batch call answers per entry: any error but the one a repeated request meets fails the sync."""
    errors = [e for e in answer.get("Errors", []) if e.get("ErrorDetail", {}).get("ErrorCode") != tolerate]
    if errors:
        detail = errors[0].get("ErrorDetail", {})
        raise CatalogError(f"{what}: {len(errors)} entr(ies) refused, first: {detail.get('ErrorMessage', detail)}")


def _batches(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _reason(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _default_region() -> str:
    import os

    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
