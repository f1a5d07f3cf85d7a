"""Small helpers around confluent-kafka clients shared by the benchmark scenarios."""

from __future__ import annotations

import time
from typing import Any, Iterable

from confluent_kafka import Consumer, KafkaError, Producer

from .session import ScenarioError

#: librdkafka quiet: benchmark clients log only errors
QUIET = {"log_level": 3}


def producer(bootstrap: str, client_id: str, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "client.id": client_id, **QUIET, **conf})


def consumer(bootstrap: str, client_id: str, **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, **QUIET, **conf})


class Delivery:
    """Delivery-report counter shared by the producers of a scenario."""

    def __init__(self) -> None:
        self.ok = 0
        self.failed: list[str] = []

    def __call__(self, err: KafkaError | None, _msg: object) -> None:
        if err is None:
            self.ok += 1
        elif len(self.failed) < 20:
            self.failed.append(err.name())

    def check(self, expected: int) -> None:
        if self.failed or self.ok != expected:
            raise ScenarioError(f"{self.ok}/{expected} delivered; failures: {self.failed}")


def produce(p: Producer, topic: str, key: bytes | None, value: bytes, on_delivery: Delivery,
            headers: list[tuple[str, bytes]] | None = None) -> None:
    """``Producer.produce`` that waits (serving callbacks) while the local queue is full."""
    while True:
        try:
            if headers:
                p.produce(topic, value, key, on_delivery=on_delivery, headers=headers)
            else:
                p.produce(topic, value, key, on_delivery=on_delivery)
            return
        except BufferError:
            p.poll(0.05)


class Seen:
    """Distinct (topic, partition, offset) a set of consumers received."""

    def __init__(self) -> None:
        self.offsets: set[tuple[str, int, int]] = set()

    def drain(self, consumers: Iterable[Consumer], timeout: float = 0.0,
              batch: int = 2000) -> int:
        got = 0
        for c in consumers:
            for msg in c.consume(batch, timeout):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise ScenarioError(f"consumer error: {err}")
                self.offsets.add((msg.topic(), msg.partition(), msg.offset()))
                got += 1
        return got

    def until(self, consumers: list[Consumer], count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.offsets) < count:
            if time.monotonic() > deadline:
                raise ScenarioError(f"consumed {len(self.offsets)} of {count} records "
                                    f"in {timeout}s")
            self.drain(consumers, 0.1)
