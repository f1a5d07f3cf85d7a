"""The insights screen: its numbers are those of ``stats --insights``; its timeline and
lag chart drawings; the real app opens it with ``i``."""

from __future__ import annotations

import asyncio
import io
import json
import time

from rich.console import Console
from textual.widgets import Static

from kwsniff.cli import main
from kwsniff.tui.app import KwsniffApp
from kwsniff.tui.insights import compute_insights
from kwsniff.tui.screens.insights import (InsightsScreen, lag_steps, lag_view,
                                          rebalance_view, timeline_line)
from tui_common import PCAPS, load_in_process

GROUPS = PCAPS / "insights-groups.pcap"


def _stats_insights(capsys) -> dict:
    assert main(["stats", "--insights", "--json", str(GROUPS)]) == 0
    return json.loads(capsys.readouterr().out)["insights"]


def test_the_store_gives_the_numbers_of_stats_insights(capsys) -> None:
    loader = load_in_process(GROUPS)
    try:
        report = compute_insights(loader.store)
    finally:
        loader.close()
    assert report is not None and report["rows"] > 0 and report["dropped"] == 0
    want = _stats_insights(capsys)
    for key in ("end_to_end", "lag", "rebalances", "producers"):
        assert report[key] == want[key], key


def test_compute_can_be_cancelled() -> None:
    loader = load_in_process(GROUPS)
    try:
        assert compute_insights(loader.store, cancelled=lambda: True) is None
    finally:
        loader.close()


def test_timeline_marks_rebalances_and_stable_generations() -> None:
    gens = [{"generation": 2, "start_ts": 0.0, "end_ts": 1.0},
            {"generation": 3, "start_ts": 5.0, "end_ts": 7.0}]
    line = timeline_line(gens, 0.0, 10.0, 20)
    assert len(line) == 20
    assert line.startswith("███2")         # 0-1 s forming, then generation 2 stable
    assert line[10:15] == "█████" and line[15] == "3" and line[16:] == "────"
    assert timeline_line([], 0.0, 1.0, 5) == "     "


def test_lag_steps_keep_peaks_and_carry_values() -> None:
    samples = [(1.5, 3), (1.6, 9), (1.7, 2), (6.5, 5)]
    assert lag_steps(samples, 0.0, 10.0, 10) == [0, 9, 2, 2, 2, 2, 5, 5, 5, 5]


def _text(renderable, width: int = 140) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_views_show_the_groups_their_triggers_and_lag(capsys) -> None:
    report = _stats_insights(capsys)
    report["first_ts"] = None
    text = _text(rebalance_view(report, 120))
    assert "insights-fast  (3 generations)" in text
    assert "joined: fast-2" in text and "left: fast-1 (LeaveGroup)" in text
    lag = _text(lag_view(report, 120))
    assert "insights-slow  clicks[0]  lag now 24, max 24, 6 commits" in lag


def test_the_app_opens_the_insights_screen() -> None:
    app = KwsniffApp(capture=str(GROUPS))

    async def run() -> None:
        async with app.run_test(size=(140, 60)) as pilot:
            deadline = time.monotonic() + 60
            while not app.loader.done:
                assert time.monotonic() < deadline
                await pilot.pause(0.1)
            await pilot.press("i")
            screen = app.screen
            assert isinstance(screen, InsightsScreen)
            while screen.report is None:
                assert time.monotonic() < deadline
                await pilot.pause(0.1)
            await pilot.pause(0.2)
            rebalances = _text(screen.query_one("#insights-rebalances", Static).content)
            assert "left: fast-1 (LeaveGroup)" in rebalances
            lag = _text(screen.query_one("#insights-lag", Static).content)
            assert "lag now 24, max 24" in lag
            await pilot.press("escape")
            assert not isinstance(app.screen, InsightsScreen)

    asyncio.run(run())
