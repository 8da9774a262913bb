"""Bad input gets one clear error line and the right exit code, and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from coordinator.write.writer import LocalWriter
from tests.conftest import tandem, unzip_fixture
from timeline.errors import BadInputError, CorruptInstantError, NotATableError
from timeline.format import avro_metadata, properties
from timeline.format.active_timeline import ActiveTimeline
from timeline.format.commit_metadata import CommitMetadata
from timeline.format.instant import Instant, State
from timeline.io.storage import Storage
from timeline.table import Table


def tree(path: Path) -> dict[str, bytes]:
    """Every table file and its bytes; the lock's own state (fencing counter) may move on, and an
    aborted write leaves its rollback decision (kept by design: a zombie must lose it)."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not {".tandem-lock", ".tandem-outcome"} & set(p.parts)
    }


@pytest.fixture
def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    LocalWriter(t).write(pa.table({"id": [1, 2], "p": ["a", "b"], "v": [1, 2]}), "insert")
    return t


def rewrite_properties(base: Path, **changes: str) -> None:
    path = base / ".hoodie" / "hoodie.properties"
    props = properties.loads(path.read_text())
    props.update(changes)
    path.write_text(properties.dumps(props))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hoodie.table.version": "5"}, "table version '5' is not supported"),
        ({"hoodie.table.version": "8"}, "table version '8' is not supported"),
        ({"hoodie.table.type": "READ_OPTIMIZED"}, "READ_OPTIMIZED is not supported"),
        (
            {"hoodie.table.type": "MERGE_ON_READ", "hoodie.populate.meta.fields": "false"},
            "merge-on-read tables without meta fields",
        ),
        ({"hoodie.table.base.file.format": "ORC"}, "ORC is not supported"),
        ({"hoodie.timeline.layout.version": "2"}, "layout version '2'"),
        ({"hoodie.table.checksum": "12345"}, "does not match"),
        ({"hoodie.table.keygenerator.class": "com.example.MyKeyGen"}, "key generator"),
        (
            {"hoodie.table.type": "MERGE_ON_READ", "hoodie.bootstrap.base.path": "/data/source"},
            "bootstrapped merge-on-read tables are not supported",
        ),
        ({"hoodie.table.cdc.enabled": "true"}, "CDC tables are not supported"),
        ({"hoodie.datasource.write.drop.partition.columns": "true"}, "drop the partition columns"),
    ],
)
def test_unsupported_tables_are_refused_with_exit_2(table, changes, message):
    base = Path(table.uri)
    rewrite_properties(base, **changes)
    before = tree(base)
    with pytest.raises(BadInputError, match=message):
        Table.open(table.uri)
    result = tandem("read", table.uri)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert tree(base) == before


def test_not_a_table(tmp_path):
    with pytest.raises(NotATableError):
        Table.open(str(tmp_path))
    result = tandem("timeline", str(tmp_path))
    assert result.returncode == 2 and "is not a Hudi table" in result.stderr


def test_corrupt_replacecommit_is_a_clear_error(table):
    base = Path(table.uri)
    (base / ".hoodie" / "20990101000000000.replacecommit").write_bytes(b"{not json")
    before = tree(base)
    with pytest.raises(CorruptInstantError, match="20990101000000000.replacecommit"):
        table.storage_view()
    result = tandem("read", table.uri)
    assert result.returncode == 2 and "not valid commit metadata JSON" in result.stderr
    assert tree(base) == before


def test_empty_completed_commit_is_corrupt():
    with pytest.raises(CorruptInstantError, match="is empty"):
        CommitMetadata.from_json_bytes(b"", "x.commit")


def test_garbage_avro_instant_is_corrupt():
    with pytest.raises(CorruptInstantError, match="not a readable Avro file"):
        avro_metadata.decode(b"\x00\x01garbage", "1.clean")


