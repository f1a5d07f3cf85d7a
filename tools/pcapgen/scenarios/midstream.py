"""A capture that starts in the middle of established connections and inside a message.

Loopback is rate-limited (token bucket, 2 Mbit/s) so that a 256 KiB produce takes about
a second on the wire; tcpdump starts while it is in flight, after the producer and the
consumer group member had connected and exchanged traffic.
"""

from __future__ import annotations

import hashlib
import time

from ..brokers import MockCluster
from ..clients import RdkConsumer, RdkProducer
from ..context import ScenarioContext, ScenarioFailed
from ..netns import clear_rate_limit, set_rate_limit
from ..pcapcheck import client_flows, starts_at_logged_request
from ..payloads import order_json, random_bytes
from . import Scenario

PORT = 20092
TOPIC = "midstream"
GROUP = "midstream-group"
RATE = "2mbit"
BIG_SIZE = 256 * 1024
CAPTURE_DELAY = 0.35  # seconds after the big produce() before tcpdump starts


def run(ctx: ScenarioContext) -> None:
    with MockCluster([PORT]) as mock:
        ctx.manifest.add_broker(software=mock.software, version=mock.version, node_id=1,
                                host="127.0.0.1", port=PORT)
        ctx.node_ports["1"] = PORT
        mock.create_topic(TOPIC, 1)
        mock.set_group_initial_rebalance_delay(300)
        ctx.manifest.add_topic(TOPIC, 1, "mock API (rd_kafka_mock_topic_create)")
        bs = mock.bootstrap_servers
        set_rate_limit(RATE)
        ctx.rate_limit = f"tbf {RATE} on the namespace loopback (whole scenario)"
        try:
            prod = RdkProducer(ctx, bs, "midstream-producer", acks=-1, **{"linger.ms": 0})
            cons = RdkConsumer(ctx, bs, "midstream-consumer", **{
                "group.id": GROUP, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range"})
            # before the capture: connect, produce, join the group, consume
            for n in range(3):
                prod.produce(TOPIC, f"early-{n}".encode(), order_json(1000 + n), partition=0,
                             before_capture=True)
            prod.flush()
            cons.consumer.subscribe([TOPIC])
            cons.consume(3, timeout=40)
            for entry in ctx.manifest.data["consumed"]:
                entry["before_capture"] = True
            cons.consumer.commit(asynchronous=False)

            big = random_bytes(BIG_SIZE, seed=2024)
            big_entry = prod.produce(TOPIC, b"big-in-flight", big, partition=0,
                                     headers=[("sha256", hashlib.sha256(big).hexdigest()
                                               .encode())],
                                     before_capture=False, in_flight_at_capture_start=True)
            time.sleep(CAPTURE_DELAY)
            ctx.start_capture([PORT], mid_stream=True)
            if big_entry["offset"] is not None:
                raise ScenarioFailed("the big message was delivered before tcpdump started")

            for n in range(2):
                prod.produce(TOPIC, f"late-{n}".encode(), order_json(1100 + n), partition=0,
                             before_capture=False)
            prod.flush(60)
            n_before = len(ctx.manifest.data["consumed"])
            cons.consume(3, timeout=60)
            for entry in ctx.manifest.data["consumed"][n_before:]:
                entry["before_capture"] = False
            committed = cons.consumer.commit(asynchronous=False)
            cons.linger(1.0)
            cons.close()
            prod.close()
            ctx.stop_capture()
        finally:
            clear_rate_limit()
        ctx.manifest.add_group(GROUP, ["midstream-consumer"],
                               [{"topic": tp.topic, "partition": tp.partition,
                                 "offset": tp.offset} for tp in committed or []])
        ctx.manifest.note(
            "tcpdump started about 0.35 s after the 256 KiB produce() call, while the "
            "ProduceRequest was still on the (2 Mbit/s) wire: the capture has no SYN for "
            "either connection and the producer's first captured bytes are in the middle "
            "of that request; produced/consumed entries carry before_capture, and requests "
            "logged before the capture started have in_capture=false")
        ctx.post_processors.append(lambda doc: verify(ctx, doc))


def verify(ctx: ScenarioContext, doc: dict) -> None:
    """The capture must start mid-connection and inside a large message."""
    flows = client_flows(ctx.pcap_tmp, [PORT])
    if any(f.saw_syn for f in flows):
        raise ScenarioFailed("a connection was opened during the capture")
    inside = [f for f in flows if f.payload_bytes >= 64 * 1024
              and not starts_at_logged_request(f, doc["requests"])]
    if not inside:
        raise ScenarioFailed("the capture does not begin inside a large message")
    big = max((r for r in doc["requests"] if r["client_id"] == "midstream-producer"
               and r["api_name"] == "Produce"), key=lambda r: r["size"] or 0)
    big["partially_in_capture"] = True
    doc["capture"]["in_flight_at_start"] = {
        "client_id": big["client_id"], "api_name": big["api_name"],
        "api_version": big["api_version"], "correlation_id": big["correlation_id"],
        "size": big["size"]}


SCENARIOS = [
    Scenario("midstream",
             "capture started mid-connection, inside a 256 KiB ProduceRequest in flight "
             "(librdkafka producer + consumer group member, librdkafka mock cluster)", run),
]
