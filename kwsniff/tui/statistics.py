"""Statistics of a set of stored rows, for the statistics screen (sans-UI).

Contract: :func:`compute` returns a :class:`ViewStatistics` for row ids of a store:

* ``report``: :meth:`kwsniff.output.stats.StatsCollector.report` (the numbers of
  ``kwsniff stats``): the decoder's report when given (the rows are the whole capture),
  else computed by re-reading each exchange (same code, exact);
* ``histograms``: a :class:`~kwsniff.tui.charts.LogHistogram` of latencies per
  ``(protocol, api_key, api_version)``, and ``rate``: request counts in ``bins`` equal
  time bins between ``start`` and ``end`` — both from the stored columns (fast).

It never raises on dropped rows (they are skipped) and stops early, returning None,
when ``cancelled()`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.stats import StatsCollector
from kwsniff.tui.charts import LogHistogram, time_bins
from kwsniff.tui.store import ExchangeStore

ApiKey = tuple[str, int, int | None]


@dataclass(slots=True)
class ViewStatistics:
    rows: int
    report: dict[str, Any]
    histograms: dict[ApiKey, LogHistogram] = field(default_factory=dict)
    rate: list[int] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0
    partial: bool = False          # the capture was still loading


def compute(store: ExchangeStore, rows: Sequence[int], *, bins: int = 60,
            report: dict[str, Any] | None = None,
            partial: bool = False, progress: Callable[[int, int], None] | None = None,
            cancelled: Callable[[], bool] | None = None) -> ViewStatistics | None:
    """Statistics of ``rows`` (see the module contract)."""
    hists: dict[ApiKey, LogHistogram] = {}
    stamps: list[float] = []
    protocols = store.protocols
    total = len(rows)
    for n, row in enumerate(rows):
        if cancelled is not None and not n % 4096 and cancelled():
            return None
        loc = store.locate(row)
        if loc is None:
            continue
        seg, i = loc
        key = seg.api_key[i]
        ver = seg.api_version[i]
        api: ApiKey = (protocols[seg.protocol[i]], key if key >= 0 else -1,
                       ver if ver >= 0 else None)
        h = hists.get(api)
        if h is None:
            h = hists[api] = LogHistogram()
        h.add(seg.latency[i])
        stamps.append(seg.ts[i])
    start = min(stamps, default=0.0)
    end = max(stamps, default=0.0)
    rate = time_bins(stamps, start, end, bins)
    if report is None:
        collector = StatsCollector()
        for n, row in enumerate(rows):
            if cancelled is not None and not n % 256 and cancelled():
                return None
            ex = store.exchange(row)
            if ex is not None:
                collector.add(ExchangeFacts(ex, store.names))
            if progress is not None and not n % 1024:
                progress(n, total)
        report = collector.report()
    return ViewStatistics(total, report, hists, rate, start, end, partial)
