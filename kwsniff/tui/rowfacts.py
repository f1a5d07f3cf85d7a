"""Display filters over stored rows, without re-decoding when the row has the answer.

Contract:

* :data:`FAST_FIELDS` are the display-filter fields (:data:`kwsniff.output.fields.FIELDS`)
  whose values a stored row holds. :class:`RowFacts` quacks like
  :class:`~kwsniff.output.facts.ExchangeFacts` for those fields (and only those), so the
  compiled :class:`~kwsniff.output.filter.DisplayFilter` of ``-Y`` runs unchanged on it.
* :data:`SCREENED_FIELDS` are fields whose value a row cannot hold but whose *absence*
  it can tell (the ``sasl_*`` fields only in SASL exchanges, ``problem`` only where the
  row counts problems); for the rows that cannot have a value :class:`RowFacts` gives
  what the real facts give there (no value).
* :func:`make_matcher` returns ``match(store, row) -> bool`` for an expression: over
  :class:`RowFacts` when every field it names is fast; when every field is fast or
  screened, over :class:`RowFacts` for rows without a value of the screened fields and
  over the real facts of the exchange (rebuilt from the store's spill) for the others;
  else over the real facts of every row (slow but exact). Filter syntax errors raise
  :class:`~kwsniff.output.filter.FilterError` as for ``-Y``; so does a run-state field
  (``e2e_latency_ms``, ``e2e_latency_min_ms``, ``consumer_group``: the whole-run pass of
  :mod:`kwsniff.output.insights.annotate` needs the exchanges in capture order).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import canonical_field
from kwsniff.output.filter import DisplayFilter, FilterError, compile_filter, tokenize
from kwsniff.tui.store import (
    F_ACKS,
    F_ERRORS,
    F_GROUPS,
    F_MEMBERS,
    F_PARTITIONS,
    F_PRODUCERS,
    F_TLS,
    F_TOPIC_IDS,
    F_TOPICS,
    F_TXNS,
    NONE_INT,
    STATUSES,
    ExchangeStore,
)

FAST_FIELDS = frozenset({
    "api", "api_key", "version", "correlation_id", "client_id", "status", "client",
    "broker", "client_port", "broker_port", "port", "address", "stream", "exchange",
    "protocol", "ts", "latency_ms", "topic", "topic_id", "partition", "group", "member",
    "transactional_id", "producer_id", "error", "records", "bytes", "request_bytes",
    "response_bytes", "tls", "tls.version", "tls.suite", "tls.sni", "frame", "acks",
})
SCREENED_FIELDS = frozenset({"sasl_mechanism", "sasl_user", "sasl_error", "problem"})
_PRODUCE = 0
_SASL_APIS = frozenset({17, 36})        # SaslHandshake, SaslAuthenticate
_SASL_PROTOCOL = "kafka-sasl"

Matcher = Callable[[ExchangeStore, int], bool]


class _RowTls:
    """The :class:`~kwsniff.tls.session.TlsInfo` attributes the ``tls`` fields read."""

    __slots__ = ("version_name", "suite_name", "sni")

    def __init__(self, version_name: str | None, suite_name: str | None,
                 sni: str | None) -> None:
        self.version_name = version_name
        self.suite_name = suite_name
        self.sni = sni


class _RowMessage:
    """The message attributes the ``frame`` and ``acks`` fields read (a Produce
    request's body holds only its ``Acks``)."""

    __slots__ = ("api_key", "frame_first", "frame_last", "body")

    def __init__(self, api_key: int | None, frame_first: int, frame_last: int,
                 body: dict[str, Any] | None) -> None:
        self.api_key = api_key
        self.frame_first = frame_first
        self.frame_last = frame_last
        self.body = body


class RowExchange:
    """The exchange attributes the fast fields read, from a stored row, each read from
    the columns when asked (a filter reads few). Its messages hold only frames and
    Produce acks; the screened fields find no value in them (see the module contract)."""

    __slots__ = ("_store", "_seg", "_i", "_messages")

    def __init__(self, store: ExchangeStore, row: int) -> None:
        loc = store.locate(row)
        if loc is None:
            raise KeyError(row)
        self._store = store
        self._seg, self._i = loc
        self._messages: tuple[_RowMessage | None, _RowMessage | None] | None = None

    @property
    def api_key(self) -> int | None:
        key = self._seg.api_key[self._i]
        return key if key >= 0 else None

    @property
    def api_version(self) -> int | None:
        ver = self._seg.api_version[self._i]
        return ver if ver >= 0 else None

    @property
    def correlation_id(self) -> int | None:
        corr = self._seg.corr[self._i]
        return None if corr == NONE_INT else corr

    @property
    def client_id(self) -> str | None:
        return self._store.client_ids[self._seg.client_id[self._i]]

    @property
    def status(self) -> str:
        return STATUSES[self._seg.status[self._i]]

    @property
    def stream(self) -> int:
        return self._seg.stream[self._i]

    @property
    def client(self) -> tuple[str, int]:
        return self._store.routes[self._seg.route[self._i]][0]

    @property
    def broker(self) -> tuple[str, int]:
        return self._store.routes[self._seg.route[self._i]][1]

    @property
    def index(self) -> int:
        return self._seg.index[self._i]

    @property
    def protocol(self) -> str:
        return self._store.protocols[self._seg.protocol[self._i]]

    @property
    def ts(self) -> float:
        return self._seg.ts[self._i]

    @property
    def latency_ms(self) -> float | None:
        lat = self._seg.latency[self._i]
        return None if math.isnan(lat) else lat

    @property
    def tls(self) -> _RowTls | None:
        tls = self._store.facts_table[self._seg.facts[self._i]][F_TLS]
        return None if tls is None else _RowTls(*tls)

    def _both(self) -> tuple[_RowMessage | None, _RowMessage | None]:
        messages = self._messages
        if messages is None:
            key = self.api_key
            frames = self._seg.frames
            at = 4 * self._i
            req = resp = None
            if frames[at] >= 0:
                body = None
                if key == _PRODUCE:
                    acks = self._store.facts_table[self._seg.facts[self._i]][F_ACKS]
                    if acks is not None:
                        body = {"Acks": acks}
                req = _RowMessage(key, frames[at], frames[at + 1], body)
            if frames[at + 2] >= 0:
                resp = _RowMessage(key, frames[at + 2], frames[at + 3], None)
            messages = self._messages = (req, resp)
        return messages

    @property
    def request(self) -> _RowMessage | None:
        return self._both()[0]

    @property
    def response(self) -> _RowMessage | None:
        return self._both()[1]

    def all_problems(self) -> list[str]:
        """None here (rows with problems are read from the spill: see :func:`make_matcher`)."""
        return []


class RowFacts:
    """The :class:`ExchangeFacts` attributes the fast fields read, from a stored row
    (each read when asked)."""

    __slots__ = ("exchange",)

    def __init__(self, store: ExchangeStore, row: int) -> None:
        self.exchange = RowExchange(store, row)

    def _facts(self, part: int) -> list[Any]:
        ex = self.exchange
        return list(ex._store.facts_table[ex._seg.facts[ex._i]][part])

    @property
    def topics(self) -> list[str]:
        return self._facts(F_TOPICS)

    @property
    def error_codes(self) -> list[int]:
        return self._facts(F_ERRORS)

    @property
    def partitions(self) -> list[int]:
        return self._facts(F_PARTITIONS)

    @property
    def groups(self) -> list[str]:
        return self._facts(F_GROUPS)

    @property
    def topic_ids(self) -> list[str]:
        return self._facts(F_TOPIC_IDS)

    @property
    def members(self) -> list[str]:
        return self._facts(F_MEMBERS)

    @property
    def transactional_ids(self) -> list[str]:
        return self._facts(F_TXNS)

    @property
    def producer_ids(self) -> list[int]:
        return self._facts(F_PRODUCERS)

    @property
    def has_records(self) -> bool:
        ex = self.exchange
        return ex._seg.records[ex._i] >= 0

    @property
    def record_count(self) -> int:
        ex = self.exchange
        return max(ex._seg.records[ex._i], 0)

    @property
    def request_bytes(self) -> int | None:
        ex = self.exchange
        size = ex._seg.req_bytes[ex._i]
        return size if size >= 0 else None

    @property
    def response_bytes(self) -> int | None:
        ex = self.exchange
        size = ex._seg.resp_bytes[ex._i]
        return size if size >= 0 else None

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


_SASL_FIELDS = frozenset({"sasl_mechanism", "sasl_user", "sasl_error"})


def is_screened(expression: str) -> bool:
    """True when the expression is not fast but every field it names is fast or
    screened: only the rows that may have a screened field are re-decoded."""
    named = fields_named(expression)
    return not named <= FAST_FIELDS and named <= FAST_FIELDS | SCREENED_FIELDS


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

    def fast(store: ExchangeStore, row: int) -> bool:
        try:
            return matches(RowFacts(store, row))  # type: ignore[arg-type]
        except KeyError:
            return False

    def slow(store: ExchangeStore, row: int) -> bool:
        ex = store.exchange(row)
        if ex is None:
            return False
        return matches(ExchangeFacts(ex, store.names))

    named = fields_named(expression)
    if named <= FAST_FIELDS:
        return flt, fast, True
    screened = named - FAST_FIELDS
    if is_screened(expression):
        problem = "problem" in screened
        sasl = bool(screened & _SASL_FIELDS)

        def screened_match(store: ExchangeStore, row: int) -> bool:
            loc = store.locate(row)
            if loc is None:
                return False
            seg, i = loc
            if (problem and seg.problems[i]) or (sasl and (
                    seg.api_key[i] in _SASL_APIS
                    or store.protocols[seg.protocol[i]] == _SASL_PROTOCOL)):
                return slow(store, row)
            return fast(store, row)
        return flt, screened_match, False
    return flt, slow, False

