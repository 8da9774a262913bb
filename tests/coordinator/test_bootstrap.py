"""Bootstrap (RFC-12): a parquet dataset taken in as a table, in both modes and mixed by the regex selector.

Oracle: the source itself, read with pyarrow file by file, the partition columns added from the folder names as
strings (what Spark reads from a `df.write.partitionBy` dataset): every reader of Tandem must return exactly
those rows after the bootstrap, and a model of upserts and deletes after a random history of writes and table
services, while every source file keeps its bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.checker import check_table
from coordinator.bootstrap.run import FULL_RECORD, METADATA_ONLY, BootstrapRequest, bootstrap
from coordinator.config import CoordinatorConfig
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import clean, recover_table
from coordinator.write.writer import LocalWriter
from timeline.crash_points import SimulatedCrash, observe, simulate
from timeline.errors import BadInputError, ConflictError, UnreadableDataFileError
from timeline.format.bootstrap_index import read_index
from timeline.format.meta_fields import META_COLUMNS
from timeline.query.reader import read_plan, read_view
from timeline.query.scan import plan_scan
from timeline.table import Table

CONFIG = CoordinatorConfig(lock_uri="memory")
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64()), ("ts", pa.int64())])


def write_source(root: str, layout: dict[str, list[int]], first_id: int = 0) -> list[dict]:
    """Parquet files under `root`: per folder, one file per row count given; returns every row with its
    partition columns (the oracle)."""
    rows, next_id = [], first_id
    for folder, counts in layout.items():
        os.makedirs(os.path.join(root, folder), exist_ok=True)
        values = dict(p.split("=", 1) for p in folder.split("/")) if folder else {}
        for n, count in enumerate(counts):
            ids = list(range(next_id, next_id + count))
            next_id += count
            data = {
                "id": ids,
                "name": [f"n{i}" for i in ids],
                "v": [None if i % 5 == 0 else i / 4 for i in ids],
                "ts": [1] * count,
            }
            pq.write_table(pa.table(data, schema=SCHEMA), os.path.join(root, folder, f"part-{n:05d}.parquet"))
            rows += [{**{k: data[k][j] for k in data}, **values} for j in range(count)]
    with open(os.path.join(root, "_SUCCESS"), "w"):
        pass
    return rows


def fingerprint(root: str) -> dict[str, str]:
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(folder, name), "rb") as handle:
                out[os.path.relpath(os.path.join(folder, name), root)] = hashlib.sha256(handle.read()).hexdigest()
    return out


def table_rows(path: str, where: str | None = None) -> list[dict]:
    rows = read_plan(plan_scan(Table.open(path), where))
    rows = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names])
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


LAYOUTS = st.sampled_from(
    [
        {"": None},
        {"city=a": None, "city=b": None},
        {"year=2020/month=1": None, "year=2020/month=10": None, "year=2021/month=1": None},
    ]
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    layout=LAYOUTS,
    counts=st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=3), min_size=3, max_size=3),
    mode=st.sampled_from([METADATA_ONLY, FULL_RECORD, "mixed"]),
)
def test_every_reader_returns_the_source_rows(tmp_path_factory, layout, counts, mode):
    base = tmp_path_factory.mktemp("boot")
    folders = {folder: counts[i] for i, folder in enumerate(layout)}
    expected = sorted(write_source(str(base / "src"), folders), key=lambda r: r["id"])
    if not expected:
        return
    before = fingerprint(str(base / "src"))
    columns = [p.split("=")[0] for p in next(iter(folders)).split("/")] if next(iter(folders)) else []
    request = BootstrapRequest(
        str(base / "src"),
        str(base / "t"),
        ["id"],
        mode=FULL_RECORD if mode == FULL_RECORD else METADATA_ONLY,
        mode_regex=".*=a|year=2020/month=1" if mode == "mixed" else None,
    )
    result = bootstrap(request, CONFIG)
    assert table_rows(str(base / "t")) == expected
    table = Table.open(str(base / "t"))
    viewed = read_view(table, table.view(source="storage")).drop_columns(META_COLUMNS).to_pylist()
    assert sorted(viewed, key=lambda r: r["id"]) == expected
    assert fingerprint(str(base / "src")) == before
    index = read_index(table.storage)
    assert (index is not None) == (result.metadata_only_files > 0)
    if columns:
        value = expected[0][columns[0]]
        want = [r for r in expected if r[columns[0]] == value and r["v"] is not None and r["v"] > 0.5]
        assert table_rows(str(base / "t"), f"{columns[0]} = '{value}' AND v > 0.5") == want


def test_skeletons_hold_the_meta_columns_of_their_source_rows_in_order(tmp_path):
    write_source(str(tmp_path / "src"), {"city=a": [3, 0], "city=b": [4]})
    bootstrap(BootstrapRequest(str(tmp_path / "src"), str(tmp_path / "t"), ["id"]), CONFIG)
    table = Table.open(str(tmp_path / "t"))
    assert table.config.raw["hoodie.bootstrap.base.path"] == str(tmp_path / "src")
    skeletons = table.view().latest_base_files()
    assert len(skeletons) == 3 and all(f.instant == "00000000000001" and f.source for f in skeletons)
    for f in skeletons:
        stored = pq.read_table(table.storage.full(f.path))
        assert stored.column_names == META_COLUMNS
        source = pq.read_table(os.path.join(str(tmp_path / "src"), f.source.path))
        assert stored.column("_hoodie_record_key").to_pylist() == [str(i) for i in source.column("id").to_pylist()]
        assert set(stored.column("_hoodie_partition_path").to_pylist()) <= {f.partition}
        seqnos = stored.column("_hoodie_commit_seqno").to_pylist()
        assert seqnos == [f"00000000000001_{s.split('_')[1]}_{i}" for i, s in enumerate(seqnos)]


@pytest.mark.parametrize("seed", [7, 11])
def test_random_histories_after_a_bootstrap_never_touch_the_source(tmp_path, seed):
    """Upserts (of the source's rows and new ones), deletes, inserts, cleans, archival and a crashed write rolled
    back, on a bootstrapped table (both modes), against a model; every invariant of the chaos checker holds at
    the end, and the source's bytes never change."""
    rng = random.Random(seed)
    source = str(tmp_path / "src")
    rows = write_source(source, {"city=a": [5, 3], "city=b": [4], "city=c": [2, 2]})
    before = fingerprint(source)
    path = str(tmp_path / "t")
    config = CoordinatorConfig(
        lock_uri="memory",
        commits_retained=1,
        archive_min_commits=2,
        archive_max_commits=3,
        failed_writes_policy="EAGER",
    )
    bootstrap(BootstrapRequest(source, path, ["id"], mode_regex="city=c", regex_mode=FULL_RECORD), config)
    model = {r["id"]: r for r in rows}
    writer = LocalWriter(Table.open(path), coordinator=config)
    schema = SCHEMA.append(pa.field("city", pa.string()))
    for step in range(20):
        op = rng.choice(["upsert", "upsert", "delete", "insert", "clean", "crash"])
        if op == "clean":
            clean(Table.open(path), config)
            continue
        ids = rng.sample(range(30), rng.randint(1, 4))
        batch = [
            {"id": i, "name": f"s{step}", "v": float(step), "ts": step + 2, "city": model.get(i, {}).get("city", "c")}
            for i in ids
        ]
        if op == "crash":  # dies after its metadata-table delta commit; the next write rolls it back
            with pytest.raises(SimulatedCrash), simulate("commit.mdt"):
                writer.write(pa.Table.from_pylist(batch, schema), "upsert")
            continue
        if op == "insert":
            batch = [r for r in batch if r["id"] not in model]
            if not batch:
                continue
        writer.write(pa.Table.from_pylist(batch, schema), op)
        for r in batch:
            if op == "delete":
                model.pop(r["id"], None)
            else:
                model[r["id"]] = r
        assert table_rows(path) == sorted(model.values(), key=lambda r: r["id"]), step
    table = Table.open(path)
    recover_table(table, config, table_lock(table, config))
    assert table.timeline().archived_files, "archival ran past the bootstrap instants"
    assert check_table(table, "id", {str(k): r for k, r in model.items()}, use_hudi=False) == []
    assert fingerprint(source) == before


BAD_SOURCES = {
    "mixed schemas": lambda root: pq.write_table(
        pa.table({"id": [9], "name": [1]}), os.path.join(root, "city=a", "part-9.parquet")
    ),
    "a file, not a folder": lambda root: [shutil.rmtree(root), open(root, "w").close()],
    "not parquet": lambda root: open(os.path.join(root, "city=a", "notes.txt"), "w").close(),
    "not a parquet file": lambda root: open(os.path.join(root, "city=a", "x.parquet"), "wb").write(b"PAR1junk"),
    "inconsistent folders": lambda root: _move(root, "city=b", "town=b"),
    "nested deeper": lambda root: _move(root, "city=b/part-00000.parquet", "city=b/day=1/part-00000.parquet"),
    "duplicate keys": lambda root: pq.write_table(
        pa.table({"id": [0], "name": ["d"], "v": [1.0], "ts": [1]}, schema=SCHEMA),
        os.path.join(root, "city=a", "part-9.parquet"),
    ),
    "empty": lambda root: [os.remove(os.path.join(f, n)) for f, _, ns in os.walk(root) for n in ns],
    "empty partition value": lambda root: _move(root, "city=b/part-00000.parquet", "city=/part-00000.parquet"),
    "a ? in a name": lambda root: _move(root, "city=b/part-00000.parquet", "city=b?x/part-00000.parquet"),
    "a column name no reader holds": lambda root: pq.write_table(
        pa.table({"id": [9], "a b": [1]}), os.path.join(root, "city=a", "part-00000.parquet")
    ),
    "null key": lambda root: pq.write_table(
        pa.table({"id": [None], "name": ["d"], "v": [1.0], "ts": [1]}, schema=SCHEMA),
        os.path.join(root, "city=a", "part-9.parquet"),
    ),
}


def _move(root: str, old: str, new: str) -> None:
    os.makedirs(os.path.dirname(os.path.join(root, new)), exist_ok=True)
    os.rename(os.path.join(root, old), os.path.join(root, new))


@pytest.mark.parametrize("problem", sorted(BAD_SOURCES))
def test_a_bad_source_is_refused_before_anything_is_written(tmp_path, problem):
    source = str(tmp_path / "src")
    write_source(source, {"city=a": [3], "city=b": [2]})
    BAD_SOURCES[problem](source)
    before = fingerprint(source)
    with pytest.raises(BadInputError) as refused:
        bootstrap(BootstrapRequest(source, str(tmp_path / "t"), ["id"]), CONFIG)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "t").exists()
    assert fingerprint(source) == before


