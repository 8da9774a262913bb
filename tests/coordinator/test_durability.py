"""Durability on local storage: nothing a completed instant names can be lost to a power loss.

A trace of `os.fsync`, `os.link`, `os.replace`, `os.rename`, `os.mkdir` and
exclusive creates (`os.open` with O_CREAT) during real commits shows, for each completion: every file it names was
flushed at its final size, and every folder entry it depends on was followed
by a flush of that folder, before the completed file was linked; then the
completed file's folder was flushed too.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
from dataclasses import dataclass

import pyarrow as pa
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.write.writer import LocalWriter
from timeline.io.storage import Storage
from timeline.table import Table

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names fsynced descriptors through /proc")

PARTITIONS = ["r0/c0", "r0/c1", "r1/c2", "r1/c3", "r2/c4"]


@dataclass(frozen=True)
class Event:
    kind: str  # fsync, link, replace, rename, mkdir or create
    path: str  # what was flushed, or the entry created
    source: str = ""  # link/replace/rename: the file that got the new name
    size: int = -1  # fsync of a file: its size at that moment
    is_dir: bool = False


class Trace:
    """The file-system calls of this process that decide durability, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[Event] = []
        self._real = {name: getattr(os, name) for name in ("fsync", "link", "replace", "rename", "mkdir", "open")}
        monkeypatch.setattr(os, "fsync", self._fsync)
        for name in ("link", "replace", "rename"):
            monkeypatch.setattr(os, name, self._moved(name))
        monkeypatch.setattr(os, "mkdir", self._mkdir)
        monkeypatch.setattr(os, "open", self._open)

    def _fsync(self, fd) -> None:
        number = fd if isinstance(fd, int) else fd.fileno()
        info = os.fstat(number)
        path = os.readlink(f"/proc/self/fd/{number}")
        self._real["fsync"](fd)
        self.events.append(Event("fsync", path, size=info.st_size, is_dir=stat.S_ISDIR(info.st_mode)))

    def _moved(self, kind: str):
        def call(src, dst, *args, **kwargs):
            self._real[kind](src, dst, *args, **kwargs)
            self.events.append(Event(kind, os.path.abspath(dst), source=os.path.abspath(src)))

        return call

    def _mkdir(self, path, *args, **kwargs) -> None:
        self._real["mkdir"](path, *args, **kwargs)
        self.events.append(Event("mkdir", os.path.abspath(path)))

    def _open(self, path, flags, *args, **kwargs) -> int:
        fd = self._real["open"](path, flags, *args, **kwargs)
        if flags & os.O_CREAT:  # an empty file is created in place (no temp file to link)
            self.events.append(Event("create", os.path.abspath(path)))
        return fd

    def created(self, path: str) -> int:
        """Index of the event that gave `path` its entry."""
        found = [i for i, e in enumerate(self.events) if e.kind != "fsync" and e.path == path]
        assert found, f"{path} was not created in the trace"
        return found[-1]


def flushed_at_size(trace: Trace, path: str, before: int) -> int | None:
    """Index of a flush of `path`'s content at its final size before `before` (a linked file: of its temp file)."""
    size = os.path.getsize(path)
    names = {path} | {e.source for e in trace.events if e.kind == "link" and e.path == path}
    hits = [i for i, e in enumerate(trace.events[:before]) if e.kind == "fsync" and e.path in names and e.size == size]
    return hits[-1] if hits else None


def folder_flushed(trace: Trace, folder: str, after: int, before: int) -> bool:
    window = trace.events[after + 1 : before]
    return any(e.kind == "fsync" and e.is_dir and e.path == folder for e in window)


def completion_problems(trace: Trace, completed: str, files: list[str], entries: list[str]) -> list[str]:
    """What a power loss right after `completed` was linked could take that it names or depends on.

    `files` must be flushed at their final size; `entries` (files and folders)
    must have their parent folder flushed after they appeared (a file written
    without a traced call appears no later than its own flush).
    """
    done = trace.created(completed)
    problems = []
    for path in files:
        if flushed_at_size(trace, path, done) is None:
            problems.append(f"content of {path} not flushed before {completed}")
    for path in entries:
        content = flushed_at_size(trace, path, done) if os.path.isfile(path) else None
        seen = [i for i in (content, _created_or_none(trace, path)) if i is not None]
        if not seen or not folder_flushed(trace, os.path.dirname(path), max(seen), done):
            problems.append(f"entry {path} not flushed before {completed}")
    if flushed_at_size(trace, completed, done) is None:
        problems.append(f"content of {completed} not flushed before its link")
    if not folder_flushed(trace, os.path.dirname(completed), done, len(trace.events)):
        problems.append(f"folder of {completed} not flushed after it")
    return problems


def _created_or_none(trace: Trace, path: str) -> int | None:
    found = [i for i, e in enumerate(trace.events) if e.kind != "fsync" and e.path == path]
    return found[-1] if found else None


def data_commit_dependencies(trace: Trace, base: str, completed: str, stats: list[str]) -> tuple[list[str], list[str]]:
    """(files, entries) that the data instant completed as `completed` depends on: its write stats and the trace."""
    time = posixpath.basename(completed).split(".")[0]
    hoodie, mdt = f"{base}/.hoodie", f"{base}/.hoodie/metadata"
    data_files = [f"{base}/{path}" for path in stats]
    partitions = {os.path.dirname(path) for path in data_files}
    ancestors = {folder for p in partitions for folder in _ancestors(p, base)}
    instant_folders = {hoodie, f"{mdt}/.hoodie"}
    entries = list(data_files)
    for event in trace.events:
        parent, name = os.path.split(event.path)
        if event.kind == "fsync" or name.endswith(".tmp"):
            continue
        mine = parent in partitions | ancestors | {base, f"{mdt}/files"} or (
            parent in instant_folders and name.startswith(f"{time}.")
        )
        if mine and event.path != completed:
            entries.append(event.path)
    linked = [e.path for e in trace.events if e.kind == "link" and e.path in entries and os.path.getsize(e.path)]
    return data_files + linked, sorted(set(entries))


