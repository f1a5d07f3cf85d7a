"""The small queries of the charts and of the sorted summary sections, on the driver.

Contract: on a local ``--out`` the result tables are collected once as Arrow
(:func:`kwsniff.spark.output.collect_small`). The charts (:mod:`kwsniff.spark.analyze`)
and the sections with an order of their own then read those copies instead of running
one Spark job each: each function here takes the rows of a collected table
(:func:`rows`: a list of dicts, the values ``Row`` objects would hold) and returns what
the Spark query it stands for returns — the same rows with the same values, in the same
order where the query has one — or **None** where that cannot be guaranteed; the
caller then runs the Spark query. None is returned for:

* a sort whose key is not unique over the rows (Spark's order of ties is its own);
* a ``percentile_approx`` over a bucket of ``accuracy / 2`` values or more (see
  :func:`percentile`), or over NaN;
* series ranks decided by a sum of doubles where two totals lie so close that the
  order of the additions (Spark's partitions) could swap them;
* a NaN or infinite time (no chart bucket).

Spark semantics reproduced: aggregates skip nulls (all null: null); ``floor(t / step) *
step`` buckets; an ascending order puts nulls first, a descending one last; strings
compare by code point (= Spark's UTF-8 byte order); NaN sorts above every number and
-0.0 equals 0.0; ``concat`` is null when a part is, ``concat_ws`` skips null parts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

#: Relative distance under which two double totals count as a possible tie.
NEAR_TIE = 1e-9

Agg = tuple[Any, ...]          # ("sum"|"max"|"count", column) or ("pct", column, p, accuracy)


def rows(table: Any, columns: Iterable[str]) -> list[dict[str, Any]]:
    """The ``columns`` of a collected Arrow ``table`` as one dict per row, in its order."""
    names = list(dict.fromkeys(columns))
    data = [table.column(c).to_pylist() for c in names]
    return [dict(zip(names, values)) for values in zip(*data)]


def concat(*parts: Any) -> str | None:
    """Spark's ``concat``: null when a part is null."""
    return None if any(p is None for p in parts) else "".join(parts)


def concat_ws(sep: str, *parts: Any) -> str:
    """Spark's ``concat_ws``: null parts are skipped."""
    return sep.join(p for p in parts if p is not None)


# --------------------------------------------------------------------------- ordering

def _key(value: Any) -> tuple[Any, ...]:
    """A sort key of one value, ascending with nulls first (NaN above every number)."""
    if value is None:
        return (False, False, 0)
    if isinstance(value, float) and math.isnan(value):
        return (True, True, 0)
    return (True, False, value)


def order_value(row: dict[str, Any], columns: Sequence[str]) -> Any:
    """The value an order key sorts by: one column, or the sum of several (null when
    one is null, as Spark's ``+``)."""
    if len(columns) == 1:
        return row[columns[0]]
    values = [row[c] for c in columns]
    return None if any(v is None for v in values) else sum(values)


def sort_rows(data: list[dict[str, Any]],
              order: Sequence[tuple[tuple[str, ...], bool]]) -> list[dict[str, Any]] | None:
    """``data`` ordered as Spark's ``orderBy`` with ``order`` (per key: the columns whose
    sum it is, descending or not; nulls first ascending, last descending), or None when
    two rows have equal keys."""
    keys = [tuple(_key(order_value(r, cols)) for cols, _desc in order) for r in data]
    if len(set(keys)) < len(keys):
        return None
    indices = list(range(len(data)))
    for i in reversed(range(len(order))):     # stable sorts, last key first
        indices.sort(key=lambda j: keys[j][i], reverse=order[i][1])
    return [data[j] for j in indices]


# ------------------------------------------------------------------------ aggregation

class NotExact(Exception):
    """A driver-side aggregate cannot promise Spark's result."""