def test_a_source_inside_the_target_and_a_wrong_partition_column_are_refused(tmp_path):
    source = str(tmp_path / "t" / "src")
    write_source(source, {"city=a": [2]})
    with pytest.raises(BadInputError, match="overlap"):
        bootstrap(BootstrapRequest(source, str(tmp_path / "t"), ["id"]), CONFIG)
    with pytest.raises(BadInputError, match="overlap"):
        bootstrap(BootstrapRequest(str(tmp_path / "t"), source + "/inner", ["id"]), CONFIG)
    with pytest.raises(BadInputError, match="partition-by"):
        bootstrap(BootstrapRequest(source, str(tmp_path / "u"), ["id"], partition_by=["town"]), CONFIG)
    with pytest.raises(BadInputError, match="'city'"):
        bootstrap(BootstrapRequest(source, str(tmp_path / "u"), ["city"]), CONFIG)
    assert not (tmp_path / "u").exists()


@pytest.mark.parametrize(
    "point", ["commit.begin.inflight", "commit.write.file", "bootstrap.skeletons", "bootstrap.index", "commit.mdt"]
)
def test_an_interrupted_bootstrap_is_rolled_back_by_recover_and_runs_again(tmp_path, point):
    """Crashed anywhere inside instant 01: `recover` rolls it back with its bootstrap index and skeletons; running
    it again says to remove the target (instant 01 cannot be taken twice), and once removed it runs to the end."""
    source = str(tmp_path / "src")
    expected = sorted(write_source(source, {"city=a": [3, 1], "city=b": [2]}), key=lambda r: r["id"])
    path = str(tmp_path / "t")
    config = CoordinatorConfig(lock_uri="memory", failed_writes_policy="EAGER")
    with pytest.raises(SimulatedCrash), simulate(point):
        bootstrap(BootstrapRequest(source, path, ["id"]), config)
    table = Table.open(path)
    recover_table(table, config, table_lock(table, config))
    assert read_index(table.storage) is None
    assert not [f for f in table.storage_view().all_base_files()]
    assert not table.timeline().instants or all(i.action == "rollback" for i in table.timeline().instants)
    with pytest.raises(BadInputError, match="remove the folder"):
        bootstrap(BootstrapRequest(source, path, ["id"]), config)
    shutil.rmtree(path)
    result = bootstrap(BootstrapRequest(source, path, ["id"]), config)
    assert result.instants == ["00000000000001"]
    assert table_rows(path) == expected


