"""The shipped plugins on synthetic data: options, edge cases, malformed input."""

from __future__ import annotations

import base64
import io
import json
import struct
from pathlib import Path

import pytest
from plugin_common import DATA

from kwsniff.kafka import payload
from kwsniff.plugin_api import KafkaReader, PluginManager, TopicMap, TruncatedError, \
    confluent_frame, protobuf_message_indexes, topic_pattern
from kwsniff.plugin_api.manager import SHIPPED_DIR, find_in_dir
from kwsniff.plugin_api.options import OptionError, PluginOptions


def load_shipped(manager: PluginManager, name: str, **options: object):
    [cand] = [c for c in find_in_dir(SHIPPED_DIR) if c.name == name]
    [plugin] = manager.load_candidates([cand], {name: PluginOptions(name, options)})
    return plugin


def render(data: bytes, topic: str = "t", part: str = "value", header_key: str | None = None):
    return payload.render_payload(data, topic=topic, part=part, header_key=header_key)


def trace_module():
    import sys

    return next(m for m in list(sys.modules.values())
                if getattr(m, "__file__", None) == str(SHIPPED_DIR / "trace.py"))


# ----------------------------------------------------------------------------- helpers

def test_topic_map_and_patterns() -> None:
    m = TopicMap({"orders.*": "A", "orders.eu": "B", "*": "C"})
    assert m.get("orders.eu") == "B"          # exact names before globs
    assert m.get("orders.us") == "A" and m.get("x") == "C" and m.get(None) is None
    assert TopicMap({}).get("x") is None and not TopicMap({})
    assert topic_pattern(None) is None and topic_pattern(["a", "*"]) is None
    assert topic_pattern(["a.*"]) == "a.*"
    rx = topic_pattern(["a.*", "b"])
    assert rx.fullmatch("a.x") and rx.fullmatch("b") and not rx.fullmatch("bb")


def test_confluent_framing_helpers() -> None:
    assert confluent_frame(b"\x00\x00\x00\x01\x02rest") == (258, b"rest")
    assert confluent_frame(b"\x01\x00\x00\x00\x01") is None
    assert confluent_frame(b"\x00\x00\x00") is None
    assert protobuf_message_indexes(b"\x00msg") == ([0], b"msg")
    assert protobuf_message_indexes(b"\x04\x02\x00msg") == ([1, 0], b"msg")
    for bad in (b"\x03", b"\x80", b"\x02\x01", b"\xfe\x01"):
        with pytest.raises(ValueError):
            protobuf_message_indexes(bad)


def test_kafka_reader() -> None:
    data = struct.pack(">bhiqd", -1, 2, 3, 4, 1.5) + b"\x01" + struct.pack(">h", 2) + b"hi" + \
        b"\x03ok" + b"\x00" + struct.pack(">i", 2) + b"\x05\x06" + b"\xac\x02" + b"\x03" + \
        struct.pack(">i", 2) + b"\x07\x08" + b"\x01\x05\x01z"
    r = KafkaReader(data)
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.float64()) == (-1, 2, 3, 4, 1.5)
    assert r.boolean() is True and r.string() == "hi" and r.compact_string() == "ok"
    assert r.compact_string() is None and r.bytes() == b"\x05\x06"
    assert r.uvarint() == 300 and r.varint() == -2
    assert r.array(lambda rd: rd.int8()) == [7, 8]
    assert r.tagged_fields() == {5: b"z"} and r.remaining == 0
    with pytest.raises(TruncatedError, match="needs 4 bytes at offset 0, 2 left"):
        KafkaReader(b"\x00\x01").int32()
    with pytest.raises(TruncatedError, match="cannot fit"):
        KafkaReader(struct.pack(">i", 1000) + b"\x00").array(lambda rd: rd.int8())


# ----------------------------------------------------------------------------- json

