"""The insights collector over exchanges read back from the JSON export (what
``kwsniff analyze`` feeds it) gives exactly ``kwsniff stats --insights --json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwsniff.cli import main
from kwsniff.output.insights import InsightsCollector
from kwsniff.output.insights.bodies import batches
from kwsniff.output.insights.exported import exchange_from_export

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"


def _cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name", ["insights-groups", "insights-idempotent-retry",
                                  "insights-session-timeout", "rdkafka-consumer-group",
                                  "rdkafka-idempotent-txn"])
def test_export_round_trip_gives_the_stats_report(name: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pcap = str(PCAPS / f"{name}.pcap")
    want = json.loads(_cli(capsys, ["stats", "--insights", "--json", pcap]))["insights"]
    out = tmp_path / "x.jsonl"
    _cli(capsys, ["export", pcap, "-o", str(out)])
    collector = InsightsCollector()
    with out.open(encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            if obj["kind"] == "exchange":
                collector.add(exchange_from_export(obj))
    got = json.loads(json.dumps(collector.report()))
    assert got == want
    # the captures exercise what is compared (not four empty reports)
    assert got["end_to_end"]["produced_batches"] or got["rebalances"] or got["producers"]


def test_bodies_as_json_text_and_absent_halves() -> None:
    produce = {"status": "paired", "api_key": 0, "protocol": "kafka", "stream": 3,
               "client": "[::1]:5000", "client_id": "p", "correlation_id": 9, "index": 4,
               "ts": 10.0, "request_end_ts": 10.5, "response_ts": 11.0,
               "request": json.dumps({"TopicData": [{"Name": "t", "PartitionData": [
                   {"Index": 0, "Records": {"batches": [
                       {"base_offset": 0, "last_offset_delta": 1, "record_count": 2,
                        "producer_id": 5, "producer_epoch": 0, "base_sequence": 0,
                        "transactional": False, "control": False, "truncated": False}]}}]}]}),
               "response": "{not json"}
    ex = exchange_from_export(produce)
    assert ex.client == ("::1", 5000) and ex.index == 4
    assert (ex.request.ts_first, ex.request.ts_last) == (10.0, 10.5)
    assert ex.response.body is None and ex.response.ts_last == 11.0
    records = ex.request.body["TopicData"][0]["PartitionData"][0]["Records"]
    [batch] = batches(records)
    assert (batch.base_offset, batch.last_offset_delta, batch.producer_id,
            batch.base_sequence, batch.control) == (0, 1, 5, 0, False)
    orphan = exchange_from_export({"status": "orphan_response", "ts": 3.0, "response_ts": 3.2,
                                   "client": "bad", "stream": "x", "response": {}})
    assert orphan.request is None and orphan.response.ts_first == 3.0
    assert orphan.client == ("bad", None) and orphan.stream is None
    unanswered = exchange_from_export({"status": "unanswered", "ts": 1.0, "request": None})
    assert unanswered.response is None and unanswered.request.body is None
    # odd batch headers read as None / False, never raise
    [odd] = batches({"batches": [{"base_offset": "7", "control": 1}, 3]})
    assert odd.base_offset is None and odd.control is False
    InsightsCollector().add(ex)      # a half-decoded Produce is skipped, not an error
