"""Real Kafka traffic on loopback for the live-capture tests (run as a child process).

Starts librdkafka's mock cluster (``test.mock.num.brokers``, inside a holder producer),
prints ``{"bootstrap": "127.0.0.1:PORT", "port": PORT}`` and waits for a line on
standard input. Then a producer sends ``--messages`` keyed messages to ``--topic``
(confluent-kafka, acks=all), a consumer of group ``--group`` reads them back and commits,
and it prints ``{"produced": [...], "consumed": [...]}`` (the message values) and exits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--topic", default="kws-live-orders")
    ap.add_argument("--group", default="kws-live-group")
    ap.add_argument("--timeout", type=float, default=40.0)
    args = ap.parse_args()

    holder = Producer({"test.mock.num.brokers": 1, "client.id": "kws-mock-holder",
                       "log_level": 3})
    brokers = holder.list_topics(timeout=10).brokers
    broker = next(iter(brokers.values()))
    print(json.dumps({"bootstrap": f"{broker.host}:{broker.port}", "port": broker.port}),
          flush=True)
    if not sys.stdin.readline():
        return 1
    bootstrap = f"{broker.host}:{broker.port}"

    produced: list[str] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "kws-live-producer",
                         "acks": "all", "linger.ms": 5, "log_level": 3})
    for i in range(args.messages):
        value = f"live order {i}"
        producer.produce(args.topic, key=f"order-{i}", value=value, on_delivery=on_delivery)
        produced.append(value)
        producer.poll(0)
    left = producer.flush(args.timeout)
    if left or errors:
        print(json.dumps({"error": f"{left} undelivered, errors: {errors[:3]}"}), flush=True)
        return 1

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": args.group,
                         "client.id": "kws-live-consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.subscribe([args.topic])
    consumed: list[str] = []
    deadline = time.monotonic() + args.timeout
    while len(consumed) < len(produced) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            continue
        consumed.append(msg.value().decode())
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        errors.append(str(exc))
    consumer.close()
    print(json.dumps({"produced": produced, "consumed": consumed, "errors": errors}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
