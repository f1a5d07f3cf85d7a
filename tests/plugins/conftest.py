"""Fixtures of the plugin tests: a plugin manager that reports into a list and is closed
(every registration removed) after the test, and a directory to write plugins into."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kwsniff.plugin_api import PluginManager



class Reports(list):
    """The lines a manager reported."""

    def matching(self, text: str) -> list[str]:
        return [r for r in self if text in r]


@pytest.fixture
def reports() -> Reports:
    return Reports()


@pytest.fixture
def manager(reports: Reports) -> Iterator[PluginManager]:
    mgr = PluginManager(reporter=reports.append)
    try:
        yield mgr
    finally:
        mgr.close()


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Callable[[str, str], Path]:
    """``write(name, source)`` writes ``tmp/plugins/<name>.py`` and returns the directory."""
    directory = tmp_path / "plugins"
    directory.mkdir()

    def write(name: str, source: str) -> Path:
        (directory / f"{name}.py").write_text(textwrap.dedent(source))
        return directory

    return write
