"""Insights across exchanges: end-to-end record latency, consumer lag, rebalances and
producer health, joined from the exchanges of a whole capture.

:class:`InsightsCollector` consumes exchanges in the order the engine gives them (the
stream ``stats`` reads) and keeps bounded state (each part's module states its limits):

* :mod:`.membership` — which group a Fetch reads for;
* :mod:`.journey` — Produce → Fetch end-to-end latency per batch and group;
* :mod:`.lag` — high watermark minus committed offset / fetch position over time;
* :mod:`.rebalance` — generations, members, assignments, durations, triggers;
* :mod:`.producers` — retries, out-of-order sequences, duplicates, errors.

Worst case, with the defaults: ``limit`` (100,000) produced batches, early deliveries,
connections and clients, and 10,000 lag series of 128 samples, groups of 64
generations, producer/partition keys of 64 sequences — some hundreds of MB at most,
whatever the capture's size; typical captures need a few MB.

It only reads decoded bodies (decoding deferred ones when needed) and never changes an
exchange. It is not on the per-packet decode path: ``stats`` runs it (``--insights``),
as does anything that asks for it.
"""

from __future__ import annotations

from typing import Any

from kwsniff.output.insights.bodies import ensure_bodies, text
from kwsniff.output.insights.journey import Journeys
from kwsniff.output.insights.lag import LagTracker
from kwsniff.output.insights.membership import GROUP_APIS, Membership
from kwsniff.output.insights.producers import TXN_APIS, ProducerHealth
from kwsniff.output.insights.rebalance import Rebalances

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, TXN_OFFSET_COMMIT = 8, 28
REBALANCE_APIS = frozenset({11, 12, 13, 14})
WANTED = frozenset({PRODUCE, FETCH, LIST_OFFSETS}) | GROUP_APIS | frozenset(TXN_APIS)

# Tables whose entries hold series or lists have a smaller bound than ``limit``.
SMALL_TABLES = 10_000       # group/topic/partition lag series, groups, producer keys
LAG_SAMPLES = 128           # kept samples per lag series (halving beyond)
GENERATIONS_KEPT = 64       # generations kept per group
SEQUENCE_WINDOW = 64        # sequences remembered per producer/partition (retries of
#                             older batches than that are not recognised)

__all__ = ["InsightsCollector"]


class InsightsCollector:
    """Feed it exchanges with :meth:`add`; :meth:`report` gives the JSON-able result.

    ``names`` is the run's :class:`kwsniff.output.facts.TopicNames` (topic ids of
    Fetch v13+ are read through it when the decoder did not name them), ``context``
    the engine's annotate context (to decode deferred bodies)."""

    def __init__(self, names: Any = None, context: Any = None, limit: int = 100_000) -> None:
        self.names = names
        self.context = context
        small = max(1, min(limit, SMALL_TABLES))
        self.membership = Membership(limit)
        self.journeys = Journeys(limit)
        self.lag = LagTracker(small, capacity=LAG_SAMPLES)
        self.rebalances = Rebalances(small, keep=GENERATIONS_KEPT)
        self.producers = ProducerHealth(small, window=SEQUENCE_WINDOW)
        self.exchanges = 0

    def add(self, exchange: Any) -> None:
        key = exchange.api_key
        if key not in WANTED or exchange.protocol != "kafka":
            return
        self.exchanges += 1
        if self.context is not None:
            ensure_bodies(exchange, self.context)
        names = self.names
        if key == FETCH:
            group = self.membership.group_of(exchange)
            self.lag.fetch(exchange, group, names)
            self.journeys.fetch(exchange, group, names)
            self.producers.fetch(exchange, names)
        elif key == PRODUCE:
            self.journeys.produce(exchange, names)
            self.producers.produce(exchange, names)
        elif key == LIST_OFFSETS:
            self.lag.list_offsets(exchange, names)
        else:
            req = exchange.request
            group = text(req.body, "GroupId") if req is not None else None
            if group:
                self.membership.learn(exchange, group)
                if key in REBALANCE_APIS:
                    self.rebalances.feed(exchange, group)
                elif key in (OFFSET_COMMIT, TXN_OFFSET_COMMIT):
                    self.lag.commit(exchange, group, names)
            if key in TXN_APIS:
                self.producers.txn(exchange)

    def fetch_context(self, exchange: Any) -> tuple[str, int | None]:
        """``(group, current generation)`` a Fetch exchange is attributed to."""
        group = self.membership.group_of(exchange)
        return group, self.rebalances.generation_of(group)

    def report(self) -> dict[str, Any]:
        return {
            "end_to_end": self.journeys.report(),
            "lag": self.lag.report(),
            "rebalances": self.rebalances.report(),
            "producers": self.producers.report(),
        }
