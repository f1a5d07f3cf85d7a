"""Export of stored rows and statistics of a view (no UI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from kwsniff.errors import UserError
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.jsonl import ExportEncoder, dumps
from kwsniff.output.stats import StatsCollector
from kwsniff.tui.export import export_rows
from kwsniff.tui.loader import Loader
from kwsniff.tui.screens.stats import auth_table
from kwsniff.tui.statistics import ViewStatistics, compute

from tui_common import PCAPS, SAMPLE, reference


def test_export_rows_is_the_export_command_output(sample_loader: Loader,
                                                  tmp_path: Path) -> None:
    store = sample_loader.store
    rows = [r for r in range(store.count) if r % 3 == 0][::-1]      # any order, kept
    out = tmp_path / "rows.jsonl"
    seen: list[tuple[int, int]] = []
    result = export_rows(store, rows, str(out), "cap.pcap", sample_loader.counters,
                         progress=lambda done, total: seen.append((done, total)))
    assert result.complete and result.exchanges == len(rows) and result.missing == 0
    assert seen[-1] == (len(rows), len(rows))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    ref = reference(SAMPLE)
    encoder = ExportEncoder("cap.pcap")
    want = [json.loads(dumps(encoder.exchange_object(ref[r][0]))) for r in rows]
    got = lines[:-1]
    assert [o["index"] for o in got] == [o["index"] for o in want]
    assert got == want
    assert lines[-1]["kind"] == "summary" and lines[-1]["exported_exchanges"] == len(rows)


def test_export_to_an_unwritable_place(sample_loader: Loader, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot write"):
        export_rows(sample_loader.store, [0], str(tmp_path), "x", None)


def test_export_can_be_cancelled(sample_loader: Loader, tmp_path: Path) -> None:
    out = tmp_path / "part.jsonl"
    result = export_rows(sample_loader.store, list(range(100)), str(out), "x", None,
                         cancelled=lambda: True)
    assert not result.complete and '"summary"' not in out.read_text()


def test_statistics_of_a_view_equal_the_stats_command(sample_loader: Loader) -> None:
    store = sample_loader.store
    ref = reference(SAMPLE)
    rows = [r for r, (ex, _) in enumerate(ref) if ex.api_key in (1, 12)]   # Fetch, Heartbeat
    stats = compute(store, rows, bins=10)
    assert stats is not None and stats.rows == len(rows)
    collector = StatsCollector()
    for r in rows:
        collector.add(ExchangeFacts(ref[r][0]))
    want = collector.report()
    assert stats.report["exchanges"] == want["exchanges"] == len(rows)
    assert [(a["api_name"], a["count"], a["latency_ms"]["p50"]) for a in stats.report["apis"]] \
        == [(a["api_name"], a["count"], a["latency_ms"]["p50"]) for a in want["apis"]]
    assert sum(stats.rate) == len(rows) and len(stats.rate) == 10
    assert sum(h.total for h in stats.histograms.values()) == \
        sum(1 for r in rows if ref[r][0].latency_ms is not None)
    assert compute(store, rows, cancelled=lambda: True) is None


def test_sasl_outcomes_in_the_statistics_screen() -> None:
    capture = PCAPS / "tansu-sasl.pcap"
    if not capture.exists():
        pytest.skip("pcaps/tansu-sasl.pcap missing")
    collector = StatsCollector()
    for ex, _ in reference(capture):
        collector.add(ExchangeFacts(ex))
    stats = ViewStatistics(18, collector.report(), {}, [], 0.0, 0.0, False)
    table = auth_table(stats)
    assert table is not None
    console = Console(width=160, record=True)
    console.print(table)
    text = console.export_text()
    assert "SASL authentication: 5 attempts (failed 4, no response 1)" in text
    assert text.count("SASL error unknown-user") == 4
    assert "the SaslHandshake was not answered" in text
    none = ViewStatistics(0, StatsCollector().report(), {}, [], 0.0, 0.0, False)
    assert auth_table(none) is None
