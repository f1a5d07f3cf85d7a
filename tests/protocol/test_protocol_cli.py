"""`kwsniff protocols` prints the coverage table; --json for machines."""

from __future__ import annotations

import json
import re

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


# ----------------------------------------------------------------------------- the docs' claims

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _table() -> tuple[int, str, dict[str, int]]:
    """(highest API key, newest Kafka release named in the sources, totals)."""
    from kwsniff.commands.protocols import _totals, coverage

    rows = coverage()
    releases = {s["source"].removeprefix("kafka-") for r in rows for s in r["sources"]
                if re.fullmatch(r"kafka-\d+\.\d+", s["source"])}
    newest = max(releases, key=lambda v: tuple(int(p) for p in v.split(".")))
    return max(r["api_key"] for r in rows), newest, _totals(rows)


def test_readme_and_coverage_doc_claim_what_the_table_shows() -> None:
    top, newest, totals = _table()
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"every API key (0-{top}) at every version** from Kafka 0.8 to {newest} " in readme
    assert f"{totals['api_keys']} API keys, {totals['api_versions']} versions" in readme
    doc = " ".join((ROOT / "docs" / "protocol-coverage.md").read_text(encoding="utf-8").split())
    assert f"every API key 0-{top}," in doc
    assert (f"{totals['api_keys']} API keys (0-{top}), {totals['api_versions']} API versions, "
            f"{totals['request_and_response_schemas']} request/response schemas") in doc
    assert f"newest in Kafka {newest}," in doc
    # no other Kafka release is claimed as the newest anywhere
    for text in (readme, doc):
        for claimed in re.findall(r"(?:to|newest in) Kafka (\d+\.\d+)", text):
            assert claimed == newest, claimed


@pytest.mark.parametrize("command", ["decode", "export", "stats", "live", "tui", "analyze",
                                     "spark-decode", "protocols"])
def test_help_has_no_rst_markup(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and not re.search(r":(func|class|mod|meth|data):", out), out
    if command == "protocols":
        assert "--json prints one JSON document" in " ".join(out.split())