def test_json_plugin(manager: PluginManager, reports) -> None:
    load_shipped(manager, "json", topics="ev.*,audit", parts="value,key,body")
    assert reports == ["plugin json: parts body ignored (use key and/or value)"]
    assert render(b'{"a": [1, 2]}', topic="ev.x").obj == {"format": "json", "data": {"a": [1, 2]}}
    assert render(b'"k"', topic="audit", part="key").obj == {"format": "json", "data": "k"}
    framed = b"\x00\x00\x00\x00\x05" + b'{"x": 1}'
    assert render(framed, topic="audit").obj == {"format": "json", "schema_id": 5, "data": {"x": 1}}
    assert render(b"\xff\xfe", topic="audit").problems == [
        "json: not JSON: invalid UTF-8 at byte 0"]
    assert render(b'{"a": 1}', topic="other").kind == "json"    # not opted in: built-in view
    assert payload.render_payload(b'{"a": 1}', topic=None).decoder is None


def test_json_plugin_without_topics_is_inert(manager: PluginManager) -> None:
    assert load_shipped(manager, "json").status == "loaded, disabled"
    assert payload.registered_decoders() == []


# ----------------------------------------------------------------------------- avro

def avro_bytes(schema_file: str, value: object, schema_id: int) -> bytes:
    from fastavro import schemaless_writer
    from fastavro.schema import load_schema

    buf = io.BytesIO()
    schemaless_writer(buf, load_schema(str(DATA / "avro" / schema_file)), value)
    return b"\x00" + schema_id.to_bytes(4, "big") + buf.getvalue()


def test_avro_ids_map_subjects_and_lenient_topics(manager: PluginManager, reports) -> None:
    load_shipped(manager, "avro", schemas=str(DATA / "avro"), ids="77=3,78=avro-payments-value")
    key = avro_bytes("3.avsc", "hello", 77)
    assert render(key, part="key").obj == {"format": "avro", "schema_id": 77, "schema": "string",
                                           "data": "hello"}
    # no topics option: undecodable-looking data is left alone, an unknown id noted once
    assert render(b"plain text").kind == "text"
    unknown = avro_bytes("3.avsc", "x", 500)
    assert render(unknown).obj is None and render(unknown).problems == []
    assert reports == ["plugin avro: schema id 500 (topic 't', value) has no schema file: "
                       "add 500.avsc or map it with avro.ids"]
    # a known id whose bytes do not fit: maybe not Avro at all on an undeclared topic
    assert render(b"\x00\x00\x00\x00\x4d\x80").problems == []
    assert reports[-1].startswith("plugin avro: values of topic 't' framed with schema id 77 "
                                  "do not decode with string (not decodable: ")
    assert reports[-1].endswith("name the topic in avro.topics to see each one as a record "
                                "problem")
    # many different notices: at most 20, then one line saying so
    for i in range(40):
        render(avro_bytes("3.avsc", "x", 1000 + i))
    assert len(reports) == 20 + 1 and reports[-1].endswith("the others are not shown")


def test_avro_declared_topics_report_every_bad_value(manager: PluginManager, reports) -> None:
    load_shipped(manager, "avro", schemas=str(DATA / "avro"), topics="t", ids="77=3")
    key = avro_bytes("3.avsc", "hello", 77)
    assert "not decodable" in render(b"\x00\x00\x00\x00\x4d\x80").problems[0]
    assert "bytes left after the Avro data" in render(key + b"\x00\x00").problems[0]
    assert "not in the Confluent wire format" in render(b"plain").problems[0]
    assert render(b"plain", part="key").problems == []      # keys need not be Avro
    assert render(b"plain", topic="u").decoder is None      # other topics: not tried
    assert reports == []


