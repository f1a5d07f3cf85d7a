"""Mixed: a minute of ordinary traffic, ~2.5 MB/s of every kind of request (~150 MB).

Five librdkafka producers, each with its own topic and habits, send ``messages``
seeded records paced at ``rate`` records/s, each record going to a producer drawn by
weight: small JSON orders (no codec, acks=1, linger 5 ms), small binary metrics (snappy,
linger 10 ms), text log lines (gzip, acks=all, linger 50 ms), medium events (lz4,
linger 20 ms, idempotent: InitProducerId) and a few 8-64 KiB blobs (zstd, acks=all,
1 MB batches, linger 100 ms). Two consumer groups subscribe to every topic ("analytics":
3 consumers, round-robin; "billing": 2, range), with 1 s heartbeats and auto-commits,
and a group-less tail consumer assigned to the ends of the orders partitions
(ListOffsets) reads along; a fourth analytics consumer joins at 40 % of the run and a
billing consumer leaves at 70 % (JoinGroup / SyncGroup / LeaveGroup rebalances). Every
client refreshes metadata every 10 s. A 3-broker librdkafka mock cluster with API
versions capped for tshark 4.0 (``apicaps.py``); the loopback keeps its default 64 KiB
MTU, as on a host where one captures ``lo``, so frames carry up to 64 KiB (the other
two captures use Ethernet-sized frames).
"""

from __future__ import annotations

import random
import time
from typing import Any, Iterator

from confluent_kafka import OFFSET_END, TopicPartition
from .apicaps import CappedMockCluster as MockCluster
from pcapgen.payloads import order_json, repetitive_text

from .clients import Delivery, Seen, consumer, produce, producer
from .session import ScenarioError

NAME = "mixed"
PORTS = [49092, 49093, 49094]
#: producer profile -> (weight, librdkafka settings); the topic is ``mixed-<profile>``
PROFILES: dict[str, tuple[int, dict[str, Any]]] = {
    "orders": (35, {"compression.type": "none", "acks": 1, "linger.ms": 5}),
    "metrics": (25, {"compression.type": "snappy", "acks": 1, "linger.ms": 10}),
    "logs": (20, {"compression.type": "gzip", "acks": -1, "linger.ms": 50,
                  "batch.size": 262_144}),
    "events": (17, {"compression.type": "lz4", "acks": -1, "linger.ms": 20,
                    "enable.idempotence": True}),
    "blobs": (3, {"compression.type": "zstd", "acks": -1, "linger.ms": 100,
                  "batch.size": 1_000_000, "message.max.bytes": 8 << 20}),
}
PARAMS: dict[str, Any] = {"messages": 37_500, "rate": 625, "partitions": 6,
                          "analytics_consumers": 3, "billing_consumers": 2,
                          "join_at": 0.4, "leave_at": 0.7, "linger_s": 5.0,
                          "catch_up_s": 30.0, "loopback_mtu": 65536, "seed": 4100,
                          "profiles": {k: w for k, (w, _c) in PROFILES.items()}}
LOOPBACK_MTU = PARAMS["loopback_mtu"]
DESCRIPTION = __doc__.split("\n\n")[0]
FLUSH_TIMEOUT = 300.0
#: every consumer: 1 s heartbeats and auto-commits, 10 s metadata refresh
CONSUMER_CONF = {"auto.offset.reset": "earliest", "enable.auto.commit": True,
                 "auto.commit.interval.ms": 1000, "heartbeat.interval.ms": 1000,
                 "session.timeout.ms": 10000, "fetch.wait.max.ms": 100,
                 "topic.metadata.refresh.interval.ms": 10000}


def records(n: int, seed: int) -> Iterator[tuple[int, str, bytes | None, bytes,
                                                 list[tuple[str, bytes]] | None]]:
    """``(index, profile, key, value, headers)`` for ``n`` records; same seed, same
    records (the profile is drawn by the weights of :data:`PROFILES`)."""
    rng = random.Random(seed)
    text = repetitive_text(256 * 1024, seed=seed)
    names = list(PROFILES)
    weights = [PROFILES[k][0] for k in names]
    for i in range(n):
        kind = rng.choices(names, weights)[0]
        headers = None
        if kind == "orders":
            key = f"customer-{rng.randrange(5000):04d}".encode()
            value = order_json(i, padding=rng.randrange(0, 8))
        elif kind == "metrics":
            key = f"host-{rng.randrange(64):02d}".encode()
            value = rng.randbytes(rng.randint(16, 48)) + b"cpu,mem,disk" * rng.randint(1, 6)
        elif kind == "logs":
            key = None
            size = rng.randint(120, 1200)
            start = rng.randrange(0, len(text) - size)
            value = f"{i} INFO ".encode() + text[start:start + size]
            headers = [("level", b"INFO"), ("seq", str(i).encode())]
        elif kind == "events":
            key = f"session-{rng.randrange(20_000):05d}".encode()
            size = rng.randint(400, 3200)
            noise = size // 4
            start = rng.randrange(0, len(text) - size)
            value = rng.randbytes(noise) + text[start:start + size - noise]
            headers = [("type", b"event")] if i % 2 else None
        else:
            key = f"blob-{i:06d}".encode()
            size = rng.randint(8 * 1024, 64 * 1024)
            noise = size // 2
            start = rng.randrange(0, len(text) - size)
            value = rng.randbytes(noise) + text[start:start + size - noise]
        yield i, kind, key, value, headers


