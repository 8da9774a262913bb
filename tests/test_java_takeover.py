"""Takeover both ways with default settings: Java Hudi 0.15 writes Tandem's tables, Tandem writes Java's.

Observed (docs/design.md, "Sharing a table with Java Hudi"): a Java writer with the default
hoodie.metadata.enable=true finds `.hoodie/metadata` but `hoodie.table.metadata.partitions` empty, so it
deletes Tandem's `files` partition, bootstraps its own HFile metadata table there (instant <last commit>010)
and records `hoodie.table.metadata.partitions=files`. Its rows are all on storage; Tandem's readers fall back
to listing storage, and writers refuse with one line naming `tandem metadata repair`, which rebuilds
Tandem's MDT and clears Java's record, after which both sides go on with no row lost.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import tandem

SCHEMA = pa.schema(
    [("id", pa.int64()), ("region", pa.string()), ("city", pa.string()), ("fare", pa.float64()), ("ts", pa.int64())]
)


def _rows(*rows: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)


def _jsonl(tmp_path: Path, name: str, rows: pa.Table) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows.to_pylist()))
    return str(path)


def _canon(rows: pa.Table) -> list[tuple]:
    return sorted(
        (r["id"], r["region"], r["city"], r["fare"]) for r in rows.select(["id", "region", "city", "fare"]).to_pylist()
    )


def _model(model: dict) -> list[tuple]:
    return sorted((r[0], r[1], r[2], r[3]) for r in model.values())


def _ok(*args: str):
    result = tandem(*args)
    assert result.returncode == 0, f"tandem {' '.join(args)}: rc={result.returncode}\n{result.stderr}"
    return result


def _tandem_rows(tmp_path: Path, path: str, name: str) -> list[tuple]:
    out = tmp_path / f"{name}.parquet"
    _ok("read", path, "--output", str(out))
    return _canon(pq.read_table(out))


def _java_both(java_hudi, path: str) -> dict[bool, list[tuple]]:
    return {metadata: _canon(java_hudi.read(path, metadata=metadata)) for metadata in (False, True)}


def _upsert(model: dict, key, rows: pa.Table) -> None:
    for r in rows.to_pylist():
        model[key(r)] = (r["id"], r["region"], r["city"], r["fare"])


def _java_writes_again(java_hudi, tmp_path: Path, path: str, model: dict, key, options: dict, name: str) -> None:
    """A Java upsert of one more key (it rebuilds its own MDT); both Java reads and Tandem's equal the model."""
    again = _rows((6, "x", "b", 6.0, 5))
    java_hudi.write(path, again, "upsert", options)
    _upsert(model, key, again)
    assert _java_both(java_hudi, path) == {False: _model(model), True: _model(model)}
    assert _tandem_rows(tmp_path, path, name) == _model(model)


def _delete(model: dict, key, rows: pa.Table) -> None:
    for r in rows.to_pylist():
        model.pop(key(r), None)


def _props(path: str) -> str:
    return (Path(path) / ".hoodie" / "hoodie.properties").read_text()


# -- (a) a Tandem table, Java writes with default options, Tandem takes it back


def test_java_writes_a_tandem_table_then_tandem_takes_it_back(java_hudi, tmp_path):
    from coordinator.config import CoordinatorConfig
    from coordinator.writer import LocalWriter
    from timeline.table import Table

    path = str(tmp_path / "trips")
    table = Table.create(path, "trips", ["id"], ["city"], hive_style=True, precombine_field="ts")
    key = lambda r: r["id"]  # noqa: E731
    model: dict = {}
    first = _rows((1, "x", "a", 1.0, 1), (2, "x", "a", 2.0, 1), (3, "x", "b", 3.0, 1))
    LocalWriter(table, coordinator=CoordinatorConfig(lock_uri="memory")).write(first, "upsert")
    _upsert(model, key, first)

    java_options = {  # only what the table needs: Hudi's defaults otherwise (metadata table on)
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.hive_style_partitioning": "true",
    }
    upsert = _rows((2, "x", "a", 20.0, 2), (4, "x", "c", 4.0, 2))
    java_hudi.write(path, upsert, "upsert", java_options)
    _upsert(model, key, upsert)
    gone = _rows((1, "x", "a", 1.0, 3))
    java_hudi.write(path, gone, "delete", java_options)
    _delete(model, key, gone)
    assert "hoodie.table.metadata.partitions=files" in _props(path), "Java no longer builds its own MDT here"

    # readers list storage (one warning line naming the repair); no row lost
    read = tandem("read", path, "--output", str(tmp_path / "r0.parquet"))
    assert read.returncode == 0, read.stderr
    assert _canon(pq.read_table(tmp_path / "r0.parquet")) == _model(model)
    assert "tandem metadata repair" in read.stderr and len(read.stderr.strip().splitlines()) == 1, read.stderr

    # writers (and recover) refuse in one line naming the repair, and change nothing
    more = _rows((3, "x", "b", 30.0, 4), (5, "x", "a", 5.0, 4))
    source = _jsonl(tmp_path, "more", more)
    for args in (("write", path, "--input", source, "--operation", "upsert"), ("recover", path)):
        refused = tandem(*args)
        assert refused.returncode == 2, (args, refused.returncode, refused.stderr)
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "Java Hudi" in lines[0] and f"tandem metadata repair {path}" in lines[0], lines
    assert _tandem_rows(tmp_path, path, "r1") == _model(model)

    _ok("metadata", "repair", path)
    assert "hoodie.table.metadata.partitions=" not in _props(path)
    _ok("metadata", "validate", path)
    _ok("write", path, "--input", source, "--operation", "upsert")
    _upsert(model, key, more)
    read = _ok("read", path, "--output", str(tmp_path / "r2.parquet"))
    assert not read.stderr.strip(), read.stderr  # from the MDT again
    assert _canon(pq.read_table(tmp_path / "r2.parquet")) == _model(model)
    assert _java_both(java_hudi, path) == {False: _model(model), True: _model(model)}

    # and once more round: Java again (it rebuilds its MDT again), Tandem repairs again
    _java_writes_again(java_hudi, tmp_path, path, model, key, java_options, "r3")
    _ok("metadata", "repair", path)
    assert _tandem_rows(tmp_path, path, "r4") == _model(model)