def test_avro_bad_options_and_files(manager: PluginManager, reports, tmp_path: Path) -> None:
    with pytest.raises(OptionError) as err:     # a mistake in an option stops the command
        load_shipped(manager, "avro", schemas=str(tmp_path / "missing"))
    assert str(err.value) == f"plugin avro: option schemas: {tmp_path / 'missing'} is not " \
        "a directory"
    assert not payload.registered_decoders()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "1.avsc").write_text("{not json")
    (bad / "2.avsc").write_text('{"type": "record", "name": "R", "fields": '
                                '[{"name": "a", "type": "int"}]}')
    other = PluginManager(reporter=reports.append)
    try:
        assert load_shipped(other, "avro", schemas=str(bad), ids="x=2,9=nope").status == "active"
        assert any("schema file 1.avsc skipped" in r for r in reports)
        assert any("ids: 'x' is not a schema id" in r for r in reports)
        assert any("schema id 9 maps to 'nope'" in r for r in reports)
    finally:
        other.close()


def test_avro_logical_types_become_text() -> None:
    import datetime as dt
    import decimal
    import uuid

    from kwsniff.plugin_api.manager import _import_path

    avro = _import_path("avro", SHIPPED_DIR / "avro.py")
    value = {"t": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), "d": dt.date(2026, 1, 2),
             "tm": dt.time(1, 2, 3), "n": decimal.Decimal("1.50"),
             "u": uuid.UUID(int=1), "l": [("a", 1)], "b": b"\x00"}
    assert avro.plain(value) == {"t": "2026-01-01T00:00:00+00:00", "d": "2026-01-02",
                                 "tm": "01:02:03", "n": "1.50",
                                 "u": "00000000-0000-0000-0000-000000000001", "l": [["a", 1]],
                                 "b": b"\x00"}


# ----------------------------------------------------------------------------- protobuf

def test_protobuf_options(manager: PluginManager, reports, tmp_path: Path) -> None:
    desc = str(DATA / "proto" / "shop.desc")
    assert load_shipped(manager, "protobuf", descriptors=desc).status == "loaded, disabled"
    assert reports == ["plugin protobuf: descriptors given but no topics/keys/ids map: "
                       "nothing to decode"]
    for opts, error in [({"descriptors": desc, "topics": "x=shop.v1.Nope"},
                         "shop.v1.Nope is not in the descriptor set"),
                        ({"descriptors": str(tmp_path / "no.desc"), "topics": "x=a.B"},
                         "cannot read"),
                        ({"descriptors": str(DATA / "proto" / "shop.proto"), "topics": "x=a.B"},
                         "is not a descriptor set"),
                        ({"descriptors": desc, "ids": "seven=shop.v1.Order"},
                         "'seven' is not a schema id")]:
        other = PluginManager(reporter=lambda m: None)
        try:
            with pytest.raises(OptionError) as err:    # option mistakes stop the command
                load_shipped(other, "protobuf", **opts)
            assert str(err.value).startswith("plugin protobuf: ") and error in str(err.value)
        finally:
            other.close()