def test_clean_and_rollback_avro_round_trip(tmp_path):
    storage = Storage(str(tmp_path))
    timeline = ActiveTimeline(storage, ".hoodie", [])
    plan = {
        "instantToRollback": {"commitTime": "20240101000000000", "action": "commit"},
        "RollbackRequests": [
            {
                "partitionPath": "p=a",
                "fileId": "f-0",
                "latestBaseInstant": None,
                "filesToBeDeleted": ["p=a/f-0_0-1-0_20240101000000000.parquet"],
                "logBlocksToBeDeleted": None,
            }
        ],
        "version": 1,
    }
    instant = timeline.create_requested(
        Instant("20240102000000000", "rollback", State.REQUESTED), avro_metadata.encode("HoodieRollbackPlan", plan)
    )
    assert timeline.reload().avro(instant) == plan
    clean = {
        "policy": "KEEP_LATEST_COMMITS",
        "startCleanTime": "20240103000000000",
        "timeTakenInMillis": 5,
        "totalFilesDeleted": 1,
        "earliestCommitToRetain": "20240101000000000",
        "lastCompletedCommitTimestamp": "20240102000000000",
        "partitionMetadata": {
            "p=a": {
                "partitionPath": "p=a",
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": ["x.parquet"],
                "successDeleteFiles": ["x.parquet"],
                "failedDeleteFiles": [],
                "isPartitionDeleted": None,
            }
        },
        "version": 2,
        "bootstrapPartitionMetadata": None,
        "extraMetadata": {"savepointed_timestamps": "20240101000000000"},
    }
    assert avro_metadata.decode(avro_metadata.encode("HoodieCleanMetadata", clean), "c") == clean


def test_table_with_archived_timeline_opens(tmp_path):
    base = unzip_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    archived = base / ".hoodie" / "archived" / ".commits_.archive.1_1-0-1"
    archived.write_bytes(b"#HUDI#opaque archived log")
    # An archived instant's files stay visible: the oldest active instant is removed.
    oldest = sorted((base / ".hoodie").glob("20240418172802262.*"))
    for path in oldest:
        path.unlink()
    table = Table.open(str(base))
    timeline = table.timeline()
    assert timeline.archived_files == [archived.name]
    assert timeline.is_completed_or_archived("20240418172802262")
    files = table.storage_view().latest_base_files()
    assert {f.instant for f in files} == {"20240418172802262", "20240418172804498"}


def test_write_with_null_key_is_refused_and_leaves_nothing(table):
    base = Path(table.uri)
    before = tree(base)
    with pytest.raises(BadInputError, match="record key field 'id' is null"):
        LocalWriter(table).write(pa.table({"id": [None, 3], "p": ["a", "a"], "v": [1, 2]}), "upsert")
    assert tree(base) == before


def test_partition_value_escaping_the_table_is_refused(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", ["id"], ["p"])
    with pytest.raises(BadInputError, match="escapes the table base"):
        LocalWriter(t).write(pa.table({"id": [1], "p": [".."], "v": [1]}), "insert")
    assert not (tmp_path / "t" / ".." / "x").exists()
    assert [i for i in t.timeline().instants if i.is_completed] == []


def test_failed_write_leaves_no_instant_or_file(table, monkeypatch):
    base = Path(table.uri)
    before = tree(base)

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("coordinator.write.parquet_files.pq.ParquetWriter", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        LocalWriter(table).write(pa.table({"id": [5], "p": ["c"], "v": [5]}), "insert")
    after = tree(base)
    new = set(after) - set(before)
    assert all(name.endswith(".hoodie_partition_metadata") for name in new), new


def test_bad_input_file_exit_codes(table, tmp_path):
    garbage = tmp_path / "in.parquet"
    garbage.write_bytes(b"not parquet")
    result = tandem("write", table.uri, "--input", str(garbage), "--operation", "insert")
    assert result.returncode == 2 and "cannot be read as parquet" in result.stderr
    txt = tmp_path / "in.txt"
    txt.write_text("x")
    result = tandem("write", table.uri, "--input", str(txt), "--operation", "insert")
    assert result.returncode == 2 and "unsupported format .txt" in result.stderr
    result = tandem("read", table.uri, "--as-of", "yesterday")
    assert result.returncode == 2 and "--as-of: 'yesterday' is not a time" in result.stderr
    result = tandem("init", table.uri, "--name", "t", "--record-key", "id")
    assert result.returncode == 2 and "already a table" in result.stderr
