"""Display filters over stored rows, without re-decoding when the row has the answer.

Contract:

* :data:`FAST_FIELDS` are the display-filter fields (:data:`kwsniff.output.fields.FIELDS`)
  whose values a stored row holds. :class:`RowFacts` quacks like
  :class:`~kwsniff.output.facts.ExchangeFacts` for those fields (and only those), so the
  compiled :class:`~kwsniff.output.filter.DisplayFilter` of ``-Y`` runs unchanged on it.
* :func:`make_matcher` returns ``match(store, row) -> bool`` for an expression: over
  :class:`RowFacts` when every field it names is fast, else over the real facts of the
  exchange unpickled from the store (slow but exact). Filter syntax errors raise
  :class:`~kwsniff.output.filter.FilterError` as for ``-Y``; so does a run-state field
  (``e2e_latency_ms``, ``e2e_latency_min_ms``, ``consumer_group``: the whole-run pass of
  :mod:`kwsniff.output.insights.annotate` needs the exchanges in capture order).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import canonical_field
from kwsniff.output.filter import DisplayFilter, FilterError, compile_filter, tokenize
from kwsniff.tui.store import (
    F_ERRORS,
    F_GROUPS,
    F_PARTITIONS,
    F_TOPICS,
    NONE_INT,
    STATUSES,
    ExchangeStore,
)

FAST_FIELDS = frozenset({
    "api", "api_key", "version", "correlation_id", "client_id", "status", "client",
    "broker", "client_port", "broker_port", "stream", "exchange", "protocol", "ts",
    "latency_ms", "topic", "partition", "group", "error", "records", "bytes",
    "request_bytes", "response_bytes",
})

Matcher = Callable[[ExchangeStore, int], bool]


class RowExchange:
    """The exchange attributes the fast fields read, from a stored row."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "status",
                 "client", "broker", "stream", "index", "protocol", "ts", "latency_ms")

    def __init__(self, store: ExchangeStore, row: int) -> None:
        loc = store.locate(row)
        if loc is None:
            raise KeyError(row)
        seg, i = loc
        key = seg.api_key[i]
        ver = seg.api_version[i]
        corr = seg.corr[i]
        lat = seg.latency[i]
        self.api_key = key if key >= 0 else None
        self.api_version = ver if ver >= 0 else None
        self.correlation_id = None if corr == NONE_INT else corr
        self.client_id = store.client_ids[seg.client_id[i]]
        self.status = STATUSES[seg.status[i]]
        self.stream = seg.stream[i]
        self.client, self.broker = store.routes[seg.route[i]]
        self.index = seg.index[i]
        self.protocol = store.protocols[seg.protocol[i]]
        self.ts = seg.ts[i]
        self.latency_ms = None if math.isnan(lat) else lat


class RowFacts:
    """The :class:`ExchangeFacts` attributes the fast fields read, from a stored row."""

    __slots__ = ("exchange", "topics", "error_codes", "partitions", "groups",
                 "record_count", "has_records", "request_bytes", "response_bytes")

    def __init__(self, store: ExchangeStore, row: int) -> None:
        self.exchange = RowExchange(store, row)
        seg, i = store.locate(row)  # type: ignore[misc]  # checked by RowExchange
        facts = store.facts_table[seg.facts[i]]
        self.topics = list(facts[F_TOPICS])
        self.error_codes = list(facts[F_ERRORS])
        self.partitions = list(facts[F_PARTITIONS])
        self.groups = list(facts[F_GROUPS])
        records = seg.records[i]
        self.has_records = records >= 0
        self.record_count = max(records, 0)
        req, resp = seg.req_bytes[i], seg.resp_bytes[i]
        self.request_bytes = req if req >= 0 else None
        self.response_bytes = resp if resp >= 0 else None

    @property
    def total_bytes(self) -> int:
        return (self.request_bytes or 0) + (self.response_bytes or 0)


def fields_named(expression: str) -> set[str]:
    """The display-filter field names appearing as words in ``expression`` (the field
    a Wireshark alias names for an alias)."""
    names = {canonical_field(t.text) for t in tokenize(expression) if t.kind == "WORD"}
    names.discard(None)
    return names  # type: ignore[return-value]


def is_fast(expression: str) -> bool:
    """True when every field the expression names is answered by stored rows."""
    return fields_named(expression) <= FAST_FIELDS


def make_matcher(expression: str) -> tuple[DisplayFilter, Matcher, bool]:
    """``(compiled filter, match(store, row), fast)``; raises FilterError on mistakes."""
    flt = compile_filter(expression)
    if flt.run_fields:
        # the whole-run pass reads the exchanges in capture order; the filter bar tests
        # rows one by one, in any order, while the capture is still loading
        tok = next(t for t in tokenize(expression)
                   if t.kind == "WORD" and canonical_field(t.text) in flt.run_fields)
        raise FilterError(f"field '{tok.text}' needs the whole-capture insights pass: not "
                          "in the filter bar (use -Y of decode/export/stats, or the insights "
                          "screen, key i)", expression, tok.pos)
    matches = flt.matches
    if is_fast(expression):
        def fast(store: ExchangeStore, row: int) -> bool:
            try:
                return matches(RowFacts(store, row))  # type: ignore[arg-type]
            except KeyError:
                return False
        return flt, fast, True

    def slow(store: ExchangeStore, row: int) -> bool:
        ex = store.exchange(row)
        if ex is None:
            return False
        return matches(ExchangeFacts(ex, store.names))
    return flt, slow, False

