"""Bulk: sustained produce + consume, every codec mixed, large frames (~150 MB).

Five librdkafka producers, one per compression codec (none, gzip, snappy, lz4, zstd),
write ``records`` seeded records (keys, headers on every third, values of 32 B to 48 KiB
that are part random, part repetitive text) round-robin into five 8-partition topics of
a 3-broker librdkafka mock cluster, with 1 MB batches (acks=all for none/gzip/snappy,
acks=1 for lz4/zstd). Two consumers, each assigned half of the partitions, read
everything back at the same time with 8 MB partition fetches, so Fetch responses are
multi-megabyte frames. (The mock keeps about 5 MB per partition: the partition count
keeps every record readable.)
"""

from __future__ import annotations

import random
from typing import Any

from confluent_kafka import TopicPartition
from .apicaps import CappedMockCluster as MockCluster
from pcapgen.payloads import repetitive_text

from .clients import Delivery, Seen, consumer, produce, producer
from .session import CaptureSession, ScenarioError

NAME = "bulk"
PORTS = [29092, 29093, 29094]
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARAMS: dict[str, Any] = {"records": 128_000, "seed": 150, "partitions": 8,
                          "random_fraction": 0.15}
DESCRIPTION = __doc__.split("\n\n")[0]


def records(n: int, seed: int, random_fraction: float):
    """``(index, key, value, headers)`` for ``n`` records; same seed, same records."""
    rng = random.Random(seed)
    text = repetitive_text(256 * 1024, seed=seed)
    for i in range(n):
        r = rng.random()
        if r < 0.80:
            size = rng.randint(32, 600)
        elif r < 0.98:
            size = rng.randint(600, 2400)
        else:
            size = rng.randint(8 * 1024, 48 * 1024)
        noise = int(size * random_fraction)
        start = rng.randrange(0, len(text) - size)
        value = rng.randbytes(noise) + text[start:start + size - noise]
        key = None if i % 17 == 0 else f"key-{i % 5000:05d}".encode()
        headers = [("seq", str(i).encode()), ("src", b"bench")] if i % 3 == 0 else None
        yield i, key, value, headers


def run(session_factory) -> dict[str, Any]:
    n = PARAMS["records"]
    with MockCluster(PORTS) as mock:
        mock.cap_api_versions()
        topics = [f"bulk-{codec}" for codec in CODECS]
        for t in topics:
            mock.create_topic(t, PARAMS["partitions"],
                              leaders=[1 + p % 3 for p in range(PARAMS["partitions"])])
        mock.set_group_initial_rebalance_delay(200)
        bs = mock.bootstrap_servers
        delivery = Delivery()
        seen = Seen()
        raw_bytes = 0
        with session_factory(PORTS) as session:
            readers = [consumer(bs, f"bulk-reader-{k}", **{
                "group.id": "bulk-readers", "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                "max.partition.fetch.bytes": 8 << 20, "fetch.wait.max.ms": 100})
                for k in (1, 2)]
            parts = [TopicPartition(t, p, 0) for t in topics
                     for p in range(PARAMS["partitions"])]
            for k, c in enumerate(readers):
                c.assign(parts[k::len(readers)])
            producers = [producer(bs, f"bulk-producer-{codec}", **{
                "compression.type": codec, "acks": -1 if k < 3 else 1,
                "linger.ms": 25, "batch.size": 1_000_000, "batch.num.messages": 10_000,
                "message.max.bytes": 8 << 20, "queue.buffering.max.kbytes": 262144})
                for k, codec in enumerate(CODECS)]
            for i, key, value, headers in records(n, PARAMS["seed"], PARAMS["random_fraction"]):
                k = i % len(CODECS)
                produce(producers[k], topics[k], key, value, delivery, headers)
                raw_bytes += len(value) + (len(key) if key else 0)
                if i % 500 == 499:
                    for p in producers:
                        p.poll(0)
                    seen.drain(readers)
            for p in producers:
                if p.flush(60):
                    raise ScenarioError("producer flush timed out")
            delivery.check(n)
            seen.until(readers, n, timeout=180)
            for p in producers:
                p.close()
            for c in readers:
                c.close()
        facts = session.facts()
    facts.update({"records_produced": n, "records_consumed": len(seen.offsets),
                  "produced_key_value_bytes": raw_bytes, "codecs": list(CODECS),
                  "clients": 7})
    return facts
