"""Plugin test capture: Avro (Confluent wire format), Protobuf, JSON and trace headers.

A real producer (confluent-kafka) writes, to librdkafka's mock cluster:

* Avro in the Confluent Schema Registry wire format (magic byte 0 + 4-byte schema id +
  Avro binary written by fastavro with tests/plugins/data/avro/*.avsc), keys too;
* Protobuf, Confluent-framed (schema id + message indexes [0], [1], [1, 0]) and plain,
  serialized by the classes protoc generates from tests/plugins/data/proto/shop.proto
  (when protoc is missing, classes built from the committed shop.desc);
* JSON, plain and framed by Confluent's JSON Schema serializer format; text;
* a few deliberately malformed values; trace-context headers (W3C traceparent, B3
  single and multi, SkyWalking sw8);

then a consumer reads everything back. Every produced message has ``plugin`` in the
manifest: the format written, what the plugins configured by
tests/plugins/data/plugins.toml must decode it to (``expected``, in the JSON form of
the export; ``key_expected`` for Avro keys) or the problem they must report
(``expected_problem``), and the trace context of its headers (``trace``).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from ..brokers import MockCluster
from ..clients import RdkConsumer, RdkProducer
from ..context import ScenarioContext
from . import Scenario

ROOT = Path(__file__).resolve().parents[3]

NAME = "plugins-avro-protobuf-json"
DESCRIPTION = ("Avro (Confluent wire format), Protobuf (framed and plain), JSON and trace "
               "headers produced and consumed with confluent-kafka against the mock cluster")
PORT = 20192
DATA = ROOT / "tests" / "plugins" / "data"
UTC = dt.timezone.utc

AVRO_ORDER_ID = 1          # tests/plugins/data/avro/1.avsc
AVRO_KEY_ID = 3            # tests/plugins/data/avro/3.avsc ("string")
AVRO_PAYMENT_ID = 42       # no 42.avsc: decoded by subject avro-payments-value
AVRO_UNKNOWN_ID = 99       # no file, no subject: a problem
PROTO_SCHEMA_ID = 7        # Confluent id of shop.proto
JSON_SCHEMA_ID = 9

TOPICS = ["avro-orders", "avro-payments", "proto-orders", "proto-raw", "json-events",
          "plain-text"]


# ----------------------------------------------------------------------------- encoders
# Written here on purpose, not imported from kwsniff: the capture must not depend on
# the code it tests.

def confluent(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def message_indexes(indexes: list[int]) -> bytes:
    """Confluent's Protobuf message-index list ([0] is written as a single 0)."""
    if indexes == [0]:
        return b"\x00"
    return zigzag_varint(len(indexes)) + b"".join(zigzag_varint(i) for i in indexes)