def test_protobuf_framing_ids_and_unknown_fields(manager: PluginManager) -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString((DATA / "proto" / "shop.desc").read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    refund_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.v1.Refund"))
    refund = refund_cls(order_id=5, reason="late").SerializeToString()
    load_shipped(manager, "protobuf", descriptors=str(DATA / "proto" / "shop.desc"),
                 topics="r=shop.v1.Refund", keys="r=shop.v1.Refund", ids="12=shop.v1.Order")
    assert render(refund, topic="r").obj == {"format": "protobuf", "schema": "shop.v1.Refund",
                                             "data": {"order_id": "5", "reason": "late"}}
    assert render(refund, topic="r", part="key").obj["schema"] == "shop.v1.Refund"
    # unmapped topic, schema id 12 -> shop.proto; indexes [1] pick Refund
    framed = b"\x00\x00\x00\x00\x0c" + b"\x02\x02" + refund
    got = render(framed, topic="elsewhere").obj
    assert (got["schema"], got["schema_id"], got["message_indexes"]) == \
        ("shop.v1.Refund", 12, [1])
    assert render(refund, topic="elsewhere").kind == "hex"     # plain bytes, no mapping
    # field 15 is not in Refund: decoded, and said
    extra = refund + b"\x78\x01"
    assert render(extra, topic="r").obj["unknown_fields"] == [15]
    bad_index = b"\x00\x00\x00\x00\x0c" + b"\x02\x0a" + refund
    assert "does not exist in shop.proto" in render(bad_index, topic="r").problems[0]
    assert "bad message indexes" in render(b"\x00\x00\x00\x00\x0c\x03", topic="r").problems[0]


# ----------------------------------------------------------------------------- trace

def test_trace_parsers(manager: PluginManager) -> None:
    load_shipped(manager, "trace", enabled="true")
    t = trace_module()
    tp = t.parse_traceparent
    assert tp("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").sampled is True
    assert tp("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00").sampled is False
    assert tp("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future").trace_id
    for bad in ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                "00-4bf92f35-00f067aa0ba902b7-01", ""):
        assert tp(bad) is None, bad
    b3 = t.parse_b3
    assert b3("a3ce929d0e0e4736-00f067aa0ba902b7").trace_id == "a3ce929d0e0e4736"
    assert b3("80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-d").sampled is True
    full = b3("80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-0-05e3ac9a4f6e3b90")
    assert (full.sampled, full.parent_id) == (False, "05e3ac9a4f6e3b90")
    for bad in ("1", "xyz-e457b5a2e4d86bd1", "80f198ee56343ba8-e457b5a2e4d86bd1-2",
                "80f198ee56343ba8-e457b5a2e4d86bd1-1-zz", "a-b-c-d-e"):
        assert b3(bad) is None, bad
    multi = t.parse_b3_multi({"x-b3-traceid": "463ac35c9f6413ad", "x-b3-spanid":
                              "a2fb4a1d1a96d312", "x-b3-flags": "1"})
    assert (multi.trace_id, multi.sampled) == ("463ac35c9f6413ad", True)
    assert t.parse_b3_multi({"x-b3-traceid": "463ac35c9f6413ad"}) is None
    enc = [base64.b64encode(x.encode()).decode() for x in ("tid", "seg", "svc", "inst",
                                                           "/ep", "host:1")]
    sw8 = f"0-{enc[0]}-{enc[1]}-7-{enc[2]}-{enc[3]}-{enc[4]}-{enc[5]}"
    got = t.parse_sw8(sw8)
    assert (got.trace_id, got.span_id, got.sampled) == ("tid", "seg.7", False)
    assert t.parse_sw8(sw8.replace(enc[0], "!!!")) is None
    assert t.parse_sw8("1-a-b") is None


def test_trace_headers_and_fields(manager: PluginManager) -> None:
    load_shipped(manager, "trace", enabled="yes", topics="orders")
    t = trace_module()
    hdrs = [("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            ("X-B3-TraceId", b"463ac35c9f6413ad48485a3953bb6124"),
            ("X-B3-SpanId", b"a2fb4a1d1a96d312"), ("b3", b"\xff\xfe"), ("other", b"1")]
    assert [c.format for c in t.record_contexts(hdrs)] == ["w3c", "b3-multi"]
    r = render(hdrs[0][1], topic="orders", part="header", header_key="traceparent")
    assert r.obj == {"format": "w3c", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                     "parent_id": "00f067aa0ba902b7", "flags": "01", "sampled": True}
    assert render(b"1", topic="orders", part="header", header_key="b3").obj == \
        {"format": "b3", "sampled": True}
    assert render(b"junk", topic="orders", part="header", header_key="b3").problems == \
        ["trace: not a valid b3 value"]
    assert render(hdrs[0][1], topic="other", part="header", header_key="traceparent").decoder \
        is None


def test_trace_is_opt_in(manager: PluginManager) -> None:
    from kwsniff.output.fields import FIELDS

    load_shipped(manager, "trace")
    assert "trace.id" not in FIELDS and payload.registered_decoders() == []


def test_trace_field_values_are_bounded(manager: PluginManager) -> None:
    load_shipped(manager, "trace", enabled="true")
    t = trace_module()
    seen: dict[str, None] = {}
    for i in range(t.MAX_VALUES + 50):
        t._add(seen, f"id-{i}")
    assert len(seen) == t.MAX_VALUES
    json.dumps(list(seen))
