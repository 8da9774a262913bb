"""A small trips table shared by Tandem and Java Hudi in the takeover tests: rows, a model keyed by the record
key, and the three readers that must agree with it (Tandem's CLI, Java with its metadata table on and off)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import tandem

SCHEMA = pa.schema(
    [("id", pa.int64()), ("region", pa.string()), ("city", pa.string()), ("fare", pa.float64()), ("ts", pa.int64())]
)
Key = Callable[[dict], object]


def rows(*values: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, v, strict=True)) for v in values], schema=SCHEMA)


def jsonl(tmp_path: Path, name: str, table: pa.Table) -> str:
    """`table` as a JSON-lines file for `tandem write --input`."""
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()))
    return str(path)


def canon(table: pa.Table) -> list[tuple]:
    return sorted(
        (r["id"], r["region"], r["city"], r["fare"]) for r in table.select(["id", "region", "city", "fare"]).to_pylist()
    )


def expected(model: dict) -> list[tuple]:
    return sorted((r[0], r[1], r[2], r[3]) for r in model.values())


def upsert(model: dict, key: Key, table: pa.Table) -> None:
    for r in table.to_pylist():
        model[key(r)] = (r["id"], r["region"], r["city"], r["fare"])


def delete(model: dict, key: Key, table: pa.Table) -> None:
    for r in table.to_pylist():
        model.pop(key(r), None)


def ok(*args: str):
    """Run the CLI and insist on exit 0, showing its stderr otherwise."""
    result = tandem(*args)
    assert result.returncode == 0, f"tandem {' '.join(args)}: rc={result.returncode}\n{result.stderr}"
    return result


def tandem_rows(tmp_path: Path, path: str, name: str) -> list[tuple]:
    out = tmp_path / f"{name}.parquet"
    ok("read", path, "--output", str(out))
    return canon(pq.read_table(out))


def java_both(java_hudi, path: str) -> dict[bool, list[tuple]]:
    """Java's snapshot with its metadata table on and off."""
    return {metadata: canon(java_hudi.read(path, metadata=metadata)) for metadata in (False, True)}


def assert_all_read(java_hudi, tmp_path: Path, path: str, model: dict, name: str) -> None:
    assert java_both(java_hudi, path) == {False: expected(model), True: expected(model)}
    assert tandem_rows(tmp_path, path, name) == expected(model)


def properties(path: str) -> str:
    return (Path(path) / ".hoodie" / "hoodie.properties").read_text()


def snapshot(path: str) -> dict[str, str]:
    """Every file's bytes, but Tandem's lock folder (`.hoodie/.tandem-lock`: the file lock's fence counter,
    created by the refused writer's lock acquisition; no reader of the table opens it)."""
    found = {}
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".tandem-lock"]
        for name in files:
            full = os.path.join(folder, name)
            found[os.path.relpath(full, path)] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return found


def data_files(path: str) -> set[str]:
    """The parquet files in the table's partitions (not under `.hoodie/`, where a metadata table keeps its own)."""
    return {
        os.path.join(folder, n)
        for folder, _, files in os.walk(path)
        if "/.hoodie" not in folder
        for n in files
        if n.endswith(".parquet")
    }
