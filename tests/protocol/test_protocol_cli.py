"""`kwsniff protocols` prints the coverage table; --json for machines."""

from __future__ import annotations

import json

import pytest

from kwsniff.cli import main


def test_protocols_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["key", "name", "versions", "flexible", "sources"]
    produce = next(line for line in out if line.split()[:2] == ["0", "Produce"])
    assert "v0-v13" in produce and "v9+" in produce and "kafka-2024-10" in produce
    sasl = next(line for line in out if line.split()[:2] == ["17", "SaslHandshake"])
    assert sasl.split()[3] == "-"
    assert out[-1] == "93 API keys, 360 versions (720 request/response schemas)"


def test_protocols_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["protocols", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["totals"] == {"api_keys": 93, "api_versions": 360,
                             "request_and_response_schemas": 720}
    fetch = doc["apis"][1]
    assert fetch["name"] == "Fetch" and fetch["max_version"] == 18 and fetch["flexible_from"] == 12
    assert [s["source"] for s in doc["apis"][88]["sources"]] == ["franz-go"]
