"""Kafka API key names (from the generated table: Kafka's request names minus "Request")."""

from __future__ import annotations

from kwsniff.kafka.protocol.schema_table import API_NAMES


def api_name(api_key: int | None) -> str:
    """"Produce", "Fetch", ...; ``Unknown(<key>)`` for keys the table does not know."""
    name = API_NAMES.get(api_key) if api_key is not None else None
    return name if name is not None else f"Unknown({api_key})"


def api_key_by_name(name: str) -> int | None:
    """Reverse lookup, case-insensitive ("produce" -> 0); None when unknown."""
    low = name.lower()
    for key, value in API_NAMES.items():
        if value.lower() == low:
            return key
    return None