def _ancestors(folder: str, base: str) -> list[str]:
    """`folder` and the folders between it and the base (the base's own entry is the table's, not a commit's)."""
    out = []
    while folder != base:
        out.append(folder)
        folder = os.path.dirname(folder)
    return out


def commit_stats(completed: str) -> list[str]:
    with open(completed, encoding="utf-8") as handle:
        doc = json.load(handle)
    return [stat["path"] for stats in doc["partitionToWriteStats"].values() for stat in stats]


def rows(ids: range, value: float) -> pa.Table:
    cities = [PARTITIONS[i % len(PARTITIONS)] for i in ids]
    return pa.table(
        {
            "id": list(ids),
            "region": [c.split("/")[0] for c in cities],
            "city": [c.split("/")[1] for c in cities],
            "v": [value] * len(ids),
        }
    )


def traced_write(monkeypatch, base: str, data: pa.Table, operation: str, config: CoordinatorConfig | None = None):
    with monkeypatch.context() as patch:
        trace = Trace(patch)
        result = LocalWriter(Table.open(base), coordinator=config).write(data, operation)
    return trace, result


@pytest.fixture(params=[True, False], ids=["hudi-format", "tandem-format"])
def base(tmp_path, request) -> str:
    path = os.path.realpath(tmp_path / "trips")
    Table.create(path, "trips", ["id"], ["region", "city"], hudi_format=request.param)
    return path


def assert_commit_durable(trace: Trace, base: str, time: str, action: str) -> None:
    completed = f"{base}/.hoodie/{time}.{action}"
    stats = commit_stats(completed)
    files, entries = data_commit_dependencies(trace, base, completed, stats)
    names = {posixpath.basename(p) for p in entries}
    assert {
        f"{time}.{action}.requested",
        f"{time}.inflight" if action == "commit" else f"{time}.{action}.inflight",
    } <= names
    assert any(".log." in name for name in names), "the MDT log of the commit is a dependency"
    assert completion_problems(trace, completed, files, entries) == []


def test_a_first_commit_into_new_nested_partitions_is_durable_before_it_completes(monkeypatch, base):
    trace, result = traced_write(monkeypatch, base, rows(range(100), 1.0), "insert")
    assert len(result.files_written) == len(PARTITIONS)
    assert {e.path for e in trace.events if e.kind == "mkdir"} >= {f"{base}/r0", f"{base}/r0/c0", f"{base}/r2/c4"}
    assert_commit_durable(trace, base, result.instant, "commit")


def test_upserts_and_overwrites_of_existing_partitions_are_durable_before_they_complete(monkeypatch, base):
    LocalWriter(Table.open(base)).write(rows(range(100), 1.0), "insert")
    trace, result = traced_write(monkeypatch, base, rows(range(0, 100, 3), 2.0), "upsert")
    assert_commit_durable(trace, base, result.instant, "commit")
    trace, result = traced_write(monkeypatch, base, rows(range(200, 210), 3.0), "insert_overwrite")
    assert_commit_durable(trace, base, result.instant, "replacecommit")


def test_the_mdt_deltacommit_is_durable_before_it_completes(monkeypatch, base):
    trace, result = traced_write(monkeypatch, base, rows(range(50), 1.0), "insert")
    mdt = f"{base}/.hoodie/metadata"
    completed = f"{mdt}/.hoodie/{result.instant}.deltacommit"
    logs = [e.path for e in trace.events if e.kind == "link" and ".log." in e.path]
    partitions = Table.open(base).config.java_metadata_partitions or ["files"]
    assert {p for p in partitions if any(f"/metadata/{p}/" in log for log in logs)} == set(partitions)
    assert completion_problems(trace, completed, logs, logs) == []


def test_an_inline_mdt_compaction_publishes_durably(monkeypatch, base):
    config = CoordinatorConfig(max_delta_commits=1)
    LocalWriter(Table.open(base), coordinator=config).write(rows(range(50), 1.0), "insert")
    trace, _ = traced_write(monkeypatch, base, rows(range(50, 100), 1.0), "insert", config)
    mdt = f"{base}/.hoodie/metadata"
    completions = [e.path for e in trace.events if e.kind == "link" and e.path.startswith(f"{mdt}/.hoodie/")]
    compaction = next(p for p in completions if p.endswith(".commit"))
    time = posixpath.basename(compaction).split(".")[0]
    published = [
        e.path for e in trace.events if e.kind == "link" and e.path.endswith((f"_{time}.parquet", f"_{time}.hfile"))
    ]
    plan = [
        e.path
        for e in trace.events
        if e.kind != "fsync" and posixpath.basename(e.path).startswith(f"{time}.") and e.path != compaction
    ]
    assert published and f"{mdt}/.hoodie/{time}.compaction.requested" in plan
    problems = completion_problems(trace, compaction, published, published + plan)
    assert problems == [], "\n".join(p.replace(base, "") for p in problems)


def test_flushes_are_no_ops_on_object_storage(monkeypatch):
    def refuse(*_args):
        raise AssertionError("no local call on object storage")

    monkeypatch.setattr(os, "fsync", refuse)
    monkeypatch.setattr(os, "open", refuse)
    storage = Storage("s3://bucket/table")
    storage.sync_file("p/a.parquet")
    storage.sync_dirs(["p", ".hoodie"])
    storage.create_dirs(["p/q"])
