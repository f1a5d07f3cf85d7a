"""PNG charts of analysis results with matplotlib (headless, ``Agg`` backend).

Contract: every function takes plain Python data (already collected and cut to a
readable size by the caller), draws one figure, saves it as PNG at ``path`` and returns
``path``; with nothing to draw it writes nothing and returns None. Times are epoch
seconds, shown in UTC.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

DPI = 110
WIDE = (11.0, 5.5)
#: Empty buckets a line is drawn through (zero-filled or held); a longer gap is a break.
MAX_GAP_BUCKETS = 5
FILLS = ("zero", "hold")


def _save(fig: Any, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _times(xs: Sequence[float]) -> list[dt.datetime]:
    return [dt.datetime.fromtimestamp(x, dt.timezone.utc) for x in xs]


def latency_bars(labels: Sequence[str], p50: Sequence[float], p90: Sequence[float],
                 p99: Sequence[float], maxima: Sequence[float], path: str,
                 title: str = "Latency by API (ms, log scale)") -> str | None:
    """Horizontal bars of p50/p90/p99 per label, max as a marker."""
    if not labels:
        return None
    n = len(labels)
    fig, ax = plt.subplots(figsize=(11.0, max(3.0, 0.42 * n + 1.5)))
    ys = list(range(n))
    h = 0.27
    floor = 1e-3   # log scale: a 0 ms latency is drawn at 1 µs
    for offset, values, label in ((-h, p50, "p50"), (0.0, p90, "p90"), (h, p99, "p99")):
        ax.barh([y + offset for y in ys], [max(v or 0.0, floor) for v in values], height=h,
                label=label)
    ax.scatter([max(v or 0.0, floor) for v in maxima], ys, marker="|", s=120, color="black",
               label="max", zorder=3)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def with_gaps(xs: Sequence[float], ys: Sequence[float], step: float | None,
              fill: str = "zero", max_gap: int = MAX_GAP_BUCKETS
              ) -> tuple[list[float], list[float]]:
    """The points of one series (sorted bucket starts ``xs``, ``step`` seconds apart when
    contiguous) ready to draw: with ``fill="zero"`` (counts) every empty bucket of a gap
    of at most ``max_gap`` buckets becomes a 0 point; a longer gap drops to 0 in its first
    and last empty bucket and is a break (a NaN point) in between. With ``fill="hold"``
    (levels, drawn as steps) short gaps are left to the step line and a long gap is a
    break one bucket after its last point. Without ``step`` the points are returned as they are."""
    if not step or not xs:
        return list(xs), list(ys)
    out_x: list[float] = [xs[0]]
    out_y: list[float] = [ys[0]]
    for x, y in zip(xs[1:], ys[1:]):
        prev = out_x[-1]          # the previous data point
        missing = round((x - prev) / step) - 1
        if missing > 0:
            if missing <= max_gap:
                if fill == "zero":
                    for k in range(1, missing + 1):
                        out_x.append(prev + k * step)
                        out_y.append(0.0)
            else:
                if fill == "zero":
                    out_x.append(prev + step)
                    out_y.append(0.0)
                # the break: mid-gap for counts; for levels (steps) right after the
                # last bucket, so the level is not drawn on into the empty time
                out_x.append((prev + x) / 2 if fill == "zero" else prev + step)
                out_y.append(math.nan)
                if fill == "zero":
                    out_x.append(x - step)
                    out_y.append(0.0)
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


def time_series(series: dict[str, tuple[Sequence[float], Sequence[float]]], path: str,
                title: str, ylabel: str, panels: dict[str, dict[str, tuple[Sequence[float],
                                                                      Sequence[float]]]]
                | None = None, *, step: float | None = None, fill: str = "zero"
                ) -> str | None:
    """Lines over time, one per series; ``panels`` draws several stacked panels instead
    (panel title -> series). With ``step`` (seconds per bucket) empty buckets are filled
    or drawn as breaks (:func:`with_gaps`); ``fill="hold"`` draws levels as steps."""
    groups = panels if panels is not None else {title: series}
    groups = {k: v for k, v in groups.items() if v}
    if not groups:
        return None
    fig, axes = plt.subplots(len(groups), 1, figsize=(WIDE[0], 3.2 * len(groups) + 0.8),
                             sharex=True, squeeze=False)
    for ax, (name, lines) in zip(axes[:, 0], groups.items()):
        for label, (xs, ys) in lines.items():
            marker = "o" if len(xs) < 30 else None
            px, py = with_gaps(xs, ys, step, fill)
            ax.plot(_times(px), py, label=label, marker=marker, markersize=3, linewidth=1.2,
                    drawstyle="steps-post" if fill == "hold" else "default")
        ax.set_title(name, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", ncol=2)
    locator = mdates.AutoDateLocator()
    axes[-1, 0].xaxis.set_major_locator(locator)
    axes[-1, 0].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    axes[-1, 0].set_xlabel("time (UTC)")
    return _save(fig, path)


def bars(labels: Sequence[str], values: Sequence[float], path: str, title: str,
         xlabel: str) -> str | None:
    """One horizontal bar per label."""
    if not labels:
        return None
    n = len(labels)
    fig, ax = plt.subplots(figsize=(11.0, max(2.5, 0.38 * n + 1.4)))
    ys = list(range(n))
    ax.barh(ys, values, color="#c0504d")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    for y, v in zip(ys, values):
        ax.text(v, y, f" {v:,.0f}" if float(v).is_integer() else f" {v:,.1f}",
                va="center", fontsize=7)
    return _save(fig, path)


def stacked_bars(labels: Sequence[str], stacks: dict[str, Sequence[float]], path: str,
                 title: str, ylabel: str) -> str | None:
    """Vertical stacked bars: one bar per label, one colour per stack."""
    if not labels:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(labels) + 3), 4.5))
    xs = list(range(len(labels)))
    bottom = [0.0] * len(labels)
    for name, values in stacks.items():
        ax.bar(xs, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def heatmap(rows: Sequence[str], cols: Sequence[str], values: Sequence[Sequence[float]],
            path: str, title: str, unit: str) -> str | None:
    """A row x column matrix of counts with the value written in each non-empty cell."""
    if not rows or not cols:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cols) + 4), max(3.0, 0.4 * len(rows) + 2)))
    image = ax.imshow(values, aspect="auto", cmap="Blues")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    peak = max((v for row in values for v in row), default=0) or 1
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if v:
                ax.text(j, i, f"{v:,.0f}", ha="center", va="center", fontsize=7,
                        color="white" if v > peak / 2 else "black")
    fig.colorbar(image, ax=ax, label=unit)
    ax.set_title(title)
    return _save(fig, path)
