"""Bounded memory and odd input for the insights collector (crafted exchanges), and
the ``stats --insights`` command on a real capture."""

from __future__ import annotations

import json
import random

import pytest
from insights_run import PCAPS, insights_of

from kwsniff.cli import main
from kwsniff.kafka.model import PAIRED, Exchange, KafkaMessage
from kwsniff.output.insights import InsightsCollector
from kwsniff.output.insights.membership import Membership
from kwsniff.output.insights.series import Series


def test_series_keeps_an_even_bounded_picture():
    s = Series(capacity=8)
    for i in range(1000):
        s.add(i)
    kept = s.all()
    assert len(kept) <= 9 and kept[0] == 0 and kept[-1] == 999
    steps = {b - a for a, b in zip(kept, kept[1:-1])}
    assert len(steps) == 1 and s.decimated


def test_a_client_in_two_groups_is_not_attributed_to_either():
    m = Membership()

    def ex(stream, client_id, port):
        return Exchange(1, stream, ("10.0.0.1", port), ("10.0.0.2", 9092), PAIRED,
                        request=KafkaMessage("request", b"", api_key=1, client_id=client_id))
    m.learn(ex(1, "app", 5000), "g1")
    assert m.group_of(ex(7, "app", 5001)) == "g1"         # same client, fetch connection
    m.learn(ex(2, "app", 5002), "g2")
    assert m.group_of(ex(7, "app", 5001)) == "client app"  # ambiguous now
    assert m.group_of(ex(2, "app", 5002)) == "g2"          # its own connection still knows
    assert m.group_of(ex(9, "other", 5003)) == "client other"


def test_limits_bound_the_join_tables_and_say_so():
    full = insights_of("insights-groups")
    small = insights_of("insights-groups", limit=5)
    e2e = small["end_to_end"]
    assert e2e["dropped"]["produced_batches"] == full["end_to_end"]["produced_batches"] - 5
    assert sum(r["batches"] for r in e2e["by_partition"]) < \
        sum(r["batches"] for r in full["end_to_end"]["by_partition"])
    assert len(small["lag"]) <= 5


def _message(kind, api_key, version, body, ts):
    return KafkaMessage(kind, b"", api_key=api_key, api_version=version, correlation_id=1,
                        client_id="c" if kind == "request" else None, body=body,
                        ts_first=ts, ts_last=ts)


@pytest.mark.parametrize("api_key", [0, 1, 2, 8, 11, 12, 13, 14, 22, 24, 26, 28])
def test_odd_bodies_never_raise(api_key):
    rnd = random.Random(api_key)
    odd = [None, {}, {"Topics": "x"}, {"Topics": [None, 3, {"Partitions": [{}]}]},
           {"TopicData": [{"Name": 3, "PartitionData": [{"Index": "0", "Records": b"zz"}]}]},
           {"Responses": [{"Topic": "t", "Partitions": [{"PartitionIndex": 0,
                                                          "Records": object()}]}]},
           {"GroupId": "g", "MemberId": 5, "GenerationId": "x", "Members": [{}],
            "Assignments": [{"MemberId": "m", "_decoded_Assignment": {"data": 3}}]},
           {"GroupId": "g", "ErrorCode": True, "ProducerId": -5, "Results": [[]]}]
    collector = InsightsCollector()
    for i in range(200):
        req = _message("request", api_key, rnd.randint(0, 12), rnd.choice(odd), i)
        resp = rnd.choice([None, _message("response", api_key, req.api_version,
                                          rnd.choice(odd), i + 0.5)])
        collector.add(Exchange(i + 1, i % 3, ("10.0.0.1", 5000), ("10.0.0.2", 9092),
                               PAIRED, request=req, response=resp))
    report = collector.report()
    json.dumps(report, default=str)


def test_stats_insights_text_and_json(capsys):
    pcap = str(PCAPS / "insights-groups.pcap")
    assert main(["stats", "--insights", pcap]) == 0
    text = capsys.readouterr().out
    for heading in ("End-to-end latency (ms)", "Consumer lag", "Rebalances",
                    "Producer health"):
        assert heading in text
    assert "left: fast-1 (LeaveGroup)" in text and "joined: fast-2" in text
    assert main(["stats", "--insights", "--json", pcap]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["insights"]) == {"end_to_end", "lag", "rebalances", "producers"}
    # -Y restricts the ordinary statistics, not the joins
    assert main(["stats", "--insights", "--json", "-Y", "api == Heartbeat", pcap]) == 0
    filtered = json.loads(capsys.readouterr().out)
    assert filtered["exchanges"] < report["exchanges"]
    assert filtered["insights"]["end_to_end"]["by_partition"] == \
        report["insights"]["end_to_end"]["by_partition"]
    assert main(["stats", "--json", pcap]) == 0
    assert "insights" not in json.loads(capsys.readouterr().out)


def test_merged_sketches_keep_exact_and_estimated_percentiles():
    from kwsniff.output.stats import EXACT_SAMPLES, LatencySketch
    small, big, into = LatencySketch(), LatencySketch(), LatencySketch()
    for v in (1.0, 2.0, 3.0):
        small.add(v)
    for i in range(EXACT_SAMPLES + 10):        # beyond the exact samples: bucketed
        big.add(10.0 + i % 100)
    into.merge(small)
    assert into.exact and into.quantile(0.5) == 2.0
    into.merge(big)
    assert not into.exact and into.count == 3 + EXACT_SAMPLES + 10
    assert into.min == 1.0 and into.max == big.max
    assert abs(into.quantile(0.99) - big.quantile(0.99)) <= 0.02 * big.quantile(0.99)
