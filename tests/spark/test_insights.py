"""``analyze``'s insight tables (e2e latency, lag, rebalances, producer health) on a real
local SparkSession: every capture's rows are exactly ``kwsniff stats --insights --json``
of that capture (whose figures tests/insights checks against the clients' own logs),
although all the captures are analysed together; captures are never joined; an input
without insight data gives empty tables and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import capture_names
from spark_common import PCAPS

from kwsniff.cli import main

pytestmark = pytest.mark.spark

INSIGHT_TABLES = ("e2e_latency", "e2e_latency_by_topic", "e2e_deliveries", "e2e_never_fetched",
                  "e2e_totals", "lag_partitions", "lag_timeline", "rebalance_generations",
                  "rebalance_groups", "producer_health", "producer_retries",
                  "producer_duplicates")


@pytest.fixture(scope="module")
def stats_reports() -> dict[str, dict[str, Any]]:
    """``stats --insights --json`` of every capture (in-process, stdout captured)."""
    import contextlib
    import io

    out: dict[str, dict[str, Any]] = {}
    for name in capture_names():
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["stats", "--insights", "--json", str(PCAPS / f"{name}.pcap")]) == 0
        out[name] = json.loads(buf.getvalue())["insights"]
    return out


def _of(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The rows of capture ``name``, copied without their ``capture`` and ``source``."""
    return [{k: v for k, v in r.items() if k not in ("capture", "source")} for r in rows
            if r["capture"].endswith(f"/{name}.pcap")]


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert sorted(map(_key, got)) == sorted(map(_key, want))


def _pick(d: dict[str, Any], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in drop}


