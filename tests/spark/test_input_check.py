"""Inputs of ``analyze`` / ``spark-decode`` are checked before Spark starts (no JVM: these
tests make starting a SparkSession fail, so a check that lets a bad input through fails
them). Fast: not marked spark."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pytest
from spark_common import PCAPS

from kwsniff.cli import main
from kwsniff.spark.input_check import check_exports, problem_of_export

EXCHANGE = {"schema": "kwsniff.exchange/1", "kind": "exchange", "index": 1, "ts": 1.0,
            "api_key": 18, "api_name": "ApiVersions"}


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    import kwsniff.spark.session as session

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started for an input that should have been refused")
    monkeypatch.setattr(session, "spark_session", refuse)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return code, err


def fake_parquet(path: Path, columns: tuple[str, ...]) -> Path:
    footer = b"\x15\x00" + b"".join(b"\x18" + bytes([len(c)]) + c.encode() for c in columns)
    path.write_bytes(b"PAR1" + b"\x00" * 16 + footer + len(footer).to_bytes(4, "little")
                     + b"PAR1")
    return path


def test_a_capture_is_refused_with_what_to_run(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    pcap = str(PCAPS / "aiokafka.pcap")
    code, err = run_cli(["analyze", pcap, "-o", str(tmp_path / "o")], capsys)
    assert code == 2
    assert len(err) == 1
    assert pcap in err[0] and "packet capture" in err[0]
    assert f"kwsniff export {pcap}" in err[0] and "kwsniff spark-decode" in err[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name,content,what", [
    ("empty.jsonl", "", "is empty"),
    ("blank.jsonl", "\n  \n", "is empty"),
    ("other.json", '{"hello": "world"}\n', "without \"schema\""),
    ("array.json", "[1, 2, 3]\n", "JSON list"),
    ("future.jsonl", json.dumps({**EXCHANGE, "schema": "kwsniff.exchange/9"}) + "\n",
     "without \"schema\""),
    ("text.txt", "hello\n", "not a JSON value"),
])
def test_non_exports_are_refused(tmp_path: Path, capsys, name: str, content: str,  # noqa: ANN001
                                 what: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    code, err = run_cli(["analyze", str(path), "-o", str(tmp_path / "o")], capsys)
    assert code == 2
    assert len(err) == 1
    assert str(path) in err[0] and what in err[0] and "kwsniff export" in err[0]


def test_one_bad_file_among_good_ones_is_named(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(EXCHANGE) + "\n", encoding="utf-8")
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps(EXCHANGE) + "\n", encoding="utf-8")
    (folder / "b.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    code, err = run_cli(["analyze", str(good), str(folder), "-o", str(tmp_path / "o")], capsys)
    assert code == 2 and len(err) == 1 and str(folder / "b.csv") in err[0]


def test_parquet_without_the_exchange_columns_is_refused(tmp_path: Path,
                                                        capsys) -> None:  # noqa: ANN001
    table = tmp_path / "t.parquet"
    fake_parquet(table, ("name", "value"))
    code, err = run_cli(["analyze", str(table), "-o", str(tmp_path / "o")], capsys)
    assert code == 2 and len(err) == 1
    assert str(table) in err[0] and "kwsniff spark-decode" in err[0]
    empty = tmp_path / "decoded"
    (empty / "exchanges").mkdir(parents=True)
    code, err = run_cli(["analyze", str(empty), "-o", str(tmp_path / "o")], capsys)
    assert code == 2 and "no Parquet files" in err[0]


def test_exports_pass(tmp_path: Path) -> None:
    line = (json.dumps(EXCHANGE) + "\n").encode()
    plain = tmp_path / "x.jsonl"
    plain.write_bytes(b"\n" + line)
    gz = tmp_path / "x.jsonl.gz"
    gz.write_bytes(gzip.compress(line))
    bz = tmp_path / "x.jsonl.bz2"
    bz.write_bytes(bz2.compress(line))
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "part-0.jsonl").write_bytes(line)
    (folder / "_SUCCESS").write_bytes(b"")
    decoded = tmp_path / "decoded"
    (decoded / "exchanges").mkdir(parents=True)
    fake_parquet(decoded / "exchanges" / "part-0.parquet",
                 ("index", "ts", "api_key", "api_name", "correlation_id", "client", "broker"))
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"schema":"kwsniff.exchange/1","request":"' + "x" * (5 << 20) + '"}\n',
                    encoding="utf-8")
    paths = [str(p) for p in (plain, gz, bz, folder, decoded, huge)]
    check_exports(paths)
    assert problem_of_export("hdfs:///somewhere/exports") is None


def test_spark_decode_missing_capture_before_spark(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, err = run_cli(["spark-decode", "/nonexistent.pcap", "--out", str(tmp_path / "o")],
                        capsys)
    assert code == 2 and len(err) == 1 and "no such capture: /nonexistent.pcap" in err[0]


def test_analyze_missing_export_before_spark(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, err = run_cli(["analyze", str(tmp_path / "nope.jsonl")], capsys)
    assert code == 2 and len(err) == 1 and "no such export" in err[0]
