"""Fixtures of the insights tests: each insights capture decoded once per session."""

from __future__ import annotations

from typing import Any

import pytest
from insights_run import insights_of, manifest


@pytest.fixture(scope="session")
def groups_capture() -> tuple[dict[str, Any], dict[str, Any]]:
    """(kwsniff's insights, the clients' manifest) of pcaps/insights-groups."""
    return insights_of("insights-groups"), manifest("insights-groups")


@pytest.fixture(scope="session")
def retry_capture() -> tuple[dict[str, Any], dict[str, Any]]:
    """(kwsniff's insights, the clients' manifest) of pcaps/insights-idempotent-retry."""
    return insights_of("insights-idempotent-retry"), manifest("insights-idempotent-retry")


@pytest.fixture(scope="session")
def timeout_capture() -> tuple[dict[str, Any], dict[str, Any]]:
    """(kwsniff's insights, the clients' manifest) of pcaps/insights-session-timeout."""
    return insights_of("insights-session-timeout"), manifest("insights-session-timeout")
