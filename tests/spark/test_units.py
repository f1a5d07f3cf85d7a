"""Spark-layer pieces that need no SparkSession: schema derivation, body views, error
sites, text tables, topic-id resolution, capture file numbering, charts, packaging."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402

import pcapsplit  # noqa: E402

from kwsniff.spark import bodies, charts, schema, tables, topic_fixup  # noqa: E402
from kwsniff.spark.capture_files import (  # noqa: E402
    CaptureFile,
    FrameMap,
    connection_key,
    number_files,
    read_segments,
    survey,
)
from kwsniff.spark.error_sites import error_sites  # noqa: E402
from kwsniff.spark.session import (  # noqa: E402
    PATIENT_JIT,
    QUICK_JIT,
    QUICK_JIT_BYTES,
    driver_java_options,
    is_local_master,
    jit_for,
    package_zip,
)

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- schema

def test_exchange_schema_is_the_json_schema() -> None:
    js = schema.export_json_schema()["$defs"]["exchange"]
    spark_fields = schema.exchange_schema()
    assert spark_fields.fieldNames() == list(js["properties"])
    types = {f.name: f.dataType for f in spark_fields.fields}
    for name in ("request", "response", "request_header"):
        assert types[name] == T.StringType()          # x-spark-type: json-string
    assert types["index"] == T.LongType()
    assert types["ts"] == T.DoubleType()
    assert types["topics"] == T.ArrayType(T.StringType())
    assert types["request_frames"] == T.ArrayType(T.LongType())
    assert spark_fields["ts"].metadata["comment"].startswith("Exchange time: the request's first frame")


def test_record_and_summary_schemas() -> None:
    rec = {f.name: f.dataType for f in schema.record_schema().fields}
    assert rec["key"] == T.StructType([T.StructField("text", T.StringType()),
                                       T.StructField("base64", T.StringType())])
    assert rec["control"] == T.StringType() and rec["value_decoded"] == T.StringType()
    assert rec["headers"].elementType.fieldNames()[:2] == ["key", "value"]
    summary = {f.name: f.dataType for f in schema.summary_schema().fields}
    assert summary["problems"] == T.LongType()
    line = schema.line_schema()
    # the exchange's array wins over the summary's integer
    assert line["problems"].dataType == T.ArrayType(T.StringType())
    assert "exported_exchanges" in line.fieldNames() and "producer_id" in line.fieldNames()


@pytest.mark.parametrize("node", [
    {"type": ["string", "integer"]},
    {"type": "object"},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "array"},
    {"$ref": "http://elsewhere/schema.json"},
])
def test_unsupported_schema_constructs_are_refused(node: dict) -> None:
    with pytest.raises(schema.SchemaError):
        schema.spark_type(node, {})


# ----------------------------------------------------------------------------- views

def test_views_are_typed_from_every_version() -> None:
    view = bodies.message_view(1, "response", {
        "Responses": {"Topic": None, "TopicId": None, "_topic_name": None,
                      "Partitions": {"PartitionIndex": None, "HighWatermark": None,
                                     "Records": None}}})
    part = view["Responses"].dataType.elementType["Partitions"].dataType.elementType
    assert part["PartitionIndex"].dataType == T.IntegerType()
    assert part["HighWatermark"].dataType == T.LongType()
    assert part["Records"].dataType == schema.record_set_type()
    leaves = bodies.view_fields(view)
    assert "Responses[].TopicId" in leaves and "Responses[].Partitions[].Records.size" in leaves


def test_views_refuse_unknown_fields_and_wrong_shapes() -> None:
    with pytest.raises(schema.SchemaError, match="no such field"):
        bodies.message_view(0, "request", {"TopicDatta": None})
    with pytest.raises(schema.SchemaError, match="is a struct"):
        bodies.message_view(0, "request", {"TopicData": None})
    with pytest.raises(schema.SchemaError, match="not a struct"):
        bodies.message_view(0, "request", {"Acks": {"X": None}})
    with pytest.raises(schema.SchemaError):
        bodies.message_view(9999, "request", {"X": None})


def test_embedded_assignment_view() -> None:
    view = bodies.message_view(14, "response", {"_decoded_Assignment": {
        "ConsumerProtocolAssignment": {"AssignedPartitions": {"Topic": None,
                                                              "Partitions": None}}}})
    data = view["_decoded_Assignment"].dataType["data"].dataType
    assert data["AssignedPartitions"].dataType.elementType["Partitions"].dataType == \
        T.ArrayType(T.IntegerType())


# ---------------------------------------------------------------------- error sites

def test_error_sites() -> None:
    body = {"Responses": [{"Name": "a", "PartitionResponses": [
        {"Index": 0, "ErrorCode": 0}, {"Index": 3, "ErrorCode": 6}]}],
        "ThrottleTimeMs": 0}
    assert error_sites(json.dumps(body)) == [(6, "a", 3)]
    assert error_sites('{"ErrorCode": 79, "MemberId": "m"}') == [(79, None, None)]
    # Name outside a topic array is not a topic (e.g. a group or a protocol name)
    assert error_sites('{"Groups": [{"Name": "g", "ErrorCode": 15}]}') == [(15, None, None)]
    fetch = {"Responses": [{"TopicId": "u-u-i-d", "_topic_name": "t", "Partitions": [
        {"PartitionIndex": 1, "ErrorCode": 1}]}]}
    assert error_sites(json.dumps(fetch)) == [(1, "t", 1)]
    txn = {"ResultsByTopicV3AndBelow": [{"Name": "o", "ResultsByPartition": [
        {"PartitionIndex": 0, "PartitionErrorCode": 48}]}]}
    assert error_sites(json.dumps(txn)) == [(48, "o", 0)]


@pytest.mark.parametrize("text", [None, "", "not json", "[1, 2]", "42", '{"a": '])
def test_error_sites_on_bad_bodies(text: str | None) -> None:
    assert error_sites(text) == []


def test_error_sites_deep_nesting_is_bounded() -> None:
    deep: dict = {"ErrorCode": 1}
    for _ in range(500):
        deep = {"x": deep}
    assert error_sites(json.dumps(deep)) == []


# ---------------------------------------------------------------------------- tables

def test_text_table_layout() -> None:
    text = tables.text_table("Title", ["name", "exchanges", "first_ts"],
                             [("a", 12345, 0.0), ("bb", 7, None)], total=5)
    lines = text.splitlines()
    assert lines[:2] == ["Title", "====="]
    assert lines[2].split() == ["name", "exchanges", "first_ts"]
    assert "12,345" in lines[4] and "1970-01-01 00:00:00.000" in lines[4]
    assert lines[5].startswith("bb") and lines[5].rstrip().endswith("-")
    assert lines[-1] == "(3 more rows)"
    assert tables.text_table("Empty", ["a"], []).splitlines()[-1] == "(none)"


def test_format_cell() -> None:
    assert tables.format_cell("producer_id", 408047000) == "408047000"
    assert tables.format_cell("bytes", 408047000) == "408,047,000"
    assert tables.format_cell("p50_ms", 0.12345) == "0.12"
    assert tables.format_cell("max_ms", 4995.0721) == "4995.07"     # as stats prints it
    assert tables.format_cell("rate", 4995.0721) == "4995.072"
    assert tables.format_cell("apis", ["Fetch", "Produce"]) == "Fetch,Produce"
    assert tables.format_cell("leader", True) == "yes"
    html = tables.html_table("<T>", ["x"], [("<b>",)])
    assert "&lt;b&gt;" in html and "&lt;T&gt;" in html


# ------------------------------------------------------------------------ topic ids

def test_resolve_body_only_with_ids_learned_before() -> None:
    body = json.dumps({"Responses": [{"TopicId": "id-1", "Partitions": []},
                                     {"TopicId": "id-2", "Partitions": []}]},
                      separators=(",", ":"))
    names = {"id-1": ("orders", 10), "id-2": ("late", 50)}
    new, found = topic_fixup.resolve_body(body, ["id-1", "id-2"], 20, names)
    assert found == {"id-1": "orders"}
    assert list(json.loads(new)["Responses"][0]) == ["TopicId", "_topic_name", "Partitions"]
    assert "_topic_name" not in json.loads(new)["Responses"][1]
    assert topic_fixup.resolve_body(body, ["id-2"], 20, names) == (body, {})


def test_resolve_row_updates_topics_and_problems() -> None:
    pos = {"request": 0, "response": 1, "topics": 2, "problems": 3}
    body = json.dumps({"Responses": [{"TopicId": "id-1"}]})
    row = [None, body, ["id-1", "orders"],
           ["response: records id-1[0]: batch 0: CRC mismatch", "other"]]
    topic_fixup.resolve_row(row, [(1, ["id-1"], 99)], pos, {"id-1": ("orders", 1)})
    assert row[2] == ["orders"]
    assert row[3] == ["response: records orders[0]: batch 0: CRC mismatch", "other"]


def test_unresolved_ids() -> None:
    body = {"Topics": [{"TopicId": "a"}, {"TopicId": "b", "_topic_name": "x"},
                       {"TopicId": "c", "Name": "y"},
                       {"TopicId": "00000000-0000-0000-0000-000000000000"}]}
    assert topic_fixup.unresolved_ids(body) == ["a"]


def test_recording_topic_ids_keeps_first_frame() -> None:
    ids = topic_fixup.RecordingTopicIds()
    ids.frame = 7
    ids.add("167adfa7-5527-4b4e-acb3-d5a0f4888655", "t")
    ids.frame = 9
    ids.add("167adfa7-5527-4b4e-acb3-d5a0f4888655", "t")
    assert ids.origins == {"167adfa7-5527-4b4e-acb3-d5a0f4888655": ("t", 7)}
    assert ids.name_of("167adfa7-5527-4b4e-acb3-d5a0f4888655") == "t"


# --------------------------------------------------------------------- capture files

def test_number_files_orders_by_first_packet_time() -> None:
    files = [CaptureFile(0, "cap", 10, 100.0, 101.0), CaptureFile(1, "cap10", 5, 300.0, 301.0),
             CaptureFile(2, "cap2", 7, 200.0, 201.0), CaptureFile(3, "junk", error="bad"),
             CaptureFile(4, "empty", 0, None, None)]
    numbered = {f.path: f for f in number_files(files)}
    assert [numbered[p].rank for p in ("cap", "cap2", "cap10", "empty", "junk")] == \
        [0, 1, 2, 3, -1]
    assert (numbered["cap2"].first_frame, numbered["cap2"].last_frame) == (11, 17)
    assert numbered["cap10"].offset == 17
    fm = FrameMap(list(numbered.values()))
    assert fm.locate(11) == (numbered["cap2"], 1)
    assert fm.capture_of(22) == "cap10"
    assert fm.locate(23) is None and fm.locate(0) is None


def test_survey_and_segments(tmp_path: Path) -> None:
    pcap = ROOT / "pcaps" / "rdkafka-acks.pcap"
    times = pcapsplit.record_times(pcap)
    info = survey(3, str(pcap))
    assert info.error is None and info.packets == len(times) and info.position == 3
    assert (info.first_ts, info.last_ts) == (pytest.approx(times[0]), pytest.approx(times[-1]))
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all")
    assert survey(0, str(junk)).error is not None
    assert survey(0, str(tmp_path / "missing.pcap")).error is not None
    numbered = number_files([info])[0]
    items = list(read_segments(numbered))
    assert len(items) == len(times)          # the sample captures hold only TCP
    assert [key[2] for key, _ in items] == list(range(1, len(times) + 1))
    pairs = set()
    for key, seg in items:
        assert key[0] == connection_key(seg[0])
        pairs.add(seg[0])
    # both directions of every connection share one key
    assert len({connection_key(k) for k in pairs}) == len({k[0] for k, _ in items})
    assert len(pairs) == 2 * len({k[0] for k, _ in items})


def test_read_segments_stops_at_the_surveyed_count() -> None:
    pcap = ROOT / "pcaps" / "rdkafka-acks.pcap"
    f = CaptureFile(0, str(pcap), 10, 0.0, 0.0, rank=0, offset=100)
    items = list(read_segments(f))
    problems = [seg[1] for key, seg in items if key[0] == b""]
    assert len(items) - len(problems) == 10
    assert [key[2] for key, _ in items if key[0]] == list(range(101, 111))
    assert problems and "more packets than when the run started" in problems[0]


# ---------------------------------------------------------------------------- charts

def test_charts_draw_png_or_nothing(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    assert charts.bars([], [], str(png), "t", "x") is None and not png.exists()
    assert charts.time_series({}, str(png), "t", "y") is None
    assert charts.bars(["a", "b"], [3, 1.5], str(png), "t", "x") == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = tmp_path / "b.png"
    assert charts.time_series({"s": ([1.0, 2.0], [3.0, 4.0])}, str(out), "t", "y") == str(out)
    heat = tmp_path / "c.png"
    assert charts.heatmap(["c"], ["b1", "b2"], [[1, 0]], str(heat), "t", "n") == str(heat)


# ----------------------------------------------------------------------- packaging

def test_is_local_master() -> None:
    assert is_local_master("local[*]") and is_local_master("local") \
        and is_local_master("local-cluster[2,1,1024]")
    assert not is_local_master("spark://host:7077") and not is_local_master("yarn")


def test_package_zip_for_executors(tmp_path: Path) -> None:
    import zipfile

    path = package_zip(tmp_path)
    names = zipfile.ZipFile(path).namelist()
    assert "kwsniff/__init__.py" in names and "kwsniff/output/export_schema.json" in names
    assert "kwsniff/spark/error_sites.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_pcap_header_of_samples() -> None:
    """The split helper of the spark-decode tests assumes classic little-endian pcap."""
    head = (ROOT / "pcaps" / "rdkafka-consumer-group.pcap").read_bytes()[:24]
    assert struct.unpack("<I", head[:4])[0] == 0xA1B2C3D4


# --------------------------------------------------------------- gaps, HTML tables

def test_time_series_gaps_are_zero_filled_or_broken() -> None:
    from kwsniff.spark.charts import MAX_GAP_BUCKETS, with_gaps

    xs, ys = with_gaps([0.0, 1.0, 3.0], [5.0, 6.0, 7.0], 1.0)
    assert (xs, ys) == ([0.0, 1.0, 2.0, 3.0], [5.0, 6.0, 0.0, 7.0])
    far = 10.0 + (MAX_GAP_BUCKETS + 2) * 10.0          # MAX_GAP_BUCKETS + 1 empty buckets
    xs, ys = with_gaps([0.0, 10.0, far], [1.0, 2.0, 3.0], 10.0)
    assert xs[:3] == [0.0, 10.0, 20.0] and ys[:3] == [1.0, 2.0, 0.0]
    assert math.isnan(ys[3]) and 20.0 < xs[3] < far - 10.0
    assert (xs[4:], ys[4:]) == ([far - 10.0, far], [0.0, 3.0])
    # levels (fill="hold"): short gaps are left to the step line, long ones break
    xs, ys = with_gaps([0.0, 2.0, 100.0], [4.0, 5.0, 6.0], 1.0, "hold")
    assert xs == [0.0, 2.0, 3.0, 100.0] and ys[:2] == [4.0, 5.0] and math.isnan(ys[2])
    assert with_gaps([5.0], [1.0], 1.0) == ([5.0], [1.0])


def test_html_table_is_whole_sortable_and_numbers_right_aligned() -> None:
    rows = [("orders", i, 1000 * i, 1.5e9 + i) for i in range(40)]
    page = tables.html_table("T", ["topic", "requests", "bytes", "first_ts"], rows, 40)
    assert page.count("<tr>") == 41                       # header + every row
    assert "more rows" not in page and "class='sortable'" in page
    assert "<td class='num' data-v='7'>7</td>" in page        # "requests" is a count
    assert "<td class='num' data-v='7000'>7,000</td>" in page
    assert "<td class='txt'>2017-07-14" in page               # times are not numbers
    assert tables.is_time_column("first_ts") and not tables.is_time_column("requests")


def test_driver_java_options_keep_the_users_and_the_quiet_log_setup() -> None:
    quiet = "-Dlog4j2.configurationFile=file:/tmp/q.properties"
    assert driver_java_options("-Xss4m -Dfoo=1", quiet) == f"-Xss4m -Dfoo=1 {quiet}"
    assert driver_java_options("", quiet) == quiet
    mine = "-Dlog4j2.configurationFile=file:/etc/mine.properties"
    assert driver_java_options(mine, quiet) == mine        # theirs wins


def test_driver_java_options_put_the_jit_option_first_so_the_users_wins() -> None:
    quiet = "-Dlog4j2.configurationFile=file:/tmp/q.properties"
    assert driver_java_options("", quiet, QUICK_JIT) == f"{QUICK_JIT} {quiet}"
    assert driver_java_options("", "", QUICK_JIT) == QUICK_JIT       # --verbose
    theirs = "-XX:TieredStopAtLevel=4 -Dfoo=1"
    assert driver_java_options(theirs, quiet, QUICK_JIT) == f"{QUICK_JIT} {theirs} {quiet}"
    mine = "-Dlog4j2.configurationFile=file:/etc/mine.properties"
    assert driver_java_options(mine, quiet, QUICK_JIT) == f"{QUICK_JIT} {mine}"


def test_jit_options_by_input_size_on_local_masters_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert jit_for(436_939, None) == QUICK_JIT == jit_for(QUICK_JIT_BYTES, "local[2]")
    assert jit_for(QUICK_JIT_BYTES + 1, None) == PATIENT_JIT      # big: C2 pays off
    assert jit_for(None, None) == ""                              # remote input: unknown
    assert jit_for(1000, "spark://127.0.0.1:7077") == ""          # tasks run elsewhere
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")           # JVM already started
    assert jit_for(1000, None) == ""
