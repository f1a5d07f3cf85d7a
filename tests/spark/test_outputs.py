"""What ``analyze`` writes (Parquet, CSV, summary, charts, HTML) and the command line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

PNG = b"\x89PNG\r\n\x1a\n"


def test_every_table_is_written_as_parquet_and_csv(spark, analysis, analysis_out: Path,
                                                   tables) -> None:  # noqa: ANN001
    assert sorted(analysis.written) == sorted(analysis.tables)
    for name, rows in tables.items():
        back = spark.read.parquet(str(analysis_out / "parquet" / name))
        assert back.count() == len(rows), name
        assert back.columns == analysis.tables[name].columns
        with open(analysis_out / "csv" / f"{name}.csv", newline="", encoding="utf-8") as fh:
            lines = list(csv.reader(fh))
        assert lines[0] == analysis.tables[name].columns, name
        assert len(lines) - 1 == len(rows), name
    # nested columns are JSON text in CSV
    with open(analysis_out / "csv" / "errors_by_code.csv", newline="", encoding="utf-8") as fh:
        row = next(csv.DictReader(fh))
    assert isinstance(json.loads(row["apis"]), list)
    assert not list((analysis_out / "csv").glob(".*"))      # no staging left behind


def test_spark_done_is_called_once_between_the_tables_and_the_charts(
        analysis, analysis_out: Path, spark_done_calls) -> None:  # noqa: ANN001
    """run_analysis's ``spark_done`` (the command line stops Spark there) comes once,
    after every table is written and before any chart is drawn."""
    assert spark_done_calls == [(analysis.written, [])]
    assert sorted(analysis.written) == sorted(analysis.tables)
    assert analysis.charts and all(Path(c).parent == analysis_out / "charts"
                                   for c in analysis.charts)


def test_summary_and_report(analysis, analysis_out: Path) -> None:  # noqa: ANN001
    summary = (analysis_out / "summary.txt").read_text(encoding="utf-8")
    assert summary == analysis.summary
    for title in ("Input", "Latency by API and version", "Errors by code",
                  "Consumer group generations", "Producers", "Transactions",
                  "Client <-> broker"):
        assert f"\n{title}" in "\n" + summary
    assert "more rows)" in summary         # top=5 cuts the longer tables
    charts = sorted(p.name for p in (analysis_out / "charts").glob("*.png"))
    assert {"latency_by_api.png", "throughput.png", "errors.png", "consumers.png",
            "rebalances.png", "transactions.png", "client_broker.png",
            "requests_over_time.png"} <= set(charts)
    for png in (analysis_out / "charts").glob("*.png"):
        assert png.read_bytes()[:8] == PNG
    report = (analysis_out / "report.html").read_text(encoding="utf-8")
    assert report.count("data:image/png;base64,") == len(charts)
    assert "src='http" not in report and 'src="http' not in report   # self-contained
    assert "<h3>Latency by API and version (paired exchanges, ms)</h3>" in report


def test_cli_analyze(spark, export_dir: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from kwsniff.cli import main

    out = tmp_path / "out"
    code = main(["analyze", str(export_dir / "rdkafka-acks.jsonl"), "--out", str(out),
                 "--bucket", "0.25", "--charts", "none", "--top", "3"])
    assert code == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Input\n=====")
    assert "analyzed" in captured.err and "tables in" in captured.err
    assert not (out / "charts").exists() and not (out / "report.html").exists()
    epochs = [float(r["bucket_epoch"]) for r in
              csv.DictReader(open(out / "csv" / "throughput.csv", encoding="utf-8"))]
    assert epochs and all((e / 0.25).is_integer() for e in epochs)
    assert any(not e.is_integer() for e in epochs)
    # the session started by the tests is still usable afterwards
    assert spark.range(3).count() == 3


def test_cli_analyze_html_only(spark, export_dir: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from kwsniff.cli import main

    out = tmp_path / "out"
    assert main(["analyze", str(export_dir / "aiokafka.jsonl"), "-o", str(out), "-q",
                 "--charts", "html"]) == 0
    assert capsys.readouterr().out == ""
    assert (out / "report.html").exists() and not (out / "charts").exists()


def test_cli_errors(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from kwsniff.cli import main

    assert main(["analyze", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o")]) == 2
    assert "no such export" in capsys.readouterr().err
    for bad in (["--bucket", "0"], ["--bucket", "nan"], ["--top", "-1"],
                ["--conf", "novalue"]):
        with pytest.raises(SystemExit) as exc:
            main(["analyze", "x.jsonl", *bad])
        assert exc.value.code == 2


def test_bad_lines_are_counted_not_fatal(spark, export_dir: Path, tmp_path: Path) -> None:  # noqa: ANN001
    from kwsniff.spark.load import load_exports

    good = (export_dir / "rdkafka-acks.jsonl").read_text(encoding="utf-8").splitlines()
    exchanges = sum(1 for line in good if '"kind":"exchange"' in line)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([
        "this is not json",
        '{"schema":"kwsniff.exchange/9","kind":"exchange","index":1,"ts":1.0}',
        '{"schema":"kwsniff.exchange/1","kind":"exchange","index":2}',
        '{"schema":"kwsniff.exchange/1","kind":"gossip"}',
        '{"broken": ',
        *good,
    ]) + "\n", encoding="utf-8")
    exports = load_exports(spark, [str(mixed)])
    try:
        assert exports.exchanges.count() == exchanges
        assert exports.rejected == {
            "lines that are not JSON objects": 2,
            "lines that are not kwsniff.exchange/1": 1,
            "lines of an unknown kind": 1,
            "exchange lines without ts or index": 1,
        }
    finally:
        exports.release()


def test_compressed_exports_read_directly(spark, export_dir: Path, tmp_path: Path) -> None:  # noqa: ANN001
    import gzip

    from kwsniff.spark.load import load_exports

    src = export_dir / "rdkafka-acks.jsonl"
    gz = tmp_path / "acks.jsonl.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    exports = load_exports(spark, [str(gz)])
    try:
        want = sum(1 for line in src.read_text().splitlines() if '"kind":"exchange"' in line)
        assert exports.exchanges.count() == want
    finally:
        exports.release()


def test_driver_written_table_equals_spark_written(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """A small table written by the driver (pyarrow Parquet, CSV from Arrow) is what
    Spark writes for it: the same CSV bytes (trimmed, quoted, nested as JSON, doubles
    with 6 places, UTC timestamps) and Parquet that Spark reads back alike."""
    from pyspark.sql import functions as F

    from kwsniff.spark import output

    rows = [(" a ", 1, True, 1.5, [1.0, 2.5e20], None),
            ("", None, False, None, [], {"k": 1}),
            ('x"y', 3, None, 1e-9, None, {}),
            ("a,b", 4, True, 123456789.1234567, [3.0], None),
            ("l\nn", 5, False, -0.0, [float("nan")], None),
            (None, 6, True, float("inf"), [1e-7], None),
            ("\ttab", 7, True, 2.0000005, [0.1], None)]
    df = spark.createDataFrame(
        rows, "s string, i long, b boolean, d double, arr array<double>, m map<string,long>"
    ).withColumn("t", F.timestamp_seconds(F.col("i") * 1000.5 + 1.7e9)).coalesce(1)
    output.write_table(df, str(tmp_path / "spark"), "t")
    assert output.write_small_table(df, str(tmp_path / "driver"), "t")
    assert not output.write_small_table(df, str(tmp_path / "big"), "t", max_rows=6)
    assert not (tmp_path / "big").exists()
    assert not output.write_small_table(df, "hdfs://nowhere/out", "t")
    spark_csv = (tmp_path / "spark" / "csv" / "t.csv").read_bytes()
    assert (tmp_path / "driver" / "csv" / "t.csv").read_bytes() == spark_csv
    assert b'\na,1,true,1.500000,"[1.0,2.5E20]",' in spark_csv      # what both agree on
    by_spark = spark.read.parquet(str(tmp_path / "spark" / "parquet" / "t"))
    by_driver = spark.read.parquet(str(tmp_path / "driver" / "parquet" / "t"))
    assert by_driver.schema == by_spark.schema
    assert sorted(map(str, by_driver.collect())) == sorted(map(str, by_spark.collect()))
    assert not list((tmp_path / "driver" / "csv").glob(".*"))


def test_derived_frames_are_shared_checkpoints_freed_on_release(spark, export_dir: Path) -> None:  # noqa: ANN001
    """A frame jobs share (:meth:`Exports.derived`) is built once, has no lineage on a
    local master (its plan is a scan of checkpointed rows) and :meth:`Exports.release`
    frees the blocks it left in the block manager."""
    from kwsniff.spark.jobs.producers import producer_events
    from kwsniff.spark.load import load_exports

    def cached_rdds() -> set[int]:
        return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keys()}

    exports = load_exports(spark, [str(export_dir / "rdkafka-idempotent-txn.jsonl")])
    before = cached_rdds()
    try:
        events = exports.derived("producer_events", producer_events)
        assert exports.derived("producer_events", producer_events) is events
        assert events._jdf.queryExecution().logical().getClass().getSimpleName() == "LogicalRDD"
        assert events.count() > 0
        assert cached_rdds() - before       # the checkpoints are in the block manager
    finally:
        exports.release()
    assert not cached_rdds() - before


def test_collect_small_counts_first_and_skips_a_table_over_the_cap(spark) -> None:  # noqa: ANN001
    """``count_first`` answers None for a table over the cap without collecting it, and
    the same rows as the plain collect for one within it."""
    from kwsniff.spark import output

    df = spark.range(5).selectExpr("id", "id * 0.5 AS half").cache()
    assert output.collect_small(df, 4, count_first=True) is None
    assert output.collect_small(df, 4) is None
    within = output.collect_small(df, 5, count_first=True)
    assert within is not None and within.equals(output.collect_small(df, 5))
    assert within.column("id").to_pylist() == [0, 1, 2, 3, 4]
    df.unpersist()


def test_exports_count_every_line_read(analysis, reference) -> None:  # noqa: ANN001
    """``Exports.lines`` (what decides the count before a collect) counts every line."""
    assert analysis.exports.lines >= len(reference.exchanges) + analysis.exports.record_lines
