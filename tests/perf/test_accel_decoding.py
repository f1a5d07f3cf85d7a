"""The accelerator's record parser (``_speedups.v2_records``) gives exactly what
``records._parse_v2_records`` gives, or None where only the Python code can; its tree
line renderer (``plain_lines``) gives what ``tree._emit_plain`` gives.

The parser is compared on the record sets of the sample captures, on batches built with
every kind of record (null/empty keys and values, headers, big varints, LogAppendTime),
cut at every byte, byte-mutated, and on random bytes; the renderer on the tree of every
exchange of the sample captures and on odd labels and values. (``payload_view`` is
compared in tests/output/test_tree_values.py.) Skipped when the accelerator is not built.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz import wire
from kwsniff import accel
from kwsniff.kafka import records as rec_mod
from kwsniff.kafka.records import Record
from record_sets import record_sets

C = accel.speedups
pytestmark = pytest.mark.skipif(C is None, reason=f"accelerator not in use: {accel.status}")
ROOT = Path(__file__).resolve().parents[2]


def _shape(parsed: tuple[list[Record], list[str], int, bool]) -> Any:
    records, problems, pos, ran_out = parsed
    return ([(r.offset, r.timestamp, r.key, type(r.key), r.value, type(r.value), r.headers,
              r.attributes, r.size, r.start, r.problems) for r in records],
            problems, pos, ran_out)


class _Header:
    """What _parse_v2_records reads of a batch."""

    def __init__(self, base_offset: int, base_ts: int, max_ts: int, attributes: int) -> None:
        self.base_offset, self.base_timestamp = base_offset, base_ts
        self.max_timestamp, self.attributes = max_ts, attributes


def compare(buf: bytes, pos: int, end: int, count: int, base_offset: int = 100,
            base_ts: int = 1_700_000_000_000, attributes: int = 0, in_place: bool = True,
            max_ts: int = 1_700_000_000_999) -> bool:
    """Assert C == Python (when C answers); True when C answered."""
    b = _Header(base_offset, base_ts, max_ts, attributes)
    py = rec_mod._parse_v2_records(buf, pos, end, count, b, in_place)  # type: ignore[arg-type]
    c = C.v2_records(buf, pos, end, count, base_offset, base_ts,
                     max_ts if attributes & 0x08 else None, in_place, Record)
    if c is None:
        return False
    assert _shape(c) == _shape(py)
    return True


def _record(i: int, rng: random.Random) -> bytes:
    key = rng.choice([None, b"", b"k%d" % i, bytes(rng.randrange(256) for _ in range(200))])
    value = rng.choice([None, b"", b"v" * rng.randrange(1, 300), "é✓".encode() * 3])
    headers = [(rng.choice([b"h", b"\xff\xfe", b""]), rng.choice([None, b"", b"x" * 5]))
               for _ in range(rng.randrange(4))]
    return wire.v2_record(i * rng.choice([1, 1000, 1 << 40]), key, value, headers)


def _records(n: int, seed: int) -> bytes:
    rng = random.Random(seed)
    return b"".join(_record(i, rng) for i in range(n))


def test_builds_the_same_records_as_python() -> None:
    data = _records(40, 1)
    assert compare(data, 0, len(data), 40)
    assert compare(data, 0, len(data), 40, attributes=0x08)        # LogAppendTime
    assert compare(data, 0, len(data), 40, in_place=False)
    assert compare(data, 0, len(data), 25)                         # fewer declared
    assert compare(data, 0, len(data), 60)                         # more declared
    assert compare(data, 0, len(data), -1)
    assert compare(b"xx" + data, 2, len(data) + 2, 40)             # not at the start


def test_same_when_cut_anywhere() -> None:
    data = _records(6, 2)
    answered = 0
    for cut in range(len(data) + 1):
        answered += compare(data[:cut], 0, cut, 6)
        answered += compare(data, 0, cut, 6)         # end before the buffer's end
    assert answered > len(data)


def test_same_on_mutated_records() -> None:
    rng = random.Random(3)
    data = bytearray(_records(8, 4))
    answered = 0
    for _ in range(1500):
        m = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            m[rng.randrange(len(m))] = rng.randrange(256)
        answered += compare(bytes(m), 0, len(m), 8)
    assert answered > 1000


def test_python_answers_beyond_64_bits() -> None:
    """A 10-byte varint whose value needs more than 64 bits; a key longer than the
    buffer (Python clamps the slice): the C parser declines, the caller runs Python."""
    huge = b"\x00" + b"\xff" * 9 + b"\x7f"           # attributes, then a 70-bit delta
    rec = wire.uvarint(len(huge) * 2) + huge
    assert C.v2_records(rec, 0, len(rec), 1, 0, 0, None, True, Record) is None
    long_key = b"\x00\x00\x00" + wire.varint(1000) + b"k"
    rec = wire.varint(len(long_key)) + long_key
    assert C.v2_records(rec, 0, len(rec), 1, 0, 0, None, True, Record) is None
    assert C.v2_records(bytearray(rec), 0, len(rec), 1, 0, 0, None, True, Record) is None
    overflow = wire.v2_record(1, b"k", b"v")
    assert C.v2_records(overflow, 0, len(overflow), 1, (1 << 63) - 1, 0, None, True,
                        Record) is None


def test_malformed_records_same_as_python() -> None:
    cases = [
        b"\x00" * 3 + b"\xff" * 10 + b"\x01",                        # varint > 10 bytes
        wire.varint(6) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(-3),
        wire.varint(5) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(4),
        wire.varint(8) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(1)
        + wire.varint(-2) + b"\x00",
        wire.varint(0) + b"rest",                                      # invalid length
        wire.varint(-5) + b"rest",
        wire.varint(9) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(0)
        + b"\x00\x00\x00",                                             # fields < length
    ]
    for data in cases:
        assert compare(data, 0, len(data), 1), data
        assert compare(data + data, 0, 2 * len(data), 2), data


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300), st.integers(-2, 12), st.booleans())
def test_same_on_random_bytes(data: bytes, count: int, log_append: bool) -> None:
    compare(data, 0, len(data), count, attributes=0x08 if log_append else 0)


@pytest.mark.parametrize("path", sorted((ROOT / "pcaps").glob("*.pcap")), ids=lambda p: p.name)
def test_sample_captures_decode_the_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record of every sample capture, through Batch.records, both ways."""
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine

    def all_records() -> list[Any]:
        out = []
        with open_capture(str(path)) as source:
            for ex in Engine().run(source):
                for msg in (ex.request, ex.response):
                    for rs in record_sets(msg.body) if msg is not None and msg.body else ():
                        for b in rs.batches:
                            out.append(([(r.offset, r.timestamp, r.key, r.value, r.headers,
                                          r.attributes, r.size, r.start, r.problems,
                                          r.control) for r in b.records], b.problems))
        return out

    fast = all_records()
    monkeypatch.setattr(rec_mod, "_v2_records_native", None)
    assert all_records() == fast


