"""Text charts for the statistics screen (no plotting dependency).

Contract (pure functions over numbers, returning text):

* :class:`LogHistogram` counts values (milliseconds) in log-spaced bins between
  :data:`HIST_LOW_MS` and :data:`HIST_HIGH_MS` (values outside go to the end bins);
  :meth:`LogHistogram.spark` draws it as one line of ▁▂▃▄▅▆▇█ (blank = empty bin) and
  :func:`histogram_axis` labels the decades under it.
* :func:`time_bins` counts timestamps in ``n`` equal bins; :func:`column_chart` draws
  counts as a multi-line column chart with eighth-block tops and a y-axis label.
* :func:`bar` is a horizontal bar of ``width`` cells with eighth-block ends.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

HIST_LOW_MS = 0.01          # 10 µs
HIST_HIGH_MS = 100_000.0    # 100 s
BINS_PER_DECADE = 4
_LEVELS = " ▁▂▃▄▅▆▇█"
_EIGHTHS = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"]


class LogHistogram:
    """Counts of values in log-spaced bins (see the module contract)."""

    __slots__ = ("counts", "total")

    decades = round(math.log10(HIST_HIGH_MS / HIST_LOW_MS))
    size = decades * BINS_PER_DECADE

    def __init__(self) -> None:
        self.counts = [0] * self.size
        self.total = 0

    @classmethod
    def bin_of(cls, ms: float) -> int:
        if ms <= HIST_LOW_MS:
            return 0
        i = int(math.log10(ms / HIST_LOW_MS) * BINS_PER_DECADE)
        return min(max(i, 0), cls.size - 1)

    def add(self, ms: float) -> None:
        if ms != ms:  # NaN: no latency
            return
        self.counts[self.bin_of(ms)] += 1
        self.total += 1

    def spark(self, peak: int | None = None) -> str:
        """One character per bin, height relative to ``peak`` (default: own maximum)."""
        top = peak if peak else max(self.counts, default=0)
        if not top:
            return " " * self.size
        out = []
        for c in self.counts:
            if not c:
                out.append(" ")
            else:
                out.append(_LEVELS[max(1, min(8, math.ceil(c * 8 / top)))])
        return "".join(out)


def histogram_axis() -> str:
    """Decade labels aligned under :meth:`LogHistogram.spark` (``10µs`` ... ``100s``)."""
    labels = []
    for d in range(LogHistogram.decades + 1):
        ms = HIST_LOW_MS * 10 ** d
        labels.append(format_ms_short(ms))
    width = LogHistogram.size
    line = [" "] * (width + 6)
    for d, label in enumerate(labels):
        x = d * BINS_PER_DECADE
        if x + len(label) > len(line):
            continue
        if any(ch != " " for ch in line[max(0, x - 1):x + len(label)]):
            continue
        line[x:x + len(label)] = list(label)
    return "".join(line).rstrip()


def format_ms_short(ms: float) -> str:
    if ms < 1:
        return f"{ms * 1000:g}µs"
    if ms < 1000:
        return f"{ms:g}ms"
    return f"{ms / 1000:g}s"


def time_bins(timestamps: Iterable[float], start: float, end: float, n: int) -> list[int]:
    """Counts of ``timestamps`` in ``n`` equal bins over ``[start, end]``."""
    counts = [0] * max(n, 1)
    span = end - start
    if span <= 0:
        for _ in timestamps:
            counts[0] += 1
        return counts
    scale = len(counts) / span
    last = len(counts) - 1
    for ts in timestamps:
        i = int((ts - start) * scale)
        counts[min(max(i, 0), last)] += 1
    return counts


def column_chart(counts: Sequence[int], height: int = 8) -> list[str]:
    """Lines (top first) of a column chart, one column per count."""
    peak = max(counts, default=0)
    if peak <= 0 or height <= 0:
        return [" " * len(counts)] * max(height, 0)
    levels = [c * height * 8 / peak for c in counts]
    lines = []
    for row in range(height, 0, -1):
        floor = (row - 1) * 8
        chars = []
        for lv in levels:
            fill = lv - floor
            if fill >= 8:
                chars.append("█")
            elif fill > 0:
                chars.append(_LEVELS[max(1, int(round(fill)))])
            else:
                chars.append(" ")
        lines.append("".join(chars))
    return lines


def bar(value: float, peak: float, width: int) -> str:
    """A horizontal bar of ``value / peak`` of ``width`` cells."""
    if peak <= 0 or value <= 0 or width <= 0:
        return ""
    eighths = int(round(min(value / peak, 1.0) * width * 8))
    eighths = max(eighths, 1)
    return "█" * (eighths // 8) + _EIGHTHS[eighths % 8]
