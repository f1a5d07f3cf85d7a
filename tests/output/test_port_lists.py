"""``-p`` takes what tcpdump users type: one port, comma lists and ranges."""

from __future__ import annotations

import argparse

import pytest

from kwsniff.cli import build_parser
from kwsniff.commands.decode import _ports, engine_options


@pytest.mark.parametrize("text, ports", [
    ("9092", [9092]),
    ("9092,9093", [9092, 9093]),
    ("9092-9094", [9092, 9093, 9094]),
    ("9092, 9094-9095,19092", [9092, 9094, 9095, 19092]),
    ("65535", [65535]),
])
def test_port_lists_and_ranges(text: str, ports: list[int]) -> None:
    assert _ports(text) == ports


@pytest.mark.parametrize("text, message", [
    ("kafka", "not a port, port list or port range"),
    ("9092,", "not a port, port list or port range"),
    ("9092-", "not a port, port list or port range"),
    ("0", "out of range"),
    ("9092-70000", "out of range"),
    ("9094-9092", "empty port range"),
])
def test_bad_port_lists(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        _ports(text)


@pytest.mark.parametrize("command", ["decode", "export", "stats", "tui", "live"])
def test_every_command_takes_lists_and_repeats(command: str) -> None:
    argv = [command, "-p", "9092,9093", "-p", "19092-19093", "-p", "9092"]
    argv += {"decode": ["x.pcap"], "export": ["x.pcap", "-o", "-"], "stats": ["x.pcap"],
             "tui": ["x.pcap"], "live": ["-i", "lo"]}[command]
    args = build_parser(command).parse_args(argv)
    assert args.port == [9092, 9093, 19092, 19093, 9092]
    if command in ("decode", "export", "stats"):
        assert engine_options(args).ports == (9092, 9093, 19092, 19093)
