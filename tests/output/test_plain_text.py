"""``tree.plain_text``: the plain -V tree as ``decode -V`` writes it (its first line and
the rest) is exactly ``render_tree``'s lines joined, or None for a tree too deep to
recurse; the lean tree (plain -V) gives the same text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_plain_text_of_every_sample_exchange() -> None:
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine
    from kwsniff.output.tree import build_tree, plain_text, render_tree
    n = 0
    for path in sorted((ROOT / "pcaps").glob("*.pcap")):
        with open_capture(str(path)) as source:
            for ex in Engine().run(source):
                root = build_tree(ex)
                lines = list(render_tree(root))
                head, rest = plain_text(root)
                assert head == lines[0]
                assert head + rest == "\n".join(lines)
                n += 1
    assert n > 500


def test_plain_text_escapes_and_declines_deep_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text that is not printable is escaped in labels and values alike (no line breaks
    from the wire), a lone surrogate is kept (the writers encode it), and a tree too deep
    to recurse gives None (the caller then walks it with render_tree)."""
    from kwsniff.output import tree as tree_mod
    from kwsniff.output.tree import TreeNode, plain_text, render_tree
    assert plain_text(TreeNode("root", "caf\u00e9 \u2192 x")) == ("root: caf\u00e9 \u2192 x", "")
    root = TreeNode("root", "", [TreeNode("k\nx", "a\nb\x1b"), TreeNode("k", "\udcff"),
                                 TreeNode("e", "", [TreeNode("x" * 60, "\n" * 60)])])
    head, rest = plain_text(root)
    assert head + rest == "\n".join(render_tree(root))
    assert rest.count("\n") == 4 and "\\x1b" in rest and "\udcff" in rest
    assert list(render_tree(root)) == list(tree_mod._render_walk(root, tree_mod.PLAIN, False,
                                                                 "    "))

    def too_deep(root: Any, indent: str) -> list[str]:
        raise RecursionError

    monkeypatch.setattr(tree_mod, "_plain_pieces", too_deep)
    assert plain_text(TreeNode("root", "v")) is None


def _sample_exchanges() -> list[Any]:
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine
    out = []
    for path in sorted((ROOT / "pcaps").glob("*.pcap")) + \
            sorted((ROOT / "pcaps" / "tls").glob("*.pcap")):
        with open_capture(str(path)) as source:
            out += list(Engine().run(source))
    return out


def test_lean_tree_gives_the_same_text_with_fewer_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_tree(lean=True)`` (plain -V) renders the same lines as the full tree, by
    both renderers (the recursive one and the explicit-stack walk used for very deep
    trees), with most leaves as their lines (strings); with byte spans it is the full tree."""
    from kwsniff.output import tree as tree_mod
    from kwsniff.output.tree import TreeNode, build_tree, plain_text, render_tree
    # (two decodings: building a tree decodes record batches, which a second tree of
    # the same exchange then describes as decoded)
    exchanges = _sample_exchanges()
    again = _sample_exchanges()
    assert len(exchanges) == len(again) > 500
    leaves = nodes = 0
    for ex, ex2 in zip(exchanges, again):
        full = build_tree(ex, value_chars=64)
        lean = build_tree(ex2, value_chars=64, lean=True)
        text = list(render_tree(full))
        assert plain_text(lean) == plain_text(full)
        assert list(render_tree(lean)) == text
        assert list(tree_mod._render_walk(lean, tree_mod.PLAIN, False, "    ")) == text
        stack = [lean]
        while stack:
            node = stack.pop()
            for child in node.children:
                if type(child) is str:
                    leaves += 1
                else:
                    nodes += 1
                    stack.append(child)
        spanned = build_tree(ex, spans=True, lean=True)
        assert all(isinstance(n, TreeNode) for _, n in spanned.walk())
    assert leaves > 2 * nodes