def progress(produced: int, delivered: int, groups: dict[str, Seen], start: float) -> None:
    seen = ", ".join(f"{g} {len(s.offsets)}" for g, s in groups.items())
    print(f"mixed: {time.monotonic() - start:6.1f} s: {produced} produced, {delivered} "
          f"delivered; consumed: {seen}", flush=True)


def run(session_factory) -> dict[str, Any]:
    pr = PARAMS
    n, rate = pr["messages"], pr["rate"]
    with MockCluster(PORTS) as mock:
        mock.cap_api_versions()
        topics = {k: f"mixed-{k}" for k in PROFILES}
        for t in topics.values():
            mock.create_topic(t, pr["partitions"], leaders=[1 + p % 3 for p in
                                                            range(pr["partitions"])])
        mock.set_group_initial_rebalance_delay(200)
        bs = mock.bootstrap_servers
        delivery = Delivery()
        groups = {"analytics": Seen(), "billing": Seen(), "tail": Seen()}
        members: dict[str, list] = {"analytics": [], "billing": []}
        raw_bytes = 0
        per_profile = {k: 0 for k in PROFILES}

        def join(group: str, k: int, strategy: str) -> None:
            c = consumer(bs, f"mixed-{group}-{k}", **{
                **CONSUMER_CONF, "group.id": f"mixed-{group}",
                "partition.assignment.strategy": strategy})
            c.subscribe(list(topics.values()))
            members[group].append(c)

        with session_factory(PORTS) as session:
            for k in range(pr["analytics_consumers"]):
                join("analytics", k, "roundrobin")
            for k in range(pr["billing_consumers"]):
                join("billing", k, "range")
            tail = consumer(bs, "mixed-tail", **{**CONSUMER_CONF, "group.id": "mixed-tail",
                                                 "enable.auto.commit": False})
            tail.assign([TopicPartition(topics["orders"], p, OFFSET_END)
                         for p in range(pr["partitions"])])
            producers = {k: producer(bs, f"mixed-producer-{k}", **{
                "topic.metadata.refresh.interval.ms": 10000,
                "queue.buffering.max.kbytes": 262144, **conf})
                for k, (_w, conf) in PROFILES.items()}
            left = None
            start = time.monotonic()
            for i, kind, key, value, headers in records(n, pr["seed"]):
                produce(producers[kind], topics[kind], key, value, delivery, headers)
                raw_bytes += len(value) + (len(key) if key else 0)
                per_profile[kind] += 1
                if i == int(n * pr["join_at"]):
                    join("analytics", pr["analytics_consumers"], "roundrobin")
                if i == int(n * pr["leave_at"]):
                    left = members["billing"].pop()
                    left.close()
                if i % 20 == 19:
                    for p in producers.values():
                        p.poll(0)
                    for g in ("analytics", "billing"):
                        groups[g].drain(members[g], 0.0, 500)
                    groups["tail"].drain([tail], 0.0, 500)
                    ahead = (i + 1) / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
                if i % 10_000 == 9_999:
                    progress(i + 1, delivery.ok, groups, start)
            for p in producers.values():
                if p.flush(FLUSH_TIMEOUT):
                    raise ScenarioError("producer flush timed out")
            delivery.check(n)
            # the groups catch up (bounded), then every consumer keeps fetching,
            # heartbeating and committing a little longer
            deadline = time.monotonic() + pr["catch_up_s"]
            while time.monotonic() < deadline and any(
                    len(groups[g].offsets) < n for g in ("analytics", "billing")):
                for g in ("analytics", "billing"):
                    groups[g].drain(members[g], 0.05, 2000)
            linger_until = time.monotonic() + pr["linger_s"]
            while time.monotonic() < linger_until:
                for g in ("analytics", "billing"):
                    groups[g].drain(members[g], 0.05, 2000)
                groups["tail"].drain([tail], 0.0, 2000)
            progress(n, delivery.ok, groups, start)
            for p in producers.values():
                p.close()
            for c in [*members["analytics"], *members["billing"], tail]:
                c.close()
            if not all(groups[g].offsets for g in groups):
                raise ScenarioError("a consumer group received no record: " + ", ".join(
                    f"{g} {len(s.offsets)}" for g, s in groups.items()))
        facts = session.facts()
    facts.update({"records_produced": n,
                  "records_consumed_distinct": {g: len(s.offsets) for g, s in groups.items()},
                  "records_per_profile": per_profile, "produced_key_value_bytes": raw_bytes,
                  "clients": len(PROFILES) + pr["analytics_consumers"] + 1
                  + pr["billing_consumers"] + 1,
                  "produce_seconds": round(time.monotonic() - start, 1)})
    return facts
