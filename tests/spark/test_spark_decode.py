"""``spark-decode`` over captures split into rotated files (connections and messages cross
the splits), compared with ``kwsniff export`` of the unsplit capture."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pcapsplit
import pytest
from spark_common import PCAPS

pytestmark = pytest.mark.spark

BODY_COLUMNS = ("request", "response", "request_header")


def export_lines(capture: Path, out: Path) -> list[dict]:
    from kwsniff.cli import main

    assert main(["export", str(capture), "-o", str(out), "--no-summary"]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def parquet_rows(spark, directory: Path) -> list[dict]:  # noqa: ANN001
    rows = [r.asDict(recursive=True) for r in
            spark.read.parquet(str(directory / "exchanges")).orderBy("index").collect()]
    for r in rows:
        for c in BODY_COLUMNS:
            if r[c] is not None:
                r[c] = json.loads(r[c])
    return rows


def file_of(frame: int, captures: list[dict]) -> str:
    for c in captures:
        if c["first_frame"] is not None and c["first_frame"] <= frame <= c["last_frame"]:
            return c["capture"]
    raise AssertionError(f"frame {frame} in no file")


@pytest.mark.parametrize("name,per_file,big_messages", [("rdkafka-consumer-group", 45, True),
                                                        ("rdkafka-idempotent-txn", 31, False)])
def test_split_capture_decodes_like_the_whole(spark, tmp_path: Path, name: str,
                                              per_file: int, big_messages: bool) -> None:
    from kwsniff.spark.spark_decode import run_spark_decode

    capture = PCAPS / f"{name}.pcap"
    files = pcapsplit.split(capture, tmp_path / "rotated", per_file)
    assert len(files) > 10          # tcpdump -C names: name order is not capture order
    expected = export_lines(capture, tmp_path / "whole.jsonl")
    shuffled = [str(f) for f in files]
    random.Random(7).shuffle(shuffled)
    out = tmp_path / "out"
    result = run_spark_decode(spark, shuffled, str(out), partitions=3)

    rows = parquet_rows(spark, out)
    assert len(rows) == len(expected) == result.exchanges
    captures = sorted((r.asDict() for r in spark.read.parquet(str(out / "captures")).collect()),
                      key=lambda c: c["rank"])
    assert [c["capture"] for c in captures] == [str(f) for f in files]   # capture order
    assert captures[0]["first_frame"] == 1
    for a, b in zip(captures, captures[1:]):
        assert b["first_frame"] == a["last_frame"] + 1
    assert captures[-1]["last_frame"] == len(pcapsplit.records(capture)[1]) == result.packets

    spanning_exchanges = spanning_messages = 0
    for got, want in zip(rows, expected):
        for key, value in want.items():
            if key != "capture":
                assert got[key] == value, (want["index"], key)
        first = (want["request_frames"] or want["response_frames"])[0]
        assert got["capture"] == file_of(first, captures)
        frames = [f for f in (want["request_frames"], want["response_frames"]) if f]
        owners = {file_of(f, captures) for pair in frames for f in pair}
        spanning_exchanges += len(owners) > 1
        spanning_messages += any(file_of(a, captures) != file_of(b, captures) for a, b in frames)
    # the premise: exchanges (and, with a 100 KiB record, single messages) really cross
    # file boundaries
    assert spanning_exchanges > 0
    assert spanning_messages > 0 or not big_messages

    run = json.loads((out / "run.json").read_text())
    assert run["exchanges"] == len(expected)
    assert run["packets"] == result.packets
    # streams are numbered over all TCP connections, like a single run does
    assert run["tcp_connections"] >= max(w["stream"] for w in expected) + 1


def test_topic_ids_named_on_other_connections_are_resolved(spark, tmp_path: Path) -> None:
    """Fetch v13+ names topics by id; the Metadata response naming them comes on another
    connection, which a per-connection decode must still take into account."""
    from kwsniff.spark.spark_decode import run_spark_decode

    capture = PCAPS / "rdkafka-consumer-group.pcap"
    files = pcapsplit.split(capture, tmp_path / "rotated", 60)
    out = tmp_path / "out"
    result = run_spark_decode(spark, [str(f) for f in files], str(out), partitions=2)
    assert result.topic_ids >= 1
    fetches = [r for r in parquet_rows(spark, out) if r["api_name"] == "Fetch"
               and r["api_version"] >= 13]
    assert fetches
    for r in fetches:
        assert r["topics"] == ["orders"]
        for t in (r["response"] or {}).get("Responses", []):
            assert t["_topic_name"] == "orders"


def test_unreadable_files_are_reported_and_skipped(spark, tmp_path: Path) -> None:
    from kwsniff.spark.spark_decode import run_spark_decode

    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"\x00" * 100)
    good = PCAPS / "rdkafka-acks.pcap"
    out = tmp_path / "out"
    result = run_spark_decode(spark, [str(junk), str(good)], str(out), partitions=2)
    bad = [f for f in result.files if f.error]
    assert [f.path for f in bad] == [str(junk)] and bad[0].rank == -1
    assert result.exchanges == len([x for x in export_lines(good, tmp_path / "x.jsonl")
                                    if x["kind"] == "exchange"])
    assert result.problem_count >= 1


def test_cli_and_analyze_read_the_output(spark, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from kwsniff.cli import main
    from kwsniff.spark.load import load_exports

    files = pcapsplit.split(PCAPS / "rdkafka-idempotent-txn.pcap", tmp_path / "rot", 50)
    out = tmp_path / "decoded"
    assert main(["spark-decode", str(files[0].parent), "--out", str(out),
                 "--partitions", "2"]) == 0
    err = capsys.readouterr().err
    assert "exchanges in" in err and f"{len(files)} capture files" in err
    exports = load_exports(spark, [str(out)])
    try:
        n = exports.exchanges.count()
        expected = export_lines(PCAPS / "rdkafka-idempotent-txn.pcap", tmp_path / "w.jsonl")
        assert n == len(expected)
        assert exports.records.count() == 0
    finally:
        exports.release()


def test_cli_errors(spark, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from kwsniff.cli import main

    assert main(["spark-decode", str(tmp_path / "nope.pcap"), "--out", str(tmp_path)]) == 2
    assert "no such capture" in capsys.readouterr().err
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"junk")
    assert main(["spark-decode", str(junk), "--out", str(tmp_path / "o")]) == 2
    assert "no readable capture" in capsys.readouterr().err
