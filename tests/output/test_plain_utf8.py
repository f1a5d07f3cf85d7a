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