def _expected(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The table rows ``report`` must give, written out from the JSON field by field."""
    e2e = report["end_to_end"]
    gens, groups = [], []
    for g in report["rebalances"]:
        groups.append({**_pick(g, ("generations",)), "generations": len(g["generations"]),
                       "since_last_generation": "; ".join(g["since_last_generation"])})
        for gen in g["generations"]:
            gens.append({**gen, "group": g["group"], "member_count": len(gen["members"]),
                         "trigger": "; ".join(gen["trigger"])})
    produced = bool(e2e["produced_batches"] or e2e["by_partition"]
                    or e2e["fetched_not_produced_in_capture_records"])
    return {
        "e2e_latency": e2e["by_partition"],
        "e2e_latency_by_topic": e2e["by_topic"],
        "e2e_deliveries": e2e["samples"],
        "e2e_never_fetched": e2e["never_fetched"],
        "e2e_totals": [{**_pick(e2e, ("by_partition", "by_topic", "never_fetched", "samples",
                                      "dropped")),
                        "redelivered_batches": sum(e2e["redeliveries"].values()),
                        "dropped_produced_batches": e2e["dropped"]["produced_batches"],
                        "dropped_waiting_deliveries": e2e["dropped"]["waiting_deliveries"]}]
        if produced else [],
        "lag_partitions": [_pick(p, ("timeline",)) for p in report["lag"]],
        "lag_timeline": [{"group": p["group"], "topic": p["topic"],
                          "partition": p["partition"], **s}
                         for p in report["lag"] for s in p["timeline"]],
        "rebalance_generations": gens,
        "rebalance_groups": groups,
        "producer_health": [{**_pick(p, ("retried_batches",)),
                             "written_twice": len(p["written_twice"]),
                             "error_count": sum(p["errors"].values())}
                            for p in report["producers"]],
        "producer_retries": [{**r, "producer_id": p["producer_id"]}
                             for p in report["producers"] for r in p["retried_batches"]],
        "producer_duplicates": [{**w, "producer_id": p["producer_id"]}
                                for p in report["producers"] for w in p["written_twice"]],
    }


@pytest.mark.parametrize("table", INSIGHT_TABLES)
def test_every_capture_equals_its_stats_report(tables, stats_reports, table: str) -> None:
    compared = 0
    for name, report in stats_reports.items():
        want = _expected(report)[table]
        got = _of(tables[table], name)
        _same(got, want)
        compared += len(want)
    assert compared > 0, table


def test_the_insights_captures_are_in_the_tables(tables) -> None:
    """The figures tests/insights checks against the clients' logs, seen in the tables."""
    slow = {(r["partition"]): r for r in _of(tables["lag_partitions"], "insights-groups")
            if r["group"] == "insights-slow"}
    assert {p: (r["committed"], r["lag"]) for p, r in slow.items()} == {0: (6, 24),
                                                                        1: (6, 24)}
    gens = _of(tables["rebalance_generations"], "insights-groups")
    assert sorted((g["group"], g["generation"], g["trigger"]) for g in gens) == [
        ("insights-fast", 2, "first seen"), ("insights-fast", 3, "joined: fast-2"),
        ("insights-fast", 4, "left: fast-1 (LeaveGroup)"), ("insights-slow", 2, "first seen")]
    [retry] = _of(tables["producer_health"], "insights-idempotent-retry")
    assert (retry["batches"], retry["retries"], retry["unanswered_requests"],
            retry["written_twice"]) == (6, 4, 4, 4)
    deliveries = _of(tables["e2e_deliveries"], "insights-groups")
    assert len(deliveries) == 120      # 60 batches, first delivery to each of two groups
    [gone] = [g for g in _of(tables["rebalance_generations"], "insights-session-timeout")
              if g["gone_without_leaving"]]
    assert gone["gone_without_leaving"][0]["client_id"] == "victim"


def test_summary_and_charts_show_the_insights(analysis, analysis_out: Path) -> None:
    summary = (analysis_out / "summary.txt").read_text(encoding="utf-8")
    for title in ("End-to-end latency per group, topic, partition",
                  "Records produced in the capture but never seen fetched",
                  "Consumer lag at the end of each capture", "Rebalances (generations",
                  "Producer health"):
        assert f"\n{title}" in summary
    assert "none of the captures has exchanges the insights read" not in summary
    charts = {p.name for p in (analysis_out / "charts").glob("*.png")}
    assert {"e2e_latency.png", "lag.png"} <= charts
    report = (analysis_out / "report.html").read_text(encoding="utf-8")
    assert "<h3>Producer health (idempotent and transactional producers)</h3>" in report
    assert "alt='e2e latency'" in report and "alt='lag'" in report


def test_captures_analysed_together_are_not_joined(spark, export_dir: Path,
                                                   stats_reports, tmp_path: Path) -> None:
    """The same export twice (two files, the same capture name), analysed together: the
    offsets and times of one would match the other's exactly, so any join across them
    would show (batches delivered twice, e2e latencies between the copies)."""
    from kwsniff.spark.analyze import run_analysis

    lines = (export_dir / "insights-groups.jsonl").read_text(encoding="utf-8").splitlines()
    for copy in ("a", "b"):
        with open(tmp_path / f"{copy}.jsonl", "w", encoding="utf-8") as fh:
            for line in lines:
                obj = json.loads(line)
                obj["capture"] = "-"          # as exported from standard input
                fh.write(json.dumps(obj) + "\n")
    result = run_analysis(spark, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")], None,
                          charts="none")
    try:
        want = _expected(stats_reports["insights-groups"])
        for table in ("e2e_latency", "e2e_totals", "lag_partitions", "rebalance_generations"):
            rows = [r.asDict(recursive=True) for r in result.tables[table].collect()]
            for copy in ("a", "b"):
                got = [{k: v for k, v in r.items() if k not in ("capture", "source")}
                       for r in rows if r["source"].endswith(f"/{copy}.jsonl")]
                _same(got, want[table])
            assert len(rows) == 2 * len(want[table])
    finally:
        result.release()


def test_no_insight_data_gives_empty_tables_and_a_line(spark, export_dir: Path,
                                                       tmp_path: Path) -> None:
    """tansu-sasl: SASL and metadata only — no Produce, Fetch, group or transaction
    exchange."""
    from kwsniff.spark.analyze import NO_INSIGHTS, run_analysis

    out = tmp_path / "out"
    result = run_analysis(spark, [str(export_dir / "tansu-sasl.jsonl")], str(out),
                          charts="none")
    try:
        for table in INSIGHT_TABLES:
            assert result.tables[table].count() == 0, table
            header = (out / "csv" / f"{table}.csv").read_text(encoding="utf-8").splitlines()
            assert header[0].startswith("capture,source,") and len(header) == 1, table
        summary = (out / "summary.txt").read_text(encoding="utf-8")
        flat = " ".join(summary.split())
        assert " ".join(NO_INSIGHTS.split()) in flat
        assert "\nEnd-to-end latency per group, topic, partition" in summary
    finally:
        result.release()


def test_spark_decode_output_gives_each_capture_its_own_report(spark, stats_reports,
                                                               tmp_path: Path) -> None:
    """Parquet input: two captures decoded by one spark-decode run are two captures for
    the insights (never joined), each equal to its stats report."""
    from kwsniff.spark.analyze import run_analysis
    from kwsniff.spark.spark_decode import run_spark_decode

    names = ("insights-groups", "insights-idempotent-retry")
    out = tmp_path / "decoded"
    run_spark_decode(spark, [str(PCAPS / f"{n}.pcap") for n in names], str(out), partitions=2)
    result = run_analysis(spark, [str(out)], None, charts="none")
    try:
        for table in ("e2e_latency", "e2e_totals", "producer_health", "rebalance_generations"):
            rows = [r.asDict(recursive=True) for r in result.tables[table].collect()]
            assert {r["source"] for r in rows} <= {str(out), f"file:{out}", f"file://{out}"}
            for name in names:
                _same(_of(rows, name), _expected(stats_reports[name])[table])
            assert len(rows) == sum(len(_expected(stats_reports[n])[table]) for n in names)
    finally:
        result.release()
