"""Glue between the engine's exchanges and the output views (sans-IO).

Contract:

* :class:`Selection` turns an iterable of exchanges into ``(exchange, facts)`` pairs of
  those that pass the display filter, stopping after ``count`` of them; it counts what
  it saw (``seen``, ``shown``, ``problems``) and shares one
  :class:`~kwsniff.output.facts.TopicNames` map across the run. ``decode``, ``export``,
  ``stats``, ``live`` and the TUI use it the same way. ``lean`` (for output that does
  not read the facts, e.g. the -V tree) makes the facts count record-set problems
  without walking bodies that cannot teach topic names (the same counts and names).
  ``lane`` (a :class:`~kwsniff.output.skim.SummaryLane`, summary lines without a
  display filter only) gives the facts of exchanges with deferred bodies where it can
  and completes those bodies where it cannot. Without a lane, ``deferred`` (the run's
  annotate context, set when the engine defers bodies: ``EngineOptions.defer_bodies``)
  makes it complete each exchange's deferred bodies as it selects it, so a body is
  decoded only once its exchange leaves the engine's reorder buffer (what that buffer
  holds is the raw frames, not decoded record sets). A display filter naming run-state fields
  (``DisplayFilter.run_fields``: end-to-end latency, consumer group) makes it run the
  whole-run insights pass (:mod:`kwsniff.output.insights.annotate`) over the exchanges
  first; no other filter does.
* :func:`run_counters` collects the run summary every command reports at its end
  (packets, connections, exchanges, problems, skipped and lost bytes) from the engine's
  ``RunSummary``, the capture's problems and the exchanges' problems;
  :func:`run_summary_line` is its one-line text (and the hints after it: TLS without
  keys, a capture of one direction only, :func:`one_direction_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kwsniff.kafka.decoding import complete
from kwsniff.kafka.model import ORPHAN_RESPONSE, PAIRED, UNANSWERED, Exchange
from kwsniff.output.facts import ExchangeFacts, TopicNames
from kwsniff.output.filter import DisplayFilter
from kwsniff.text import counted


class Selection:
    """Filter and count exchanges; see the module contract."""

    __slots__ = ("filter", "lean", "lane", "deferred", "count", "names", "seen", "shown",
                 "problems")

    def __init__(self, display_filter: DisplayFilter | None = None, count: int | None = None,
                 names: TopicNames | None = None, lean: bool = False) -> None:
        self.filter = display_filter
        self.lean = lean
        self.lane: Any = None      # a kwsniff.output.skim.SummaryLane (summary lines)
        self.deferred: Any = None  # the annotate context completing deferred bodies
        self.count = count
        self.names = names if names is not None else TopicNames()
        self.seen = 0
        self.shown = 0
        self.problems = 0        # problems of all exchanges seen (not only shown ones),
        #                          record-set problems included

    def __call__(self, exchanges: Iterable[Exchange]) -> Iterator[tuple[Exchange, ExchangeFacts]]:
        flt = self.filter
        matches = flt.matches if flt is not None else None
        if flt is not None and flt.run_fields:
            # run-state fields: the whole-run insights pass annotates the exchanges
            # (only for such filters: it is not on the per-exchange path otherwise)
            from kwsniff.output.insights.annotate import annotate_run
            lane = self.lane
            exchanges = annotate_run(exchanges, flt.annotations, flt.run_fields, self.names,
                                     lane.annotate_ctx if lane is not None else self.deferred)
        limit = self.count
        for ex in exchanges:
            if limit is not None and self.shown >= limit:
                return
            facts = self.select(ex, matches)
            if facts is not None:
                yield ex, facts

    def select(self, ex: Exchange, matches: Any) -> Any:
        """Count ``ex`` and return its facts when it is shown (None: ``matches``, the
        display filter's test, rejected it)."""
        self.seen += 1
        req, resp = ex.request, ex.response
        # (the lane completes deferred bodies first where it declines)
        facts = None
        lane = self.lane
        if lane is not None:
            if matches is None:
                facts = lane.facts(ex)
            else:       # a filter reads the full facts
                lane.complete(ex)
        elif self.deferred is not None:
            complete(ex, self.deferred)
        if ex.problems or (req is not None and req.problems) or \
                (resp is not None and resp.problems):
            self.problems += len(ex.all_problems())
        if facts is None:
            facts = ExchangeFacts(ex, self.names, lean=self.lean)
        # batch header and CRC checks of the record sets: problems every mode
        # (summary line, -V tree, export) lists with the exchange
        self.problems += facts.record_problems
        if matches is not None:
            if not matches(facts):
                # Topic ids learnt from filtered-out exchanges still help later ones.
                if resp is not None and ex.api_key in (3, 19, 20, 75):
                    facts.topics  # noqa: B018 - walks the body, learning ids
                return None
        self.shown += 1
        return facts


def run_counters(summary: Any, capture_problems: Iterable[str] = (),
                 exchange_problems: int = 0) -> dict[str, Any]:
    """The counters of one run (see :data:`kwsniff.output.jsonl.SUMMARY_COUNTERS`;
    ``not_kafka`` is the engine's list of connections not recognised as Kafka)."""
    get = (lambda name: getattr(summary, name, 0) or 0) if summary is not None else \
        (lambda name: 0)
    run_problems = len(getattr(summary, "problems", []) or []) + get("problems_dropped")
    statuses = getattr(summary, "exchanges", None)
    if not isinstance(statuses, dict):
        statuses = {}
    return {
        "packets": int(get("packets")),
        "connections": int(get("kafka_connections")),
        "exchanges": int(get("exchanges_total")),
        "problems": int(exchange_problems + run_problems + len(list(capture_problems))),
        "frame_bytes": int(get("frame_bytes")),
        "skipped_bytes": int(get("skipped_bytes")),
        "gap_bytes": int(get("gap_bytes")),
        # TLS connections on a Kafka port that no key decrypted (the end hint)
        "tls_undecrypted": int(get("tls_undecrypted")),
        "not_kafka_connections": int(get("not_kafka_connections")),
        "not_kafka_bytes": int(get("not_kafka_bytes")),
        # TCP payload bytes of TLS connections (in TLS records), not in the four above
        "tls_bytes": int(get("tls_bytes")),
        "tls_decrypted_bytes": int(get("tls_decrypted_bytes")),
        "tls_undecrypted_bytes": int(get("tls_undecrypted_bytes")),
        "tls_gap_bytes": int(get("tls_gap_bytes")),
        "not_kafka": list(getattr(summary, "not_kafka", None) or []),
        # exchanges by status (the one-direction hint, :func:`one_direction_text`)
        "paired": int(statuses.get(PAIRED, 0)),
        "unanswered": int(statuses.get(UNANSWERED, 0)),
        "orphan_responses": int(statuses.get(ORPHAN_RESPONSE, 0)),
    }


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1000 else \
        f"{n / 1000:.3g} KB" if n < 1_000_000 else f"{n / 1e6:.3g} MB"


def not_kafka_text(counters: dict[str, Any]) -> str | None:
    """``"2 TCP connections not recognised as Kafka (161 KB; 127.0.0.1:20092,
    10.0.0.5:8080); try -p 20092"`` (largest first), or None when there are none."""
    n = counters.get("not_kafka_connections") or 0
    if not n:
        return None
    rows = counters.get("not_kafka") or []
    servers: list[str] = []
    ports: list[str] = []
    for row in rows:
        server = row["server"]
        if server not in servers:
            servers.append(server)
        port = server.rsplit(":", 1)[-1]
        if port not in ports:
            ports.append(port)
    shown = ", ".join(servers[:3]) + (", ..." if len(servers) > 3 else "")
    inside = _size(int(counters.get("not_kafka_bytes") or 0)) + (f"; {shown}" if shown else "")
    text = f"{n} TCP connection{'s' if n != 1 else ''} not recognised as Kafka ({inside})"
    if ports:
        text += "; try " + " ".join(f"-p {p}" for p in ports[:3])
    return text


def run_summary_line(counters: dict[str, int], shown: int | None = None,
                     what: str = "shown") -> str:
    """``"51 exchanges (51 shown) in 9 connections, 173 packets; 12 problems; ..."``."""
    parts = [f"{counters['exchanges']} exchange{'s' if counters['exchanges'] != 1 else ''}"
             + (f" ({shown} {what})" if shown is not None else "")
             + f" in {counters['connections']} Kafka connection"
             + ("s" if counters["connections"] != 1 else "")
             + f", {counters['packets']} packets",
             f"{counters['problems']} problem{'s' if counters['problems'] != 1 else ''}",
             f"{counted(counters['skipped_bytes'], 'byte')} skipped",
             f"{counted(counters['gap_bytes'], 'byte')} lost in gaps"]
    other = not_kafka_text(counters)
    if other is not None:
        parts.append(other)
    line = "; ".join(parts)
    n = counters.get("tls_undecrypted", 0)
    if n:
        line += (f"\n{n} TLS connection{'s' if n != 1 else ''} not decrypted "
                 "(no key for them): use --tls-keylog")
    hint = one_direction_text(counters)
    if hint is not None:
        line += "\n" + hint
    return line


def one_direction_text(counters: dict[str, Any]) -> str | None:
    """The hint for a capture that seems to hold one direction of its Kafka traffic
    only (a mirrored port's one side, an asymmetric route): requests and not a single
    response, or responses (decoded without their requests) and not a single request;
    None otherwise, and for fewer than two such exchanges."""
    if counters.get("paired", 0):
        return None
    unanswered = counters.get("unanswered", 0)
    orphans = counters.get("orphan_responses", 0)
    if unanswered >= 2 and not orphans:
        return (f"no broker response in the capture ({unanswered} requests unanswered): "
                "it may hold the clients' direction only")
    if orphans >= 2 and not unanswered:
        return (f"no client request in the capture ({orphans} responses without theirs): "
                "it may hold the brokers' direction only")
    return None
