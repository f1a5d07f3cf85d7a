"""Exchange numbers and times agree: an exchange's time is its first frame's (the frame
that gives its number), so the Time column and the export's ``ts`` never go backwards
as the numbers go up; the request's completion time is its own field
(``request_end_ts``, where latency counts from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "pcaps").glob("*.pcap"))


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_time_column_follows_exchange_numbers(capture: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-j", "1", str(capture)])
    assert code == 0
    rows = [(int(line.split()[0]), float(line.split()[1])) for line in out.splitlines()]
    assert [n for n, _ in rows] == list(range(1, len(rows) + 1))
    times = [t for _, t in rows]
    assert times == sorted(times), capture.name


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_export_ts_is_the_first_frame_and_request_end_is_kept(
        capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["export", "-j", "1", str(capture), "-o", "-"])
    lines = [json.loads(line) for line in out.splitlines()]
    exchanges = [o for o in lines if o["kind"] == "exchange"]
    ts = [o["ts"] for o in exchanges]
    assert ts == sorted(ts)
    for o in exchanges:
        end = o["request_end_ts"]
        if o["request_frames"] is None:
            assert end is None
            continue
        assert end >= o["ts"]
        if o["latency_ms"] is not None:
            assert o["latency_ms"] == pytest.approx((o["response_ts"] - end) * 1000.0, abs=1e-3)


def test_the_big_produce_of_the_issue(capsys: pytest.CaptureFixture[str]) -> None:
    """A 100 KB Produce spans many frames: its time is its first frame's, before the
    next exchange's, and its completion time is later."""
    capture = str(ROOT / "pcaps" / "rdkafka-consumer-group.pcap")
    code, out, err = run_cli(capsys, ["export", "-j", "1", capture, "-o", "-", "-Y",
                                      'api == "Produce" and request_bytes > 100000'])
    [big] = [json.loads(line) for line in out.splitlines()
             if json.loads(line)["kind"] == "exchange"]
    first, last = big["request_frames"]
    assert last - first > 10
    assert big["request_end_ts"] > big["ts"]
