"""Spark test fixtures: ONE local SparkSession per test session, exports of pcaps/.

The SparkSession (``local[2]``, 2 shuffle partitions, no UI) is created by the first
test that needs it and stopped at the end of the session; in-process CLI runs join it
instead of starting their own. Exports are written once per session with ``kwsniff
export --records`` into a temporary directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_common import PCAPS  # noqa: E402 - after the sys.path insert above


def capture_names() -> list[str]:
    return sorted(p.stem for p in PCAPS.glob("*.pcap"))


@pytest.fixture(scope="session")
def spark():  # noqa: ANN201 - a SparkSession
    pytest.importorskip("pyspark")
    from kwsniff.spark.session import spark_session

    session = spark_session("local[2]", "kwsniff-tests", shuffle_partitions=2,
                            driver_memory="2g",
                            conf={"spark.default.parallelism": "2",
                                  "spark.sql.adaptive.coalescePartitions.initialPartitionNum":
                                  "2"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<name>.jsonl`` for every capture in pcaps/ (with record lines)."""
    from kwsniff.cli import main

    out = tmp_path_factory.mktemp("exports")
    for name in capture_names():
        code = main(["export", str(PCAPS / f"{name}.pcap"), "-o", str(out / f"{name}.jsonl"),
                     "--records"])
        assert code == 0, name
    return out


@pytest.fixture(scope="session")
def export_paths(export_dir: Path) -> list[str]:
    return sorted(str(p) for p in export_dir.glob("*.jsonl"))


@pytest.fixture(scope="session")
def reference(export_paths: list[str]):  # noqa: ANN201 - reference.Lines
    from reference import load_lines

    return load_lines(export_paths)


@pytest.fixture(scope="session")
def analysis_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("analysis")


@pytest.fixture(scope="session")
def spark_done_calls() -> list[tuple[list[str], list[str]]]:
    """What the analysis fixture's ``spark_done`` saw, per call: the tables written and
    the chart files present."""
    return []


@pytest.fixture(scope="session")
def analysis(spark, export_paths: list[str], analysis_out: Path,  # noqa: ANN001, ANN201
             spark_done_calls: list):
    """All analysis tables over all exports, written to ``analysis_out`` once."""
    from kwsniff.spark.analyze import run_analysis
    from kwsniff.spark.jobs import AnalysisOptions

    def spark_done(result) -> None:  # noqa: ANN001
        charts = analysis_out / "charts"
        spark_done_calls.append((list(result.written),
                                 sorted(p.name for p in charts.glob("*.png"))))

    result = run_analysis(spark, export_paths, str(analysis_out), AnalysisOptions(bucket=1.0),
                          charts="both", top=5, spark_done=spark_done)
    yield result
    result.release()


@pytest.fixture(scope="session")
def tables(analysis) -> dict[str, list[dict]]:  # noqa: ANN001
    """Every result table collected as a list of dicts."""
    return {name: [r.asDict(recursive=True) for r in df.collect()]
            for name, df in analysis.tables.items()}
