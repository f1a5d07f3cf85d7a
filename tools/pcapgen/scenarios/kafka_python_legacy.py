"""kafka-python forced to old protocol versions (api_version 0.8.2 / 0.9 / 0.10 / 0.11).

Broker: librdkafka's mock cluster (it accepts the old request versions; see the notes
written into each manifest for what it does with MessageSet magic 0/1).
"""

from __future__ import annotations

import time
from typing import Any

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ..brokers import MockCluster
from ..context import ScenarioContext, ScenarioFailed
from ..payloads import order_json
from . import Scenario
from .rdkafka import register_mock

LEGACY_NOTE = (
    "Observed broker behaviour (librdkafka {librdkafka} mock): it accepts Produce v{pv} "
    "and stores uncompressed MessageSet magic {magic} as sent (served back unchanged in "
    "Fetch v{fv} responses), but answers UNSUPPORTED_VERSION (35) for compressed magic-0/1 "
    "message sets ({rejected}): the mock only decompresses/validates RecordBatch magic 2. "
    "Those Produce requests are still in the capture with their real compressed wrapper "
    "messages; the consumer reads back the topics whose produce succeeded ({accepted}). "
    "Tansu 0.6.0 was not used: it rejects magic 0/1 altogether (it parses every record set "
    "as a RecordBatch: CRC mismatch / parse error, then closes the connection).")


class Version:
    def __init__(self, label: str, tag: str, port: int, produce_ok: bool,
                 codecs: list[str], headers: bool, groups: bool,
                 produce_version: int, fetch_version: int, magic: int) -> None:
        self.label = label
        self.api_version = tuple(int(x) for x in label.split("."))
        self.tag = tag
        self.port = port
        self.produce_ok = produce_ok
        self.codecs = codecs
        self.headers = headers
        self.groups = groups
        self.produce_version = produce_version
        self.fetch_version = fetch_version
        self.magic = magic


VERSIONS = [
    Version("0.8.2", "082", 19492, False, ["none", "gzip", "snappy", "lz4"], False, False, 0, 0, 0),
    Version("0.9", "09", 19592, False, ["none", "gzip", "snappy", "lz4"], False, True, 1, 1, 0),
    Version("0.10", "010", 19692, False, ["none", "gzip", "snappy", "lz4"], False, True, 2, 2, 1),
    Version("0.11", "011", 19792, True, ["none", "gzip", "snappy", "lz4"], True, True, 3, 5, 2),
]


def _consumed(ctx: ScenarioContext, client_id: str, rec: Any) -> None:
    ctx.manifest.consumed(client_id=client_id, topic=rec.topic, partition=rec.partition,
                          offset=rec.offset, key=rec.key, value=rec.value,
                          headers=list(rec.headers or []), timestamp=rec.timestamp)


def _poll_until(ctx: ScenarioContext, consumer: KafkaConsumer, client_id: str,
                expected: int, timeout: float) -> int:
    got = 0
    deadline = time.monotonic() + timeout
    while got < expected:
        if time.monotonic() > deadline:
            raise ScenarioFailed(f"{client_id}: got {got} of {expected} messages")
        for records in consumer.poll(timeout_ms=200).values():
            for rec in records:
                _consumed(ctx, client_id, rec)
                got += 1
    return got


