"""A lookup of a few partitions takes Python paths instead of Arrow's (whose fixed cost per call is most of a
small lookup): each must decide exactly as the Arrow rule it stands in for, on any names and any timeline."""

from __future__ import annotations

import tempfile

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.format import fs_view
from timeline.format.active_timeline import ARCHIVED_FOLDER, ActiveTimeline
from timeline.format.file_names import BaseFile
from timeline.format.fs_view import FileSystemView
from timeline.io.storage import Storage
from timeline.mdt.reader import LISTING_SCHEMA, MetadataReader, _listed

TIMES = [f"2026010100000{i}" for i in range(10)]
ACTIONS = st.sampled_from(["commit", "deltacommit", "clean", "rollback"])
STATES = st.sampled_from(["requested", "inflight", ""])
INSTANT_TEXT = st.one_of(
    st.sampled_from(TIMES),
    st.sampled_from(["20251231000000", "202601010000009", "1" * 18, "2026010100000\u0663", "abc"]),
)
NAME = st.builds(
    lambda file_id, instant, tail: f"{file_id}_0-1-0_{instant}{tail}",
    st.sampled_from(["f1", "f2", "a_b", ""]),
    INSTANT_TEXT,
    st.sampled_from([".parquet", ".parquet\n", ".log", "x.parquet"]),
)


def _timeline(folder: str, instants: list[tuple[int, str, str]], archived: bool) -> ActiveTimeline:
    storage = Storage(folder)
    for index, action, state in instants:
        suffix = f"{action}.{state}" if state else action
        storage.write_bytes(f".hoodie/{TIMES[index]}.{suffix}", b"{}")
    if archived:
        storage.write_bytes(f".hoodie/{ARCHIVED_FOLDER}/.commits_.archive.1_1-0-1", b"x")
    return ActiveTimeline.load(storage)


@settings(max_examples=150, deadline=None)
@given(
    instants=st.lists(st.tuples(st.integers(0, 9), ACTIONS, STATES), max_size=6, unique_by=lambda i: i[0]),
    archived=st.booleans(),
    names=st.sets(NAME, max_size=12),
)
def test_names_kept_as_the_arrow_filter_keeps_them(instants, archived, names):
    with tempfile.TemporaryDirectory() as folder:
        timeline = _timeline(folder, instants, archived)
        reader = MetadataReader.__new__(MetadataReader)  # the filter reads nothing but the data timeline
        reader.data_timeline = timeline
        flat = pa.table({"partition": ["p"] * len(names), "file": sorted(names), "size": [1] * len(names)})
        listing = _listed(flat.cast(LISTING_SCHEMA))
        by_arrow = reader._filter_by_data_timeline(listing, listing.column("instant")).column("file").to_pylist()
        assert reader._kept_instants(set(names)) == set(by_arrow)


FILE = st.builds(
    BaseFile,
    st.sampled_from(["", "a", "b"]),
    st.sampled_from(["f1", "f2", "f3"]),
    st.sampled_from(["0-1-0", "1-2-3"]),  # two writes of one instant: which one wins is part of the rule
    st.sampled_from(TIMES),
    st.integers(1, 3),
)


@settings(max_examples=150, deadline=None)
@given(
    files=st.lists(FILE, max_size=20),
    replaced=st.lists(st.tuples(st.sampled_from(["", "a", "b"]), st.sampled_from(["f1", "f2", "f3"])), max_size=3),
    as_of=st.one_of(st.none(), st.sampled_from(TIMES)),
)
def test_small_views_choose_as_latest_mask_does(files, replaced, as_of):
    with tempfile.TemporaryDirectory() as folder:
        timeline = _timeline(folder, [(i, "commit", "") for i in range(10)], archived=False)
        timeline.replaced_file_ids = lambda _as_of=None, r=set(replaced): set(r)  # what replacecommits would say
        small = FileSystemView(files, timeline, as_of).latest_base_files()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fs_view, "SMALL_VIEW", -1)
            by_mask = FileSystemView(files, timeline, as_of).latest_base_files()
        assert small == by_mask
