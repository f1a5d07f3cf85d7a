"""``-x`` dumps at most ``--hex-limit`` bytes per frame (default 4096), then one
"... N more bytes not shown" line; ``--hex-limit 0`` dumps whole frames."""

from __future__ import annotations

from pathlib import Path

import pytest

from kwsniff.commands.decode import DEFAULT_HEX_LIMIT

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = str(ROOT / "pcaps" / "rdkafka-consumer-group.pcap")
# the first Produce of this capture is a 102,964-byte request (a 100 KB record)
BIG = ["-Y", 'api == "Produce" and request_bytes > 100000', "-c", "1"]


def _frames(out: str) -> dict[str, list[str]]:
    frames: dict[str, list[str]] = {}
    current: list[str] = []
    for line in out.splitlines():
        if line.endswith(" bytes:") and " frame, " in line:
            current = frames.setdefault(line.split()[0], [])
        elif line and not line[0].isspace() and current is not None:
            current.append(line)
    return frames


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_default_limit_cuts_big_frames(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-x", "-j", jobs, *BIG, CAPTURE])
    assert code == 0
    request = _frames(out)["request"]
    size = int(out.split("request frame, ")[1].split(" bytes")[0])
    assert size > 100_000
    assert len(request) == DEFAULT_HEX_LIMIT // 16 + 1
    assert request[-1] == (f"... {size - DEFAULT_HEX_LIMIT} more bytes not shown "
                           "(--hex-limit 0 shows all)")


def test_limit_option_and_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-x", "--hex-limit", "40", *BIG, CAPTURE])
    request = _frames(out)["request"]
    assert len(request) == 4 and request[2].startswith("0020  ")
    assert len(request[2].split("   ")[0]) == len("0020  ") + 8 * 3 - 1   # 8 bytes shown
    code, out, err = run_cli(capsys, ["decode", "-x", "--hex-limit", "0", *BIG, CAPTURE])
    request = _frames(out)["request"]
    size = int(out.split("request frame, ")[1].split(" bytes")[0])
    assert len(request) == (size + 15) // 16 and "more bytes" not in out


def test_small_frames_are_whole(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-x", "-Y", 'api == "Heartbeat"', "-c", "1",
                                      CAPTURE])
    assert "more bytes" not in out and _frames(out)["response"]


def test_help_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run_cli(capsys, ["decode", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--hex-limit BYTES" in out and "0: the whole frame" in out
