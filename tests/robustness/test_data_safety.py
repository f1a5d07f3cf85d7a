"""Data safety: every run ends with the counts of exchanges, problems, skipped and lost
bytes (standard error for decode/export/stats, the summary object of the export), the
counts agree with each other and with the engine, and the export holds every exchange."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fuzz import seeds, wire
from kwsniff.capture import open_capture
from kwsniff.cli import main
from kwsniff.engine import Engine
from kwsniff.output.facts import ExchangeFacts

RUN_LINE = re.compile(r"^(\d+) exchanges? \((\d+) (shown|exported|counted)\) in (\d+) Kafka "
                      r"connections?, (\d+) packets; (\d+) problems?; (\d+) bytes skipped; "
                      r"(\d+) bytes lost in gaps(?:; \d+ TCP connections? not recognised as "
                      r"Kafka \([^)]*\)(?:; try(?: -p \d+)+)?)?$")


def _nasty_capture(path: Path) -> Path:
    """Garbage, a lost segment, a non-Kafka connection and a capture cut mid-message."""
    ops = [(0, wire.api_versions_request(1)), (wire.OP_BROKER, wire.api_versions_response(1)),
           (0, wire.metadata_request(2) + b"junk!junk!"), (wire.OP_BROKER, wire.metadata_response(2)),
           (wire.OP_LOST, wire.metadata_request(3)), (wire.OP_BROKER, wire.metadata_response(3)),
           (0, wire.metadata_request(4)), (wire.OP_BROKER, wire.metadata_response(4)[:-9])]
    kafka = wire.script_packets(wire.encode_script(wire.PLAIN & ~wire.OPT_FIN, ops))
    other = wire.script_packets(wire.encode_script(
        wire.OPT_HANDSHAKE | wire.OPT_KAFKA_PORT, [(0, b"GET / HTTP/1.1\r\n\r\n")]))
    other = [(ts, pkt.replace(b"\x9c\x41", b"\x9c\x42")) for ts, pkt in other]  # port 40002
    pkts = sorted(kafka + [(ts + 0.00005, p) for ts, p in other], key=lambda x: x[0])
    data = wire.pcap_bytes(pkts)
    path.write_bytes(data + data[-40:-3])          # a truncated last record
    return path


def _captures(tmp: Path) -> list[Path]:
    paths = [p for p in seeds.capture_paths()
             if p.name in ("rdkafka-idempotent-txn.pcap", "midstream.pcap", "tansu-admin.pcap")]
    return paths + [_nasty_capture(tmp / "nasty.pcap")]


def _engine_counts(path: Path) -> dict[str, int]:
    eng = Engine()
    with open_capture(str(path)) as src:
        exchanges = list(eng.run(src))
        capture_problems = len(src.problems)
    s = eng.summary
    return {"exchanges": len(exchanges), "packets": s.packets,
            "connections": s.kafka_connections, "skipped_bytes": s.skipped_bytes,
            "gap_bytes": s.gap_bytes,
            "exchange_problems": sum(len(ex.all_problems()) for ex in exchanges),
            # batch header and CRC checks of record sets, listed with their exchange
            "record_set_problems": sum(len(rs.problems) for ex in exchanges
                                       for *_, rs in ExchangeFacts(ex).record_sets()),
            "run_problems": len(s.problems) + s.problems_dropped + capture_problems}


def _run_line(err: str) -> tuple[int, ...]:
    m = RUN_LINE.match(err.rstrip("\n").splitlines()[-1])
    assert m, err
    return tuple(int(g) if g.isdigit() else g for g in m.groups())  # type: ignore[misc]


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _captures(tmp_path_factory.mktemp("safety"))


def test_nasty_capture_has_something_to_count(captures: list[Path]) -> None:
    counts = _engine_counts(captures[-1])
    assert counts["skipped_bytes"] > 0 and counts["gap_bytes"] > 0
    assert counts["run_problems"] > 0 and counts["exchanges"] >= 3


@pytest.mark.parametrize("index", range(4))
def test_export_holds_every_exchange_and_true_counts(index: int, captures: list[Path],
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = captures[index]
    out = tmp_path / "out.jsonl"
    assert main(["export", str(path), "-o", str(out), "--records"]) == 0
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    exchanges = [o for o in lines if o["kind"] == "exchange"]
    summary = lines[-1]
    assert summary["kind"] == "summary" and sum(o["kind"] == "summary" for o in lines) == 1
    want = _engine_counts(path)
    assert [o["index"] for o in exchanges] == list(range(1, want["exchanges"] + 1))
    assert summary["exported_exchanges"] == summary["exchanges"] == want["exchanges"]
    assert summary["exported_records"] == sum(o["kind"] == "record" for o in lines)
    for key in ("packets", "connections", "skipped_bytes", "gap_bytes"):
        assert summary[key] == want[key], key
    listed = sum(len(o["problems"]) for o in exchanges)
    assert listed == want["exchange_problems"] + want["record_set_problems"]
    assert summary["problems"] == listed + want["run_problems"]
    n, shown, what, conns, packets, problems, skipped, gaps = _run_line(err)
    assert (n, shown, what, conns, packets, problems, skipped, gaps) == (
        summary["exchanges"], summary["exported_exchanges"], "exported", summary["connections"],
        summary["packets"], summary["problems"], summary["skipped_bytes"], summary["gap_bytes"])


@pytest.mark.parametrize("index", range(4))
def test_decode_and_stats_end_with_the_run_counts(index: int, captures: list[Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = captures[index]
    want = _engine_counts(path)
    assert main(["decode", str(path)]) == 0
    captured = capsys.readouterr()
    n, shown, what, conns, packets, problems, skipped, gaps = _run_line(captured.err)
    assert (n, shown, what) == (want["exchanges"], want["exchanges"], "shown")
    assert len(captured.out.splitlines()) == shown
    assert (skipped, gaps, packets, conns) == (want["skipped_bytes"], want["gap_bytes"],
                                               want["packets"], want["connections"])
    assert problems == want["exchange_problems"] + want["record_set_problems"] + \
        want["run_problems"]
    assert main(["stats", str(path)]) == 0
    stats_out = capsys.readouterr().out
    run = [line for line in stats_out.splitlines() if line.startswith("Run: ")]
    assert run, stats_out
    assert _run_line(run[-1][len("Run: "):])[5:] == (problems, skipped, gaps)


def test_filtered_export_says_how_many_it_left_out(captures: list[Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = next(p for p in captures if "txn" in p.name)
    out = tmp_path / "f.jsonl"
    assert main(["export", str(path), "-o", str(out), "-Y", "api == Produce"]) == 0
    capsys.readouterr()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    summary = lines[-1]
    assert 0 < summary["exported_exchanges"] < summary["exchanges"]
    assert summary["exported_exchanges"] == len(lines) - 1
    assert all(o["api_name"] == "Produce" for o in lines[:-1])


def test_truncated_capture_is_reported_at_the_end(captures: list[Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", str(captures[-1])]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("capture: ") and "frame" in line for line in err[:-1]), err
