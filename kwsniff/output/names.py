"""Display names of API keys and error codes, as output shows them.

Contract: cached wrappers over the protocol layer's tables that always return text
(``"Unknown(57)"`` / ``"UNKNOWN_CODE_123"`` for values the tables do not know), 0.7
protocol names for ``kafka-0.7`` exchanges, and reverse lookups (case-insensitive)
for the display filter.
"""

from __future__ import annotations

from functools import lru_cache

from kwsniff.kafka import legacy07 as _legacy07
from kwsniff.kafka.protocol import ERRORS, api_key_by_name, api_name, error_name
from kwsniff.kafka.protocol.schema_table import API_NAMES

LEGACY_PROTOCOL = _legacy07.PROTOCOL
SASL_PROTOCOL = "kafka-sasl"          # raw SASL tokens after SaslHandshake v0
SASL_LABEL = "SASL"


@lru_cache(maxsize=2048)
def api_label(api_key: int | None, protocol: str = "kafka") -> str:
    """Human name of an API key (``"Produce"``); the 0.7 request type for 0.7 exchanges;
    ``"SASL"`` for raw SASL token exchanges."""
    if protocol == LEGACY_PROTOCOL:
        return _legacy07.request_name(api_key)
    if protocol == SASL_PROTOCOL:
        return SASL_LABEL
    return api_name(api_key)


@lru_cache(maxsize=1024)
def error_label(code: int, protocol: str = "kafka") -> str:
    """Kafka's name of an error code (``"NOT_LEADER_OR_FOLLOWER"``).

    For the 0.7 protocol the names of that protocol (``"OffsetOutOfRange"``)."""
    if protocol == LEGACY_PROTOCOL:
        return _legacy07.ERROR_NAMES.get(code, f"UNKNOWN_CODE_{code}")
    return error_name(code)


def api_key_of(name: str) -> int | None:
    """API key of a name, case-insensitive (``"produce"`` -> 0); None if unknown."""
    return api_key_by_name(name)


@lru_cache(maxsize=1)
def _error_table() -> dict[str, int]:
    return {name.upper(): code for code, (name, _) in ERRORS.items()}


def error_code_of(name: str) -> int | None:
    """Error code of a name, case-insensitive (``"none"`` -> 0); None if unknown."""
    return _error_table().get(name.upper())


def api_names() -> list[str]:
    """All known API names, in key order (for completion), then vendor APIs registered
    by plugins."""
    from kwsniff.kafka.protocol.extensions import vendor_apis

    return [API_NAMES[k] for k in sorted(API_NAMES)] + \
        [a.name for a in vendor_apis() if a.api_key not in API_NAMES]


def error_names() -> list[str]:
    """All known error names, in code order (for completion)."""
    return [ERRORS[c][0] for c in sorted(ERRORS) if c != 0]
