"""The source file a bootstrapped table's skeleton file joins (RFC-12), as every reader receives it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

METADATA_BOOTSTRAP_INSTANT = "00000000000001"  # Hudi's METADATA_BOOTSTRAP_INSTANT_TS: the skeletons' instant
FULL_BOOTSTRAP_INSTANT = "00000000000002"  # FULL_BOOTSTRAP_INSTANT_TS: full-record partitions, a bulk insert
BOOTSTRAP_BASE_PATH = "hoodie.bootstrap.base.path"
BOOTSTRAP_INDEX_CLASS = "hoodie.bootstrap.index.class"
BOOTSTRAP_INSTANTS = (METADATA_BOOTSTRAP_INSTANT, FULL_BOOTSTRAP_INSTANT)
# in instant 01's commit metadata when full-record partitions follow at 02: no other writer may come between
COPIES_FOLLOW = "tandem.bootstrap.copies.follow"


@dataclass(frozen=True)
class SourceFile:
    """A skeleton's data: the source file (under `base_uri`, the table's bootstrap base path, at `path`), its
    length when it was bootstrapped (a file of another length is not the one the skeleton was made from), and
    the partition columns' values, which the file lacks: readers take them from the partition path; and its
    modification time then (epoch ms; 0: not known), which a file rewritten at the same length does not keep."""

    base_uri: str
    path: str
    length: int
    partition_values: tuple[tuple[str, str | None], ...] = ()
    modified_ms: int = 0

    @property
    def partition_columns(self) -> list[str]:
        return [name for name, _ in self.partition_values]


def source_json(source: SourceFile | None) -> str | None:
    """A source as text, for a reader that ships its splits as rows (Spark's read tasks)."""
    return None if source is None else json.dumps(asdict(source))


def source_from_json(text: str | None) -> SourceFile | None:
    if text is None:
        return None
    doc = json.loads(text)
    values = tuple((name, value) for name, value in doc["partition_values"])
    return SourceFile(doc["base_uri"], doc["path"], doc["length"], values, doc["modified_ms"])
