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


def test_stats_numbers_and_headings(capsys) -> None:  # noqa: ANN001
    from pathlib import Path

    from cli_run import run_cli

    capture = Path(__file__).resolve().parents[2] / "pcaps" / "rdkafka-consumer-group.pcap"
    code, out, err = run_cli(capsys, ["stats", str(capture)])
    join = next(line for line in out.splitlines() if line.startswith("JoinGroup v5"))
    assert join.split()[5:9] == ["300.72", "4995.07", "4995.07", "4995.07"]   # all 2 decimals
    assert "(Timed: exchanges with a request and its response" in out
    assert "Top 10 of 14 connections by exchanges" in out
    code, out, err = run_cli(capsys, ["stats", "--top", "20", str(capture)])
    assert "Connections (14) by exchanges" in out


def test_raw_sasl_tokens_say_so(capsys) -> None:  # noqa: ANN001
    from pathlib import Path

    from cli_run import run_cli

    capture = Path(__file__).resolve().parents[2] / "pcaps" / "tansu-sasl.pcap"
    code, out, err = run_cli(capsys, ["decode", "-p", "19993", str(capture)])
    raw = [line for line in out.splitlines() if " SASL " in line and "#" not in line]
    assert raw and all(" SASL (raw token) " in line for line in raw)
    assert "#-" not in out
