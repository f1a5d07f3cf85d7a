"""Statistics: bounded latency percentiles, bounded top-N tables, the report."""

from __future__ import annotations

import random

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from builders import build, exchange, record_batch, request, response
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.stats import EXACT_SAMPLES, BoundedCounter, LatencySketch, StatsCollector, \
    render_report


def test_sketch_exact_for_small_series():
    s = LatencySketch()
    for v in (5.0, 1.0, 3.0, 2.0, 4.0):
        s.add(v)
    assert s.exact
    assert (s.quantile(0.5), s.quantile(0.9), s.quantile(1.0)) == (3.0, 5.0, 5.0)
    assert (s.min, s.max, s.count) == (1.0, 5.0, 5)
    assert LatencySketch().quantile(0.5) is None


def test_sketch_bounded_and_accurate_for_large_series():
    rng = random.Random(7)
    values = [rng.lognormvariate(1.0, 1.5) for _ in range(50_000)] + [0.0] * 100
    s = LatencySketch()
    for v in values:
        s.add(v)
    assert not s.exact
    assert len(s._buckets) < 3000          # memory bound: buckets, not samples
    ordered = sorted(values)
    for q in (0.5, 0.9, 0.99):
        true = ordered[max(1, -(-int(q * len(values) * 1000) // 1000)) - 1]
        est = s.quantile(q)
        assert abs(est - true) <= 0.011 * true, (q, est, true)
    assert s.max == max(values) and s.quantile(0.0) == 0.0
    assert EXACT_SAMPLES < 50_000


def test_bounded_counter_keeps_the_top():
    c = BoundedCounter(width=1, limit=100)
    for i in range(1000):
        c.row(f"small-{i}")[0] += 1
        if i % 10 == 0:
            c.row("big")[0] += 50
    assert len(c.data) <= 100
    assert c.approximate
    assert c.top(1)[0][0] == "big"


def test_collector_report_and_text():
    parts = [{"Index": 0, "Records": record_batch([b"x"] * 5)}]
    stats = StatsCollector()
    for i in range(3):
        req = request(build(ProduceRequest, 9, {
            "Acks": -1, "TimeoutMs": 1, "TopicData": [{"Name": "orders",
                                                       "PartitionData": parts}]}),
            client_id="p", correlation_id=i)
        resp = response(build(ProduceResponse, 9, {"Responses": [{"Name": "orders",
                                                                  "PartitionResponses": [
            {"Index": 0, "ErrorCode": 6 if i == 2 else 0}]}]}), req,
            ts=req.ts_last + (i + 1) / 1000)
        stats.add(ExchangeFacts(exchange(req, resp, index=i + 1, stream=0)))
    req = request(build(FetchRequest, 12, {"ReplicaId": -1, "MaxWaitMs": 1, "Topics": [
        {"Topic": "orders", "Partitions": [{"Partition": 0, "FetchOffset": 0}]}]}),
        client_id="c")
    resp = response(build(FetchResponse, 12, {"Responses": [{"Topic": "orders", "Partitions": [
        {"PartitionIndex": 0, "Records": record_batch([b"y"] * 7)}]}]}), req)
    stats.add(ExchangeFacts(exchange(req, resp, index=4, stream=1)))
    report = stats.report()
    produce = next(a for a in report["apis"] if a["api_name"] == "Produce")
    assert (produce["count"], produce["errors"], produce["api_version"]) == (3, 1, 9)
    # epoch-second floats carry ~0.2 µs of rounding
    assert abs(produce["latency_ms"]["p50"] - 2.0) < 1e-3
    assert abs(produce["latency_ms"]["max"] - 3.0) < 1e-3
    assert report["errors"] == [{"api_key": 0, "api_name": "Produce", "error_code": 6,
                                 "error_name": "NOT_LEADER_OR_FOLLOWER", "count": 1}]
    topic = report["topics"][0]
    assert (topic["topic"], topic["produced_records"], topic["fetched_records"]) == \
        ("orders", 15, 7)
    assert [c["client_id"] for c in report["clients"]] == ["p", "c"]
    assert [c["exchanges"] for c in report["connections"]] == [3, 1]
    text = "\n".join(render_report(report, title="t"))
    for heading in ("Requests and latency (ms) by API and version", "Errors by API and code",
                    "Top topics by records", "Top topics by bytes", "Top clients by exchanges",
                    "Connections (2) by exchanges"):
        assert heading in text
    assert "Produce v9" in text and "NOT_LEADER_OR_FOLLOWER" in text
