"""librdkafka (confluent-kafka) scenarios against librdkafka's mock cluster."""

from __future__ import annotations

import hashlib
import time

from confluent_kafka import TopicPartition

from ..brokers import MockCluster
from ..clients import RdkConsumer, RdkProducer
from ..context import ScenarioContext, ScenarioFailed
from ..payloads import order_json, random_bytes, repetitive_text
from . import Scenario


def register_mock(ctx: ScenarioContext, mock: MockCluster) -> None:
    for node, port in mock.node_ports.items():
        ctx.manifest.add_broker(software=mock.software, version=mock.version, node_id=node,
                                host="127.0.0.1", port=port)
        ctx.node_ports[str(node)] = port


def committed_list(tps: list[TopicPartition] | None) -> list[dict[str, object]]:
    return [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset}
            for tp in (tps or [])]


# ---------------------------------------------------------------------------------------
CG_PORTS = [19092, 19093, 19094]
CG_TOPIC = "orders"
CG_GROUP = "kwsniff-orders"
BIG_VALUE_SIZE = 100 * 1024


def consumer_group(ctx: ScenarioContext) -> None:
    with MockCluster(CG_PORTS) as mock:
        register_mock(ctx, mock)
        mock.create_topic(CG_TOPIC, 3, leaders=[1, 2, 3])
        mock.set_coordinator("group", CG_GROUP, 2)
        mock.set_group_initial_rebalance_delay(300)
        ctx.manifest.add_topic(CG_TOPIC, 3, "mock API (rd_kafka_mock_topic_create)",
                               leaders={"0": 1, "1": 2, "2": 3})
        ctx.manifest.note("group coordinator of kwsniff-orders is broker 2 "
                          "(rd_kafka_mock_coordinator_set)")
        bs = mock.bootstrap_servers
        big = random_bytes(BIG_VALUE_SIZE, seed=64)
        with ctx.capture(mock.ports):
            prod = RdkProducer(ctx, bs, "cg-producer", acks=-1, **{"linger.ms": 5})
            for n in range(1, 7):
                prod.produce(CG_TOPIC, f"order-{n}".encode(), order_json(n),
                             headers=[("trace-id", f"trace-{n:04d}".encode()),
                                      ("content-type", b"application/json")],
                             partition=n % 3)
            prod.produce(CG_TOPIC, None, b"heartbeat-ping", partition=0)
            prod.produce(CG_TOPIC, None, b"heartbeat-pong",
                         headers=[("empty-header", b""), ("null-header", None)], partition=1)
            prod.produce(CG_TOPIC, b"order-3", None, headers=[("tombstone", b"yes")],
                         partition=0)
            prod.produce(CG_TOPIC, b"blob-1", big,
                         headers=[("blob-sha256", hashlib.sha256(big).hexdigest().encode())],
                         partition=2)
            prod.flush()
            first_batch = 10

            def group_consumer(client_id: str) -> RdkConsumer:
                return RdkConsumer(ctx, bs, client_id, **{
                    "group.id": CG_GROUP, "auto.offset.reset": "earliest",
                    "enable.auto.commit": False, "heartbeat.interval.ms": 500,
                    "session.timeout.ms": 6000, "partition.assignment.strategy": "range"})

            c1 = group_consumer("cg-consumer-1")
            c1.consumer.subscribe([CG_TOPIC])
            c1.consume(first_batch, timeout=40)
            committed1 = c1.consumer.commit(asynchronous=False)
            c1.linger(2.0)
            c1.close()

            for n in range(7, 10):
                prod.produce(CG_TOPIC, f"order-{n}".encode(), order_json(n),
                             headers=[("trace-id", f"trace-{n:04d}".encode())],
                             partition=n % 3)
            prod.flush()
            c2 = group_consumer("cg-consumer-2")
            c2.consumer.subscribe([CG_TOPIC])
            c2.consume(3, timeout=40)
            committed2 = c2.consumer.commit(asynchronous=False)
            c2.linger(1.5)
            c2.close()
            prod.close()
        ctx.manifest.add_group(CG_GROUP, ["cg-consumer-1", "cg-consumer-2"],
                               committed_list(committed2),
                               committed_by_member={"cg-consumer-1": committed_list(committed1),
                                                    "cg-consumer-2": committed_list(committed2)},
                               coordinator_node=2, protocol_type="consumer",
                               assignment_strategy="range")
        ctx.manifest.note("cg-consumer-1 consumes the first 10 messages, commits and leaves; "
                          "cg-consumer-2 then joins the same group, resumes from the "
                          "committed offsets (OffsetFetch) and consumes only order-7..9")


