"""Insights of the stored capture for the insights screen (sans-UI).

Contract: :func:`compute_insights` feeds every stored row, in capture order, to a
:class:`kwsniff.output.insights.InsightsCollector` and returns its report (the numbers
of ``kwsniff stats --insights``), or None when ``cancelled()`` says so. It reads the
whole store, not the current view: the joins need both sides (a Produce and the Fetch
that delivers it). Rows dropped by the row limit are missing from it (``dropped``
says how many). Never raises on rows that cannot be read (they are skipped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kwsniff.output.insights import InsightsCollector
from kwsniff.tui.store import ExchangeStore


def compute_insights(store: ExchangeStore, *,
                     progress: Callable[[int, int], None] | None = None,
                     cancelled: Callable[[], bool] | None = None) -> dict[str, Any] | None:
    collector = InsightsCollector(store.names)
    first, end = store.first_row, store.count
    total = end - first
    for n, row in enumerate(range(first, end)):
        if cancelled is not None and not n % 256 and cancelled():
            return None
        ex = store.exchange(row)
        if ex is not None:
            collector.add(ex)
        if progress is not None and not n % 1024:
            progress(n, total)
    report = collector.report()
    report["rows"] = total
    report["dropped"] = store.dropped
    report["first_ts"] = store.first_ts
    return report
