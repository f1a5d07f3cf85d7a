"""The plugin capture (real confluent-kafka clients, Avro/Protobuf/JSON, trace headers)
decoded through the shipped plugins and compared with what the clients sent: export
(``--records``), ``-V`` tree, summary lines, display filters, the TUI's tree builder,
Spark over the export, and broken plugins that must not stop any of it."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from plugin_common import CAPTURE, CONFIG, DATA, MANIFEST

from kwsniff.capture import open_capture
from kwsniff.cli import main
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.tree import build_tree, render_tree
from kwsniff.plugin_api import PluginManager, collect_options

PORT = ["-p", "20192"]
PLUGINS = ["--plugin-config", str(CONFIG)]
BROKEN = DATA / "broken_plugins"

pytestmark = pytest.mark.skipif(not CAPTURE.exists(), reason="plugin capture missing")


def manifest() -> dict[str, Any]:
    return json.loads(MANIFEST.read_text())


def manifest_bytes(enc: dict[str, Any] | None) -> bytes | None:
    if enc is None:
        return None
    if "utf8" in enc:
        return enc["utf8"].encode("utf-8")
    return base64.b64decode(enc["base64"])


def export_bytes(enc: dict[str, str] | None) -> bytes | None:
    if enc is None:
        return None
    return enc["text"].encode() if "text" in enc else base64.b64decode(enc["base64"])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err and "internal error" not in err
    return out, err


def export(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[list[dict[str, Any]], str]:
    out, err = run(capsys, "export", str(CAPTURE), *PORT, "--records", "-o", "-", *extra)
    return [json.loads(line) for line in out.splitlines()], err


def by_payload(objs: list[dict[str, Any]]) -> dict[tuple[str, bytes | None, bytes | None],
                                                    list[dict[str, Any]]]:
    out: dict[tuple[str, bytes | None, bytes | None], list[dict[str, Any]]] = {}
    for o in objs:
        if o["kind"] == "record":
            out.setdefault((o["topic"], export_bytes(o["key"]), export_bytes(o["value"])),
                           []).append(o)
    return out


def test_export_decodes_what_the_clients_sent(capsys: pytest.CaptureFixture[str]) -> None:
    objs, err = export(capsys, *PLUGINS)
    records = by_payload(objs)
    exchanges = {o["index"]: o for o in objs if o["kind"] == "exchange"}
    checked = Counter()
    for p in manifest()["produced"]:
        plugin = p["plugin"]
        found = records[(p["topic"], manifest_bytes(p["key"]), manifest_bytes(p["value"]))]
        # once in the Produce request, once in the Fetch response
        assert sorted(r["side"] for r in found) == ["request", "response"], p["topic"]
        for r in found:
            if "expected_problem" in plugin:
                assert r["value_decoded"] is None
                assert any(plugin["expected_problem"] in x for x in r["problems"]), r["problems"]
                checked["problem"] += 1
            else:
                assert r["value_decoded"] == plugin["expected"], (p["topic"], r["offset"])
                assert r["problems"] == []
                checked[plugin["format"]] += 1
            if "key_expected" in plugin:
                assert r["key_decoded"] == plugin["key_expected"]
                checked["avro key"] += 1
            if "trace" in plugin:
                t = plugin["trace"]
                ex = exchanges[r["exchange"]]
                assert t["trace_id"] in ex["plugins"]["trace"]["id"]
                assert t["span_id"] in ex["plugins"]["trace"]["span"]
                assert t["format"] in ex["plugins"]["trace"]["format"]
                decoded = [h["decoded"] for h in r["headers"] if "decoded" in h]
                if t["format"] != "b3-multi":   # multi-header B3 is one id per header
                    assert [d["trace_id"] for d in decoded] == [t["trace_id"]]
                checked["trace"] += 1
    assert checked == {"avro": 10, "protobuf": 10, "json": 8, "text": 2, "problem": 8,
                       "avro key": 6, "trace": 10}
    assert "kwsniff: plugin" not in err      # no plugin failed


def test_exchange_trace_fields_join_requests_with_traces(
        capsys: pytest.CaptureFixture[str]) -> None:
    objs, _ = export(capsys, *PLUGINS)
    produced = {t["trace_id"] for p in manifest()["produced"]
                if (t := p["plugin"].get("trace"))}
    produce_ids, fetch_ids = set(), set()
    for o in objs:
        if o["kind"] == "exchange":
            ids = set(o["plugins"]["trace"]["id"])
            if o["api_name"] == "Produce":
                produce_ids |= ids
            elif o["api_name"] == "Fetch":
                fetch_ids |= ids
            else:
                assert ids == set() and o["plugins"]["trace"]["records"] is None
    assert produce_ids == fetch_ids == produced and len(produced) == 4
    # the same ids select the exchanges with a display filter
    out, _ = run(capsys, "decode", str(CAPTURE), *PORT, *PLUGINS,
                 "-Y", 'trace.id == "4bf92f3577b34da6a3ce929d0e0e4736"')
    lines = out.splitlines()
    assert [ln.split()[6] for ln in lines] == ["Produce", "Produce", "Fetch"]
    assert all("trace.id=4bf92f3577b34da6a3ce929d0e0e4736" in ln for ln in lines)


def test_verbose_tree_shows_decoded_fields(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "decode", str(CAPTURE), *PORT, *PLUGINS, "-V", "-Y",
                 "api == Produce")
    text = out
    for needle in ['schema: "com.example.shop.Order"', 'customer: "ada"', 'amount: "19.99"',
                   'created: "2026-01-02T03:04:05.678000+00:00"', 'city: "Springfield"',
                   'schema_from: "subject avro-payments-value (id 42 unknown)"',
                   'payment_id: "6f1c2a0e-1d2b-4c3d-8e4f-5a6b7c8d9e0f"',
                   'schema: "shop.v1.Refund.Line"', "message_indexes: [1, 0]",
                   'order_id: "9007199254740993"', 'created: "2026-03-04T05:06:07.890Z"',
                   'event: "login"', 'deeper: [true, false]', "schema_id: 9",
                   'parent_service: "checkout"', 'trace_id: "80f198ee56343ba864fe8b2a57d3eff7"',
                   "Plugin fields: 4", "trace.format: w3c",
                   "Problem: avro: schema id 1 (com.example.shop.Order): not decodable",
                   "Problem: protobuf: not a shop.v1.Order",
                   "Problem: json: not JSON", '"just text, no plugin" (20 bytes)']:
        assert needle in text, needle
    assert text.count("[avro]") == 3 + 3 + 2       # order values and keys, payments
    assert text.count("[protobuf]") == 5 and text.count("[json]") == 4


def test_tui_tree_builder_sees_the_plugins(manager: PluginManager) -> None:
    """The TUI's detail pane is build_tree with byte ranges, under the command's plugins."""
    manager.load(options=collect_options(config=CONFIG), entry_points=False)
    with open_capture(str(CAPTURE)) as source:
        exchanges = list(Engine(EngineOptions(ports=(20192,))).run(source))
    fetch = max((ex for ex in exchanges if ex.api_key == 1 and ex.response is not None),
                key=lambda ex: ex.response.size)
    nodes = {n.label: n for _, n in build_tree(fetch, spans=True).walk()}
    assert nodes["Plugin fields"].value == "4"
    text = "\n".join(render_tree(build_tree(fetch, spans=True), offsets=True))
    assert 'customer: "grace"' in text and 'schema: "shop.v1.Refund"' in text
    values = [n for _, n in build_tree(fetch, spans=True).walk() if n.label == "Value"
              and n.value.endswith("[avro]")]
    assert values and all(n.children for n in values)


def test_without_plugins_nothing_is_decoded(capsys: pytest.CaptureFixture[str]) -> None:
    objs, err = export(capsys)
    records = [o for o in objs if o["kind"] == "record"]
    assert len(records) == 38
    assert all(r["value_decoded"] is None and r["key_decoded"] is None and r["problems"] == []
               for r in records)
    assert all("plugins" not in o for o in objs if o["kind"] == "exchange")
    assert all("decoded" not in h for r in records for h in r["headers"])


def test_broken_plugins_do_not_stop_decoding(capsys: pytest.CaptureFixture[str]) -> None:
    good, _ = export(capsys, *PLUGINS)
    objs, err = export(capsys, *PLUGINS, "--plugins", str(BROKEN))
    # every broken plugin is named once, at once, and the run completes
    reports = [ln for ln in err.splitlines() if ln.startswith("kwsniff: plugin")]
    assert len([r for r in reports if "crash_on_import" in r]) == 1
    assert "RuntimeError: this plugin is broken at import time; skipped" in err
    assert "crash_in_register" in err and "OSError: configuration file missing" in err
    assert len([r for r in reports if "payload decoder crasher failed" in r
                and "further failures" in r]) == 1
    payloads = sum((r["key"] is not None) + (r["value"] is not None)
                   for r in objs if r["kind"] == "record")
    assert f"payload decoder crasher failed {payloads} times in all" in err
    assert len([r for r in reports if "field crash_in_hooks.always_fails failed" in r]) == 2
    assert len([r for r in reports if "payload decoder opaque failed" in r]) == 2
    assert "a Opaque value" in err and "returned str 'three', not int" in err
    assert "SHOULD NEVER BE SEEN" not in json.dumps(objs)
    # the decoded data is what the good plugins alone give
    assert len(objs) == len(good)
    for a, b in zip(good, objs):
        if a["kind"] == "record":
            assert b["value_decoded"] == a["value_decoded"]
            assert b["key_decoded"] == a["key_decoded"]
            assert [p for p in b["problems"] if "crasher" not in p and "opaque" not in p] \
                == a["problems"]
        elif a["kind"] == "exchange":
            assert b["plugins"]["trace"] == a["plugins"]["trace"]
            assert b["plugins"]["crash_in_hooks"] == {"always_fails": None}
            assert b["plugins"]["bad_results"] == {"count": None}
            assert b["request"] == a["request"] and b["response"] == a["response"]


def test_summary_and_tree_survive_broken_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    plain, _ = run(capsys, "decode", str(CAPTURE), *PORT, *PLUGINS)
    broken, err = run(capsys, "decode", str(CAPTURE), *PORT, *PLUGINS, "--plugins",
                      str(BROKEN))
    assert broken == plain
    tree, err = run(capsys, "decode", str(CAPTURE), *PORT, *PLUGINS, "--plugins",
                    str(BROKEN), "-V", "-Y", "api == Produce")
    assert 'customer: "ada"' in tree and "crasher failed: ValueError" in tree


def test_list_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "decode", "--list-plugins", *PLUGINS, "--plugins", str(BROKEN))
    assert "avro         active" in out and "crash_on_import failed" in out
    assert "options given: schemas=" in out


@pytest.mark.spark
def test_spark_reads_the_decoded_payloads(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    """The export is what the Spark analysis reads: decoded fields are queryable."""
    objs, _ = export(capsys, *PLUGINS)
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StringType

    spark = (SparkSession.builder.master("local[1]").appName("kwsniff-plugins-test")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        # decoded payloads differ per topic: read them as JSON text, as the export schema
        # says ("x-spark-type": "json-string"), and extract with JSON paths
        lines = spark.read.text(str(path))
        js = F.get_json_object
        rec = lines.select(js("value", "$.kind").alias("kind"),
                           js("value", "$.topic").alias("topic"),
                           js("value", "$.side").alias("side"),
                           js("value", "$.value_decoded.data.customer").alias("customer"),
                           js("value", "$.value_decoded.schema").alias("schema"))
        customers = sorted(r["customer"] for r in rec.where(
            (F.col("kind") == "record") & (F.col("topic") == "avro-orders")
            & (F.col("side") == "request") & F.col("schema").isNotNull()).collect())
        assert customers == ["", "ada", "grace"]
        ids = F.from_json(js("value", "$.plugins.trace.id"), ArrayType(StringType()))
        traces = (lines.where(js("value", "$.kind") == "exchange")
                  .select(js("value", "$.api_name").alias("api_name"),
                          F.explode(ids).alias("trace_id"))
                  .groupBy("trace_id").agg(F.collect_set("api_name").alias("apis"))
                  .collect())
        assert {r["trace_id"]: sorted(r["apis"]) for r in traces} == {
            t: ["Fetch", "Produce"] for t in (
                "4bf92f3577b34da6a3ce929d0e0e4736", "80f198ee56343ba864fe8b2a57d3eff7",
                "463ac35c9f6413ad48485a3953bb6124",
                "a8c5e4b2f0d14e8c9b7a6f5e4d3c2b1a.42.17000000000000001")}
    finally:
        spark.stop()
