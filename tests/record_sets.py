"""Test helper: the record sets of a decoded message body."""

from __future__ import annotations

from typing import Any

from kwsniff.kafka.records import Records


def record_sets(body: Any) -> list[Records]:
    """Every :class:`Records` in ``body`` (dicts and lists walked), in field order."""
    if isinstance(body, Records):
        return [body]
    if isinstance(body, dict):
        return [s for v in body.values() for s in record_sets(v)]
    if isinstance(body, list):
        return [s for v in body for s in record_sets(v)]
    return []
