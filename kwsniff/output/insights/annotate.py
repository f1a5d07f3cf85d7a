"""The streaming insights pass behind the run-state display-filter fields.

Contract:

* :func:`annotate_run` passes the exchanges through unchanged and in the same order,
  feeding each to an :class:`~kwsniff.output.insights.InsightsCollector`; while an
  exchange is out (between its ``yield`` and the request for the next one) its values
  are in the filter's :class:`~kwsniff.output.filter.RunAnnotations`
  (``exchange index -> (exchange, {field: value})``). Only a display filter naming a
  run-state field (``DisplayFilter.run_fields``) makes the selection run it.
* ``e2e_latency_ms`` / ``e2e_latency_min_ms`` of a Fetch exchange: the largest /
  smallest end-to-end latency (:mod:`.journey`: Produce request first byte → this Fetch
  response last byte, in ms) of the batches produced in the capture that this Fetch
  delivers *first* to its group — the per-batch values ``stats --insights --json``
  lists as samples. Absent when it delivers none (re-deliveries, records produced
  before the capture or by an unanswered Produce).
* ``consumer_group`` of a Fetch exchange: the group id :mod:`.membership` attributes it
  to at that point of the run (absent for clients seen in no group or in several);
  other exchanges keep the filter's default (their body group ids).
* A Fetch can come before the Produce exchange whose batches it returns (exchanges are
  in request order; a long-poll answers later): a Fetch is held back — with every
  exchange after it, so the order is kept — until an exchange whose request starts
  after the Fetch response's last byte arrives (no Produce matching it can come after
  that), or the run ends. Memory: at most ``hold`` exchanges are held; beyond that the
  oldest goes out with the values known so far.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from kwsniff.output.insights import InsightsCollector

FETCH = 1
HOLD = 10_000

__all__ = ["annotate_run"]


def annotate_run(exchanges: Iterable[Any], annotations: Any, fields: Iterable[str],
                 names: Any = None, context: Any = None, hold: int = HOLD) -> Iterator[Any]:
    """Yield ``exchanges`` annotated for ``fields``; see the module contract."""
    collector = InsightsCollector(names, context)
    membership = collector.membership
    values = annotations.values
    open_fetches: dict[Any, dict[str, Any]] = {}     # index -> values of held Fetches
    held: deque[tuple[Any, dict[str, Any], float]] = deque()
    want_group = "consumer_group" in fields

    def delivered(index: Any, ms: float) -> None:
        vals = open_fetches.get(index)
        if vals is None:
            return
        hi = vals.get("e2e_latency_ms")
        vals["e2e_latency_ms"] = ms if hi is None else max(hi, ms)
        lo = vals.get("e2e_latency_min_ms")
        vals["e2e_latency_min_ms"] = ms if lo is None else min(lo, ms)

    collector.journeys.on_deliver = delivered
    for ex in exchanges:
        vals: dict[str, Any] = {}
        until = float("-inf")
        if ex.api_key == FETCH and ex.protocol == "kafka":
            open_fetches[ex.index] = vals
            resp = ex.response
            if resp is not None and resp.ts_last is not None:
                until = resp.ts_last
        collector.add(ex)
        if want_group and ex.api_key == FETCH and ex.protocol == "kafka":
            group = membership.known_group(ex)
            vals["consumer_group"] = [group] if group is not None else []
        held.append((ex, vals, until))
        req = ex.request
        start = req.ts_first if req is not None and req.ts_first is not None else ex.ts
        if start is None:
            start = float("-inf")
        while held and (held[0][2] < start or len(held) > hold):
            out, out_vals, _ = held.popleft()
            open_fetches.pop(out.index, None)
            values[out.index] = (out, out_vals)
            yield out
            values.pop(out.index, None)
    while held:
        out, out_vals, _ = held.popleft()
        open_fetches.pop(out.index, None)
        values[out.index] = (out, out_vals)
        yield out
        values.pop(out.index, None)
