"""Plain-text and HTML tables of small result sets (pure Python, no Spark).

Contract: :func:`format_cell` renders one value the same way everywhere (floats with 3
decimals, ``*_ms`` columns with 2 as ``decode`` and ``stats`` print milliseconds, no
thousands separators in floats; epoch-second columns named ``ts``/``*_ts``/``*_start``/``*_end``
as UTC times,
counts (``*bytes``, ``*records``, ``*requests``, ...) with thousands separators, lists
joined with ``,``, None as ``-``); :func:`text_table` lays out rows under a title
with aligned columns (numbers right-aligned) and says how many rows were left out;
:func:`html_table` is the same table as escaped HTML.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence
from typing import Any

TIME_SUFFIXES = ("_ts", "_start", "_end")   # "requests" is not a time
COUNT_SUFFIXES = ("bytes", "records", "requests", "exchanges", "occurrences", "fetches")


def is_time_column(name: str) -> bool:
    return name == "ts" or name.endswith(TIME_SUFFIXES)


def format_cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float) and is_time_column(column):
        try:
            moment = dt.datetime.fromtimestamp(value, dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return f"{value:.6f}"
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        # as decode and stats write them: milliseconds with 2 decimals, no separators
        return f"{value:.2f}" if column.endswith("_ms") else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}" if column.endswith(COUNT_SUFFIXES) else str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(format_cell(column, v) for v in value)
    return str(value)


def _numeric(values: list[Any]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                 for v in present)


def text_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
               total: int | None = None, max_width: int = 48) -> str:
    """``title`` then the aligned table; ``total`` > len(rows) adds "(N more rows)"."""
    lines = [title, "=" * len(title)]
    if not rows:
        lines.append("(none)")
        return "\n".join(lines)
    cells = [[format_cell(c, v) for c, v in zip(columns, row)] for row in rows]
    cells = [[c if len(c) <= max_width else c[:max_width - 1] + "…" for c in row]
             for row in cells]
    widths = [max(len(columns[i]), *(len(r[i]) for r in cells)) for i in range(len(columns))]
    right = [_numeric([row[i] for row in rows]) and not is_time_column(columns[i])
             for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if r else v.ljust(w)
                         for v, w, r in zip(values, widths, right)).rstrip()
    lines.append(line(list(columns)))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(line(r) for r in cells)
    if total is not None and total > len(rows):
        lines.append(f"({total - len(rows)} more rows)")
    return "\n".join(lines)


#: Sorting for the tables of :func:`html_table` (click a header; numbers by value).
SORT_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var dir = th.dataset.dir === 'asc' ? -1 : 1; th.dataset.dir = dir > 0 ? 'asc' : 'desc';
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col];
        if (x.dataset.v !== undefined && y.dataset.v !== undefined)
          return dir * (parseFloat(x.dataset.v) - parseFloat(y.dataset.v));
        return dir * x.textContent.localeCompare(y.textContent);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def html_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
               total: int | None = None) -> str:
    """The whole table (every row given) in a scrollable box, sortable by a click on a
    header (:data:`SORT_SCRIPT`); numeric cells right-aligned (class ``num``, their value
    in ``data-v``)."""
    parts = [f"<h3>{html.escape(title)}</h3>"]
    if not rows:
        parts.append("<p class='none'>(none)</p>")
        return "\n".join(parts)
    right = [_numeric([row[i] for row in rows]) and not is_time_column(columns[i])
             for i in range(len(columns))]
    parts.append("<div class='scroll'><table class='sortable'><thead><tr>" + "".join(
        f"<th title='sort'>{html.escape(c)}</th>" for c in columns) + "</tr></thead><tbody>")

    def cell(c: str, v: Any, r: bool) -> str:
        text = html.escape(format_cell(c, v))
        if r:
            value = f" data-v='{v!r}'" if v is not None else " data-v='-Infinity'"
            return f"<td class='num'{value}>{text}</td>"
        return f"<td class='txt'>{text}</td>"
    for row in rows:
        parts.append("<tr>" + "".join(cell(c, v, r) for c, v, r in zip(columns, row, right))
                     + "</tr>")
    parts.append("</tbody></table></div>")
    if total is not None and total > len(rows):
        parts.append(f"<p class='more'>({total - len(rows)} more rows in the CSV/Parquet "
                     "output)</p>")
    return "\n".join(parts)
