"""Shared pytest configuration.

The default run is fast: tests marked ``slow``, ``spark`` or ``fuzz`` are skipped
unless ``--all`` is given (CI and the README test command pass it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PCAPS = ROOT / "pcaps"

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

_OPT_IN = ("slow", "spark", "fuzz")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all", action="store_true", default=False,
                     help="also run tests marked slow, spark and fuzz")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--all"):
        return
    skip = pytest.mark.skip(reason="opt-in test: run with --all")
    for item in items:
        if any(m in item.keywords for m in _OPT_IN):
            item.add_marker(skip)
