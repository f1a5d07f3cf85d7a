"""The statistics screen: latency distribution per API, request rate, errors, top lists.

Contract: :class:`StatsScreen` computes :func:`kwsniff.tui.statistics.compute` for the
rows of the current view in a background thread (a progress line meanwhile) and shows

* a table per API and version (count, errors, p50/p90/p99/max latency as in ``kwsniff
  stats``) with each API's latency distribution drawn on a shared log axis;
* the request rate over time as a column chart;
* errors by API and code, top topics and top clients with bars;
* SASL login attempts by outcome, when the rows hold any (:func:`auth_table`).

Escape or q closes it; r recomputes (while a capture is still loading).
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from kwsniff.output.digest import human_bytes
from kwsniff.output.stats import auth_heading
from kwsniff.tui.charts import bar, column_chart, histogram_axis
from kwsniff.tui.statistics import ViewStatistics, compute

CHART_HEIGHT = 8
BAR_WIDTH = 20


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 1000 else f"{v:.0f}"


def table_width(table: Table) -> int:
    """The width ``table`` takes when nothing limits it."""
    console = Console(width=10_000, file=io.StringIO())
    return console.measure(table).maximum


def latency_table(stats: ViewStatistics, width: int | None = None) -> Table | Group:
    """Per API/version: counts, percentiles and the latency histogram. When ``width`` is
    too small for one table, the histograms move to a second table under the numbers
    (numbers are never cut); API names are cut only when even that does not fit."""
    peak = max((max(h.counts) for h in stats.histograms.values()), default=0)
    rows = []
    for a in stats.report["apis"]:
        lat = a["latency_ms"]
        key = (a["protocol"], a["api_key"] if a["api_key"] is not None else -1,
               a["api_version"])
        hist = stats.histograms.get(key)
        spark = hist.spark(max(hist.counts)) if hist is not None and hist.total else ""
        name = a["api_name"] + (f" v{a['api_version']}" if a["api_version"] is not None else "")
        rows.append((name, [str(a["count"]), str(a["errors"]) if a["errors"] else "",
                            _ms(lat["p50"]), _ms(lat["p90"]), _ms(lat["p99"]),
                            _ms(lat["max"])], spark))

    def numbers(title: str, with_chart: bool, api_max: int | None = None) -> Table:
        table = Table(title=title, title_justify="left", expand=False, show_edge=False,
                      pad_edge=False)
        table.add_column("API", no_wrap=True, overflow="ellipsis", max_width=api_max)
        for name in ("Count", "Errors", "p50", "p90", "p99", "max"):
            table.add_column(name, justify="right", no_wrap=True)
        if with_chart:
            table.add_column("Distribution (log scale)", no_wrap=True)
        for name, cells, spark in rows:
            extra = [Text(spark, style="cyan")] if with_chart else []
            table.add_row(Text(name), *cells, *extra)
        if with_chart and peak:
            table.add_row("", "", "", "", "", "", "", Text(histogram_axis(), style="dim"))
        return table

    title = "Latency (ms) by API and version"
    one = numbers(title, True)
    if width is None or table_width(one) <= width:
        return one
    first = numbers(title, False)
    over = table_width(first) - width
    if over > 0:
        api = max((len(r[0]) for r in rows), default=3)
        first = numbers(title, False, max(8, api - over))
    charts = Table(title="Latency distribution (log scale)", title_justify="left",
                   expand=False, show_edge=False, pad_edge=False, show_header=False)
    charts.add_column("API", no_wrap=True, overflow="ellipsis")
    charts.add_column("Distribution", no_wrap=True)
    for name, _cells, spark in rows:
        charts.add_row(Text(name), Text(spark, style="cyan"))
    if peak:
        charts.add_row("", Text(histogram_axis(), style="dim"))
    return Group(first, Text(""), charts)


def rate_chart(stats: ViewStatistics) -> Group:
    """Requests per second over time as a column chart."""
    counts = stats.rate
    span = stats.end - stats.start
    title = Text("Request rate over time", style="bold")
    if not counts or not any(counts):
        return Group(title, Text("no exchanges", style="dim"))
    per_bin = span / len(counts) if span > 0 else 1.0
    peak = max(counts)
    peak_rate = peak / per_bin if span > 0 else float(peak)
    lines = column_chart(counts, CHART_HEIGHT)
    label_w = max(len(f"{peak_rate:.1f}/s"), 6)
    out = [title]
    for i, line in enumerate(lines):
        label = f"{peak_rate:.1f}/s" if i == 0 else ("0/s" if i == len(lines) - 1 else "")
        row = Text(label.rjust(label_w) + " │", style="dim")
        row.append(line, style="green")
        out.append(row)
    axis = Text(" " * label_w + " └" + "─" * len(counts), style="dim")
    out.append(axis)
    end_label = f"+{span:.3f} s"
    foot = "0 s".ljust(max(len(counts) - len(end_label), 4)) + end_label
    out.append(Text(" " * (label_w + 2) + foot, style="dim"))
    out.append(Text(f"{sum(counts)} exchanges over {span:.3f} s, "
                    f"{per_bin:.3f} s per column", style="dim"))
    return Group(*out)


def errors_table(stats: ViewStatistics) -> Table | Text:
    errors = stats.report["errors"]
    if not errors:
        return Text("Errors by code: none", style="bold")
    table = Table(title="Errors by API and code", title_justify="left", show_edge=False,
                  pad_edge=False)
    for name, right in (("API", False), ("Error", False), ("Code", True), ("Count", True)):
        _add_column(table, name, right)
    table.add_column("", no_wrap=False, overflow="crop")
    peak = max(e["count"] for e in errors)
    for e in errors[:15]:
        table.add_row(Text(e["api_name"]), Text(e["error_name"]), str(e["error_code"]),
                      str(e["count"]),
                      Text(bar(e["count"], peak, BAR_WIDTH), style="red"))
    return table


def _add_column(table: Table, name: str, right: bool) -> None:
    """Numbers (right-aligned) never shrink; texts shrink first (cut with …)."""
    if right:
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    else:
        table.add_column(name, no_wrap=False, overflow="ellipsis", min_width=5)


def topics_table(stats: ViewStatistics) -> Table | Text:
    topics = stats.report["topics_by_bytes"]
    by_records = {t["topic"]: t for t in stats.report["topics"]}
    if not topics:
        return Text("Top topics: no topic data", style="bold")
    table = Table(title="Top topics by bytes", title_justify="left", show_edge=False,
                  pad_edge=False)
    for name, right in (("Topic", False), ("Produced", True), ("Fetched", True),
                        ("Records", True)):
        _add_column(table, name, right)
    table.add_column("", no_wrap=False, overflow="crop")
    peak = max(t["produced_bytes"] + t["fetched_bytes"] for t in topics) or 1
    for t in topics:
        recs = by_records.get(t["topic"])
        records = (recs["produced_records"] + recs["fetched_records"]) if recs else None
        table.add_row(Text(t["topic"]), human_bytes(t["produced_bytes"]),
                      human_bytes(t["fetched_bytes"]),
                      "" if records is None else str(records),
                      Text(bar(t["produced_bytes"] + t["fetched_bytes"], peak, BAR_WIDTH),
                           style="blue"))
    return table


def clients_table(stats: ViewStatistics) -> Table | Text:
    clients = stats.report["clients"]
    if not clients:
        return Text("Top clients: none", style="bold")
    table = Table(title="Top clients by exchanges", title_justify="left", show_edge=False,
                  pad_edge=False)
    for name, right in (("Client id", False), ("Address", False), ("Exchanges", True),
                        ("Errors", True), ("Bytes", True)):
        _add_column(table, name, right)
    table.add_column("", no_wrap=False, overflow="crop")
    peak = max(c["exchanges"] for c in clients)
    for c in clients:
        table.add_row(Text(c["client_id"] if c["client_id"] is not None else "-"),
                      Text(c["address"]),
                      str(c["exchanges"]), str(c["errors"]) if c["errors"] else "",
                      human_bytes(c["bytes"]),
                      Text(bar(c["exchanges"], peak, BAR_WIDTH), style="magenta"))
    return table


OUTCOME_STYLES = {"failed": "red", "no response": "yellow", "unfinished": "dim",
                  "succeeded": "green"}


def auth_table(stats: ViewStatistics) -> Table | None:
    """SASL login attempts by outcome (as ``kwsniff stats``); None when there are none."""
    auth = stats.report.get("authentication")
    heading = auth_heading(auth)
    if auth is None or heading is None:
        return None
    table = Table(title=heading, title_justify="left", show_edge=False, pad_edge=False)
    for name, right in (("Mechanism", False), ("User", False), ("Client id", False),
                        ("Outcome", False), ("Reason", False), ("Attempts", True)):
        table.add_column(name, justify="right" if right else "left", no_wrap=name != "Reason")
    for r in auth["rows"]:
        table.add_row(Text(r["mechanism"] or "-"), Text(r["user"] or "-"),
                      Text(r["client_id"] or "-"),
                      Text(r["outcome"], style=OUTCOME_STYLES.get(r["outcome"], "")),
                      Text(r["reason"] or "-"), str(r["attempts"]))
    return table


def summary_text(stats: ViewStatistics, what: str) -> Text:
    rep = stats.report
    text = Text(f"Statistics of {stats.rows} exchange{'s' if stats.rows != 1 else ''}"
                f" ({what})", style="bold")
    statuses = ", ".join(f"{k} {v}" for k, v in rep["statuses"].items() if v)
    if statuses:
        text.append(f"\n{statuses}")
    if rep["duration_s"] is not None:
        text.append(f" · {rep['duration_s']:.3f} s")
    if rep["problems"]:
        text.append(f" · {rep['problems']} decode problems", style="yellow")
    if stats.partial:
        text.append("\nthe capture is still loading: press r to refresh", style="yellow")
    return text


class StatsScreen(Screen[None]):
    """See the module contract."""

    BINDINGS = [
        Binding("escape,q,s", "close", "Back"),
        Binding("r", "refresh_stats", "Refresh"),
    ]

    def __init__(self, source: Any) -> None:
        """``source`` is the app: it provides ``stats_input()``."""
        super().__init__()
        self.source = source
        self.stats: ViewStatistics | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stats-body"):
            yield Static("computing statistics…", id="stats-summary")
            yield Static("", id="stats-latency")
            yield Static("", id="stats-rate")
            with Horizontal(id="stats-lists"):
                yield Static("", id="stats-errors")
                yield Static("", id="stats-topics")
            yield Static("", id="stats-clients")
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh_stats()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_refresh_stats(self) -> None:
        self.query_one("#stats-summary", Static).update("computing statistics…")
        bins = max(20, self.app.size.width - 14)
        self._compute(bins)

    @work(thread=True, exclusive=True, group="stats")
    def _compute(self, bins: int) -> None:
        worker = get_current_worker()
        rows, what, report, partial = self.source.stats_input()

        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(
                self.query_one("#stats-summary", Static).update,
                Text(f"computing statistics of {total} exchanges ({what}): "
                     f"{100 * done // max(total, 1)}%"))

        stats = compute(self.source.store, rows, bins=bins, report=report,
                        partial=partial, progress=progress,
                        cancelled=lambda: worker.is_cancelled)
        if stats is not None and not worker.is_cancelled:
            self.app.call_from_thread(self._show, stats, what)

    def _show(self, stats: ViewStatistics, what: str) -> None:
        self.stats = stats
        self.query_one("#stats-summary", Static).update(summary_text(stats, what))
        # the screen less the body's padding (2) and its vertical scrollbar (2)
        width = self.app.size.width - 4
        self.query_one("#stats-latency", Static).update(latency_table(stats, width))
        self.query_one("#stats-rate", Static).update(rate_chart(stats))
        self.query_one("#stats-errors", Static).update(errors_table(stats))
        self.query_one("#stats-topics", Static).update(topics_table(stats))
        clients, auth = clients_table(stats), auth_table(stats)
        self.query_one("#stats-clients", Static).update(
            clients if auth is None else Group(clients, Text(""), auth))

