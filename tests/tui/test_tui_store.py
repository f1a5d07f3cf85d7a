"""The TUI's compact store: rows, spilled exchanges, search, fast filters, row limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kwsniff.output.digest import digest
from kwsniff.output.fields import FIELDS
from kwsniff.output.pipeline import Selection
from kwsniff.output.filter import compile_filter
from kwsniff.output.tree import build_tree, render_tree
from kwsniff.tui import store as store_mod
from kwsniff.tui.loader import LOCK_NAME
from kwsniff.tui.loader import Loader
from kwsniff.tui.rowfacts import FAST_FIELDS, RowFacts, is_fast, make_matcher
from kwsniff.tui.store import ExchangeStore

from tui_common import ALL_PCAPS, SAMPLE, load_in_process, reference


def test_rows_match_the_decoded_exchanges(sample_loader: Loader) -> None:
    store = sample_loader.store
    ref = reference(SAMPLE)
    assert store.count == len(ref) == 109
    assert sample_loader.done and sample_loader.error is None
    assert sample_loader.counters is not None
    assert sample_loader.counters["exchanges"] == len(ref)
    for row, (ex, facts) in enumerate(ref):
        assert store.digest_text(row) == digest(ex, facts)
        again = store.exchange(row)
        assert again is not None
        assert again.index == ex.index and again.stream == ex.stream
        # the spilled exchange shows exactly the tree decode -V prints
        assert list(render_tree(build_tree(again))) == list(render_tree(build_tree(ex)))


def test_spill_files_leave_nothing_on_disk() -> None:
    loader = load_in_process(SAMPLE)
    directory = loader.directory
    # opened and unlinked as rows arrived: only the loader's lock file is left
    assert os.listdir(directory) == [LOCK_NAME]
    assert loader.store.exchange(0) is not None
    loader.close()
    assert not os.path.exists(directory)


@pytest.mark.parametrize("path", ALL_PCAPS, ids=lambda p: p.stem)
def test_fast_fields_equal_the_real_facts(path: Path) -> None:
    """Every field answered from stored rows has the value the -Y filter computes."""
    loader = load_in_process(path)
    try:
        store = loader.store
        ref = reference(path)
        assert store.count == len(ref)
        for row, (_ex, facts) in enumerate(ref):
            quick = RowFacts(store, row)
            for name in FAST_FIELDS:
                spec = FIELDS[name]
                assert spec.get(quick) == spec.get(facts), (path.name, row, name)
    finally:
        loader.close()


@pytest.mark.parametrize("expression", [
    "api == Produce",
    "api in {Fetch, Metadata} and latency_ms > 0.1",
    "error",
    "not error and status == paired",
    'topic contains "orders"',
    "partition == 1",
    'group == "kwsniff-orders"',
    "client_id matches \"consumer\" or records > 5",
    "bytes >= 1000 and response_bytes < 500",
    "correlation_id in {1..3}",
    "status != paired",
    "client == 127.0.0.1 and broker_port == 19093",
    # slow: fields that rows do not keep
    "member",
    "frame > 100 and acks == -1",
    'problem contains "left over"',
])
def test_fast_and_slow_filters_select_what_decode_selects(expression: str) -> None:
    loader = load_in_process(SAMPLE)
    try:
        store = loader.store
        _flt, match, fast = make_matcher(expression)
        assert fast == is_fast(expression)
        got = [store.exchange(r).index for r in range(store.count)  # type: ignore[union-attr]
               if match(store, r)]
        selection = Selection(compile_filter(expression))
        want = [ex.index for ex, _ in selection(ex for ex, _ in reference(SAMPLE))]
        assert got == want
    finally:
        loader.close()


def test_fast_detection() -> None:
    assert is_fast("api == Produce and latency_ms > 3")
    assert is_fast('topic == "member"')          # a value, not the member field... still fine
    assert is_fast("member or producer_id == 5 or port == 9092 or tls or acks == 0")
    assert is_fast("frame > 3")
    assert not is_fast("problem")
    assert not is_fast('sasl_user == "alice"')


_SCREENED = [
    "acks == -1", "not acks", "acks",
    "sasl_mechanism", 'sasl_mechanism == "PLAIN" or api == Metadata', "not sasl_user",
    'sasl_error or sasl_user == "alice"',
    "problem", "!problem", 'problem contains "gap" or error', 'not problem contains "left"',
    "frame > 10 and member", "frame in {1..40}",
    'transactional_id or producer_id > 0', 'topic_id or tls.version == "TLS 1.3"',
    'address == 127.0.0.1 and not port in {9092}',
]


@pytest.mark.parametrize("path", ALL_PCAPS, ids=lambda p: p.stem)
def test_screened_filters_select_what_decode_selects(path: Path) -> None:
    """Filters on fields rows cannot hold read the spill only where a row may have a
    value, and select exactly what ``decode -Y`` selects, on every committed capture."""
    loader = load_in_process(path)
    try:
        store = loader.store
        ref = [ex for ex, _ in reference(path)]
        for expression in _SCREENED:
            _flt, match, _fast = make_matcher(expression)
            got = [store.exchange(r).index for r in range(store.count)  # type: ignore[union-attr]
                   if match(store, r)]
            want = [ex.index for ex, _ in Selection(compile_filter(expression))(iter(ref))]
            assert got == want, (path.name, expression)
    finally:
        loader.close()


def test_screening_reads_only_rows_that_may_have_a_value(sample_loader: Loader,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    store = sample_loader.store
    read: list[int] = []
    real = store.exchange
    monkeypatch.setattr(store, "exchange", lambda row: read.append(row) or real(row))
    _flt, match, fast = make_matcher("not problem")
    assert not fast
    got = [r for r in range(store.count) if match(store, r)]
    with_problems = []
    for r in range(store.count):
        seg, i = store.locate(r)  # type: ignore[misc]
        if seg.problems[i]:
            with_problems.append(r)
    assert read == with_problems and 0 < len(read) < store.count
    assert len(got) == store.count - len(with_problems)


def test_search_finds_digests_case_insensitively(sample_loader: Loader) -> None:
    store = sample_loader.store
    want = [r for r in range(store.count) if "orders" in store.digest_text(r).lower()]
    assert want
    assert store.search("ORDERS") == want
    assert store.search("orders", rows_from=want[3]) == want[3:]
    assert store.search("no such text anywhere") == []
    assert store.search("") == []


def _fake_row(i: int) -> tuple[object, ...]:
    return (i + 1, 1000.0 + i, 1000.0 + i, 0.5, i % 3, 3, 12, i, "paired", "kafka", "c",
            ("10.0.0.1", 5000 + i % 3), ("10.0.0.2", 9092), None, 50, 60, -1, 0,
            f"digest {i}", 0, 0, (i, i), (-1, -1))


def test_row_limit_drops_whole_oldest_segments(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "SEGMENT_ROWS", 4)
    store = ExchangeStore(str(tmp_path), max_rows=1)
    store.max_rows = 8
    for i in range(11):
        store.append(_fake_row(i))
    store.publish()
    assert store.count == 11
    assert store.dropped == 4 and store.first_row == 4
    assert store.locate(3) is None and store.digest_text(3) == ""
    assert store.exchange(2) is None
    assert store.digest_text(4) == "digest 4"
    assert store.search("digest") == list(range(4, 11))
    assert sum(c.exchanges for c in store.connections.values()) == 11


def test_missing_spill_reads_as_unavailable(tmp_path: Path) -> None:
    store = ExchangeStore(str(tmp_path))
    store.append(_fake_row(0))
    store.publish()
    assert store.exchange(0) is None            # no spill file, no pickle: no crash
    assert store.digest_text(0) == "digest 0"
    assert store.memory()["rows"] == 1


def test_memory_estimate_of_a_loaded_capture(sample_loader: Loader) -> None:
    store = sample_loader.store
    memory = store.memory()
    assert memory["rows"] == store.count
    assert memory["columns"] > 100 * store.count
    assert memory["interned"] > 0
    assert memory["spill_disk"] > 0


def test_each_read_of_an_exchange_gets_its_own_objects(sample_loader: Loader) -> None:
    """Exchanges read back share nothing (the store keeps the last block read, and the
    UI and the view builder read from two threads)."""
    store = sample_loader.store
    for row in range(store.count):
        first = store.exchange(row)
        second = store.exchange(row)
        assert first is not None and second is not None and first is not second
        first.problems.append("changed")
        assert "changed" not in second.problems
        for a, b in ((first.request, second.request), (first.response, second.response)):
            if a is not None and a.body is not None:
                assert a.body is not b.body  # type: ignore[union-attr]
                assert a.problems is not b.problems  # type: ignore[union-attr]
