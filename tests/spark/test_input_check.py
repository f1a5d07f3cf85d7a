"""Inputs of ``analyze`` / ``spark-decode`` are checked before Spark starts (no JVM: these
tests make starting a SparkSession fail, so a check that lets a bad input through fails
them). Fast: not marked spark."""

from __future__ import annotations

import bz2
import gzip
import json
import random
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


# ------------------------------------------------------- data size of compressed inputs

def _export_lines(n: int) -> bytes:
    """``n`` distinct exchange lines, each with a pseudo-random token (so they do not
    compress absurdly well)."""
    rng = random.Random(n)
    return b"".join(json.dumps({**EXCHANGE, "index": i, "ts": 1.0 + i / 7,
                                "client_id": f"client-{i % 97}",
                                "token": f"{rng.getrandbits(64):016x}",
                                "latency_ms": (i * 7919) % 1000 / 3}).encode() + b"\n"
                    for i in range(n))


def test_plain_files_are_sized_by_their_bytes(tmp_path: Path) -> None:
    from kwsniff.spark.input_check import data_bytes, local_input_bytes

    plain = tmp_path / "a.jsonl"
    plain.write_bytes(_export_lines(1000))
    assert data_bytes(str(plain)) == plain.stat().st_size
    assert local_input_bytes([str(plain), str(tmp_path)]) == 2 * plain.stat().st_size
    assert local_input_bytes(["hdfs:///x", str(plain)]) is None


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".zst"])
def test_a_compressed_export_is_sized_by_its_decompressed_data(
        tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import kwsniff.spark.input_check as input_check
    from kwsniff.spark.input_check import data_bytes

    monkeypatch.setattr(input_check, "RATIO_SAMPLE", 256 << 10)
    data = _export_lines(40_000)          # 9 MB
    if suffix == ".gz":
        packed = gzip.compress(data, 6)
    elif suffix == ".bz2":
        packed = bz2.compress(data)
    else:
        zstandard = pytest.importorskip("zstandard")
        packed = zstandard.ZstdCompressor().compress(data)
    assert len(packed) > 2 * input_check.RATIO_SAMPLE   # estimated from a sample
    path = tmp_path / f"big.jsonl{suffix}"
    path.write_bytes(packed)
    estimate = data_bytes(str(path))
    assert 0.8 * len(data) <= estimate <= 1.25 * len(data), (estimate, len(data), len(packed))
    # a short file is read whole: exact
    small = tmp_path / f"small.jsonl{suffix}"
    small.write_bytes(gzip.compress(data[:5000]) if suffix == ".gz"
                      else bz2.compress(data[:5000]) if suffix == ".bz2"
                      else zstandard.ZstdCompressor().compress(data[:5000]))
    assert data_bytes(str(small)) == 5000


def test_a_large_gzip_export_gets_the_long_runs_jit(tmp_path: Path) -> None:
    """A gzip export of over QUICK_JIT_BYTES of data is a long run although its file is
    small (the JIT and the shuffle partitions are chosen by the data, not the file)."""
    from kwsniff.spark.input_check import local_input_bytes
    from kwsniff.spark.session import PATIENT_JIT, QUICK_JIT, QUICK_JIT_BYTES, jit_for

    block = _export_lines(20_000)
    path = tmp_path / "big.jsonl.gz"
    copies = QUICK_JIT_BYTES // len(block) + 20
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for _ in range(copies):
            fh.write(block)
    assert path.stat().st_size < QUICK_JIT_BYTES // 4
    size = local_input_bytes([str(path)])
    assert size is not None and size > QUICK_JIT_BYTES
    assert jit_for(size, "local[2]") == PATIENT_JIT
    assert jit_for(path.stat().st_size, "local[2]") == QUICK_JIT    # what it was sized as


def test_unsampled_or_damaged_compressed_files_get_the_default_ratio(tmp_path: Path) -> None:
    from kwsniff.spark.input_check import DEFAULT_RATIO, data_bytes

    snappy = tmp_path / "a.jsonl.snappy"
    snappy.write_bytes(b"x" * 1000)
    assert data_bytes(str(snappy)) == int(1000 * DEFAULT_RATIO)
    damaged = tmp_path / "b.jsonl.gz"
    damaged.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 8)
    assert data_bytes(str(damaged)) == int(damaged.stat().st_size * DEFAULT_RATIO)
    empty = tmp_path / "c.jsonl.gz"
    empty.write_bytes(b"")
    assert data_bytes(str(empty)) == 0
