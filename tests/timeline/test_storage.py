"""Storage: create-if-absent, overwrite, listing and path safety, locally and on S3."""

from __future__ import annotations

import threading

import pytest

from timeline.errors import BadInputError, PathEscapeError
from timeline.io.storage import Storage, normalize_relative


@pytest.fixture(params=["local", "s3"])
def storage(request, tmp_path):
    if request.param == "local":
        return Storage(str(tmp_path / "base"))
    return Storage(request.getfixturevalue("s3_base"))


def test_create_if_absent_creates_once(storage):
    assert storage.create_if_absent(".hoodie/1.commit", b"first")
    assert not storage.create_if_absent(".hoodie/1.commit", b"second")
    assert storage.read_bytes(".hoodie/1.commit") == b"first"


def test_write_read_list_delete(storage):
    storage.write_bytes("p/a.parquet", b"abc")
    storage.write_bytes("p/a.parquet", b"abcd")
    storage.write_bytes("q/r/b.parquet", b"x")
    assert storage.read_bytes("p/a.parquet") == b"abcd"
    listed = {(e.path, e.size) for e in storage.list_files("") if not e.path.startswith(".hoodie/")}
    assert listed == {("p/a.parquet", 4), ("q/r/b.parquet", 1)}  # on S3 the fence probe's object is in .hoodie
    assert storage.delete("p/a.parquet") is True
    assert storage.delete("p/a.parquet") is False
    assert not storage.exists("p/a.parquet")


def test_listing_a_missing_folder_is_empty(storage):
    assert storage.list_files("nothing/here") == []


@pytest.mark.parametrize("bad", ["../x", "a/../../x", "/etc/passwd", "a\\b", "..", "a/\x00"])
def test_paths_escaping_the_base_are_refused(storage, bad):
    with pytest.raises(PathEscapeError):
        storage.read_bytes(bad)
    with pytest.raises(PathEscapeError):
        storage.create_if_absent(bad, b"x")


def test_normalize_keeps_inner_dots():
    assert normalize_relative("a/./b/../c") == "a/c"
    assert normalize_relative("") == ""


def test_unknown_scheme_is_bad_input():
    with pytest.raises(BadInputError, match="unsupported storage scheme"):
        Storage("ftp://host/table")


def test_create_if_absent_has_exactly_one_winner_locally(tmp_path):
    storage = Storage(str(tmp_path))
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def racer(i: int) -> None:
        barrier.wait()
        results.append(storage.create_if_absent("claim", str(i).encode()))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_relative_accepts_hudi_absolute_paths_inside_the_base_only(tmp_path):
    storage = Storage(str(tmp_path / "base"))
    assert storage.relative("p/a.parquet") == "p/a.parquet"
    assert storage.relative(f"{tmp_path}/base/p/a.parquet") == "p/a.parquet"
    assert storage.relative(f"file:{tmp_path}/base/p/a.parquet") == "p/a.parquet"
    assert storage.relative(f"file://{tmp_path}/base/p/a.parquet") == "p/a.parquet"
    assert storage.relative(f"{tmp_path}/other/a.parquet") is None
    assert storage.relative(f"{tmp_path}/base2/a.parquet") is None
    s3 = Storage("s3://bucket/table")
    assert s3.relative("s3://bucket/table/p/a.parquet") == "p/a.parquet"
    assert s3.relative("s3a://bucket/table/p/a.parquet") == "p/a.parquet"
    assert s3.relative("s3://other/table/p/a.parquet") is None
    assert storage.relative("s3://bucket/base/p/a.parquet") is None
