"""Fixtures of the live-capture tests (helpers live in live_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live_helpers import EchoServer, capture_allowed


@pytest.fixture(scope="session")
def capture_ok() -> None:
    """Skip tests that need to capture when this process may not (not root)."""
    why = capture_allowed()
    if why is not None:
        pytest.skip(f"cannot capture here: {why}")


@pytest.fixture
def echo_server() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()
