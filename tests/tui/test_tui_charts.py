"""Text charts of the statistics screen and filter completion."""

from __future__ import annotations

from kwsniff.tui.charts import (
    BINS_PER_DECADE,
    LogHistogram,
    bar,
    column_chart,
    histogram_axis,
    time_bins,
)
from kwsniff.tui.widgets.filterbar import completions


def test_log_histogram_bins_and_spark() -> None:
    h = LogHistogram()
    for ms in (0.001, 0.05, 0.05, 1.0, 1.0, 1.0, 1.0, 250.0, 1e9, float("nan")):
        h.add(ms)
    assert h.total == 9                      # NaN (no latency) is not counted
    assert h.counts[0] == 1                  # below 10 µs: first bin
    assert h.counts[-1] == 1                 # above 100 s: last bin
    assert h.counts[LogHistogram.bin_of(1.0)] == 4
    assert LogHistogram.bin_of(1.0) == 2 * BINS_PER_DECADE   # 10 µs -> 1 ms: two decades
    spark = h.spark()
    assert len(spark) == LogHistogram.size
    assert spark[LogHistogram.bin_of(1.0)] == "█"
    assert spark[LogHistogram.bin_of(0.05)] == "▄"
    assert spark[5] == " "
    axis = histogram_axis()
    assert axis.startswith("10µs") and "1ms" in axis and axis.index("1ms") == 8


def test_time_bins_and_columns() -> None:
    assert time_bins([0.0, 0.1, 0.5, 0.99, 1.0], 0.0, 1.0, 4) == [2, 0, 1, 2]
    assert time_bins([5.0, 5.0], 5.0, 5.0, 3) == [2, 0, 0]
    lines = column_chart([0, 4, 8], height=2)
    assert lines == ["  █", " ██"]
    assert column_chart([0, 0], 2) == ["  ", "  "]


def test_bar() -> None:
    assert bar(10, 10, 4) == "████"
    assert bar(5, 10, 4) == "██"
    assert bar(1, 10, 4) == "▍"
    assert bar(0, 10, 4) == ""
    assert bar(0.0001, 10, 4) == "▏"        # something is never drawn as nothing


def test_completions() -> None:
    assert "api" in completions("ap") and "api_key" in completions("ap")
    assert completions("api ")[:3] == ["api ==", "api !=", "api <"]
    assert completions("(ap") == ["(api", "(api_key"]
    assert completions("not st") == ["not status", "not stream"]
    assert completions("status == ")[0] == 'status == paired'       # bare, as typed
    values = completions('api == "Prod')
    assert 'api == "Produce"' in values
    assert completions("topic == ") == []    # no known values for free text
    assert completions("api == Produce a") == ["api == Produce and"]
