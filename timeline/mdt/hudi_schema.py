"""The Avro schema of Hudi's metadata-table records, as Hudi 0.15 stores them (table version 6).

`HoodieMetadata.avsc` beside this module is `HoodieMetadataRecord.SCHEMA$` of Hudi 0.15's bundle (the schema
the generated class carries, so the one its writers use), pretty-printed. A record is stored under two
schemas:

- `RECORD_SCHEMA`: the record alone, as `HoodieAvroUtils.avroToBytes` encodes a `HoodieMetadataRecord`.
- `STORED_SCHEMA`: Hudi's five meta fields (nullable strings) ahead of the record's fields. The metadata
  table keeps `hoodie.populate.meta.fields=false`, yet its write handles still write records under the schema
  with meta fields (`HoodieAvroUtils.addMetadataFields`): every HFile cell value, in base files and in
  log blocks, is a record of this schema, and its JSON is the `SCHEMA` header of every log data block.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib.resources import files
from typing import Any

import fastavro

from timeline.format.meta_fields import META_COLUMNS

NAMESPACE = "org.apache.hudi.avro.model"
_AVSC = "HoodieMetadata.avsc"


def _load() -> dict[str, Any]:
    return json.loads(files(__package__).joinpath(_AVSC).read_text(encoding="utf-8"))


RECORD_SCHEMA: dict[str, Any] = _load()


def _with_meta_fields(schema: dict[str, Any]) -> dict[str, Any]:
    """`HoodieAvroUtils.addMetadataFields(schema)`: the meta fields first, each `["null","string"]`, doc "",
    default null; the record's own name, namespace and doc kept."""
    stored = copy.deepcopy(schema)
    meta = [{"name": name, "type": ["null", "string"], "doc": "", "default": None} for name in META_COLUMNS]
    stored["fields"] = meta + stored["fields"]
    return stored


STORED_SCHEMA: dict[str, Any] = _with_meta_fields(RECORD_SCHEMA)


@cache
def stored_schema_json() -> str:
    """The stored schema as Java's `Schema.toString()` prints it: the `SCHEMA` header of a log data block."""
    return json.dumps(STORED_SCHEMA, separators=(",", ":"))


@cache
def parsed_record_schema() -> dict[str, Any]:
    return fastavro.parse_schema(RECORD_SCHEMA)


@cache
def parsed_stored_schema() -> dict[str, Any]:
    return fastavro.parse_schema(STORED_SCHEMA)


def full_name(name: str) -> str:
    """A named type of the schema by its full name, the form fastavro takes and gives for union branches."""
    return f"{NAMESPACE}.{name}"
