"""The one LRU cache, against a model: random gets and puts keep exactly the most recently used entries that fit
the bounds, and the byte count never drifts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.io.lru import LruCache

operations = st.lists(st.tuples(st.sampled_from(["get", "put"]), st.integers(0, 12), st.integers(0, 40)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(operations, st.one_of(st.none(), st.integers(1, 6)), st.one_of(st.none(), st.integers(0, 100)))
def test_the_cache_keeps_the_most_recently_used_entries_that_fit(steps, max_entries, max_bytes):
    size = (lambda _, value: value) if max_bytes is not None else None
    cache: LruCache[int, int] = LruCache(max_entries, max_bytes, size)
    model: list[tuple[int, int]] = []  # oldest first
    for op, key, value in steps:
        held = dict(model)
        if op == "get":
            assert cache.get(key) == held.get(key)
            if key in held:
                model.remove((key, held[key]))
                model.append((key, held[key]))
            continue
        cache.put(key, value)
        if key in held:
            model.remove((key, held[key]))
        model.append((key, value))  # the newest value replaces the old
        while len(model) > 1 and (
            (max_entries is not None and len(model) > max_entries)
            or (max_bytes is not None and sum(v for _, v in model) > max_bytes)
        ):
            model.pop(0)
        assert len(cache) == len(model)
        assert all(cache.get(k) == v for k, v in model)  # touches each key in the model's order: recency unchanged


def test_a_byte_bound_needs_a_size():
    try:
        LruCache(max_bytes=10)
    except ValueError:
        return
    raise AssertionError("accepted a byte bound without a size function")
