"""A capture in which kwsniff finds no Kafka says so, with the TCP server ports seen
and the -p option to try (decode, export, stats text and JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwsniff.output.no_kafka import no_kafka_note, tcp_server_ports

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
# real librdkafka traffic on broker port 19292; with --no-detect and no -p, nothing is Kafka
ACKS = str(ROOT / "pcaps" / "rdkafka-acks.pcap")
NOTE = "no Kafka found in 9 TCP connections (server port 19292 x9); try -p 19292 " \
       "if Kafka runs on it"


def test_server_ports_of_a_real_capture() -> None:
    assert tcp_server_ports(ACKS) == {19292: 9}
    assert tcp_server_ports("-") == {}


def test_note_wording() -> None:
    assert no_kafka_note(1, 9, {19292: 9}) is None
    assert no_kafka_note(0, 0, {}) == "no Kafka found: the capture holds no TCP connections"
    assert no_kafka_note(0, 1, {8080: 1}) == \
        "no Kafka found in 1 TCP connection (server port 8080); try -p 8080 if Kafka runs on it"
    many = no_kafka_note(0, 12, {80: 1, 443: 5, 5432: 2, 6379: 1, 8080: 1, 9000: 2})
    assert many == ("no Kafka found in 12 TCP connections (server ports 443 x5, 5432 x2, "
                    "9000 x2, 80, 6379, ... (6 ports)); try -p 443 (or another of them) "
                    "if Kafka runs there")


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("command", ["decode", "export"])
def test_decode_and_export_say_no_kafka(command: str, jobs: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command, "-j", jobs, "--no-detect", ACKS] + \
        (["-o", "-"] if command == "export" else [])
    code, out, err = run_cli(capsys, argv)
    assert code == 0
    # the run summary line names the connections not recognised and the port to try;
    # the note would say it again, so it is left out
    last = err.splitlines()[-1]
    assert "9 TCP connections not recognised as Kafka" in last
    assert last.endswith("try -p 19292")
    assert NOTE not in err


def test_stats_says_no_kafka_instead_of_empty_tables(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    code, out, err = run_cli(capsys, ["stats", "--no-detect", ACKS])
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == [f"Kafka statistics: {ACKS}", NOTE]
    assert "Requests and latency" not in out
    code, out, err = run_cli(capsys, ["stats", "--json", "--no-detect", ACKS])
    assert json.loads(out)["no_kafka"] == NOTE


def test_kafka_found_means_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-p", "19292", "--no-detect", ACKS])
    assert "no Kafka found" not in err and out
    code, out, err = run_cli(capsys, ["stats", "--json", "-p", "19292", ACKS])
    assert json.loads(out)["no_kafka"] is None


def test_real_non_kafka_traffic(capsys: pytest.CaptureFixture[str]) -> None:
    """HTTP, TLS, Redis and PostgreSQL on loopback (tests/conversation/data)."""
    capture = str(ROOT / "tests" / "conversation" / "data" / "nonkafka.pcap")
    code, out, err = run_cli(capsys, ["decode", capture])
    assert code == 0 and out == ""
    last = err.splitlines()[-1]
    assert "19 TCP connections not recognised as Kafka" in last
    assert "try -p" in last and "no Kafka found" not in err
    code, out, err = run_cli(capsys, ["stats", capture])      # stats: the note, no tables
    assert out.splitlines()[1] == (
        "no Kafka found in 23 TCP connections (server ports 16379 x11, 15432 x6, 18080 x4, "
        "18443 x2); try -p 16379 (or another of them) if Kafka runs there")
