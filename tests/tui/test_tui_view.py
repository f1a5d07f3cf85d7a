"""Views of the exchange list: filters, connections, stable sorting, following growth."""

from __future__ import annotations

import math
import threading

from kwsniff.tui.loader import Loader
from kwsniff.tui.rowfacts import make_matcher
from kwsniff.tui.view import (
    ViewBuilder,
    ViewSpec,
    find_match,
    position_of,
    sort_key_function,
)


def _build(loader: Loader, spec: ViewSpec) -> list[int]:
    builder = ViewBuilder(loader.store, spec, lambda: True)
    builder.run()
    assert builder.complete
    return list(builder.rows)


def test_identity_spec_needs_no_builder() -> None:
    assert ViewSpec().identity
    assert ViewSpec(sort="no").identity
    assert not ViewSpec(sort="no", reverse=True).identity
    assert not ViewSpec(stream=3).identity


def test_stream_and_filter(sample_loader: Loader) -> None:
    store = sample_loader.store
    stream = store.locate(10)[0].stream[10]  # type: ignore[index]
    rows = _build(sample_loader, ViewSpec(stream=stream))
    assert rows and rows == sorted(rows)
    assert all(store.locate(r)[0].stream[r] == stream for r in rows)  # type: ignore[index]
    _flt, match, _fast = make_matcher("api == Produce")
    both = _build(sample_loader, ViewSpec("api == Produce", match, stream))
    assert both == [r for r in rows if match(store, r)]


def test_sorting_is_stable_and_reversible(sample_loader: Loader) -> None:
    store = sample_loader.store
    rows = _build(sample_loader, ViewSpec(sort="latency"))
    lat = [store.latency_of(r) for r in rows]
    keys = [math.inf if v is None else v for v in lat]
    assert keys == sorted(keys)
    assert sorted(rows) == list(range(store.count))
    by_api = _build(sample_loader, ViewSpec(sort="api"))
    key, _numeric = sort_key_function(store, "api")
    for a, b in zip(by_api, by_api[1:]):
        assert key(a) < key(b) or (key(a) == key(b) and a < b)   # ties in capture order
    rev = _build(sample_loader, ViewSpec(sort="api", reverse=True))
    for a, b in zip(rev, rev[1:]):
        assert key(a) > key(b) or (key(a) == key(b) and a < b)
    digests = _build(sample_loader, ViewSpec(sort="digest"))
    texts = [store.digest_text(r) for r in digests]
    assert texts == sorted(texts)


def test_builder_follows_a_growing_store(sample_loader: Loader) -> None:
    store = sample_loader.store
    total = store.count
    store.count = 40                       # pretend only 40 rows were published so far
    done = threading.Event()
    _flt, match, _fast = make_matcher("status == paired")
    builder = ViewBuilder(store, ViewSpec("status == paired", match), done.is_set)
    thread = threading.Thread(target=builder.run)
    thread.start()
    try:
        while builder.scanned < 40:
            thread.join(0.01)
        first = list(builder.rows)
        assert all(r < 40 for r in first)
        store.count = total
        done.set()
        thread.join(10)
        assert builder.complete
        assert list(builder.rows)[:len(first)] == first
        assert list(builder.rows) == [r for r in range(total) if match(store, r)]
    finally:
        builder.cancel()
        done.set()
        thread.join(10)


def test_position_of() -> None:
    assert position_of([1, 4, 9], 4, ascending=True) == 1
    assert position_of([1, 4, 9], 5, ascending=True) is None
    assert position_of([9, 1, 4], 4, ascending=False) == 2
    assert position_of([9, 1, 4], 7, ascending=False) is None


def test_find_match() -> None:
    matches = [3, 7, 12]
    # identity view of rows 2..14
    assert find_match(None, 13, 2, False, matches, 0, True) == 1        # row 3
    assert find_match(None, 13, 2, False, matches, 1, True) == 5        # row 7
    assert find_match(None, 13, 2, False, matches, 10, True) == 1       # wraps to row 3
    assert find_match(None, 13, 2, False, matches, 5, False) == 1
    assert find_match(None, 13, 2, False, matches, 1, False) == 10      # wraps to row 12
    # filtered (ascending) view
    rows = [1, 3, 5, 12, 20]
    assert find_match(rows, 5, 0, False, matches, 1, True) == 3
    assert find_match(rows, 5, 0, False, matches, 3, True) == 1
    assert find_match(rows, 5, 0, False, [7], 0, True) is None         # not in this view
    # sorted view
    rows = [12, 1, 7, 3]
    assert find_match(rows, 4, 0, True, matches, 0, True) == 2
    assert find_match(rows, 4, 0, True, matches, 2, True) == 3
    assert find_match(rows, 4, 0, True, matches, 3, True) == 0
    assert find_match(rows, 4, 0, True, matches, 0, False) == 3
    assert find_match(rows, 4, 0, True, [], 0, True) is None