def test_helper_varints_are_kafkas() -> None:
    """The cases above are written with the fuzz helper's zigzag varints."""
    assert wire.varint(-1) == b"\x01" and wire.varint(1) == b"\x02"
    assert rec_mod.uvarint(wire.varint(-3), 0) == (5, 1)


# ------------------------------------------------------------------ plain tree lines

def _python_lines(root: Any, indent: str) -> list[str]:
    from kwsniff.output import tree
    out: list[str] = []
    tree._emit_plain([root], "", indent, out.append)
    return out


def test_plain_lines_of_every_sample_exchange() -> None:
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine
    from kwsniff.output.summary import printable
    from kwsniff.output.tree import build_tree
    n = 0
    for path in sorted((ROOT / "pcaps").glob("*.pcap")):
        with open_capture(str(path)) as source:
            for ex in Engine().run(source):
                root = build_tree(ex)
                for indent in ("    ", "\t", ""):
                    assert C.plain_lines(root, indent, printable) == _python_lines(root, indent)
                n += 1
    assert n > 500


def test_plain_lines_of_odd_nodes() -> None:
    from kwsniff.output.summary import printable
    from kwsniff.output.tree import TreeNode
    odd = ["", "plain", "tab\there", "esc\x1b[31m", "é✓", "\u2028sep", "\U0001f600 emoji",
           "nul\x00", "del\x7f", "ü\n", "\ud800"]
    root = TreeNode("root", "")
    for i, label in enumerate(odd):
        node = root.add(TreeNode(label or "empty", odd[-1 - i]))
        for value in odd:
            node.add(TreeNode(f"{label}#", value, [TreeNode("leaf", value)]))
    assert C.plain_lines(root, "  ", printable) == _python_lines(root, "  ")


