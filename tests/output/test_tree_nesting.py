"""The -V tree's nesting bound (``tree.MAX_TREE_NESTING``): a struct more than that many
levels below the body gets one problem node instead of its fields, and a body nested far
deeper than the interpreter's recursion limit still renders (bounded output)."""

from __future__ import annotations

from typing import Any

import pytest

from kwsniff.kafka.model import Exchange, KafkaMessage
from kwsniff.output import tree


def _nested(depth: int, leaf: Any) -> Any:
    body = leaf
    for i in range(depth):
        body = {"Level": body, "N": i} if i % 2 else {"Items": [body, {"K": i}]}
    return body


def _lines(body: Any) -> list[str]:
    ex = Exchange(1, 0, ("127.0.0.1", 5000), ("127.0.0.1", 9092), "unanswered",
                  request=KafkaMessage("request", b"\0" * 16, 0, 9, body=body))
    return list(tree.render_tree(tree.build_tree(ex)))


@pytest.mark.parametrize("depth", [63, 64, 65, 66, 99, 150])
def test_nesting_around_and_beyond_the_bound(depth: int) -> None:
    lines = _lines(_nested(depth, {"ErrorCode": 1}))
    cut = [line for line in lines if "levels deep: not shown" in line]
    assert bool(cut) == (depth > tree.MAX_TREE_NESTING)
    if cut:
        assert cut[0].strip() == \
            f"Problem: nested more than {tree.MAX_TREE_NESTING} levels deep: not shown"
    else:
        assert any("ErrorCode: 1 (" in line for line in lines)


def test_too_deep_to_show() -> None:
    lines = _lines(_nested(20_000, {"X": 1}))
    assert sum("nested more than 64 levels deep: not shown" in line for line in lines) == 1
    assert len(lines) < 300
