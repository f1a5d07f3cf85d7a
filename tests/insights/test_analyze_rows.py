"""The Python half of ``kwsniff analyze``'s insights job (no Spark session): captures
are fed to their own collectors, and the tables are the report's values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from kwsniff.cli import main  # noqa: E402
from kwsniff.output.insights import WANTED  # noqa: E402
from kwsniff.spark.jobs.insights import (  # noqa: E402
    COLUMNS,
    INSIGHT_APIS,
    SCHEMAS,
    collect_reports,
    table_rows,
)
from kwsniff.spark.load import BODY_APIS  # noqa: E402

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"


def _export(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    out = tmp_path / f"{name}.jsonl"
    assert main(["export", str(PCAPS / f"{name}.pcap"), "-o", str(out)]) == 0
    capsys.readouterr()
    return [o for o in map(json.loads, out.read_text(encoding="utf-8").splitlines())
            if o["kind"] == "exchange"]


def _stats(name: str, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["stats", "--insights", "--json", str(PCAPS / f"{name}.pcap")]) == 0
    return json.loads(capsys.readouterr().out)["insights"]


def test_the_job_reads_every_api_the_collector_reads_with_its_body() -> None:
    assert set(INSIGHT_APIS) == set(WANTED)
    assert set(WANTED) <= set(BODY_APIS)


def test_two_captures_are_never_joined(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The same capture twice, under two names and under one name in two export files:
    each run gets its own report, equal to ``stats --insights`` of the capture (joined,
    every batch would be delivered twice and the offsets of one would answer the Produce
    requests of the other)."""
    rows = _export(tmp_path, "insights-groups", capsys)
    want = _stats("insights-groups", capsys)
    runs = [("a.pcap", "x.jsonl"), ("b.pcap", "x.jsonl"), ("b.pcap", "y.jsonl")]
    fed = [{**{c: r.get(c) for c in COLUMNS}, "run": run, "source": source}
           for run, source in runs for r in rows if r["api_key"] in WANTED]
    reports = list(collect_reports(fed))
    assert [(c, s) for c, s, _ in reports] == runs
    for _capture, _source, report in reports:
        assert json.loads(report) == want


def test_table_rows_are_the_report_values(capsys: pytest.CaptureFixture[str]) -> None:
    report = _stats("insights-idempotent-retry", capsys)
    names = {n: [f.name for f in SCHEMAS[n].fields] for n in SCHEMAS}

    def as_dicts(table: str) -> list[dict]:
        return [dict(zip(names[table], row)) for row in table_rows(table, "c", report)]

    [health] = as_dicts("producer_health")
    [producer] = report["producers"]
    assert health["capture"] == "c" and health["producer_id"] == producer["producer_id"]
    assert (health["retries"], health["unanswered_requests"], health["written_twice"]) == (
        producer["retries"], producer["unanswered_requests"], len(producer["written_twice"]))
    assert [(d["base_sequence"], d["offsets"]) for d in as_dicts("producer_duplicates")] == [
        (w["base_sequence"], w["offsets"]) for w in producer["written_twice"]]
    assert [r["resent_ts"] for r in as_dicts("producer_retries")] == [
        r["resent_ts"] for r in producer["retried_batches"]]
    [lat] = as_dicts("e2e_latency")
    assert {k: lat[k] for k in report["end_to_end"]["by_partition"][0]} == \
        report["end_to_end"]["by_partition"][0]
    [totals] = as_dicts("e2e_totals")
    assert totals["fetched_not_produced_in_capture_records"] == 4
    timeline = as_dicts("lag_timeline")
    assert len(timeline) == sum(len(p["timeline"]) for p in report["lag"])
    assert all(isinstance(r["ts"], float) for r in timeline)
    # a report with nothing in it, or odd values, gives no rows / None cells
    empty = {"end_to_end": {"produced_batches": 0, "by_partition": [], "samples": []},
             "lag": [], "rebalances": [], "producers": []}
    assert all(table_rows(n, "c", empty) == [] for n in SCHEMAS)
    odd = {"producers": [{"producer_id": "x", "epochs": "no", "errors": {"E": 2},
                          "written_twice": [{"offsets": [1, None, "2"]}]}]}
    [row] = table_rows("producer_health", "c", odd, "s")
    health = dict(zip(names["producer_health"], row))
    assert (health["capture"], health["source"]) == ("c", "s")
    assert health["producer_id"] is None and health["epochs"] is None
    assert (health["error_count"], health["errors"]) == (2, {"E": 2})
    assert table_rows("producer_duplicates", "c", odd)[0][-1] == [1, None, None]
