"""Kafka API key names (from the generated table: Kafka's request names minus "Request";
vendor extensions name the keys the table does not know)."""

from __future__ import annotations

from kwsniff.kafka.protocol.extensions import vendor_key_by_name, vendor_name
from kwsniff.kafka.protocol.schema_table import API_NAMES


def api_name(api_key: int | None) -> str:
    """"Produce", "Fetch", ...; a registered vendor API's name; ``Unknown(<key>)`` else."""
    name = API_NAMES.get(api_key) if api_key is not None else None
    if name is None:
        name = vendor_name(api_key)
    return name if name is not None else f"Unknown({api_key})"


def api_key_by_name(name: str) -> int | None:
    """Reverse lookup, case-insensitive ("produce" -> 0); None when unknown."""
    low = name.lower()
    for key, value in API_NAMES.items():
        if value.lower() == low:
            return key
    return vendor_key_by_name(name)
