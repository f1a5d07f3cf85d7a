"""tshark's request/response pairs are all in kwsniff's export (issue 36): on every
capture in pcaps/, each ``kafka.request_frame`` tshark reports (on a response frame,
with the broker ports of the capture's manifest decoded as Kafka) is an exported
exchange whose request ends in that frame and whose response ends in the other."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from capture_edit import PCAPS

from kwsniff.cli import main

TSHARK = shutil.which("tshark")
# the captures with a manifest (the TLS ones, tools/make_tls_pcaps.py, have none: their
# TLS connections are followed by the TLS layer, whose bytes this accounting does not
# cover yet)
CAPTURES = sorted(p.name for p in PCAPS.glob("*.pcap") if p.with_suffix(".json").is_file())


def _tshark_pairs(name: str) -> set[tuple[int, int]]:
    ports = json.loads((PCAPS / name.replace(".pcap", ".json")).read_text())["capture"]["ports"]
    cmd = [TSHARK, "-n", "-r", str(PCAPS / name)]
    for port in ports:
        cmd += ["-d", f"tcp.port=={port},kafka"]
    cmd += ["-T", "fields", "-e", "frame.number", "-e", "kafka.request_frame",
            "-Y", "kafka.request_frame"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    pairs = set()
    for line in out.splitlines():
        response, requests = line.split("\t")
        for request in requests.split(","):
            pairs.add((int(request), int(response)))
    return pairs


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
@pytest.mark.parametrize("capture", CAPTURES)
def test_every_tshark_pair_is_exported(capture: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    want = _tshark_pairs(capture)
    assert want
    out = tmp_path / "x.jsonl"
    assert main(["export", str(PCAPS / capture), "-o", str(out)]) == 0
    capsys.readouterr()
    got = set()
    for line in out.read_text().splitlines():
        obj = json.loads(line)
        if obj["kind"] == "exchange" and obj["request_frames"] and obj["response_frames"]:
            got.add((obj["request_frames"][1], obj["response_frames"][1]))
    assert want <= got, sorted(want - got)[:10]
