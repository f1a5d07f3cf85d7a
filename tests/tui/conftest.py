"""Fixtures of the TUI tests: captures decoded in-process into a store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kwsniff.tui.loader import Loader
from tui_common import SAMPLE, load_in_process


@pytest.fixture()
def sample_loader() -> Iterator[Loader]:
    loader = load_in_process(SAMPLE)
    yield loader
    loader.close()
