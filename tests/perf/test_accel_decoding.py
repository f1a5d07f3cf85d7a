"""The accelerator's tree line renderer (``plain_lines``) gives what
``tree._emit_plain`` gives, on the tree of every exchange of the sample captures and on
odd labels and values. (``payload_view`` is compared in tests/output/test_tree_values.py;
the record parser ``v2_records`` moved to the records kernel:
tests/records/test_records_kernel.py.) Skipped when the accelerator is not built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwsniff import accel

C = accel.speedups
pytestmark = pytest.mark.skipif(C is None, reason=f"accelerator not in use: {accel.status}")
ROOT = Path(__file__).resolve().parents[2]


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
