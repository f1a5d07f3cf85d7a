"""The TUI at the terminal sizes people have, and the filter bar's Tab completion.

Pure parts (column layout, completion steps) are checked directly; the rest drives the
real app with Textual's pilot on the sample capture (decoder in a child process).
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from rich.console import Console
from test_tui_app import wait_detail, wait_for, wait_loaded, wait_view
from textual.pilot import Pilot
from tui_common import SAMPLE, reference

from kwsniff.output.filter import compile_filter
from kwsniff.output.pipeline import Selection
from kwsniff.tui.app import KwsniffApp
from kwsniff.tui.decoder import decode
from kwsniff.tui.widgets.exchanges import COLUMNS
from kwsniff.tui.widgets.filterbar import tab_complete
from kwsniff.tui.widgets.table import Column, layout_columns


def run_at(app: KwsniffApp, size: tuple[int, int],
           body: Callable[[Pilot[Any]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await body(pilot)
    asyncio.run(main())


def screen_text(app: KwsniffApp) -> str:
    """What the terminal shows, as plain text."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      force_terminal=True, color_system="truecolor")
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


# ---------------------------------------------------------------- column layout
def test_columns_shrink_then_hide_by_priority() -> None:
    cols = [Column("a", "A", 10, min_width=6, priority=1), Column("b", "B", 10, priority=5),
            Column("c", "C", 8, min_width=4, max_width=20, priority=3),
            Column("d", "D", 12, flex=True)]
    # wide: every column at its width, the flex column first to FLEX_COMFORT, then c grows
    assert layout_columns(cols, 10 + 10 + 8 + 48 + 3) == [10, 10, 8, 48]
    assert layout_columns(cols, 10 + 10 + 8 + 48 + 3 + 5) == [10, 10, 13, 48]
    assert layout_columns(cols, 200) == [10, 10, 20, 200 - 3 - 40]
    # tighter: the flex column gives back first, then the columns shrink to their minimum
    assert layout_columns(cols, 10 + 10 + 8 + 12 + 3) == [10, 10, 8, 12]
    assert layout_columns(cols, 6 + 10 + 4 + 12 + 3) == [6, 10, 4, 12]
    # narrower still: the lowest priority (a) hides, the space is shared out again
    assert layout_columns(cols, 6 + 10 + 4 + 12 + 2) == [0, 10, 8, 14]
    # nothing left to hide: the sum exceeds the width (the table scrolls sideways)
    widths = layout_columns(cols, 5)
    assert widths[0] == widths[2] == 0 and sum(widths) + 1 > 5 and widths[3] == 12


def test_exchange_columns_at_80_and_100() -> None:
    def shown(avail: int) -> dict[str, int]:
        return {c.key: w for c, w in zip(COLUMNS, layout_columns(COLUMNS, avail)) if w}

    for avail in (76, 96):          # 80 and 100 columns less the border and scrollbar
        cols = shown(avail)
        assert {"api", "latency", "digest"} <= cols.keys()
        assert sum(cols.values()) + len(cols) - 1 == avail
        assert cols["api"] >= 12 and cols["digest"] >= 24
    assert "corr" not in shown(96) and "client" not in shown(76)
    # 200 columns: names are not cut
    cols = shown(196)
    assert len(cols) == len(COLUMNS)
    assert cols["api"] >= len("GetTelemetrySubscriptions v0")
    assert cols["error"] >= len("UNSUPPORTED_VERSION")


# ---------------------------------------------------------------- completion steps
@pytest.mark.parametrize("text,expected,cycle", [
    ("api == Fe", "api == Fetch", []),                       # common prefix of two
    ("api == Fetch", "api == Fetch", ["api == Fetch", "api == FetchSnapshot"]),
    ("status == unan", "status == unanswered ", []),         # the only one, and a space
    ("error == UNSUP", "error == UNSUPPORTED_", []),
    ("error == unsup", "error == UNSUPPORTED_", []),         # letter case need not match
    ("lat", "latency_ms ", []),
    ('api == "Fe', 'api == "Fetch', []),                     # an opened quote stays
    ("status in {un", "status in {unanswered ", []),
    ("api == Produce an", "api == Produce and ", []),
    ("latency_ms > 5", "latency_ms > 5", []),                # nothing to complete
])
def test_tab_complete(text: str, expected: str, cycle: list[str]) -> None:
    new, cands = tab_complete(text)
    assert new == expected
    assert cands[:len(cycle)] == cycle