def test_plain_lines_declines_what_python_must_do() -> None:
    from kwsniff.output.summary import printable
    from kwsniff.output.tree import TreeNode
    deep = node = TreeNode("0", "")
    for i in range(500):
        node = node.add(TreeNode(str(i + 1), "v"))
    assert C.plain_lines(deep, " ", printable) is None            # deeper than 400
    odd = TreeNode("root", "", [TreeNode("n", 5)])                # type: ignore[arg-type]
    assert C.plain_lines(odd, " ", printable) is None
    as_tuple = TreeNode("root", "", (TreeNode("n", "v"),))        # type: ignore[arg-type]
    assert C.plain_lines(as_tuple, " ", printable) is None
    with pytest.raises(TypeError):
        C.plain_lines(TreeNode("r", ""), None, printable)


# -- utf8_lines / tree.plain_utf8: the -V tree as bytes in one copy -------------------------

@settings(max_examples=300, deadline=None)
@given(st.lists(st.text()), st.binary(max_size=4))
def test_utf8_lines_is_join_and_encode(lines: list[str], tail: bytes) -> None:
    try:
        expected: bytes | None = "\n".join(lines).encode("utf-8") + tail
    except UnicodeEncodeError:          # a lone surrogate: the Python path encodes it
        expected = None
    assert C.utf8_lines(lines, tail) == expected


def test_utf8_lines_declines_what_python_must_do() -> None:
    assert C.utf8_lines(["a", "\ud800"], b"") is None
    assert C.utf8_lines(["a", 5], b"") is None                    # type: ignore[list-item]

    class Text(str):
        pass

    assert C.utf8_lines([Text("a")], b"") is None
    assert C.utf8_lines([], b"\n") == b"\n"
    with pytest.raises(TypeError):
        C.utf8_lines(("a",), b"")                                # type: ignore[arg-type]


def test_plain_utf8_of_every_sample_exchange() -> None:
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine
    from kwsniff.output.tree import build_tree, plain_utf8, render_tree
    n = 0
    for path in sorted((ROOT / "pcaps").glob("*.pcap")):
        with open_capture(str(path)) as source:
            for ex in Engine().run(source):
                root = build_tree(ex)
                text = "\n".join(render_tree(root))
                assert plain_utf8(root, b"\n\n") == text.encode("utf-8") + b"\n\n"
                n += 1
    assert n > 500


def test_plain_utf8_declines_deep_trees_and_surrogates(monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff.output import tree as tree_mod
    from kwsniff.output.tree import TreeNode, plain_utf8
    assert plain_utf8(TreeNode("root", "caf\u00e9 \u2192 x")) == "root: caf\u00e9 \u2192 x".encode()
    assert plain_utf8(TreeNode("root", "", [TreeNode("k", "\udcff")])) is None

    def too_deep(root: Any, indent: str) -> list[str]:
        raise RecursionError

    monkeypatch.setattr(tree_mod, "_plain_lines", too_deep)
    assert plain_utf8(TreeNode("root", "v")) is None
