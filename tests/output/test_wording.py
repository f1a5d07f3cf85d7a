"""Counts agree with their nouns: "1 byte", "1 item", never "1 bytes"."""

from __future__ import annotations

from kwsniff.output.pipeline import run_summary_line
from kwsniff.output.tree import TreeNode, _plain_dict
from kwsniff.text import counted


def test_counted() -> None:
    assert [counted(n, "byte") for n in (0, 1, 2)] == ["0 bytes", "1 byte", "2 bytes"]
    assert counted(1, "batch", "batches") == "1 batch"
    assert counted(3, "batch", "batches") == "3 batches"


def test_decoded_value_lists_say_item_once() -> None:
    root = TreeNode("Value", "")
    _plain_dict(root, {"items": [{"sku": "A"}], "lines": [{"a": 1}, {"a": 2}]})
    labels = {child.label: child.value for child in root.children}
    assert labels == {"items": "1 item", "lines": "2 items"}


def test_run_summary_line_counts() -> None:
    counters = {"exchanges": 1, "connections": 1, "packets": 3, "problems": 1,
                "skipped_bytes": 1, "gap_bytes": 0}
    assert run_summary_line(counters, 1) == (
        "1 exchange (1 shown) in 1 Kafka connection, 3 packets; 1 problem; 1 byte skipped; "
        "0 bytes lost in gaps")
