"""The generator really regenerates a capture (needs root and unshare; slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from samplecaps import ROOT, TOOLS, read_pcap

from pcapgen.manifest import load_schema
from pcapgen.netns import why_no_netns


def test_list_names_every_expected_capture() -> None:
    from samplecaps import EXPECTED

    out = subprocess.run([sys.executable, str(TOOLS / "make_pcaps.py"), "--list"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == EXPECTED


@pytest.mark.slow
def test_regenerate_acks_capture(tmp_path: Path) -> None:
    reason = why_no_netns()
    if reason:
        pytest.skip(reason)
    out = subprocess.run([sys.executable, str(TOOLS / "make_pcaps.py"), "--only",
                          "rdkafka-acks", "--out", str(tmp_path), "--attempts", "1"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads((tmp_path / "rdkafka-acks.json").read_text())
    jsonschema.validate(doc, load_schema())
    pcap = read_pcap(tmp_path / "rdkafka-acks.pcap")
    assert len(pcap.frames) == doc["capture"]["packets_captured"] > 0
    assert doc["capture"]["packets_dropped_by_kernel"] == 0
    assert {p["acks"] for p in doc["produced"]} == {0, 1, -1}
    assert len(doc["consumed"]) == 12
