"""``tree.plain_utf8``: the plain -V tree as UTF-8 bytes (what ``decode -V`` workers send
to the parent) is exactly ``render_tree``'s lines joined and encoded, or None where it
cannot be (a tree too deep to recurse, text strict UTF-8 cannot encode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
    trees), with most leaves as (label, value) tuples; with byte spans it is the full tree."""
    from kwsniff.output import tree as tree_mod
    from kwsniff.output.tree import TreeNode, build_tree, plain_utf8, render_tree
    # (two decodings: building a tree decodes record batches, which a second tree of
    # the same exchange then describes as decoded)
    exchanges = _sample_exchanges()
    again = _sample_exchanges()
    assert len(exchanges) == len(again) > 500
    tuples = nodes = 0
    for ex, ex2 in zip(exchanges, again):
        full = build_tree(ex, value_chars=64)
        lean = build_tree(ex2, value_chars=64, lean=True)
        text = list(render_tree(full))
        assert plain_utf8(lean) == plain_utf8(full)
        assert list(render_tree(lean)) == text
        assert list(tree_mod._render_walk(lean, tree_mod.PLAIN, False, "    ")) == text
        stack = [lean]
        while stack:
            node = stack.pop()
            for child in node.children:
                if type(child) is tuple:
                    tuples += 1
                else:
                    nodes += 1
                    stack.append(child)
        spanned = build_tree(ex, spans=True, lean=True)
        assert all(isinstance(n, TreeNode) for _, n in spanned.walk())
    assert tuples > 2 * nodes