def test_a_source_file_changed_during_the_bootstrap_aborts_it(tmp_path):
    source = str(tmp_path / "src")
    write_source(source, {"city=a": [3], "city=b": [2]})
    path = str(tmp_path / "t")

    def rewrite_a_source_file(point: str) -> None:
        if point == "bootstrap.index":
            pq.write_table(pa.table({"id": [0, 1, 2, 3]}), os.path.join(source, "city=a", "part-00000.parquet"))

    observe(rewrite_a_source_file)
    try:
        with pytest.raises(BadInputError, match="changed during the bootstrap"):
            bootstrap(BootstrapRequest(source, path, ["id"]), CONFIG)
    finally:
        observe(None)
    table = Table.open(path)
    assert read_index(table.storage) is None and not table.timeline().completed()
    assert not table.storage_view().all_base_files()


def test_a_source_and_a_table_on_s3(s3_base, tmp_path):
    """Both on the S3 endpoint: the source listed with its modification times, skeletons joined on read; a
    source folder beside the table (not inside it)."""
    import boto3

    local = str(tmp_path / "src")
    expected = sorted(write_source(local, {"city=a": [3, 2], "city=b": [4]}), key=lambda r: r["id"])
    bucket = s3_base.split("/")[2]
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"])
    for folder, _, names in os.walk(local):
        for name in names:
            relative = os.path.relpath(os.path.join(folder, name), local)
            client.upload_file(os.path.join(folder, name), bucket, f"source/{relative}")
    source = f"s3://{bucket}/source"
    bootstrap(BootstrapRequest(source, s3_base, ["id"], mode_regex="city=b", regex_mode=FULL_RECORD), CONFIG)
    assert table_rows(s3_base) == expected
    assert table_rows(s3_base, "city = 'a' AND v > 0.3") == [
        r for r in expected if r["city"] == "a" and (r["v"] or 0) > 0.3
    ]