# ---------------------------------------------------------------------------------------
CODEC_PORT = 19192
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce_codecs(ctx: ScenarioContext) -> None:
    with MockCluster([CODEC_PORT]) as mock:
        register_mock(ctx, mock)
        bs = mock.bootstrap_servers
        for codec in CODECS:
            mock.create_topic(f"codec-{codec}", 1)
            ctx.manifest.add_topic(f"codec-{codec}", 1, "mock API (rd_kafka_mock_topic_create)")
        with ctx.capture(mock.ports):
            total = 0
            for i, codec in enumerate(CODECS):
                prod = RdkProducer(ctx, bs, f"codec-{codec}-producer", codec=codec, acks=-1,
                                   **{"linger.ms": 200, "batch.num.messages": 100})
                topic = f"codec-{codec}"
                for n in range(6):
                    key = None if n == 5 else f"{codec}-key-{n}".encode()
                    headers = [("codec", codec.encode())] if n % 2 == 0 else None
                    prod.produce(topic, key, order_json(100 * i + n, padding=4),
                                 headers=headers, partition=0)
                prod.produce(topic, f"{codec}-bulk".encode(),
                             repetitive_text(16 * 1024, seed=i), partition=0)
                prod.flush()
                prod.close()
                total += 7
            cons = RdkConsumer(ctx, bs, "codecs-consumer", **{
                "group.id": "kwsniff-codecs-reader", "enable.auto.commit": False,
                "auto.offset.reset": "earliest"})
            cons.consumer.assign([TopicPartition(f"codec-{c}", 0, 0) for c in CODECS])
            cons.consume(total, timeout=40)
            cons.close()
        ctx.manifest.note("one producer per codec (compression.type), each sends its 7 "
                          "messages as one batch (linger.ms=200); codecs-consumer reads all "
                          "five topics with assign() (no group join, no commit)")


# ---------------------------------------------------------------------------------------
ACKS_PORT = 19292
ACKS = [(0, "acks-0"), (1, "acks-1"), (-1, "acks-all")]


def acks(ctx: ScenarioContext) -> None:
    with MockCluster([ACKS_PORT]) as mock:
        register_mock(ctx, mock)
        bs = mock.bootstrap_servers
        for _, topic in ACKS:
            mock.create_topic(topic, 1)
            ctx.manifest.add_topic(topic, 1, "mock API (rd_kafka_mock_topic_create)")
        with ctx.capture(mock.ports):
            for ack, topic in ACKS:
                prod = RdkProducer(ctx, bs, f"{topic}-producer", acks=ack,
                                   **{"linger.ms": 0})
                for n in range(4):
                    prod.produce(topic, f"{topic}-{n}".encode(),
                                 f"message {n} sent with request.required.acks={ack}".encode(),
                                 partition=0)
                    prod.flush()  # one ProduceRequest per message
                if ack == 0:
                    # acks=0 "delivers" once written: closing at once can make the mock
                    # drop requests it has not read yet (it answers them, see notes, and
                    # gives up on the connection when the client is gone).
                    time.sleep(0.5)
                prod.close()
            cons = RdkConsumer(ctx, bs, "acks-consumer", **{
                "group.id": "kwsniff-acks-reader", "enable.auto.commit": False,
                "auto.offset.reset": "earliest"})
            cons.consumer.assign([TopicPartition(t, 0, 0) for _, t in ACKS])
            cons.consume(12, timeout=40)
            cons.close()
        ctx.manifest.note("each producer flushes after every message, so every message is "
                          "its own ProduceRequest; acks=0 delivery reports carry no offset")
        ctx.manifest.note("the librdkafka mock answers acks=0 ProduceRequests anyway (a real "
                          "Kafka broker sends no response; Tansu 0.6.0 answers them too); "
                          "librdkafka ignores those responses")


# ---------------------------------------------------------------------------------------
TXN_PORTS = [19392, 19393, 19394]
TXN_ID = "kwsniff-txn"
TXN_GROUP = "kwsniff-txn-app"