# ---------------------------------------------------------------- small terminals
@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
def test_small_terminal_shows_rows_and_a_wide_detail(size: tuple[int, int]) -> None:
    app = KwsniffApp(capture=str(SAMPLE))

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await wait_for(pilot, lambda: app.tree_root is not None)
        table = app.exchanges
        assert table.body_height >= 5
        assert {"no", "api", "latency", "digest"} <= set(table.shown_columns())
        assert app.detail.size.width >= 40
        assert not app.connections.display and not app.hexview.display
        text = screen_text(app)
        rows = [line for line in text.splitlines() if " ms " in line]
        assert len(rows) >= 5, text
        assert "ApiVersions v3" in rows[0] and "client confluent" in rows[0], text
        # c brings the connections back, b the bytes (stacked under the detail)
        await pilot.press("c")
        await pilot.pause(0.2)
        assert app.connections.display and app.connections.size.height >= 3
        assert table.body_height >= 5
        await pilot.press("c", "b")
        await pilot.pause(0.2)
        assert not app.connections.display
        hexview = app.hexview
        assert hexview.display and hexview.size.width >= 78
        assert app.detail.size.width >= 40 and app.detail.size.height >= 3
        assert "0000  00 00 00 44" in screen_text(app)
        await pilot.press("b")
        await pilot.pause(0.2)
        assert not hexview.display

    run_at(app, size, body)


def test_wide_terminal_hides_panes_on_request() -> None:
    app = KwsniffApp(capture=str(SAMPLE))

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        assert app.connections.display and app.hexview.display
        app.hexview.focus()
        await pilot.press("b")
        await pilot.pause(0.1)
        assert not app.hexview.display and app.exchanges.has_focus
        await pilot.press("c")
        await pilot.pause(0.1)
        assert not app.connections.display
        await pilot.press("b", "c")
        await pilot.pause(0.1)
        assert app.connections.display and app.hexview.display

    run_at(app, (160, 50), body)


# ---------------------------------------------------------------- filter bar
def test_tab_completes_values_and_keeps_the_focus() -> None:
    app = KwsniffApp(capture=str(SAMPLE))

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await pilot.press("f")
        inp = app.filterbar.input
        assert inp.has_focus
        await pilot.press(*"api == Fe", "tab")
        assert inp.value == "api == Fetch" and inp.has_focus
        await pilot.press("tab")                        # several fit: cycles
        assert inp.value == "api == FetchSnapshot"
        await pilot.press("tab")
        assert inp.value == "api == Fetch"
        await pilot.press("shift+tab")
        assert inp.value == "api == FetchSnapshot" and inp.has_focus
        inp.value = ""
        await pilot.press(*"status == unan", "tab")
        assert inp.value == "status == unanswered "
        # the keys typed after Tab are text, not one-key commands (c, t, s, q...)
        await pilot.press(*"or error == UNSUP", "tab", *"VERSION")
        assert inp.value == "status == unanswered or error == UNSUPPORTED_VERSION"
        assert inp.has_focus and app.connections.display and app.is_running
        await pilot.press("tab")                        # complete already: stays
        assert inp.has_focus
        await pilot.press("enter")
        await wait_view(pilot, app)
        assert app.spec.expression == "status == unanswered or error == UNSUPPORTED_VERSION"
        assert app.exchanges.has_focus
        await pilot.press("f", "escape")                # Escape leaves the bar
        assert app.exchanges.has_focus

    run_at(app, (160, 50), body)