# -- (b) Java-written copy-on-write tables, Tandem writes them


LAYOUTS = {
    "complex-hive": (
        {
            "hoodie.datasource.write.recordkey.field": "id,region",
            "hoodie.datasource.write.partitionpath.field": "city",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
        },
        lambda r: (r["id"], r["region"]),
    ),
    "non-partitioned": (
        {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        },
        lambda r: r["id"],
    ),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_tandem_writes_a_java_written_table(java_hudi, tmp_path, layout):
    options, key = LAYOUTS[layout]
    options = {"hoodie.table.name": "j", "hoodie.datasource.write.precombine.field": "ts", **options}
    path = str(tmp_path / "j")
    model: dict = {}
    first = _rows((1, "x", "a", 1.0, 1), (1, "y", "b", 1.5, 1), (2, "x", "a", 2.0, 1), (3, "x", "b", 3.0, 1))
    java_hudi.write(path, first, "upsert", options)
    _upsert(model, key, first)
    second = _rows((2, "x", "a", 20.0, 2), (4, "x", "c", 4.0, 2))
    java_hudi.write(path, second, "upsert", options)
    _upsert(model, key, second)

    # Java's own (HFile) MDT is there: Tandem lists storage to read, refuses to write, and changes nothing
    assert "hoodie.table.metadata.partitions=files" in _props(path), "Java no longer builds its MDT by default"
    upsert = _rows((3, "x", "b", 30.0, 3), (5, "y", "a", 5.0, 3))
    source = _jsonl(tmp_path, "up", upsert)
    before = _snapshot(path)
    refused = tandem("write", path, "--input", source, "--operation", "upsert")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and f"tandem metadata repair {path}" in lines[0], refused.stderr
    assert "Java Hudi" in lines[0], lines[0]
    assert _snapshot(path) == before
    assert _tandem_rows(tmp_path, path, "t0") == _model(model)

    _ok("metadata", "repair", path)
    _ok("write", path, "--input", source, "--operation", "upsert")
    _upsert(model, key, upsert)
    gone = _rows((1, "x", "a", 1.0, 4))
    _ok("write", path, "--input", _jsonl(tmp_path, "del", gone), "--operation", "delete")
    _delete(model, key, gone)

    assert _tandem_rows(tmp_path, path, "t") == _model(model)
    assert _java_both(java_hudi, path) == {False: _model(model), True: _model(model)}

    # Java writes again (it rebuilds its MDT over Tandem's), and every reader still sees the model
    _java_writes_again(java_hudi, tmp_path, path, model, key, options, "t2")


# -- (c) a Java-written table with a feature Tandem lacks


def _snapshot(path: str) -> dict[str, str]:
    """Every file's bytes, but Tandem's lock folder (`.hoodie/.tandem-lock`: the file lock's fence counter,
    created by the refused writer's lock acquisition; no reader of the table opens it)."""
    found = {}
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".tandem-lock"]
        for name in files:
            full = os.path.join(folder, name)
            found[os.path.relpath(full, path)] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return found


def test_tandem_refuses_a_java_merge_on_read_table(java_hudi, tmp_path):
    path = str(tmp_path / "mor")
    options = {
        "hoodie.table.name": "mor",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "city",
    }
    java_hudi.write(path, _rows((1, "x", "a", 1.0, 1), (2, "x", "b", 2.0, 1)), "upsert", options)
    java_hudi.write(path, _rows((1, "x", "a", 10.0, 2)), "upsert", options)
    before = _snapshot(path)
    source = _jsonl(tmp_path, "in", _rows((3, "x", "a", 3.0, 3)))
    for args in (("write", path, "--input", source, "--operation", "upsert"), ("recover", path)):
        refused = tandem(*args)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1 and "MERGE_ON_READ" in lines[0], (args, refused.stderr)
    assert _snapshot(path) == before