def test_hudi_rs_refuses_a_table_with_skeletons_and_reads_a_copied_one(tmp_path):
    """hudi-rs 0.5 reads a skeleton without its source (null data columns, silently): a table with skeletons
    carries the key it refuses; a full-record table needs no guard and hudi-rs reads it right."""
    hudi = pytest.importorskip("hudi")
    source = str(tmp_path / "src")
    expected = sorted(write_source(source, {"city=a": [3], "city=b": [2]}), key=lambda r: r["id"])
    bootstrap(BootstrapRequest(source, str(tmp_path / "skeletons"), ["id"]), CONFIG)
    with pytest.raises(Exception, match="bootstrapped_skeletons_need_their_source_files"):
        hudi.HudiTable(str(tmp_path / "skeletons")).read()
    bootstrap(BootstrapRequest(source, str(tmp_path / "copied"), ["id"], mode=FULL_RECORD), CONFIG)
    rows = pa.Table.from_batches(hudi.HudiTable(str(tmp_path / "copied")).read())
    rows = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names])
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == expected


def test_finishing_a_bootstrap_must_ask_for_what_it_began(tmp_path):
    """Killed between instants 01 and 02 (mixed modes): no other write begins meanwhile; running it again with
    other modes or with a new file in a metadata-only partition is refused; the same request finishes it."""
    source = str(tmp_path / "src")
    expected = sorted(write_source(source, {"city=a": [2], "city=b": [3], "city=c": [1]}), key=lambda r: r["id"])
    path = str(tmp_path / "t")
    request = BootstrapRequest(source, path, ["id"], mode_regex="city=c", regex_mode=FULL_RECORD)
    with pytest.raises(SimulatedCrash), simulate("bootstrap.metadata_only"):
        bootstrap(request, CONFIG)
    row = pa.Table.from_pylist([{"id": 0, "name": "w", "v": 1.0, "ts": 2, "city": "a"}])
    with pytest.raises(ConflictError, match="bootstrap is not finished"):
        LocalWriter(Table.open(path), coordinator=CONFIG).write(row, "upsert")
    for other in (
        dataclasses.replace(request, mode_regex=None),
        dataclasses.replace(request, regex_mode=METADATA_ONLY),
    ):
        with pytest.raises(BadInputError, match="other files or in other modes"):
            bootstrap(other, CONFIG)
    extra = os.path.join(source, "city=a", "part-00009.parquet")
    pq.write_table(pa.table({"id": [99], "name": ["x"], "v": [1.0], "ts": [1]}, schema=SCHEMA), extra)
    with pytest.raises(BadInputError, match="other files or in other modes"):
        bootstrap(request, CONFIG)
    os.remove(extra)
    assert bootstrap(request, CONFIG).instants == ["00000000000002"]
    assert table_rows(path) == expected
    LocalWriter(Table.open(path), coordinator=CONFIG).write(row, "upsert")


def test_a_source_rewritten_at_the_same_length_is_refused_on_read(tmp_path):
    source = str(tmp_path / "src")
    write_source(source, {"city=a": [4]})
    path = str(tmp_path / "t")
    bootstrap(BootstrapRequest(source, path, ["id"]), CONFIG)
    file = os.path.join(source, "city=a", "part-00000.parquet")
    before = os.stat(file)
    rows = pq.read_table(file)
    pq.write_table(rows.take([0, 2, 1, 3]), file)  # two rows swapped: the same statistics, the same length
    assert os.path.getsize(file) == before.st_size
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    with pytest.raises(UnreadableDataFileError, match="changed since"):
        table_rows(path)