def export_json(value: Any) -> Any:
    """``value`` as kwsniff's export writes decoded payloads (bytes as text/base64)."""
    if isinstance(value, dict):
        return {k: export_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [export_json(v) for v in value]
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
            if text.isprintable():
                return {"text": text}
        except UnicodeDecodeError:
            pass
        return {"base64": base64.b64encode(value).decode("ascii")}
    return value


class Avro:
    def __init__(self) -> None:
        from fastavro.schema import load_schema

        self.order = load_schema(str(DATA / "avro" / "1.avsc"))
        self.key = load_schema(str(DATA / "avro" / "3.avsc"))
        self.payment = load_schema(str(DATA / "avro" / "avro-payments-value.avsc"))

    @staticmethod
    def encode(schema: Any, value: Any) -> bytes:
        from fastavro import schemaless_writer

        buf = io.BytesIO()
        schemaless_writer(buf, schema, value)
        return buf.getvalue()


class Proto:
    """shop.proto compiled by protoc into Python classes (in the work directory); without
    protoc, classes built from the committed descriptor set shop.desc."""

    def __init__(self, work: Path) -> None:
        if shutil.which("protoc") is None:
            self.pb = _classes_from_descriptor_set(DATA / "proto" / "shop.desc")
            return
        out = work / "proto_py"
        out.mkdir(exist_ok=True)
        subprocess.run(["protoc", f"--proto_path={DATA / 'proto'}", f"--python_out={out}",
                        "shop.proto"], check=True)
        sys.path.insert(0, str(out))
        import shop_pb2  # type: ignore[import-not-found]

        self.pb = shop_pb2

    @staticmethod
    def as_dict(msg: Any) -> dict[str, Any]:
        from google.protobuf import json_format

        return json_format.MessageToDict(msg, preserving_proto_field_name=True)


# ----------------------------------------------------------------------------- traces

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
B3_SINGLE = "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90"
B3_MULTI = [("X-B3-TraceId", "463ac35c9f6413ad48485a3953bb6124"),
            ("X-B3-SpanId", "a2fb4a1d1a96d312"), ("X-B3-ParentSpanId", "0020000000000001"),
            ("X-B3-Sampled", "1")]
SW8_TRACE = "a8c5e4b2f0d14e8c9b7a6f5e4d3c2b1a.42.17000000000000001"
SW8_SEGMENT = "a8c5e4b2f0d14e8c9b7a6f5e4d3c2b1a.42.17000000000000002"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


SW8 = "-".join(["1", _b64(SW8_TRACE), _b64(SW8_SEGMENT), "3", _b64("checkout"),
                _b64("checkout-7d9f@10.0.0.5"), _b64("POST:/orders"), _b64("kafka:9092")])

TRACES = {
    "w3c": ([("traceparent", TRACEPARENT)],
            {"format": "w3c", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
             "span_id": "00f067aa0ba902b7"}),
    "b3": ([("b3", B3_SINGLE)],
           {"format": "b3", "trace_id": "80f198ee56343ba864fe8b2a57d3eff7",
            "span_id": "e457b5a2e4d86bd1"}),
    "b3-multi": (B3_MULTI,
                 {"format": "b3-multi", "trace_id": "463ac35c9f6413ad48485a3953bb6124",
                  "span_id": "a2fb4a1d1a96d312"}),
    "sw8": ([("sw8", SW8)],
            {"format": "sw8", "trace_id": SW8_TRACE, "span_id": f"{SW8_SEGMENT}.3"}),
}


# ----------------------------------------------------------------------------- messages

def messages(work: Path) -> list[dict[str, Any]]:
    """Every message to produce: topic, key, value, headers and what plugins must show."""
    avro = Avro()
    proto = Proto(work)
    pb = proto.pb
    out: list[dict[str, Any]] = []

    def add(topic: str, key: bytes | None, value: bytes | None, plugin: dict[str, Any],
            trace: str | None = None, headers: list[tuple[str, str]] | None = None) -> None:
        hdrs = list(headers or [])
        if trace is not None:
            hdrs += TRACES[trace][0]
            plugin["trace"] = TRACES[trace][1]
        out.append({"topic": topic, "key": key, "value": value,
                    "headers": [(k, v.encode()) for k, v in hdrs], "plugin": plugin})

    # --- Avro orders: schema id 1 (+ a named type from another file), keys id 3
    orders = [
        {"order_id": 1001, "customer": "ada", "status": "NEW",
         "amount": decimal.Decimal("19.99"),
         "created": dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
         "items": [{"sku": "A-1", "qty": 2}], "tags": {"channel": "web"},
         "shipping": {"street": "1 Main St", "city": "Springfield", "zip": None},
         "note": None},
        {"order_id": 1002, "customer": "grace", "status": "PAID",
         "amount": decimal.Decimal("1234.50"),
         "created": dt.datetime(2026, 2, 3, 4, 5, 6, 7000, tzinfo=UTC),
         "items": [{"sku": "B-2", "qty": 1}, {"sku": "C-3", "qty": 12}], "tags": {},
         "shipping": None, "note": "gift wrap, ünïcode ✓"},
        {"order_id": -7, "customer": "", "status": "SHIPPED",
         "amount": decimal.Decimal("0.01"),
         "created": dt.datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
         "items": [], "tags": {"a": "1", "b": "2"},
         "shipping": {"street": "x", "city": "y", "zip": "12345"}, "note": ""},
    ]
    for i, order in enumerate(orders):
        expected = {"format": "avro", "schema_id": AVRO_ORDER_ID,
                    "schema": "com.example.shop.Order",
                    "data": {**order, "amount": str(order["amount"]),
                             "created": order["created"].isoformat()}}
        key = f"order-{order['order_id']}"
        add("avro-orders", confluent(AVRO_KEY_ID, avro.encode(avro.key, key)),
            confluent(AVRO_ORDER_ID, avro.encode(avro.order, order)),
            {"format": "avro", "schema_id": AVRO_ORDER_ID, "expected": export_json(expected),
             "key_expected": {"format": "avro", "schema_id": AVRO_KEY_ID, "schema": "string",
                              "data": key}},
            trace="w3c" if i == 0 else None)
    good = avro.encode(avro.order, orders[0])
    add("avro-orders", b"order-truncated", confluent(AVRO_ORDER_ID, good[:9]),
        {"format": "avro", "schema_id": AVRO_ORDER_ID,
         "expected_problem": "avro: schema id 1 (com.example.shop.Order): not decodable"})
    add("avro-orders", b"order-unknown-schema", confluent(AVRO_UNKNOWN_ID, good),
        {"format": "avro", "schema_id": AVRO_UNKNOWN_ID,
         "expected_problem": "avro: schema id 99 (topic 'avro-orders', value) has no schema "
                             "file"})

    # --- Avro payments: id 42 has no file; found by subject avro-payments-value
    payments = [
        {"payment_id": uuid.UUID("6f1c2a0e-1d2b-4c3d-8e4f-5a6b7c8d9e0f"), "order_id": 1001,
         "amount": 19.99, "method": "CARD",
         "at": dt.datetime(2026, 1, 2, 3, 4, 6, 123456, tzinfo=UTC), "approved": True,
         "raw": b"\x00\xff\x10\x80"},
        {"payment_id": uuid.UUID("00000000-0000-4000-8000-000000000001"), "order_id": 1002,
         "amount": 1234.5, "method": "SEPA",
         "at": dt.datetime(2026, 2, 3, 4, 5, 7, 0, tzinfo=UTC), "approved": False,
         "raw": b"ok"},
    ]
    for p in payments:
        expected = {"format": "avro", "schema_id": AVRO_PAYMENT_ID,
                    "schema": "com.example.pay.Payment",
                    "schema_from": "subject avro-payments-value (id 42 unknown)",
                    "data": {**p, "payment_id": str(p["payment_id"]),
                             "at": p["at"].isoformat()}}
        add("avro-payments", str(p["order_id"]).encode(),
            confluent(AVRO_PAYMENT_ID, avro.encode(avro.payment,
                                                   {**p, "payment_id": str(p["payment_id"])})),
            {"format": "avro", "schema_id": AVRO_PAYMENT_ID, "expected": export_json(expected)},
            trace="b3" if p["order_id"] == 1001 else None)

    # --- Protobuf, Confluent-framed: Order is message [0] of shop.proto, Refund [1],
    # Refund.Line [1, 0]
    order = pb.Order(order_id=9007199254740993, customer="linus", status=pb.Order.PAID,
                     items=[pb.Order.Item(sku="P-1", qty=3, price=2.5)],
                     tags={"prio": "high"}, card="4111-xxxx", signature=b"\x01\x02\xfe")
    order.created.FromDatetime(dt.datetime(2026, 3, 4, 5, 6, 7, 890000))
    refund = pb.Refund(order_id=1002, lines=[pb.Refund.Line(sku="B-2", qty=1)],
                       reason="damaged")
    line = pb.Refund.Line(sku="C-3", qty=4)
    for msg, indexes, full in ((order, [0], "shop.v1.Order"), (refund, [1], "shop.v1.Refund"),
                               (line, [1, 0], "shop.v1.Refund.Line")):
        add("proto-orders", f"{full}".encode(),
            confluent(PROTO_SCHEMA_ID, message_indexes(indexes) + msg.SerializeToString()),
            {"format": "protobuf", "schema_id": PROTO_SCHEMA_ID, "message_type": full,
             "expected": {"format": "protobuf", "schema_id": PROTO_SCHEMA_ID,
                          "message_indexes": indexes, "schema": full,
                          "data": proto.as_dict(msg)}},
            trace="sw8" if indexes == [0] else None)
    add("proto-orders", b"broken", confluent(PROTO_SCHEMA_ID, b"\x00\xff\xff\xff"),
        {"format": "protobuf", "schema_id": PROTO_SCHEMA_ID,
         "expected_problem": "protobuf: not a shop.v1.Order"})

    # --- Protobuf, plain bytes (topic map proto-* -> shop.v1.Order)
    plain = pb.Order(order_id=42, customer="plain", status=pb.Order.NEW, iban="DE00 1234")
    empty_items = pb.Order(order_id=43, items=[pb.Order.Item(sku="Z", qty=0)])
    for msg in (plain, empty_items):
        add("proto-raw", None, msg.SerializeToString(),
            {"format": "protobuf", "message_type": "shop.v1.Order",
             "expected": {"format": "protobuf", "schema": "shop.v1.Order",
                          "data": proto.as_dict(msg)}},
            trace="b3-multi" if msg is plain else None)

    # --- JSON (json-*), one framed by Confluent's JSON Schema serializer
    docs = [{"event": "login", "user": "ada", "ok": True, "n": 1, "x": 1.5, "none": None},
            [1, "two", {"three": 3}],
            {"event": "ünïcode", "nested": {"deep": {"deeper": [True, False]}}}]
    for i, doc in enumerate(docs):
        add("json-events", f"event-{i}".encode(),
            json.dumps(doc, ensure_ascii=False).encode(),
            {"format": "json", "expected": {"format": "json", "data": doc}},
            trace="w3c" if i == 2 else None)
    framed_doc = {"event": "framed", "schema": "json-schema"}
    add("json-events", b"event-framed",
        confluent(JSON_SCHEMA_ID, json.dumps(framed_doc).encode()),
        {"format": "json", "schema_id": JSON_SCHEMA_ID,
         "expected": {"format": "json", "schema_id": JSON_SCHEMA_ID, "data": framed_doc}})
    add("json-events", b"event-bad", b"not json {",
        {"format": "json", "expected_problem": "json: not JSON"})

    # --- a topic no plugin is configured for: stays text
    add("plain-text", b"k", b"just text, no plugin", {"format": "text", "expected": None})
    return out


# ----------------------------------------------------------------------------- scenario

def run(ctx: ScenarioContext) -> None:
    msgs = messages(ctx.work_dir)
    with MockCluster([PORT]) as mock:
        for node, port in mock.node_ports.items():
            ctx.manifest.add_broker(software=mock.software, version=mock.version,
                                    node_id=node, host="127.0.0.1", port=port)
            ctx.node_ports[str(node)] = port
        for t in TOPICS:
            mock.create_topic(t, 1)
            ctx.manifest.add_topic(t, 1, "mock API (rd_kafka_mock_topic_create)")
        bs = mock.bootstrap_servers
        with ctx.capture(mock.ports):
            plain = RdkProducer(ctx, bs, "plugins-producer", acks=-1, **{"linger.ms": 20})
            zstd = RdkProducer(ctx, bs, "plugins-zstd-producer", codec="zstd", acks=-1,
                               **{"linger.ms": 20})
            for m in msgs:
                prod = zstd if m["topic"] in ("proto-raw", "json-events") else plain
                prod.produce(m["topic"], m["key"], m["value"], headers=m["headers"] or None,
                             partition=0, plugin=m["plugin"])
            plain.flush()
            zstd.flush()
            plain.close()
            zstd.close()
            cons = RdkConsumer(ctx, bs, "plugins-consumer", **{
                "group.id": "kwsniff-plugins-reader", "enable.auto.commit": False,
                "auto.offset.reset": "earliest"})
            cons.consumer.assign([TopicPartition(t, 0, 0) for t in TOPICS])
            cons.consume(len(msgs), timeout=40)
            cons.close()
    ctx.manifest.note("every produced message has 'plugin': the format written, what the "
                      "plugins configured by tests/plugins/data/plugins.toml must decode it "
                      "to ('expected', as in the export; 'key_expected' for Avro keys) or the "
                      "problem they must report ('expected_problem'), and the trace context "
                      "of its headers ('trace')")
    ctx.manifest.note("Avro was written by fastavro with tests/plugins/data/avro/*.avsc and "
                      "framed by hand (magic 0 + schema id); Protobuf messages by classes "
                      "protoc generated from tests/plugins/data/proto/shop.proto")



def _classes_from_descriptor_set(path: Path) -> Any:
    """A namespace with Order and Refund classes built from a descriptor set."""
    from types import SimpleNamespace

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:            # protoc --include_imports writes dependencies first
        pool.Add(f)
    get = message_factory.GetMessageClass
    return SimpleNamespace(Order=get(pool.FindMessageTypeByName("shop.v1.Order")),
                           Refund=get(pool.FindMessageTypeByName("shop.v1.Refund")))


SCENARIOS = [Scenario(NAME, DESCRIPTION, run)]
