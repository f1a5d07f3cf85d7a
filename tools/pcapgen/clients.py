"""Thin recording wrappers around confluent-kafka producers and consumers.

Every message handed to a producer is written to the manifest in call order and
completed by its delivery report (partition, offset, timestamp, error); every message
a consumer delivers is written with the offset the consumer saw.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Message, Producer

from .context import ScenarioContext, ScenarioFailed

Headers = Sequence[tuple[str, bytes | None]] | None

_ck_version = confluent_kafka.version()
CK_VERSION = _ck_version if isinstance(_ck_version, str) else _ck_version[0]
LIBRDKAFKA_VERSION = confluent_kafka.libversion()[0]


def _public_conf(conf: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in conf.items() if k not in ("bootstrap.servers", "debug")}


def _ts(msg: Message) -> int | None:
    kind, ts = msg.timestamp()
    return ts if kind != confluent_kafka.TIMESTAMP_NOT_AVAILABLE else None


class RdkProducer:
    def __init__(self, ctx: ScenarioContext, bootstrap: str, client_id: str, *,
                 codec: str = "none", acks: int = -1, role: str = "producer",
                 setup: bool = False, **conf: Any) -> None:
        self.ctx = ctx
        self.client_id = client_id
        self.codec = codec
        self.acks = acks
        self.setup = setup
        full = {"compression.type": codec, "acks": acks, **conf}
        self.producer = Producer(ctx.rdkafka_conf(bootstrap, client_id, **full))
        ctx.manifest.add_client(client_id=client_id, library="confluent-kafka",
                                library_version=CK_VERSION,
                                librdkafka_version=LIBRDKAFKA_VERSION, role=role,
                                config=_public_conf(full), setup_only=setup)
        self.failures: list[str] = []

    def produce(self, topic: str, key: bytes | None, value: bytes | None,
                headers: Headers = None, partition: int | None = None,
                on_delivered: Any = None, **extra: Any) -> dict[str, Any]:
        """Hand one message to the producer; ``on_delivered(err, msg)``, when given, is
        called from the delivery callback too (after the manifest entry is completed)."""
        entry = self.ctx.manifest.produced(
            client_id=self.client_id, topic=topic, partition=partition, offset=None,
            key=key, value=value, headers=headers, codec=self.codec, acks=self.acks,
            setup=self.setup, **extra)

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            entry["partition"] = msg.partition()
            entry["offset"] = msg.offset() if (msg.offset() or 0) >= 0 else None
            entry["timestamp"] = _ts(msg)
            if err is not None:
                entry["error"] = err.name()
                self.failures.append(f"{topic}: {err.name()}")
            if on_delivered is not None:
                on_delivered(err, msg)

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if headers:
            kwargs["headers"] = list(headers)
        if partition is not None:
            kwargs["partition"] = partition
        self.producer.produce(topic, **kwargs)
        self.producer.poll(0)
        return entry

    def flush(self, timeout: float = 30.0, allow_failures: bool = False) -> None:
        left = self.producer.flush(timeout)
        if left:
            raise ScenarioFailed(f"{self.client_id}: {left} messages not delivered")
        if self.failures and not allow_failures:
            raise ScenarioFailed(f"{self.client_id}: delivery failed: {self.failures}")

    def close(self) -> None:
        self.producer.flush(30)
        self.producer.close()


class RdkConsumer:
    def __init__(self, ctx: ScenarioContext, bootstrap: str, client_id: str,
                 role: str = "consumer", **conf: Any) -> None:
        self.ctx = ctx
        self.client_id = client_id
        self.consumer = Consumer(ctx.rdkafka_conf(bootstrap, client_id, **conf))
        ctx.manifest.add_client(client_id=client_id, library="confluent-kafka",
                                library_version=CK_VERSION,
                                librdkafka_version=LIBRDKAFKA_VERSION, role=role,
                                config=_public_conf(conf))
        self.received: list[Message] = []

    def _record(self, msg: Message) -> None:
        self.received.append(msg)
        self.ctx.manifest.consumed(
            client_id=self.client_id, topic=msg.topic(), partition=msg.partition(),
            offset=msg.offset(), key=msg.key(), value=msg.value(),
            headers=msg.headers() or [], timestamp=_ts(msg))

    def consume(self, expected: int, timeout: float = 30.0) -> list[Message]:
        """Poll until ``expected`` more messages arrived; fail after ``timeout``."""
        got: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected:
            if time.monotonic() > deadline:
                raise ScenarioFailed(f"{self.client_id}: got {len(got)} of {expected} "
                                     f"messages in {timeout}s")
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise ScenarioFailed(f"{self.client_id}: {msg.error()}")
            self._record(msg)
            got.append(msg)
        return got

    def linger(self, seconds: float) -> None:
        """Keep polling (heartbeats, fetches); any message that arrives is an error."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.1)
            if msg is not None and not msg.error():
                self._record(msg)
                raise ScenarioFailed(f"{self.client_id}: unexpected message at "
                                     f"{msg.topic()}[{msg.partition()}]@{msg.offset()}")

    def close(self) -> None:
        self.consumer.close()