def legacy(ctx: ScenarioContext, v: Version) -> None:
    api = ".".join(str(x) for x in v.api_version)
    with MockCluster([v.port]) as mock:
        register_mock(ctx, mock)
        bs = mock.bootstrap_servers
        out_topics = [f"kp{v.tag}-{codec}" for codec in v.codecs]
        for t in out_topics:
            mock.create_topic(t, 1)
            ctx.manifest.add_topic(t, 1, "mock API (rd_kafka_mock_topic_create)")
        outcome: dict[str, int] = {}
        with ctx.capture(mock.ports):
            for codec, topic in zip(v.codecs, out_topics):
                cid = f"kp{v.tag}-{codec}-producer"
                conf: dict[str, Any] = {
                    "api_version": v.api_version, "linger_ms": 50,
                    "compression_type": None if codec == "none" else codec,
                    "enable_idempotence": v.produce_ok, "acks": "all" if v.produce_ok else 1,
                    "retries": 0 if not v.produce_ok else 3}
                producer = KafkaProducer(bootstrap_servers=bs, client_id=cid, **conf)
                ctx.manifest.add_client(client_id=cid, library="kafka-python",
                                        library_version=kafka.__version__, role="producer",
                                        api_version=api,
                                        config={k: val for k, val in conf.items()})
                sent = []
                for n in range(3):
                    key = None if n == 2 else f"{codec}-{n}".encode()
                    value = order_json(600 + n, padding=3)
                    headers = [("codec", codec.encode()), ("n", str(n).encode())] \
                        if v.headers else None
                    entry = ctx.manifest.produced(
                        client_id=cid, topic=topic, partition=0, offset=None, key=key,
                        value=value, headers=headers, codec=codec,
                        acks=-1 if v.produce_ok else 1)
                    fut = producer.send(topic, key=key, value=value, partition=0,
                                        headers=headers)
                    sent.append((entry, fut))
                producer.flush(timeout=20)
                for entry, fut in sent:
                    try:
                        md = fut.get(timeout=20)
                    except Exception as exc:
                        entry["error"] = type(exc).__name__
                        continue
                    entry["offset"] = md.offset
                    entry["timestamp"] = md.timestamp if md.timestamp != -1 else None
                producer.close(timeout=10)
                errors = [e["error"] for e, _ in sent if e["error"]]
                if errors and (v.produce_ok or codec == "none"):
                    raise ScenarioFailed(f"{cid}: {errors}")
                if errors and errors != ["UnsupportedVersionError"] * len(sent):
                    raise ScenarioFailed(f"{cid}: unexpected delivery errors {errors}")
                outcome[topic] = len(sent) - len(errors)

            cid = f"kp{v.tag}-consumer"
            group = f"kp{v.tag}-group"
            topics = [t for t in out_topics if outcome[t]]
            expected = sum(outcome.values())
            cconf: dict[str, Any] = {
                "api_version": v.api_version, "group_id": group,
                "auto_offset_reset": "earliest", "enable_auto_commit": False}
            if v.groups:
                cconf.update(heartbeat_interval_ms=500, session_timeout_ms=6000)
            consumer = KafkaConsumer(bootstrap_servers=bs, client_id=cid, **cconf)
            ctx.manifest.add_client(client_id=cid, library="kafka-python",
                                    library_version=kafka.__version__, role="consumer",
                                    api_version=api, config=dict(cconf),
                                    group_management=v.groups)
            if v.groups:
                consumer.subscribe(topics)
            else:
                consumer.assign([TopicPartition(t, 0) for t in topics])
            _poll_until(ctx, consumer, cid, expected, timeout=40)
            consumer.commit()
            committed = [{"topic": t, "partition": 0,
                          "offset": consumer.position(TopicPartition(t, 0))} for t in topics]
            end = time.monotonic() + 1.5
            while time.monotonic() < end:  # heartbeats (group members) / idle fetches
                for records in consumer.poll(timeout_ms=100).values():
                    raise ScenarioFailed(f"{cid}: unexpected records {records}")
            consumer.close()
            if not v.produce_ok:
                ctx.manifest.note(LEGACY_NOTE.format(
                    librdkafka=mock.version, pv=v.produce_version, magic=v.magic,
                    fv=v.fetch_version,
                    rejected=", ".join(t for t in out_topics if not outcome[t]) or "none",
                    accepted=", ".join(topics)))
            ctx.manifest.add_group(group, [cid], committed,
                                   group_management="JoinGroup/SyncGroup" if v.groups
                                   else "none (assign + Kafka-stored offsets)")


def _scenario(v: Version) -> Scenario:
    what = ("produces with none/gzip/snappy/lz4 (RecordBatch magic 2) and consumes in a group"
            if v.produce_ok else
            f"produces MessageSet magic {v.magic} with none/gzip/snappy/lz4 (the broker "
            "rejects the compressed ones) and consumes" +
            (" in a group" if v.groups else " with assign()"))
    return Scenario(f"kafka-python-{v.label}",
                    f"kafka-python {kafka.__version__} forced to api_version={v.label} {what}; "
                    "librdkafka mock cluster",
                    lambda ctx: legacy(ctx, v))


SCENARIOS = [_scenario(v) for v in VERSIONS]
