"""The real TUI driven with Textual's pilot on sample captures (decoder in a child process)."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from kwsniff.kafka.model import UNANSWERED
from kwsniff.output.filter import compile_filter
from kwsniff.output.pipeline import Selection
from kwsniff.tui.app import KwsniffApp
from kwsniff.tui.decoder import decode
from kwsniff.tui.screens.export import ExportScreen
from kwsniff.tui.screens.help import HelpScreen
from kwsniff.tui.screens.stats import StatsScreen, latency_table, rate_chart
from kwsniff.tui.widgets.hexview import hex_x, offset_width

from tui_common import SAMPLE, reference

SIZE = (160, 50)


def run_app(app: KwsniffApp, body: Callable[[Pilot[Any]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await body(pilot)
    asyncio.run(main())


async def wait_for(pilot: Pilot[Any], check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


async def wait_loaded(pilot: Pilot[Any], app: KwsniffApp) -> None:
    await wait_for(pilot, lambda: app.loader.done and app._load_reported)
    await pilot.pause(0.2)


async def wait_view(pilot: Pilot[Any], app: KwsniffApp) -> None:
    await wait_for(pilot, lambda: app.builder is None or app.builder.complete)
    await pilot.pause(0.4)      # a tick shows the rows


async def wait_detail(pilot: Pilot[Any], app: KwsniffApp, row: int) -> None:
    await wait_for(pilot, lambda: app.selected_row == row and app.tree_root is not None
                   and app.detail.root_node is app.tree_root)
    await pilot.pause(0.1)


async def cursor_to(pilot: Pilot[Any], app: KwsniffApp, label: str, limit: int = 200) -> Any:
    """Press down in the detail tree until the cursor is on a node with ``label``."""
    tree = app.detail
    for _ in range(limit):
        node = tree.cursor_node
        if node is not None and node.data is not None and node.data.label == label:
            return node
        await pilot.press("down")
    raise AssertionError(f"no node {label!r} reached")


def sample_app(**kwargs: Any) -> KwsniffApp:
    return KwsniffApp(capture=str(SAMPLE), **kwargs)


def test_open_connection_exchange_field_and_bytes() -> None:
    app = sample_app()
    ref = reference(SAMPLE)

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        assert app.exchanges.count == len(ref) == 109
        assert app.connections.row_count() == 1 + len({ex.stream for ex, _ in ref})
        assert "109 exchanges" in app.status_text()
        # the first exchange opens by itself
        await wait_detail(pilot, app, 0)

        # select the connection of the big Produce (stream of the first Produce with records)
        produce = next(ex for ex, f in ref if ex.api_key == 0 and f.record_count > 0)
        conns = app.connections
        conns.focus()
        position = next(i for i in range(conns.row_count())
                        if conns.stream_at(i) == produce.stream)
        for _ in range(position):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_view(pilot, app)
        table = app.exchanges
        in_stream = [ex.index for ex, _ in ref if ex.stream == produce.stream]
        assert [app.store.exchange(table.row_at(p)).index  # type: ignore[union-attr]
                for p in range(table.count)] == in_stream
        assert f"stream {produce.stream}" in app.status_text()

        # select the Produce exchange
        table.focus()
        pos = in_stream.index(produce.index)
        await pilot.press("home")
        for _ in range(pos):
            await pilot.press("down")
        row = table.row_at(pos)
        assert row == produce.index - 1
        await wait_detail(pilot, app, row)
        assert app.tree_root.label == f"Exchange {produce.index}"

        # expand the request body down to the topic name and check its bytes
        await pilot.press("enter")                 # into the detail tree
        assert app.detail.has_focus
        node = await cursor_to(pilot, app, f"Produce request v{produce.api_version}")
        await pilot.press("space")
        await cursor_to(pilot, app, "TopicData")
        await pilot.press("space")
        await cursor_to(pilot, app, "TopicData[0]")
        await pilot.press("space")
        node = await cursor_to(pilot, app, "Name")
        await pilot.pause(0.1)
        field = node.data
        assert field.value == '"orders"' and field.message == "request"
        hexview = app.hexview
        assert hexview.highlight == (field.start, field.start + field.length)
        assert app.hex_message == "request"
        assert hexview.data[field.start:field.start + field.length].endswith(b"orders")
        info = str(app.query_one("#field-info").render())
        assert "Name" in info and "topic name" in info.lower()
        assert f"request bytes {field.start}-{field.start + field.length}" in info

        # the reverse: click the first byte of the correlation id in the hex view
        corr = next(n for _, n in app.tree_root.walk()
                    if n.label == "CorrelationId" and n.message == "request")
        width = offset_width(len(hexview.data))
        line = corr.start // 16 + 1 - int(hexview.scroll_y)
        x = 1 + hex_x(width, corr.start % 16)
        await pilot.click("#hex", offset=(x, 1 + line))
        await pilot.pause(0.2)
        assert hexview.cursor == corr.start
        assert app.detail.cursor_node.data is corr
        assert hexview.highlight == (corr.start, corr.start + corr.length)

        # x shows the response frame
        await pilot.press("x")
        assert app.hex_message == "response"
        assert hexview.data[4:8] == produce.correlation_id.to_bytes(4, "big")

    run_app(app, body)


def test_filter_validation_completion_and_apply() -> None:
    app = sample_app()
    ref = reference(SAMPLE)

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await pilot.press("f")
        bar = app.filterbar
        assert bar.input.has_focus
        await pilot.press(*"api === Produce")
        await pilot.pause(0.1)
        assert bar.input.has_class("-invalid")
        message = str(app.query_one("#filter-message").render())
        assert "column 7" in message and "^" in message
        await pilot.press("enter")                 # refused: nothing applied
        assert app.spec.expression == ""
        bar.input.value = ""
        await pilot.press(*"late")
        await pilot.pause(0.1)
        assert "latency_ms" in str(app.query_one("#filter-message").render())
        await pilot.press("tab")                   # completes the field name
        assert bar.input.value == "latency_ms "
        await pilot.press(*"> 1 and api == Fetch")
        assert not bar.input.has_class("-invalid")
        await pilot.press("enter")
        await wait_view(pilot, app)
        expr = "latency_ms > 1 and api == Fetch"
        assert app.spec.expression == expr
        want = [ex.index for ex, _ in Selection(compile_filter(expr))(ex for ex, _ in ref)]
        got = [app.store.exchange(app.exchanges.row_at(p)).index  # type: ignore[union-attr]
               for p in range(app.exchanges.count)]
        assert got == want and want
        assert app.exchanges.has_focus
        assert f"{len(want)} of 109 exchanges" in app.status_text()
        # a slow filter (a field rows do not keep: problem) gives the same as decode -Y
        await pilot.press("f")
        bar.input.value = "problem or member"
        await pilot.press("enter")
        await wait_view(pilot, app)
        want = [ex.index for ex, _ in
                Selection(compile_filter("problem or member"))(ex for ex, _ in ref)]
        assert app.exchanges.count == len(want) and want
        # brackets in a filter are text, not markup, everywhere they are shown
        await pilot.press("f")
        bar.input.value = 'topic matches "^[a-z]+$"'
        await pilot.press("enter")
        await wait_view(pilot, app)
        assert 'filter: topic matches "^[a-z]+$"' in app.status_text()

    run_app(app, body)


def test_search_sort_pause_help_and_stats() -> None:
    app = sample_app()

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        table = app.exchanges
        store = app.store
        await pilot.press("slash")
        await pilot.press(*"assignment")
        await pilot.press("enter")
        first = table.cursor
        assert "assignment" in store.digest_text(table.row_at(first)).lower()
        await pilot.press("n")
        assert table.cursor > first
        assert "assignment" in store.digest_text(table.row_at(table.cursor)).lower()
        await pilot.press("N")
        assert table.cursor == first

        # sort by latency with a click on its header; the selection stays on its exchange
        selected = table.row_at(table.cursor)
        await pilot.click("#exchanges", offset=(1 + table.column_x("latency") + 2, 1))
        await wait_view(pilot, app)
        assert app.spec.sort == "latency"
        lat = [store.latency_of(table.row_at(p)) for p in range(table.count)]
        known = [v for v in lat if v is not None]
        assert known == sorted(known) and lat[:len(known)] == known
        assert table.row_at(table.cursor) == selected
        await pilot.press("O")
        await wait_view(pilot, app)
        assert app.spec.reverse
        assert table.row_at(table.cursor) == selected

        # connections sorted by exchanges (descending after a second click)
        conns = app.connections
        x = 1 + conns.column_x("exchanges") + 2      # inside the "Exch." header
        await pilot.click("#connections", offset=(x, 1))
        await pilot.click("#connections", offset=(x, 1))
        assert conns.sort_key == "exchanges" and conns.sort_reverse
        counts = [c.exchanges for c in conns.rows]
        assert counts == sorted(counts, reverse=True)

        await pilot.press("t")
        assert table.time_format == "a"
        assert ":" in table.row_cells(0)[0][1]          # wall-clock time

        await pilot.press("p")
        assert app.paused and "PAUSED" in app.status_text()
        await pilot.press("p")
        assert not app.paused

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

        await pilot.press("s")
        assert isinstance(app.screen, StatsScreen)
        screen = app.screen
        await wait_for(pilot, lambda: screen.stats is not None)
        stats = screen.stats
        assert stats.rows == 109
        names = {a["api_name"] for a in stats.report["apis"]}
        assert {"Produce", "Fetch", "JoinGroup"} <= names
        assert sum(stats.rate) == 109
        produce = [ex for ex, _ in reference(SAMPLE) if ex.api_key == 0]
        version = produce[0].api_version
        hist = stats.histograms[("kafka", 0, version)]
        assert hist.total == sum(1 for ex in produce if ex.api_version == version
                                 and ex.latency_ms is not None)
        console = Console(width=160, record=True, file=io.StringIO())
        console.print(latency_table(stats))
        console.print(rate_chart(stats))
        text = console.export_text()
        assert f"Produce v{version}" in text and "10µs" in text and "/s │" in text
        assert any(ch in text for ch in "▁▂▃▄▅▆▇█")
        await pilot.press("escape")
        assert not isinstance(app.screen, StatsScreen)

    run_app(app, body)


def test_stats_screen_shows_sasl_outcomes() -> None:
    app = KwsniffApp(capture=str(SAMPLE.parent / "tansu-sasl.pcap"))

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await pilot.press("s")
        screen = app.screen
        assert isinstance(screen, StatsScreen)
        await wait_for(pilot, lambda: screen.stats is not None)
        await pilot.pause()
        shown = screen.query_one("#stats-clients", Static).content
        console = Console(width=160, record=True, file=io.StringIO())
        console.print(shown)
        text = console.export_text()
        assert "SASL authentication: 5 attempts (failed 4, no response 1)" in text
        assert "erin" in text and "kp-scram256-v0" in text

    run_app(app, body)


def test_export_of_the_filtered_view(tmp_path: Path) -> None:
    app = sample_app(display_filter="api == Produce")
    ref = reference(SAMPLE)
    out = tmp_path / "view.jsonl"

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await wait_view(pilot, app)
        assert app.filterbar.input.value == "api == Produce"
        await pilot.press("e")
        assert isinstance(app.screen, ExportScreen)
        app.screen.query_one("#export-path").value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: out.exists() and out.read_text().endswith("\n")
                       and '"summary"' in out.read_text())

    run_app(app, body)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    want = [ex.index for ex, _ in ref if ex.api_key == 0]
    assert [o["index"] for o in lines if o["kind"] == "exchange"] == want
    assert lines[-1]["kind"] == "summary" and lines[-1]["exported_exchanges"] == len(want)
    assert lines[-1]["exchanges"] == 109


def test_new_exchanges_do_not_move_the_selection(tmp_path: Path) -> None:
    """Rows streaming in (live capture, a capture still loading) never steal the selection,
    in capture order or sorted; pause freezes the list."""
    app = KwsniffApp(capture=str(SAMPLE), start_loading=False)
    messages: list[tuple[Any, ...]] = []
    decode(app.loader.job, messages.append, lambda: False)
    batches = [m for m in messages if m[0] == "rows"]
    rows = [r for m in batches for r in m[1]]
    chunks = [rows[i:i + 10] for i in range(0, len(rows), 10)]

    async def body(pilot: Pilot[Any]) -> None:
        loader = app.loader
        loader.apply(("rows", chunks[0]))
        await pilot.pause(0.4)
        table = app.exchanges
        table.focus()
        await pilot.press("down", "down", "down")
        selected = table.row_at(table.cursor)
        line = table.cursor - int(table.scroll_y)
        for chunk in chunks[1:4]:
            loader.apply(("rows", chunk))
            await pilot.pause(0.3)
            assert table.row_at(table.cursor) == selected
            assert table.cursor - int(table.scroll_y) == line
        # sorted by API: new rows land above and below, the cursor follows its exchange
        await pilot.press("o", "o", "o", "o")              # No -> Time -> Client -> API
        assert app.spec.sort == "api"
        await wait_for(pilot, lambda: app.builder is not None and app.builder.scanned >= 40)
        await pilot.pause(0.8)
        assert table.row_at(table.cursor) == selected
        for chunk in chunks[4:8]:
            loader.apply(("rows", chunk))
            await pilot.pause(0.8)                         # re-sorts at most every 0.5 s
            assert table.row_at(table.cursor) == selected
        # paused: the list does not grow
        await pilot.press("p")
        count = table.count
        loader.apply(("rows", chunks[8]))
        await pilot.pause(0.8)
        assert table.count == count
        status = app.status_text()
        assert f"PAUSED ({len(chunks[8])} new" in status
        # the totals are those of the list shown, not of the store that grew
        assert status.startswith(f"{count} of {count} exchanges"), status
        await pilot.press("p")
        await pilot.pause(0.8)
        assert table.count == count + len(chunks[8])
        assert table.row_at(table.cursor) == selected
        for m in messages[messages.index(batches[-1]) + 1:]:
            if m[0] != "rows":
                loader.apply(m)
        for chunk in chunks[9:]:
            loader.apply(("rows", chunk))
        loader.apply(next(m for m in messages if m[0] == "done"))
        await wait_loaded(pilot, app)
        assert table.row_at(table.cursor) == selected
        assert sum(1 for r in rows if r[8] == UNANSWERED) == \
            sum(1 for p in range(app.store.count)
                if app.store.locate(p)[0].status[p] == 2)  # type: ignore[index]

    run_app(app, body)


def test_rows_drawn_again_when_the_time_base_moves() -> None:
    """Relative times count from the capture's first packet once the decoder reports
    it (from the first exchange before): rows already on screen are drawn again (they
    kept the old base when the report came after them: a flaky snapshot under load)."""
    import html
    import re

    app = sample_app()

    def screen_text() -> str:
        svg = app.export_screenshot()
        return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        await wait_view(pilot, app)
        base = app.exchanges.time_base
        assert base == app.loader.first_ts
        before = app.exchanges.row_cells(0)[0][1].strip()
        assert before in screen_text()
        app.loader.first_ts = base - 5.0          # as if the decoder's report moved it
        await pilot.pause(0.4)                    # a tick
        after = app.exchanges.row_cells(0)[0][1].strip()
        assert after != before and after.startswith("5.")
        text = screen_text()
        assert after in text and before not in text

    run_app(app, body)


def test_bad_capture_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "truncated.pcap"
    bad.write_bytes(SAMPLE.read_bytes()[:5000])
    app = KwsniffApp(capture=str(bad))

    async def body(pilot: Pilot[Any]) -> None:
        await wait_loaded(pilot, app)
        assert app.loader.error is None, app.loader.error
        assert app.loader.capture_problems
        assert "loaded" in app.status_text()

    run_app(app, body)


@pytest.mark.parametrize("argv, message", [
    (["tui"], "a CAPTURE file or -i IFACE is required"),
    (["tui", "-"], "cannot read a capture from it"),
    (["tui", "/no/such/file.pcap"], "/no/such/file.pcap"),
    (["tui", str(SAMPLE), "-Y", "api =="], "bad display filter"),
    (["tui", str(SAMPLE), "-i", "lo"], "not both"),
])
def test_command_errors(argv: list[str], message: str,
                        capsys: pytest.CaptureFixture[str]) -> None:
    from kwsniff.cli import main

    assert main(argv) == 2
    assert message in capsys.readouterr().err
