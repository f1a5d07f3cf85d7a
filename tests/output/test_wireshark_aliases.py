"""Wireshark field names work in display filters as aliases of kwsniff's fields, are
listed by --list-fields, and a Wireshark-style name that is no alias is answered with
a Wireshark alias or the kwsniff fields to use — never an unrelated kwsniff field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kwsniff.output.fields import WIRESHARK_ALIASES, FIELDS, canonical_field
from kwsniff.output.filter import FilterError, compile_filter, suggest

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = str(ROOT / "pcaps" / "rdkafka-consumer-group.pcap")


def _shown(capsys: pytest.CaptureFixture[str], expr: str) -> list[str]:
    code, out, err = run_cli(capsys, ["decode", "-j", "1", "-Y", expr, CAPTURE])
    assert code == 0, err
    return out.splitlines()


@pytest.mark.parametrize("alias, native", [
    ("kafka.api_key == 0", "api_key == 0"),
    ("kafka.correlation_id == 4", "correlation_id == 4"),
    ('kafka.client_id == "cg-consumer-2"', 'client_id == "cg-consumer-2"'),
    ('kafka.topic_name == "orders"', 'topic == "orders"'),
    ("tcp.port == 19092", "client_port == 19092 or broker_port == 19092"),
    ("tcp.stream == 3", "stream == 3"),
    ("ip.addr == 127.0.0.1 and frame.number > 400", "frame > 400"),
    ("frame.number == 30", "frame == 30"),
    ("KAFKA.API_KEY in {1 8}", "api_key in {1 8}"),
])
def test_alias_selects_what_the_kwsniff_field_selects(alias: str, native: str,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    with_alias = _shown(capsys, alias)
    assert with_alias and with_alias == _shown(capsys, native)


def test_port_and_address_cover_both_ends(capsys: pytest.CaptureFixture[str]) -> None:
    every = _shown(capsys, "exchange > 0")
    assert _shown(capsys, "ip.addr == 127.0.0.1") == every
    assert _shown(capsys, "ip.addr == 10.9.9.9") == []
    client_port = every[0].split()[2].rsplit(":", 1)[1]
    assert _shown(capsys, f"port == {client_port}") == \
        _shown(capsys, f"client_port == {client_port}")


def test_every_alias_names_a_field_and_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "--list-fields"])
    listed = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    for alias, name in WIRESHARK_ALIASES.items():
        assert name in FIELDS and canonical_field(alias) == name
        assert listed[alias].endswith(f"same as {name}")
    doc = (ROOT / "docs" / "display-filters.md").read_text(encoding="utf-8")
    for alias in WIRESHARK_ALIASES:
        assert f"`{alias}`" in doc


@pytest.mark.parametrize("expr, message", [
    ("ip.src == 127.0.0.1", "unknown field 'ip.src'; an exchange goes both ways: use client "
                            "or broker"),
    ("tcp.dstport == 9092", "use client_port or broker_port"),
    ('kafka.topic == "x"', "did you mean 'kafka.topic_name' (topic)?"),
    ("kafka.frobnicate == 1", "see 'kwsniff decode --list-fields'"),
])
def test_wireshark_style_mistakes_get_a_useful_hint(expr: str, message: str) -> None:
    with pytest.raises(FilterError) as err:
        compile_filter(expr)
    assert message in str(err.value)
    assert "did you mean 'member'" not in str(err.value)


def test_completion_after_an_alias() -> None:
    assert "==" in suggest("kafka.api_key ")
    assert '"orders"' not in suggest('kafka.error == "UNKNOWN_TOP')   # errors, not topics
    assert any(s.startswith('"UNKNOWN_TOPIC') for s in suggest('kafka.error == "UNKNOWN_TOP'))