def percentile(values: list[float], p: float, accuracy: int) -> float | None:
    """Spark's ``percentile_approx(values, p, accuracy)`` where its sketch is exact (read
    from Spark 4.3; tests/spark/test_analyze.py checks it against the running Spark).

    Spark keeps a Greenwald-Khanna summary (``QuantileSummaries``, relative error
    ``1 / accuracy``). A value enters it with a rank uncertainty of
    ``floor(2 * error * count)``, merged partial summaries add the same term, and
    neighbours are merged only while ``2 < 2 * error * count``: with
    ``2 * error * n < 1`` for the bucket's n values no term is ever non-zero, every
    value is kept, and the answer is the smallest for ``p <= error``, the largest for
    ``p >= 1 - error``, else the value of rank ``ceil(p * n)`` — whatever the partitions
    or the order of the rows. Null values are skipped (none: None); raises
    :class:`NotExact` for more values or a NaN."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    error = 1.0 / accuracy
    if not 2 * error * len(vals) < 1 or any(math.isnan(v) for v in vals):
        raise NotExact
    vals.sort()
    if p <= error:
        return vals[0]
    if p >= 1 - error:
        return vals[-1]
    return vals[min(math.ceil(p * len(vals)), len(vals)) - 1]


def _aggregate(agg: Agg, values: list[Any]) -> Any:
    kind = agg[0]
    present = [v for v in values if v is not None]
    if kind == "count":
        return len(present)
    if any(isinstance(v, float) and math.isnan(v) for v in present):
        raise NotExact
    if kind == "pct":
        return percentile(present, agg[2], agg[3])
    if not present:
        return None
    if kind == "sum":
        return sum(present)     # doubles: only ever ranked (:func:`_rank`)
    if kind == "max":
        return max(present)
    raise ValueError(f"unknown aggregate {kind!r}")


def _bucket(t: Any, step: float) -> float | None:
    if t is None:
        return None
    if isinstance(t, float) and not math.isfinite(t):
        raise NotExact
    return math.floor(t / step) * step


def _rank(totals: dict[Any, Any], key_of: dict[Any, Any]) -> dict[Any, int]:
    """Ranks 1.. of ``totals`` (series -> total): by total descending (nulls last), then
    by series name ascending (a null name last), as the window of ``_ranked``."""
    floats = sorted(t for t in totals.values() if isinstance(t, float))
    for a, b in zip(floats, floats[1:]):
        if b - a <= NEAR_TIE * max(abs(a), abs(b)):
            raise NotExact
    ordered = sorted(totals, key=lambda s: (totals[s] is None,
                                            -totals[s] if totals[s] is not None else 0,
                                            key_of[s] is None,
                                            key_of[s] if key_of[s] is not None else ""))
    return {s: i + 1 for i, s in enumerate(ordered)}


def ranked(data: list[dict[str, Any]], keys: Sequence[str], key: str, epoch: str,
           step: float, values: dict[str, Agg], top: int) -> list[dict[str, Any]] | None:
    """:func:`kwsniff.spark.analyze._ranked` on the driver: ``data`` aggregated per
    ``keys``, ``key`` and ``step`` seconds of ``epoch`` (``_x``), one value per entry of
    ``values``, cut to the series among the ``top`` of some value by total, with their
    ranks ``_r_<name>``; rows in no particular order. None where not exact."""
    try:
        cells: dict[tuple[Any, ...], list[list[Any]]] = {}
        for r in data:
            cell = (*[r[k] for k in keys], r[key], _bucket(r[epoch], step))
            acc = cells.get(cell)
            if acc is None:
                acc = cells[cell] = [[] for _ in values]
            for i, agg in enumerate(values.values()):
                acc[i].append(r[agg[1]])
        out = {cell: {name: _aggregate(agg, acc[i])
                      for i, (name, agg) in enumerate(values.items())}
               for cell, acc in cells.items()}
        panels: dict[tuple[Any, ...], dict[Any, list[dict[str, Any]]]] = {}
        for cell, vals in out.items():
            panels.setdefault(cell[:len(keys)], {}).setdefault(cell[len(keys)], []).append(vals)
        ranks: dict[tuple[Any, ...], dict[str, int]] = {}
        for panel, series in panels.items():
            names = {s: s for s in series}
            per_value = {}
            for name in values:
                totals = {}
                for s, cells_of in series.items():
                    present = [c[name] for c in cells_of if c[name] is not None]
                    totals[s] = sum(present) if present else None
                per_value[name] = _rank(totals, names)
            for s in series:
                ranks[(*panel, s)] = {f"_r_{name}": per_value[name][s] for name in values}
    except NotExact:
        return None
    result = []
    for cell, vals in out.items():
        r = ranks[cell[:len(keys) + 1]]
        if min(r.values()) <= top:
            row = dict(zip((*keys, key, "_x"), cell))
            row.update(vals)
            row.update(r)
            result.append(row)
    return result


def heatmap_pairs(data: list[dict[str, Any]], clients: int,
                  brokers: int) -> list[dict[str, Any]]:
    """:func:`kwsniff.spark.analyze._heatmap_pairs` on the driver: exchanges per client
    id and broker, cut to the top ``clients`` client ids or top ``brokers`` brokers by
    exchanges (dense ranks ``_rc``/``_rb``: total descending, then the name with a null
    first)."""
    cells: dict[tuple[Any, Any], list[Any]] = {}
    for r in data:
        cells.setdefault((r["client_id"], r["broker"]), []).append(r["exchanges"])
    sums = {cell: _aggregate(("sum", "exchanges"), v) for cell, v in cells.items()}

    def dense(position: int) -> dict[Any, int]:
        totals: dict[Any, Any] = {}
        for cell, n in sums.items():
            name = cell[position]
            if n is not None:
                totals[name] = (totals.get(name) or 0) + n
            else:
                totals.setdefault(name, None)
        ordered = sorted(totals, key=lambda s: (totals[s] is None,
                                                -totals[s] if totals[s] is not None else 0,
                                                s is not None, s if s is not None else ""))
        return {s: i + 1 for i, s in enumerate(ordered)}

    rc, rb = dense(0), dense(1)
    return [{"client_id": c, "broker": b, "exchanges": n, "_rc": rc[c], "_rb": rb[b]}
            for (c, b), n in sums.items() if rc[c] <= clients or rb[b] <= brokers]
