"""Exchange fields contributed by plugins: filter fields, export values, digest and tree.

Contract:

* :func:`register_extra_field` adds an :class:`ExtraField`. Its name is
  ``"<plugin>.<field>"`` (it must contain a dot, so it never collides with a built-in
  field) and it becomes a display-filter field (:data:`kwsniff.output.fields.FIELDS`)
  at once. ``get(exchange)`` returns the value (a scalar or None; a list for
  multi-valued fields) and must not raise: :mod:`kwsniff.plugin_api` wraps plugin
  functions so that failures are reported and become None.
* Where the value shows: ``export`` (the ``"plugins"`` object of the exchange export
  line, nested by the dotted name: ``{"trace": {"id": [...]}}``), ``digest`` (appended
  to the summary line's digest as ``name=value`` when it has a value) and ``tree``
  (a ``Plugin fields`` node of the ``-V`` tree). Values are computed only where they
  are shown (a filter computes only the fields it names).
* Nothing here raises on a value it cannot format; it falls back to ``repr``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwsniff.kafka.model import Exchange
from kwsniff.output.fields import FIELDS, FieldSpec

TYPES = ("int", "number", "string", "name", "address")
DIGEST_VALUE_CHARS = 40


@dataclass(frozen=True, slots=True)
class ExtraField:
    """A plugin's exchange field (see the module contract)."""

    name: str
    get: Callable[[Exchange], Any]
    type: str = "string"
    multi: bool = False
    description: str = ""
    export: bool = True
    digest: bool = False
    tree: bool = True


_extra: dict[str, ExtraField] = {}


def register_extra_field(spec: ExtraField) -> ExtraField:
    """Add ``spec``; raises ValueError for a bad name/type or a name already in use."""
    name = spec.name
    if "." not in name.strip(".") or name != name.lower() or " " in name:
        raise ValueError(f"field name {name!r} must be lower-case \"<plugin>.<field>\"")
    if spec.type not in TYPES:
        raise ValueError(f"field {name}: type {spec.type!r} is not one of {', '.join(TYPES)}")
    if name in FIELDS:
        raise ValueError(f"field {name} is already defined")
    get = spec.get
    FIELDS[name] = FieldSpec(name, spec.type, spec.multi,
                             spec.description or f"added by plugin {name.split('.')[0]}",
                             lambda facts: get(facts.exchange))
    _extra[name] = spec
    return spec


def unregister_extra_field(spec: ExtraField) -> None:
    """Remove a field (no-op when it is not registered)."""
    if _extra.get(spec.name) is spec:
        del _extra[spec.name]
        FIELDS.pop(spec.name, None)


def extra_fields() -> list[ExtraField]:
    """The registered fields, in registration order."""
    return list(_extra.values())


def has_export_fields() -> bool:
    return any(f.export for f in _extra.values())


def export_values(exchange: Exchange) -> dict[str, Any]:
    """``{"plugin": {"field": value}}`` of every export field (None/[] when absent)."""
    out: dict[str, Any] = {}
    for f in _extra.values():
        if not f.export:
            continue
        value = f.get(exchange)
        if f.multi and value is None:
            value = []
        plugin, _, rest = f.name.partition(".")
        out.setdefault(plugin, {})[rest] = value
    return out


def format_value(value: Any, limit: int | None = None) -> str:
    """A value for one-line display: lists comma-separated, strings bare."""
    if isinstance(value, (list, tuple)):
        text = ",".join(format_value(v) for v in value)
    elif isinstance(value, str):
        text = value
    elif value is True or value is False:
        text = "true" if value else "false"
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    return text


def _present(value: Any) -> bool:
    return value is not None and value != [] and value != ""


def digest_suffix(exchange: Exchange) -> str:
    """``"trace.id=4bf9… "``-style text of the digest fields that have a value."""
    parts = []
    for f in _extra.values():
        if f.digest:
            value = f.get(exchange)
            if _present(value):
                parts.append(f"{f.name}={format_value(value, DIGEST_VALUE_CHARS)}")
    return " ".join(parts)


def tree_items(exchange: Exchange) -> list[tuple[str, str]]:
    """``(name, text)`` of the tree fields that have a value."""
    out = []
    for f in _extra.values():
        if f.tree:
            value = f.get(exchange)
            if _present(value):
                out.append((f.name, format_value(value)))
    return out