def test_filter_moves_the_cursor_to_the_first_match() -> None:
    app = KwsniffApp(capture=str(SAMPLE))
    ref = reference(SAMPLE)

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await wait_detail(pilot, app, 0)                # ApiVersions, not a Fetch
        app.filterbar.set_expression("api == Fetch")
        await pilot.press("f", "enter")
        await wait_view(pilot, app)
        fetches = [ex.index for ex, _ in Selection(compile_filter("api == Fetch"))(
            ex for ex, _ in ref)]
        first = fetches[0] - 1                          # store rows count from 0
        await wait_detail(pilot, app, first)
        assert app.exchanges.cursor == 0
        assert app.tree_root is not None and app.tree_root.label == f"Exchange {fetches[0]}"
        assert app.selected_exchange.api_key == 1 and app.hex_message == "request"
        assert "request:" in app.hexview.title
        # a selection the new filter keeps stays selected
        app.exchanges.move_cursor(2)
        await wait_detail(pilot, app, fetches[2] - 1)
        app.filterbar.set_expression("api == Fetch or api == Produce")
        await pilot.press("f", "enter")
        await wait_view(pilot, app)
        assert app.selected_row == fetches[2] - 1
        # nothing matches: Detail and Bytes are cleared
        app.filterbar.set_expression("api == Fetch and api == Produce")
        await pilot.press("f", "enter")
        await wait_view(pilot, app)
        await wait_for(pilot, lambda: app.tree_root is None)
        assert app.exchanges.count == 0 and app.selected_exchange is None
        assert "no exchange" in app.hexview.title
        # no filter: the first exchange opens again
        app.filterbar.set_expression("")
        await pilot.press("f", "enter")
        await wait_detail(pilot, app, 0)

    run_at(app, (160, 50), body)


def test_paused_status_counts_the_list() -> None:
    app = KwsniffApp(capture=str(SAMPLE), start_loading=False)
    messages: list[tuple[Any, ...]] = []
    decode(app.loader.job, messages.append, lambda: False)
    rows = [r for m in messages if m[0] == "rows" for r in m[1]]

    async def body(pilot: Pilot[Any]) -> None:
        app.loader.apply(("rows", rows[:30]))
        await pilot.pause(0.5)
        await pilot.press("p")
        app.loader.apply(("rows", rows[30:45]))
        # (the status follows on the next loading repaint: wait for it, a busy machine
        # may take longer than one)
        for _ in range(50):
            await pilot.pause(0.1)
            status = app.status_text()
            if "PAUSED (15 new" in status:
                break
        assert app.exchanges.count == 30
        assert status.startswith("30 exchanges") and "PAUSED (15 new" in status, status
        await pilot.press("p")
        for _ in range(50):
            await pilot.pause(0.1)
            if app.status_text().startswith("45 exchanges"):
                break
        assert app.status_text().startswith("45 exchanges")

    run_at(app, (160, 50), body)


# ---------------------------------------------------------------- detail and statistics
def test_long_problem_lines_wrap() -> None:
    from rich.text import Text

    from kwsniff.tui.widgets.detail import wrap_label

    text = Text("Problem: " + "word " * 30)
    lines = wrap_label(text, 40)
    assert len(lines) > 1 and all(line.cell_len <= 40 for line in lines)
    assert "".join(line.plain for line in lines).replace(" ", "") == \
        text.plain.replace(" ", "")
    assert wrap_label(text, 10) == [text]            # pane not laid out yet: one line

    app = KwsniffApp(capture=str(SAMPLE))

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await wait_detail(pilot, app, 0)   # its response: a long "body decoded only partly"
        tree = app.detail
        problem = next(n for _, n in app.tree_root.walk() if n.label == "Problem")
        ui = tree.ui_node(problem)
        assert ui is not None and ui.parent is not None
        shown = [c for c in ui.parent.children if c.data is problem]
        assert len(shown) >= 2                       # the line and its continuation
        width = tree.scrollable_content_region.width
        assert all(len(str(c.label)) < width for c in shown)
        joined = " ".join(str(c.label).strip() for c in shown)
        assert problem.value.split()[-1] in joined   # the end of the text is on screen

    run_at(app, (100, 60), body)


def test_statistics_fit_80_columns() -> None:
    from kwsniff.tui.screens.stats import StatsScreen, latency_table

    app = KwsniffApp(capture=str(SAMPLE))

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, StatsScreen)
                       and app.screen.stats is not None)
        stats = app.screen.stats
        console = Console(width=76, record=True, file=io.StringIO())
        console.print(latency_table(stats, 76))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= 76
        for a in stats.report["apis"]:
            for key in ("p50", "p99"):
                value = a["latency_ms"][key]
                if value is not None:
                    want = f"{value:.2f}" if value < 1000 else f"{value:.0f}"
                    assert want in text, (a["api_name"], key, want)
        assert "10µs" in text                        # the histograms, under the numbers
        numbers = screen_text(app).split("Latency distribution")[0]
        assert "p50" in numbers and "p99" in numbers
        for line in numbers.splitlines():
            if "│" in line:                          # no number is cut (names may be)
                assert "…" not in line.split("│", 1)[1], line

    run_at(app, (80, 60), body)
