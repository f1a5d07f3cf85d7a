"""The nesting bound: ``deeper_than`` counts dicts, lists and tuples, any depth, cycles."""

from __future__ import annotations

from typing import Any

import pytest

from kwsniff.kafka.nesting import MAX_NESTING, deeper_than


def _lists(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("value, levels", [
    (1, 0), ("text", 0), (b"[[[", 0), ([], 1), ({}, 1), ((), 1), ({"a": [1, {"b": ()}]}, 4),
    ([[], [[[]]], {}], 4), (_lists(MAX_NESTING), MAX_NESTING),
])
def test_levels(value: Any, levels: int) -> None:
    assert not deeper_than(value, levels)
    assert deeper_than(value, levels - 1) == (levels > 0)


def test_any_depth_without_recursion() -> None:
    assert deeper_than(_lists(200_000))
    assert not deeper_than(_lists(200_000), 200_000)


def test_a_cycle_nests_without_end() -> None:
    d: dict = {}
    d["self"] = d
    assert deeper_than(d)
    loop: list = []
    loop.append([loop])
    assert deeper_than(loop, 1000)
