"""A Tandem table as a Hive-style catalog (AWS Glue, a Hive metastore) describes it, as Hudi's meta sync writes
it: one catalog table for a copy-on-write table, three for a merge-on-read one (`<name>_ro`, the base files
only; `<name>_rt` and `<name>`, base files merged with their logs), with the data columns (Hudi's meta columns
first, partition columns left out), the partition columns as partition keys (typed as their columns), the base
path as location, Hudi's input formats and Parquet's serde, and the properties Spark and Trino look for
(docs/hudi-catalog-sync-format.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

from coordinator.catalog.hive_types import hive_type
from timeline.errors import BadInputError
from timeline.table import Table

COW_INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
RT_INPUT_FORMAT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
LAST_SYNCED = "last_commit_time_sync"  # Hudi's: the instant whose state the catalog holds
SCHEMA_PART_CHARS = 4000  # Spark's spark.sql.sources.schema.part.N split (HiveExternalCatalog)


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True)
class CatalogTable:
    """One table as the catalog holds it."""

    name: str
    columns: list[Column]
    partition_keys: list[Column]
    location: str
    input_format: str
    serde_parameters: dict[str, str]
    parameters: dict[str, str] = field(default_factory=dict)

    def partition_location(self, partition: str) -> str:
        return f"{self.location.rstrip('/')}/{partition}" if partition else self.location


def describe(
    table: Table, schema: pa.Schema, synced: str, name: str | None = None, location: str | None = None
) -> list[CatalogTable]:
    """The catalog tables of `table` at instant `synced` whose files have `schema` (meta columns included):
    one for copy-on-write, the `_ro` and `_rt` pair for merge-on-read. `location`: the base path as the
    catalog's readers reach it (default the table's URI; Trino's local file system, e.g., says `local:///`)."""
    name = (name or table.config.name).lower()
    location = location or _location(table.uri)
    partitioned = table.config.partition_fields
    missing = [f for f in partitioned if f not in schema.names]
    if missing:
        raise BadInputError(f"partition column(s) {', '.join(missing)} are not in the table's schema")
    columns = [Column(f.name, hive_type(f.type, f"column {f.name}")) for f in schema if f.name not in partitioned]
    keys = [Column(f, hive_type(schema.field(f).type, f"partition column {f}")) for f in partitioned]
    parameters = {
        "EXTERNAL": "TRUE",
        "spark.sql.sources.provider": "hudi",
        "hudi.metadata-listing-enabled": "FALSE",  # Hudi's Glue default (Athena lists storage)
        LAST_SYNCED: synced,
        **_spark_schema(schema, partitioned),
    }

    def one(suffix: str, input_format: str, read_optimized: bool) -> CatalogTable:
        serde = _serde(location, read_optimized)
        return CatalogTable(f"{name}{suffix}", columns, keys, location, input_format, serde, parameters)

    if not table.config.merge_on_read:
        return [one("", COW_INPUT_FORMAT, False)]
    # Hudi's default pair and, with sync_snapshot_with_table_name (default true), the snapshot under the name
    return [one("_ro", COW_INPUT_FORMAT, True), one("_rt", RT_INPUT_FORMAT, False), one("", RT_INPUT_FORMAT, False)]


def partition_values(partition: str, fields: list[str], hive_style: bool) -> list[str]:
    """A partition path's values in field order, as Hudi's default extractors take them: hive-style folders
    `key=value` give the value (HiveStylePartitionValueExtractor, MultiPartKeysValueExtractor), others
    themselves (SinglePartPartitionValueExtractor, MultiPartKeysValueExtractor)."""
    parts = partition.split("/") if partition else []
    if len(parts) != len(fields):
        raise BadInputError(f"partition {partition!r} does not have one folder per partition field {fields}")
    return [p.partition("=")[2] if hive_style else p for p in parts]


def _location(uri: str) -> str:
    """The base path as Glue's readers take it: `s3a://` as `s3://` (Hudi's `s3aToS3`), local paths as `file:`."""
    if uri.startswith("s3a://"):
        return "s3://" + uri[len("s3a://") :]
    return uri if "://" in uri else f"file:{uri}"


def _serde(location: str, read_optimized: bool) -> dict[str, str]:
    return {"path": location, "hoodie.query.as.ro.table": "true" if read_optimized else "false"}


def _spark_schema(schema: pa.Schema, partitioned: list[str]) -> dict[str, str]:
    """Spark's table properties for its data source tables: the schema as Spark's JSON (partition columns
    last, as Spark orders them), cut in parts, and the partition columns."""
    ordered = [f for f in schema if f.name not in partitioned] + [schema.field(p) for p in partitioned]
    text = json.dumps({"type": "struct", "fields": [_spark_field(f) for f in ordered]}, separators=(",", ":"))
    parts = [text[i : i + SCHEMA_PART_CHARS] for i in range(0, len(text), SCHEMA_PART_CHARS)]
    found = {"spark.sql.sources.schema.numParts": str(len(parts))}
    found.update({f"spark.sql.sources.schema.part.{i}": part for i, part in enumerate(parts)})
    if partitioned:
        found["spark.sql.sources.schema.numPartCols"] = str(len(partitioned))
        found.update({f"spark.sql.sources.schema.partCol.{i}": p for i, p in enumerate(partitioned)})
    return found


def _spark_field(f: pa.Field) -> dict:
    return {"name": f.name, "type": _spark_type(f.type), "nullable": f.nullable, "metadata": {}}


def _spark_type(arrow: pa.DataType) -> str | dict:
    hive = hive_type(arrow)
    simple = {"int": "integer", "bigint": "long", "binary": "binary", "timestamp": "timestamp"}
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return {"type": "array", "elementType": _spark_type(arrow.value_type), "containsNull": True}
    if pa.types.is_map(arrow):
        return {"type": "map", "keyType": _spark_type(arrow.key_type), "valueType": _spark_type(arrow.item_type),
                "valueContainsNull": True}  # fmt: skip
    if pa.types.is_struct(arrow):
        return {"type": "struct", "fields": [_spark_field(f) for f in arrow]}
    return simple.get(hive, hive)
