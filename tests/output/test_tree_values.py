"""Record key/value/header texts of the detail tree: the fast path (no payload decoder
registered) gives exactly what the general path (``builtin_view`` shown by
``_Builder._shown``, or ``render_payload`` when decoders are registered) gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from builders import build, exchange, record_batch, request, response
from kwsniff.kafka.payload import (as_text, builtin_view, register_payload_decoder,
                                   unregister_payload_decoder)
from kwsniff.output import tree
from kwsniff.output.tree import build_tree, render_tree

LIMITS = [None, 1, 5, 16, 256]


def reference(data: bytes | None, limit: int | None) -> str:
    """The general path: the built-in view, shown as ``_Builder._shown`` shows it."""
    if data is None:
        return "null"
    if not data:
        return "0 bytes"
    kind, obj, text, _ = builtin_view(bytes(data), limit)
    builder = tree._Builder.__new__(tree._Builder)
    builder.value_chars = limit
    return builder._shown(len(data), kind, obj, text, None)


SAMPLES = [None, b"", b"k", b"key-00134", b"bench", b"\x00\x01", b"\xff\xfe" * 40,
           b'{"n":1}', b' [1, 2, "x"]', b"{not json", "héllo ✓".encode(), b"a\tb\nc",
           b"quote\"and\\back", b"x" * 64, b"x" * 65, b"y" * 300, bytes(range(256)),
           json.dumps({"k": "v" * 400}).encode(), b"\xe2\x82", b"text\x7f"]


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("data", SAMPLES, ids=range(len(SAMPLES)))
def test_view_matches_the_general_path(data: bytes | None, limit: int | None) -> None:
    tree._VIEWS.clear()
    first = tree._view(data, limit)
    assert first == reference(data, limit)
    assert tree._view(data, limit) == first                  # remembered: the same text
    if data is not None:
        assert tree._view(memoryview(data), limit) == first  # views of bytes too


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=120).map(str.encode),
                 st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300)
                 .map(str.encode),
                 st.lists(st.integers(), max_size=8).map(lambda v: json.dumps(v).encode())),
       st.sampled_from(LIMITS + [0, 2, 3, 4, 7, 300]))
def test_view_matches_the_general_path_on_any_bytes(data: bytes, limit: int | None) -> None:
    assert tree._view(data, limit) == reference(data, limit)


def test_short_view_cache_is_bounded() -> None:
    tree._VIEWS.clear()
    for i in range(tree._VIEWS_LIMIT + 10):
        tree._view(b"key-%d" % i, 256)
    assert len(tree._VIEWS) <= tree._VIEWS_LIMIT
    tree._view(b"x" * (tree._VIEWS_MAX_BYTES + 1), 256)     # long payloads are not kept
    assert (b"x" * (tree._VIEWS_MAX_BYTES + 1), 256) not in tree._VIEWS


@pytest.fixture(scope="module")
def produce() -> Any:
    values = [b'{"n":1}', b"plain text", b"\x00\x01\x02", None, b"", b"z" * 500]
    parts = [{"Index": 0, "Records": record_batch(
        values, keys=[b"k%d" % j if j % 2 else None for j in range(len(values))],
        headers=[("trace", b"\x00\x01"), ("src", b"bench"), ("empty", None)])}]
    req = request(build(ProduceRequest, 9, {
        "TransactionalId": None, "Acks": -1, "TimeoutMs": 30000,
        "TopicData": [{"Name": "orders", "PartitionData": parts}]}), correlation_id=7)
    resp = response(build(ProduceResponse, 9, {
        "Responses": [{"Name": "orders", "PartitionResponses": [
            {"Index": 0, "ErrorCode": 0, "BaseOffset": 10}]}], "ThrottleTimeMs": 0}), req)
    return exchange(req, resp, index=1)


@pytest.mark.parametrize("value_chars", [None, 8, 256])
@pytest.mark.parametrize("spans", [False, True])
def test_record_nodes_match_the_decoder_path(produce: Any, value_chars: int | None,
                                             spans: bool) -> None:
    """A registered decoder that declines every payload sends records through
    ``payload_node``/``render_payload``; the tree must not change."""
    fast = build_tree(produce, spans=spans, value_chars=value_chars)
    handle = register_payload_decoder(None, lambda *_: None, name="declines")
    try:
        general = build_tree(produce, spans=spans, value_chars=value_chars)
    finally:
        unregister_payload_decoder(handle)
    lines = list(render_tree(fast, offsets=spans))
    assert lines == list(render_tree(general, offsets=spans))
    assert any("Headers: 3" in line for line in lines)
    assert any('"src": "bench" (5 bytes)' in line for line in lines)
    assert any("Value: null" in line for line in lines)

    def shape(node: Any) -> list[Any]:
        return [(n.label, n.value, n.start, n.length, n.message, n.about, n.path, n.style)
                for _, n in node.walk()]

    assert shape(fast) == shape(general)


def _text_reference(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(ord(c) < 0x20 and c not in "\t\n\r" or c == "\x7f" for c in text):
        return None
    return text


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.binary(max_size=120), st.text(max_size=80).map(str.encode),
                 st.tuples(st.text(min_size=30, max_size=60), st.binary(max_size=3))
                 .map(lambda t: t[0].encode() + t[1])))
def test_as_text_is_utf8_without_control_characters(data: bytes) -> None:
    """The head-first control-byte test gives what decoding and looking does."""
    assert as_text(data) == _text_reference(data)


@pytest.mark.parametrize("data", [b"x" * 40 + b"\x00", b"x" * 40 + b"\xff", b"\x01" + b"x" * 40,
                                  "é".encode() * 20, b"x" * 31 + b"\x7f", b"tab\there" * 9])
def test_as_text_after_the_head(data: bytes) -> None:
    assert as_text(data) == _text_reference(data)


def test_builder_leaves_share_no_list_and_still_take_children() -> None:
    """Leaves made in bulk have the empty tuple as ``children``; ``add`` on one gives it a
    list of its own (and no other leaf gets the child)."""
    from pathlib import Path

    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine
    from kwsniff.output.tree import TreeNode

    pcap = Path(__file__).resolve().parents[2] / "pcaps" / "aiokafka.pcap"
    with open_capture(str(pcap)) as source:
        root = next(build_tree(ex) for ex in Engine().run(source))
    leaves = [n for _, n in root.walk() if n.children == ()]
    assert len(leaves) >= 2
    first, second = leaves[0], leaves[1]
    child = TreeNode("Note", "added")
    assert first.add(child) is child
    assert first.children == [child]
    assert second.children == ()
    assert list(render_tree(root)).count(" " * 4 * (1 + next(
        d for d, n in root.walk() if n is first)) + "Note: added") == 1
