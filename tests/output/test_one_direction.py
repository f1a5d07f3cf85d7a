"""A capture of one direction of Kafka traffic (one side of a mirrored port, an
asymmetric route) says so after the run summary: real librdkafka traffic cut to the
clients' or the brokers' packets (decode, export, stats)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from kwsniff.capture import open_capture
from kwsniff.output.pipeline import one_direction_text

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "conversation"))
from convsim import write_pcap  # noqa: E402

ACKS = ROOT / "pcaps" / "rdkafka-acks.pcap"      # librdkafka, broker port 19292
CLIENTS = "it may hold the clients' direction only"
BROKERS = "it may hold the brokers' direction only"


def _cut(tmp_path: Path, from_broker: bool) -> str:
    """The packets of ACKS sent by the broker (port 19292), or by the clients."""
    kept = []
    with open_capture(str(ACKS)) as source:
        for frame, ts, linktype, data, orig in source:
            data = bytes(data)
            assert linktype == 1 and data[12:14] == b"\x08\x00"     # Ethernet, IPv4
            tcp = 14 + (data[14] & 15) * 4
            sport = struct.unpack_from(">H", data, tcp)[0]
            if (sport == 19292) == from_broker:
                kept.append((frame, ts, linktype, data, orig))
    path = tmp_path / ("brokers.pcap" if from_broker else "clients.pcap")
    write_pcap(path, kept)
    return str(path)


def test_wording() -> None:
    assert one_direction_text({"paired": 1, "unanswered": 5}) is None
    assert one_direction_text({"paired": 0, "unanswered": 1}) is None
    assert one_direction_text({"paired": 0, "unanswered": 3, "orphan_responses": 1}) is None
    assert one_direction_text({"paired": 0, "unanswered": 3}) == \
        f"no broker response in the capture (3 requests unanswered): {CLIENTS}"
    assert one_direction_text({"paired": 0, "orphan_responses": 2}) == \
        f"no client request in the capture (2 responses without theirs): {BROKERS}"
    assert one_direction_text({}) is None


@pytest.mark.parametrize("command", [["decode"], ["decode", "-V"], ["export", "-o", "-"],
                                     ["stats"], ["stats", "--json"]])
def test_one_direction_hint(command: list[str], capsys: pytest.CaptureFixture[str],
                            tmp_path: Path) -> None:
    # (after the run line: standard error, or standard output for the stats text)
    where = 1 if command == ["stats"] else 2
    got = run_cli(capsys, command + [str(ACKS)])
    assert got[0] == 0 and "direction only" not in got[1] + got[2]       # both directions
    got = run_cli(capsys, command + [_cut(tmp_path, False)])
    assert got[0] == 0 and got[where].rstrip().endswith(CLIENTS)
    assert "requests unanswered" in got[where]
    got = run_cli(capsys, command + ["-p", "19292", _cut(tmp_path, True)])
    assert got[0] == 0 and got[where].rstrip().endswith(BROKERS)
    assert "responses without" in got[where]


def test_live_end_summary_says_it() -> None:
    from types import SimpleNamespace

    from kwsniff.commands.live import summary_lines
    stats = SimpleNamespace(packets=10, dropped=0, if_dropped=0)
    counters = {"exchanges": 3, "connections": 1, "problems": 3, "skipped_bytes": 0,
                "gap_bytes": 0, "paired": 0, "unanswered": 3, "orphan_responses": 0}
    lines = summary_lines(stats, "lo", counters, {"unanswered": 3}, 3, None)
    assert len(lines) == 3 and lines[-1].endswith(CLIENTS)
    counters["paired"] = 1
    assert len(summary_lines(stats, "lo", counters, {"unanswered": 3}, 3, None)) == 2
