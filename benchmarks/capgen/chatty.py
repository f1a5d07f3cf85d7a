"""Chatty: >= 1,000,000 small packets from many clients.

24 librdkafka producers send ``messages`` small seeded JSON records with acks=1,
linger.ms=0 and at most one message per partition batch, paced so nearly every
message is its own small ProduceRequest, and refresh metadata every 2 s. 12 consumers
in 3 groups subscribe to the same four 6-partition topics of a 3-broker librdkafka mock
cluster while the producers run (and ``linger_s`` seconds more): short fetch waits,
200 ms heartbeats and auto-commits (OffsetCommit) every 200 ms, so the capture is
dominated by small requests and responses. The records the consumers get depend on
timing; the records produced do not.
"""

from __future__ import annotations

import random
import time
from typing import Any

from .apicaps import CappedMockCluster as MockCluster
from pcapgen.payloads import order_json

from .clients import Delivery, Seen, consumer, produce, producer
from .session import ScenarioError

NAME = "chatty"
PORTS = [39092, 39093, 39094]
PARAMS: dict[str, Any] = {"messages": 300_000, "rate": 4000, "producers": 24,
                          "consumers": 12, "groups": 3, "topics": 4, "partitions": 6,
                          "linger_s": 5.0, "seed": 1000}
DESCRIPTION = __doc__.split("\n\n")[0]
#: generous: on a loaded machine the clients and the mock fall behind the pacing
FLUSH_TIMEOUT = 600.0


def progress(produced: int, delivered: int, consumed: int, start: float) -> None:
    print(f"chatty: {time.monotonic() - start:6.1f} s: {produced} produced, {delivered} "
          f"delivered, {consumed} consumed", flush=True)


def run(session_factory) -> dict[str, Any]:
    pr = PARAMS
    n, rate = pr["messages"], pr["rate"]
    rng = random.Random(pr["seed"])
    with MockCluster(PORTS) as mock:
        mock.cap_api_versions()
        topics = [f"chatty-{t}" for t in range(pr["topics"])]
        for t in topics:
            mock.create_topic(t, pr["partitions"], leaders=[1 + p % 3 for p in
                                                            range(pr["partitions"])])
        mock.set_group_initial_rebalance_delay(200)
        bs = mock.bootstrap_servers
        delivery = Delivery()
        seen = Seen()
        with session_factory(PORTS) as session:
            readers = [consumer(bs, f"chatty-consumer-{k}", **{
                "group.id": f"chatty-group-{k % pr['groups']}",
                "auto.offset.reset": "earliest", "enable.auto.commit": True,
                "auto.commit.interval.ms": 200, "heartbeat.interval.ms": 200,
                "session.timeout.ms": 10000, "fetch.wait.max.ms": 20,
                "topic.metadata.refresh.interval.ms": 2000,
                "partition.assignment.strategy": "roundrobin"})
                for k in range(pr["consumers"])]
            for c in readers:
                c.subscribe(topics)
            producers = [producer(bs, f"chatty-producer-{k}", **{
                "acks": 1, "linger.ms": 0, "batch.num.messages": 1,
                "max.in.flight.requests.per.connection": 1,
                "topic.metadata.refresh.interval.ms": 2000, "compression.type": "none"})
                for k in range(pr["producers"])]
            start = time.monotonic()
            for i in range(n):
                k = i % len(producers)
                key = f"user-{rng.randrange(10_000):05d}".encode()
                produce(producers[k], topics[i % len(topics)], key, order_json(i), delivery)
                if k == len(producers) - 1:
                    for p in producers:
                        p.poll(0)
                    seen.drain(readers, 0.0, 500)
                    ahead = (i + 1) / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
                if i % 25_000 == 24_999:
                    progress(i + 1, delivery.ok, len(seen.offsets), start)
            for p in producers:
                if p.flush(FLUSH_TIMEOUT):
                    raise ScenarioError("producer flush timed out")
            delivery.check(n)
            # consumers keep fetching, heartbeating and committing a little longer; they
            # need not catch up (the mock returns one message set per partition and
            # fetch, so they trail the producers)
            linger_until = time.monotonic() + pr["linger_s"]
            while time.monotonic() < linger_until:
                seen.drain(readers, 0.1, 2000)
            progress(n, delivery.ok, len(seen.offsets), start)
            for p in producers:
                p.close()
            for c in readers:
                c.close()
            if not seen.offsets:
                raise ScenarioError("the consumers received no record")
        facts = session.facts()
    facts.update({"records_produced": n, "records_consumed_distinct": len(seen.offsets),
                  "clients": pr["producers"] + pr["consumers"],
                  "produce_seconds": round(time.monotonic() - start, 1)})
    return facts
