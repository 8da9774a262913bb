"""Property tests: instant times, instant file names, base-file names, properties."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from timeline.format import properties
from timeline.format.file_names import base_file_name, new_file_id, parse_base_file, write_token
from timeline.format.instant import (
    CLOCK,
    KNOWN_ACTIONS,
    Instant,
    InstantClock,
    State,
    format_instant_time,
    parse_instant_file,
    parse_instant_time,
)

moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2999, 12, 31), timezones=st.just(timezone.utc)
)


@given(moments, moments)
def test_instant_time_order_is_time_order(a, b):
    a = a.replace(microsecond=a.microsecond // 1000 * 1000)
    b = b.replace(microsecond=b.microsecond // 1000 * 1000)
    ta, tb = format_instant_time(a), format_instant_time(b)
    assert len(ta) == 17
    assert (ta < tb) == (a < b)
    assert parse_instant_time(ta) == a


@given(st.lists(st.sampled_from(["", "20990101000000000", "20240101000000999"]), max_size=5))
def test_clock_is_strictly_increasing_and_above_floors(floors):
    clock = InstantClock()
    seen = [clock.next_after(*floors) for _ in range(50)]
    assert seen == sorted(set(seen))
    assert all(s > f for s in seen for f in floors)


def test_global_clock_within_one_millisecond():
    times = [CLOCK.next_after() for _ in range(1000)]
    assert len(set(times)) == 1000 and times == sorted(times)


@given(
    st.datetimes(min_value=datetime(2000, 1, 1), timezones=st.just(timezone.utc)).map(format_instant_time),
    st.sampled_from(sorted(KNOWN_ACTIONS - {"compaction"})),
    st.sampled_from(list(State)),
)
def test_instant_file_names_round_trip(time, action, state):
    instant = Instant(time, action, state)
    assert parse_instant_file(instant.file_name) == instant


def test_completed_compaction_is_a_commit_file():
    assert Instant("20240101000000000", "compaction", State.COMPLETED).file_name == "20240101000000000.commit"


@given(st.text(max_size=30))
def test_garbage_names_are_not_instants(name):
    parsed = parse_instant_file(name)
    assert parsed is None or parsed.file_name == name


@given(st.integers(0, 10**6), st.integers(0, 999), st.integers(0, 9))
def test_base_file_names_round_trip(task, stage, attempt):
    file_id = new_file_id()
    name = base_file_name(file_id, write_token(task, stage, attempt), "20240426205419518")
    parsed = parse_base_file("p=1", name, 10)
    assert parsed is not None
    assert (parsed.file_id, parsed.instant, parsed.name, parsed.path) == (
        file_id,
        "20240426205419518",
        name,
        f"p=1/{name}",
    )
    assert "_" not in file_id and file_id.endswith("-0")


def test_non_hudi_files_are_not_base_files():
    for name in ["part-0000.parquet", ".hoodie_partition_metadata", "a_b_c.parquet", "x_0-1-0_2024.parquet"]:
        assert parse_base_file("", name) is None


keys = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=20)
values = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


@given(st.dictionaries(keys, values, max_size=10))
def test_properties_round_trip(props):
    assert properties.loads(properties.dumps(props)) == props


def test_properties_escape_colon_and_equals_like_java():
    text = properties.dumps({"hoodie.table.create.schema": '{"a":1}', "k": "x=y"})
    assert 'hoodie.table.create.schema={"a"\\:1}' in text
    assert "k=x\\=y" in text
