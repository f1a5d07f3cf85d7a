"""Snapshots of the main screens (pytest-textual-snapshot).

The capture is a copy of pcaps/rdkafka-consumer-group.pcap kept under tests/tui/data so
that regenerating the sample captures does not change these pictures. Update them after
a deliberate change of the UI (or of the decoder's output) with
``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from kwsniff.tui.app import KwsniffApp

DATA = Path(__file__).resolve().parent / "data" / "consumer-group.pcap"
SIZE = (150, 46)
#: the sizes people have (80x24 and 100x30 use the narrow, short layout) and a large one
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((100, 30), id="100x30"),
         pytest.param((200, 50), id="200x50")]


async def _wait(pilot: Pilot[Any], check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


async def _loaded(pilot: Pilot[Any]) -> KwsniffApp:
    app = pilot.app
    assert isinstance(app, KwsniffApp)
    await _wait(pilot, lambda: app.loader.done and app._load_reported
                and app.tree_root is not None)
    await pilot.pause(0.3)
    return app


async def _open_row(pilot: Pilot[Any], app: KwsniffApp, row: int) -> None:
    app.exchanges.focus()
    app.exchanges.cursor = row - app.store.first_row
    await _wait(pilot, lambda: app.selected_row == row and app.tree_root is not None
                and app.detail.root_node is app.tree_root
                and app.tree_root.label == f"Exchange {row + 1}")
    await pilot.pause(0.2)


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause(0.5)


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _loaded(pilot)
        await _settle(pilot)

    assert snap_compare(KwsniffApp(capture=str(DATA)), terminal_size=size,
                        run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_detail(snap_compare: Any, size: tuple[int, int]) -> None:
    """A Produce request opened, its topic name focused in the detail tree (and, where
    the Bytes pane shows, the name's bytes highlighted)."""
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await _loaded(pilot)
        await _open_row(pilot, app, 7)
        tree = app.detail
        tree.focus()
        target = next(n for _, n in app.tree_root.walk()
                      if n.label == "Name" and n.message == "request")
        assert tree.focus_node(target)
        await _wait(pilot, lambda: app.hexview.highlight is not None
                    and app.hexview.highlight[0] == target.start)
        await _settle(pilot)

    assert snap_compare(KwsniffApp(capture=str(DATA)), terminal_size=size,
                        run_before=run_before)


def test_connection_and_filter(snap_compare: Any) -> None:
    """One connection selected and a display filter applied."""
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await _loaded(pilot)
        conns = app.connections
        conns.focus()
        stream = app.store.locate(40)[0].stream[40]
        position = next(i for i in range(conns.row_count()) if conns.stream_at(i) == stream)
        conns.cursor = position
        await pilot.press("enter")
        await pilot.press("f")
        await pilot.press(*"api != Heartbeat")
        await pilot.press("enter")
        await _wait(pilot, lambda: app.builder is not None and app.builder.complete)
        await _settle(pilot)

    assert snap_compare(KwsniffApp(capture=str(DATA)), terminal_size=SIZE,
                        run_before=run_before)


def test_filter_error(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await _loaded(pilot)
        await pilot.press("f")
        app.filterbar.input.cursor_blink = False
        await pilot.press(*"topic contains orders and latency_ms > fast")
        await _settle(pilot)

    assert snap_compare(KwsniffApp(capture=str(DATA)), terminal_size=SIZE,
                        run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_statistics_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await _loaded(pilot)
        await pilot.press("s")
        await _wait(pilot, lambda: getattr(app.screen, "stats", None) is not None)
        await _settle(pilot)

    assert snap_compare(KwsniffApp(capture=str(DATA)), terminal_size=size,
                        run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_help_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _loaded(pilot)
        await pilot.press("question_mark")
        await _settle(pilot)

    assert snap_compare(KwsniffApp(capture=str(DATA)), terminal_size=size,
                        run_before=run_before)
