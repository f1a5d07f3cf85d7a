"""The insights screen: rebalance timeline per group, lag chart per partition,
end-to-end latency and producer health (``kwsniff stats --insights`` in the TUI).

Contract: :class:`InsightsScreen` computes :func:`kwsniff.tui.insights.compute_insights`
over the whole stored capture in a background thread and shows

* per consumer group a timeline across the capture (``─`` stable, ``█`` rebalancing,
  the generation number where each generation starts) and its generations table
  (start, duration, members and assignments, trigger);
* per group/topic/partition the lag (high watermark − committed offset, sampled at its
  commits and fetches) as a column chart on the same time axis, with the current and
  maximum lag;
* end-to-end latency percentiles per group/topic/partition and producer health.

The renderers are plain functions of the report (tested without a terminal). Escape,
q or i closes it; r recomputes (while a capture is still loading).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from kwsniff.tui.charts import column_chart
from kwsniff.tui.insights import compute_insights

LAG_HEIGHT = 4


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 1000 else f"{v:.0f}"


def _span(report: dict[str, Any]) -> tuple[float, float]:
    """First and last time the report mentions (the timelines' common axis)."""
    times: list[float] = []
    for g in report["rebalances"]:
        for gen in g["generations"]:
            times += [t for t in (gen["start_ts"], gen["end_ts"]) if t is not None]
    for r in report["lag"]:
        times += [s["ts"] for s in r["timeline"]]
    first = report.get("first_ts")
    if first is not None:
        times.append(first)
    if not times:
        return 0.0, 0.0
    return min(times), max(times)


def timeline_line(generations: list[dict[str, Any]], start: float, end: float,
                  width: int) -> str:
    """One line of ``width`` cells from ``start`` to ``end``: ``█`` while a generation
    was forming (its rebalance), ``─`` while it was stable, its number where it starts
    (when there is room), blank before the first."""
    width = max(width, 1)
    span = max(end - start, 1e-9)
    cells = [" "] * width

    def cell(ts: float) -> int:
        return min(width - 1, max(0, int((ts - start) / span * width)))

    gens = [g for g in generations if g["start_ts"] is not None]
    for n, g in enumerate(gens):
        a = cell(g["start_ts"])
        b = cell(g["end_ts"]) if g["end_ts"] is not None else width - 1
        nxt = cell(gens[n + 1]["start_ts"]) if n + 1 < len(gens) else width
        for i in range(a, max(b, a) + 1):
            cells[i] = "█"
        for i in range(max(b, a) + 1, nxt):
            cells[i] = "─"
        label = str(g["generation"])
        at = max(b, a) + 1
        if at + len(label) <= nxt:
            cells[at:at + len(label)] = list(label)
    return "".join(cells)


def rebalance_view(report: dict[str, Any], width: int) -> RenderableType:
    start, end = _span(report)
    parts: list[RenderableType] = [Text("Rebalances", style="bold")]
    if not report["rebalances"]:
        parts.append(Text("no group membership seen"))
    for g in report["rebalances"]:
        parts.append(Text(f"{g['group']}  ({len(g['generations'])} generations)",
                          style="bold cyan"))
        parts.append(Text(timeline_line(g["generations"], start, end, width - 2),
                          style="magenta"))
        table = Table(expand=False, show_edge=False, pad_edge=False)
        for name, right in (("Gen", True), ("Start s", True), ("Took ms", True),
                            ("Members and assignments", False), ("Trigger", False)):
            table.add_column(name, justify="right" if right else "left")
        for gen in g["generations"]:
            members = "; ".join(
                f"{m['client_id'] or '?'} "
                + " ".join(f"{t}[{','.join(map(str, p))}]"
                           for t, p in (m["assignment"] or {}).items())
                for m in gen["members"])
            rel = "-" if gen["start_ts"] is None else f"{gen['start_ts'] - start:.3f}"
            table.add_row(str(gen["generation"]), rel, _ms(gen["duration_ms"]), members,
                          ", ".join(gen["trigger"]))
        parts.append(table)
    return Group(*parts)


def lag_steps(samples: list[tuple[float, int]], start: float, end: float,
              width: int) -> list[int]:
    """``width`` cells from ``start`` to ``end``: in each, the largest lag sampled in the
    cell, else the last one before it (0 before the first sample)."""
    width = max(width, 1)
    span = max(end - start, 1e-9)
    out, i, value = [], 0, 0
    for cell in range(width):
        limit = start + span * (cell + 1) / width
        peak = None
        while i < len(samples) and samples[i][0] <= limit:
            value = samples[i][1]
            peak = value if peak is None else max(peak, value)
            i += 1
        out.append(value if peak is None else peak)
    return out


def lag_view(report: dict[str, Any], width: int, height: int = LAG_HEIGHT
             ) -> RenderableType:
    """Per group/topic/partition, the lag sampled at its commits and fetches drawn over
    the capture's time axis (the same axis as the rebalance timelines)."""
    start, end = _span(report)
    parts: list[RenderableType] = [Text("Consumer lag (high watermark − committed offset) "
                                        "over time", style="bold")]
    rows = [r for r in report["lag"] if any(s["lag"] is not None for s in r["timeline"])]
    if not rows:
        parts.append(Text("no committed offsets seen"))
    for r in rows:
        samples = [(s["ts"], s["lag"]) for s in r["timeline"] if s["lag"] is not None]
        parts.append(Text(f"{r['group']}  {r['topic']}[{r['partition']}]  lag now "
                          f"{r['lag'] if r['lag'] is not None else '-'}, max "
                          f"{r['max_lag'] if r['max_lag'] is not None else '-'}, "
                          f"{r['commits']} commits", style="bold cyan"))
        for line in column_chart(lag_steps(samples, start, end, width - 2), height):
            parts.append(Text(line, style="yellow"))
    return Group(*parts)


def e2e_view(report: dict[str, Any]) -> RenderableType:
    e2e = report["end_to_end"]
    table = Table(title="End-to-end latency (ms), Produce sent → Fetch received",
                  title_justify="left", expand=False, show_edge=False, pad_edge=False)
    for name in ("Group", "Topic", "Part", "Batches", "p50", "p90", "p99", "max"):
        table.add_column(name, justify="left" if name in ("Group", "Topic") else "right")
    for r in e2e["by_partition"]:
        table.add_row(r["group"], r["topic"], str(r["partition"]), str(r["batches"]),
                      _ms(r["p50_ms"]), _ms(r["p90_ms"]), _ms(r["p99_ms"]), _ms(r["max_ms"]))
    note = Text(f"never fetched: {e2e['never_fetched_records']} of "
                f"{e2e['produced_records']} records produced in the capture")
    return Group(table, note)


def producers_view(report: dict[str, Any]) -> RenderableType:
    table = Table(title="Producer health", title_justify="left", expand=False,
                  show_edge=False, pad_edge=False)
    for name in ("Producer id", "Client id", "Batches", "Retries", "Out of order",
                 "Unanswered", "Written twice", "Errors"):
        table.add_column(name, justify="left" if name == "Client id" else "right")
    for p in report["producers"]:
        table.add_row(str(p["producer_id"]), p["client_id"] or "-", str(p["batches"]),
                      str(p["retries"]), str(p["out_of_order"]),
                      str(p["unanswered_requests"]), str(len(p["written_twice"])),
                      ", ".join(f"{k} {v}" for k, v in p["errors"].items()) or "-")
    if not report["producers"]:
        return Text("Producer health: no idempotent producer seen")
    return table


class InsightsScreen(Screen[None]):
    """See the module contract."""

    BINDINGS = [
        Binding("escape,q,i", "close", "Back"),
        Binding("r", "refresh_insights", "Refresh"),
    ]

    def __init__(self, source: Any) -> None:
        """``source`` is the app: it provides ``store`` and ``loader``."""
        super().__init__()
        self.source = source
        self.report: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="insights-body"):
            yield Static("computing insights…", id="insights-summary")
            yield Static("", id="insights-rebalances")
            yield Static("", id="insights-lag")
            yield Static("", id="insights-e2e")
            yield Static("", id="insights-producers")
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh_insights()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_refresh_insights(self) -> None:
        self.query_one("#insights-summary", Static).update("computing insights…")
        self._compute()

    @work(thread=True, exclusive=True, group="insights")
    def _compute(self) -> None:
        worker = get_current_worker()
        store = self.source.store

        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(
                self.query_one("#insights-summary", Static).update,
                Text(f"computing insights of {total} exchanges: "
                     f"{100 * done // max(total, 1)}%"))

        report = compute_insights(store, progress=progress,
                                  cancelled=lambda: worker.is_cancelled)
        if report is not None and not worker.is_cancelled:
            self.app.call_from_thread(self._show, report)

    def _show(self, report: dict[str, Any]) -> None:
        self.report = report
        loading = not getattr(getattr(self.source, "loader", None), "done", True)
        summary = (f"Insights of {report['rows']} exchanges (the whole capture"
                   + (", still loading: r recomputes" if loading else "")
                   + (f"; {report['dropped']} oldest dropped" if report["dropped"] else "")
                   + ")")
        width = self.app.size.width - 4
        self.query_one("#insights-summary", Static).update(Text(summary))
        self.query_one("#insights-rebalances", Static).update(rebalance_view(report, width))
        self.query_one("#insights-lag", Static).update(lag_view(report, width))
        self.query_one("#insights-e2e", Static).update(e2e_view(report))
        self.query_one("#insights-producers", Static).update(producers_view(report))
