"""aiokafka producer + consumer group against librdkafka's mock cluster."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from ..brokers import MockCluster
from ..context import ScenarioContext, ScenarioFailed
from ..payloads import order_json
from . import Scenario
from .rdkafka import register_mock

AIO_PORT = 19892
TOPIC = "aio-events"
GROUP = "aiokafka-group"


async def _clients(ctx: ScenarioContext, bs: str) -> None:
    pconf: dict[str, Any] = {"acks": "all", "enable_idempotence": True,
                             "compression_type": "lz4", "linger_ms": 20}
    producer = AIOKafkaProducer(bootstrap_servers=bs, client_id="aiokafka-producer", **pconf)
    ctx.manifest.add_client(client_id="aiokafka-producer", library="aiokafka",
                            library_version=aiokafka.__version__, role="producer",
                            config=pconf)
    await producer.start()
    try:
        pending = []
        for n in range(8):
            key = None if n in (3, 7) else f"aio-{n}".encode()
            headers = [("source", b"aiokafka"), ("seq", str(n).encode())] if n % 2 else []
            value = order_json(800 + n)
            entry = ctx.manifest.produced(client_id="aiokafka-producer", topic=TOPIC,
                                          partition=n % 2, offset=None, key=key, value=value,
                                          headers=headers, codec="lz4", acks=-1)
            fut = await producer.send(TOPIC, value=value, key=key, partition=n % 2,
                                      headers=headers or None)
            pending.append((entry, fut))
        for entry, fut in pending:
            md = await fut
            entry["offset"] = md.offset
            entry["timestamp"] = md.timestamp if md.timestamp != -1 else None
    finally:
        await producer.stop()

    cconf: dict[str, Any] = {"group_id": GROUP, "auto_offset_reset": "earliest",
                             "enable_auto_commit": False, "heartbeat_interval_ms": 500,
                             "session_timeout_ms": 6000}
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bs, client_id="aiokafka-consumer",
                                **cconf)
    ctx.manifest.add_client(client_id="aiokafka-consumer", library="aiokafka",
                            library_version=aiokafka.__version__, role="consumer",
                            config=cconf)
    await consumer.start()
    try:
        got = 0
        deadline = time.monotonic() + 40
        while got < 8:
            if time.monotonic() > deadline:
                raise ScenarioFailed(f"aiokafka-consumer got {got} of 8 messages")
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for rec in records:
                    ctx.manifest.consumed(client_id="aiokafka-consumer", topic=rec.topic,
                                          partition=rec.partition, offset=rec.offset,
                                          key=rec.key, value=rec.value,
                                          headers=list(rec.headers or []),
                                          timestamp=rec.timestamp)
                    got += 1
        await consumer.commit()
        committed = []
        for p in (0, 1):
            committed.append({"topic": TOPIC, "partition": p,
                              "offset": await consumer.position(TopicPartition(TOPIC, p))})
        end = time.monotonic() + 1.5
        while time.monotonic() < end:  # heartbeats and idle fetches
            if any((await consumer.getmany(timeout_ms=100)).values()):
                raise ScenarioFailed("aiokafka-consumer: unexpected extra records")
    finally:
        await consumer.stop()
    ctx.manifest.add_group(GROUP, ["aiokafka-consumer"], committed)


def run(ctx: ScenarioContext) -> None:
    with MockCluster([AIO_PORT]) as mock:
        register_mock(ctx, mock)
        mock.create_topic(TOPIC, 2)
        mock.set_group_initial_rebalance_delay(300)
        ctx.manifest.add_topic(TOPIC, 2, "mock API (rd_kafka_mock_topic_create)")
        with ctx.capture(mock.ports):
            asyncio.run(_clients(ctx, mock.bootstrap_servers))
        ctx.manifest.note("aiokafka negotiates versions with ApiVersions (api_version='auto'); "
                          "the idempotent producer sends InitProducerId first")


SCENARIOS = [
    Scenario("aiokafka",
             f"aiokafka {aiokafka.__version__} idempotent lz4 producer (headers, null keys) "
             "and consumer group; librdkafka mock cluster", run),
]
