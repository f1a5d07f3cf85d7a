"""End-to-end record latency: Produce responses joined with the Fetch responses that
return the same offsets.

Contract:

* A *produced batch* is one record batch of a Produce request whose partition
  response carries no error and a base offset: it holds the offsets
  ``[BaseOffset, BaseOffset + records)`` of its topic/partition, its *produce time*
  (the capture time of the Produce request's first byte: when the producer sent it)
  and its acknowledgement time (the response's last byte).
* A *delivery* is a record batch in a Fetch response partition, to the group of the
  fetching connection (:mod:`.membership`), at the *delivery time*: the capture time
  of the Fetch response's last byte (when the consumer had it).
* The end-to-end latency of a produced batch for a group is delivery time minus
  produce time, counted once per batch and group: the first delivery (later fetches
  of the same offsets, e.g. after a rebalance, are counted as re-deliveries).
  Batches are matched by base offset (brokers store batches as produced).
* Exchanges arrive in capture order of their requests, so a long-polling Fetch can
  come before the Produce it returns: deliveries of offsets not produced yet wait in a
  bounded table and are matched when the Produce arrives; at the end the ones left are
  *records produced before the capture* (or by a Produce not seen).
* Produced batches never delivered to any group are counted per topic/partition;
  per group, the records of partitions the group fetched that it was never given.
* Memory: at most ``limit`` produced batches and ``limit`` waiting deliveries are
  kept (oldest first out; the ones dropped are counted and the report says so);
  latencies go to :class:`kwsniff.output.stats.LatencySketch` (bounded).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kwsniff.output.insights.bodies import (
    batch_span,
    batches,
    integer,
    topic_partitions,
)
from kwsniff.output.stats import LatencySketch

PRODUCE = 0
FETCH = 1


class Produced:
    __slots__ = ("topic", "partition", "base", "end", "records", "produce_ts", "ack_ts",
                 "client_id", "correlation_id", "delivered")

    def __init__(self, topic: str, partition: int, base: int, end: int, records: int,
                 produce_ts: float, ack_ts: float, client_id: str | None,
                 correlation_id: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.base = base
        self.end = end
        self.records = records
        self.produce_ts = produce_ts
        self.ack_ts = ack_ts
        self.client_id = client_id
        self.correlation_id = correlation_id
        self.delivered: dict[str, float] | None = None   # group -> first delivery ts


class Journeys:
    """Joins produced batches with deliveries; see the module contract."""

    def __init__(self, limit: int = 100_000, keep_samples: int = 4096) -> None:
        self.limit = limit
        self.keep_samples = keep_samples
        self.produced: OrderedDict[tuple[str, int, int], Produced] = OrderedDict()
        # (topic, partition, base) -> {group: (delivery ts, records, fetching exchange)}
        self.waiting: OrderedDict[tuple[str, int, int], dict[str, tuple[float, int, Any]]] = \
            OrderedDict()
        self.latency: dict[tuple[str, str, int], LatencySketch] = {}
        self.records_delivered: dict[tuple[str, str, int], int] = {}
        self.redeliveries: dict[str, int] = {}
        self.fetched_partitions: dict[str, set[tuple[str, int]]] = {}
        self.dropped_produced = 0
        self.dropped_produced_undelivered = 0
        self.dropped_waiting = 0
        self.undelivered_dropped: dict[tuple[str, int], int] = {}
        self.produced_batches = 0
        self.produced_records = 0
        #: per-batch samples for tests and --json (first ``keep_samples``)
        self.samples: list[dict[str, Any]] = []
        #: e2e latency (ms) of the batches of the Fetch exchange last fed
        self.last_fetch_latencies: list[float] = []
        #: called as ``on_deliver(fetch exchange index, latency ms)`` at every first
        #: delivery of a batch to a group, also when a waiting delivery is matched later
        self.on_deliver: Any = None

    # -- feeding ---------------------------------------------------------------------
    def produce(self, exchange: Any, names: Any) -> None:
        req, resp = exchange.request, exchange.response
        if req is None or resp is None or not isinstance(req.body, dict) \
                or not isinstance(resp.body, dict):
            return
        acked: dict[tuple[str, int], int] = {}
        for topic, part, pr in topic_partitions(resp.body, "Responses", "PartitionResponses",
                                                names):
            base = integer(pr, "BaseOffset")
            if (integer(pr, "ErrorCode") or 0) == 0 and base is not None and base >= 0:
                acked[(topic, part)] = base
        if not acked:
            return
        for topic, part, pd in topic_partitions(req.body, "TopicData", "PartitionData", names):
            base = acked.get((topic, part))
            if base is None:
                continue
            for batch in batches(pd.get("Records")):
                span = batch_span(batch)
                if span is None:
                    continue
                count = span[1] - span[0]       # offsets this batch takes in the log
                self._add_produced(Produced(topic, part, base, base + count, span[2],
                                            req.ts_first, resp.ts_last, exchange.client_id,
                                            exchange.correlation_id))
                base += count

    def _add_produced(self, p: Produced) -> None:
        key = (p.topic, p.partition, p.base)
        self.produced_batches += 1
        self.produced_records += p.records
        self.produced[key] = p
        waiting = self.waiting.pop(key, None)
        if waiting:
            for group, (ts, _n, ex) in waiting.items():
                self._deliver(p, group, ts, ex)
        while len(self.produced) > self.limit:
            _, old = self.produced.popitem(last=False)
            self.dropped_produced += 1
            if not old.delivered:
                self.dropped_produced_undelivered += old.records
                k = (old.topic, old.partition)
                self.undelivered_dropped[k] = self.undelivered_dropped.get(k, 0) + old.records

    def fetch(self, exchange: Any, group: str, names: Any) -> None:
        self.last_fetch_latencies = []
        resp = exchange.response
        if resp is None or not isinstance(resp.body, dict):
            return
        ts = resp.ts_last
        fetched = self.fetched_partitions.setdefault(group, set())
        for topic, part, pd in topic_partitions(resp.body, "Responses", "Partitions", names):
            fetched.add((topic, part))
            for batch in batches(pd.get("Records")):
                if getattr(batch, "control", False):
                    continue
                span = batch_span(batch)
                if span is None:
                    continue
                key = (topic, part, span[0])
                p = self.produced.get(key)
                if p is not None:
                    self._deliver(p, group, ts, exchange)
                    continue
                waiting = self.waiting.get(key)
                if waiting is None:
                    waiting = self.waiting[key] = {}
                    while len(self.waiting) > self.limit:
                        self.waiting.popitem(last=False)
                        self.dropped_waiting += 1
                waiting.setdefault(group, (ts, span[2], (exchange.client_id,
                                                         exchange.correlation_id,
                                                         exchange.index)))

    def _deliver(self, p: Produced, group: str, ts: float, fetch: Any) -> None:
        if p.delivered is None:
            p.delivered = {}
        if group in p.delivered:
            self.redeliveries[group] = self.redeliveries.get(group, 0) + 1
            return
        p.delivered[group] = ts
        ms = (ts - p.produce_ts) * 1000.0
        key = (group, p.topic, p.partition)
        sketch = self.latency.get(key)
        if sketch is None:
            sketch = self.latency[key] = LatencySketch()
        sketch.add(ms)
        self.records_delivered[key] = self.records_delivered.get(key, 0) + p.records
        self.last_fetch_latencies.append(ms)
        if self.on_deliver is not None:
            self.on_deliver(fetch[2] if isinstance(fetch, tuple) else fetch.index, ms)
        if len(self.samples) < self.keep_samples:
            if not isinstance(fetch, tuple):
                fetch = (fetch.client_id, fetch.correlation_id)
            self.samples.append({"group": group, "topic": p.topic, "partition": p.partition,
                                 "base_offset": p.base, "records": p.records,
                                 "producer": p.client_id,
                                 "produce_correlation_id": p.correlation_id,
                                 "consumer": fetch[0], "fetch_correlation_id": fetch[1],
                                 "produce_ts": p.produce_ts, "ack_ts": p.ack_ts,
                                 "delivery_ts": ts, "latency_ms": round(ms, 3)})

    # -- report ----------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        rows = []
        for (group, topic, part), sk in sorted(self.latency.items()):
            rows.append({"group": group, "topic": topic, "partition": part,
                         "batches": sk.count,
                         "records": self.records_delivered.get((group, topic, part), 0),
                         **_quantiles(sk)})
        by_group: dict[tuple[str, str], LatencySketch] = {}
        for (group, topic, _part), sk in self.latency.items():
            merged = by_group.setdefault((group, topic), LatencySketch())
            merged.merge(sk)
        topics = [{"group": g, "topic": t, "batches": sk.count, **_quantiles(sk)}
                  for (g, t), sk in sorted(by_group.items())]
        never: dict[tuple[str, int], int] = dict(self.undelivered_dropped)
        per_group_missing: dict[str, int] = {}
        for p in self.produced.values():
            if not p.delivered:
                k = (p.topic, p.partition)
                never[k] = never.get(k, 0) + p.records
            for group, parts in self.fetched_partitions.items():
                if (p.topic, p.partition) in parts and not (p.delivered and group in p.delivered):
                    per_group_missing[group] = per_group_missing.get(group, 0) + p.records
        before = sum(n for w in self.waiting.values() for (_ts, n, _ex) in w.values())
        return {
            "produced_batches": self.produced_batches,
            "produced_records": self.produced_records,
            "by_partition": rows,
            "by_topic": topics,
            "never_fetched": [{"topic": t, "partition": p, "records": n}
                              for (t, p), n in sorted(never.items())],
            "never_fetched_records": sum(never.values()),
            "not_delivered_to_group": per_group_missing,
            "redeliveries": dict(sorted(self.redeliveries.items())),
            "fetched_not_produced_in_capture_records": before,
            "dropped": {"produced_batches": self.dropped_produced,
                        "waiting_deliveries": self.dropped_waiting},
            "samples": self.samples,
        }


def _quantiles(sk: LatencySketch) -> dict[str, Any]:
    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 3)
    return {"p50_ms": r(sk.quantile(0.5)), "p90_ms": r(sk.quantile(0.9)),
            "p99_ms": r(sk.quantile(0.99)), "max_ms": r(sk.max), "min_ms": r(sk.min),
            "exact": sk.exact}