def idempotent_txn(ctx: ScenarioContext) -> None:
    with MockCluster(TXN_PORTS) as mock:
        register_mock(ctx, mock)
        bs = mock.bootstrap_servers
        mock.create_topic("idem-events", 2, leaders=[1, 2])
        mock.create_topic("txn-input", 1, leaders=[3])
        mock.create_topic("txn-output", 2, leaders=[1, 3])
        mock.set_coordinator("transaction", TXN_ID, 2)
        mock.set_coordinator("group", TXN_GROUP, 3)
        mock.set_group_initial_rebalance_delay(300)
        for name, parts in (("idem-events", 2), ("txn-input", 1), ("txn-output", 2)):
            ctx.manifest.add_topic(name, parts, "mock API (rd_kafka_mock_topic_create)")
        ctx.manifest.note(f"transaction coordinator of {TXN_ID} is broker 2, group "
                          f"coordinator of {TXN_GROUP} is broker 3")
        with ctx.capture(mock.ports):
            # 1. idempotent producer
            idem = RdkProducer(ctx, bs, "idem-producer", acks=-1,
                               **{"enable.idempotence": True, "linger.ms": 20})
            for n in range(6):
                idem.produce("idem-events", f"idem-{n}".encode(),
                             f"idempotent event {n}".encode(), partition=n % 2)
            idem.flush()
            idem.close()
            # 2. input for the consume-transform-produce loop
            feeder = RdkProducer(ctx, bs, "txn-input-producer", acks=-1)
            for n in range(4):
                feeder.produce("txn-input", f"in-{n}".encode(), f"input {n}".encode(),
                               partition=0)
            feeder.flush()
            feeder.close()
            # 3. transactional consume-transform-produce
            app = RdkConsumer(ctx, bs, "txn-app-consumer", **{
                "group.id": TXN_GROUP, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "isolation.level": "read_committed",
                "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range"})
            app.consumer.subscribe(["txn-input"])
            inputs = app.consume(4, timeout=40)
            txp = RdkProducer(ctx, bs, "txn-producer", acks=-1,
                              **{"transactional.id": TXN_ID, "linger.ms": 10})
            txp.producer.init_transactions(30)

            txp.producer.begin_transaction()
            for msg in inputs:
                txp.produce("txn-output", b"out-" + (msg.key() or b""),
                            (msg.value() or b"").upper(), partition=msg.offset() % 2,
                            transactional_id=TXN_ID, transaction=1)
            positions = app.consumer.position(app.consumer.assignment())
            txp.producer.send_offsets_to_transaction(
                positions, app.consumer.consumer_group_metadata(), 30)
            txp.producer.commit_transaction(30)
            ctx.manifest.add_transaction(TXN_ID, "commit", len(inputs), transaction=1,
                                         offsets_committed=committed_list(positions),
                                         group_id=TXN_GROUP)

            txp.producer.begin_transaction()
            for n in range(2):
                txp.produce("txn-output", f"doomed-{n}".encode(),
                            b"this transaction is aborted", partition=n,
                            transactional_id=TXN_ID, transaction=2)
            txp.producer.flush(30)
            txp.producer.abort_transaction(30)
            ctx.manifest.add_transaction(TXN_ID, "abort", 2, transaction=2)

            txp.producer.begin_transaction()
            txp.produce("txn-output", b"final", b"committed after the abort", partition=0,
                        transactional_id=TXN_ID, transaction=3)
            txp.producer.commit_transaction(30)
            ctx.manifest.add_transaction(TXN_ID, "commit", 1, transaction=3)
            txp.close()
            app.close()
            ctx.manifest.add_group(TXN_GROUP, ["txn-app-consumer"],
                                   committed_list(positions),
                                   committed_via="TxnOffsetCommit (send_offsets_to_transaction)")
            # 4. read the output with both isolation levels
            for iso, cid in (("read_committed", "rc-reader"), ("read_uncommitted", "ru-reader")):
                reader = RdkConsumer(ctx, bs, cid, **{
                    "group.id": f"kwsniff-{cid}", "enable.auto.commit": False,
                    "isolation.level": iso, "enable.partition.eof": True})
                reader.consumer.assign([TopicPartition("txn-output", p, 0) for p in (0, 1)])
                # the mock returns aborted records to read_committed consumers as well
                reader.consume(7, timeout=40)
                reader.close()
        ctx.manifest.note("the librdkafka mock implements InitProducerId, AddPartitionsToTxn, "
                          "AddOffsetsToTxn, TxnOffsetCommit and EndTxn, and writes "
                          "transaction control records, but its Fetch responses carry no "
                          "AbortedTransactions: the read_committed reader (rc-reader) "
                          "therefore also receives the 2 aborted records, like ru-reader")
        if any(p["error"] for p in ctx.manifest.data["produced"]):
            raise ScenarioFailed("a transactional/idempotent message failed")


SCENARIOS = [
    Scenario("rdkafka-consumer-group",
             "librdkafka producer (headers, null keys/values, a 100 KiB value) and a "
             "consumer group lifecycle on a 3-broker librdkafka mock cluster",
             consumer_group),
    Scenario("rdkafka-produce-codecs",
             "librdkafka producers with compression none/gzip/snappy/lz4/zstd, consumed back",
             produce_codecs),
    Scenario("rdkafka-acks", "librdkafka producers with acks 0, 1 and all (-1)", acks),
    Scenario("rdkafka-idempotent-txn",
             "librdkafka idempotent producer, transactional consume-transform-produce with "
             "commit and abort, read_committed/read_uncommitted readers",
             idempotent_txn),
]
