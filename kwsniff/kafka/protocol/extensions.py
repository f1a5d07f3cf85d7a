"""Vendor API extensions: decoders for API keys and versions the schema table lacks.

Kafka-compatible brokers add their own APIs (or versions); plugins teach the decoder
about them here.

Contract:

* :func:`register_vendor_api` adds an extension for one API key: its ``name``, the
  versions it covers, which of them are *flexible* (compact encodings, tagged fields,
  request header v2 / response header v1) and a body decoder per kind. A body decoder
  is either

  - a callable ``fn(raw, offset, version) -> dict | (dict, end)``: ``raw`` is the whole
    frame without its size prefix, ``offset`` where the body starts; it returns the
    body (the end is then ``len(raw)``) or the body and the offset after its last byte;
  - or a message definition in Apache Kafka's JSON format (the ``"fields"`` list of a
    ``*Request.json``/``*Response.json``, optionally with ``"commonStructs"``), compiled
    by the same code generator as Kafka's own APIs (byte ranges included).

* The decoder consults extensions **only** when the schema table has no decoder for an
  (api key, kind, version): built-in Kafka APIs are never overridden. A version outside
  the extension's range is not decoded.
* A failing extension never breaks decoding: an exception, or a result that is not a
  dict, leaves the body undecoded with a problem naming the extension
  (see :func:`kwsniff.kafka.protocol.decoder.decode_request`).
* :func:`vendor_api` finds the extension for a key/version; :func:`vendor_name` its
  name (``api_name`` uses it for keys the table does not know). :func:`on_change`
  lets caches drop what they derived from the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kwsniff.kafka.protocol.schema import OPEN_END, REQUEST, RESPONSE

CallableBody = Callable[[bytes, int, int], Any]
BodySpec = CallableBody | dict[str, Any] | list[dict[str, Any]]

NONE_RANGE = (0, -1)
_PRIMITIVES = frozenset({
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string",
    "bytes", "uuid", "records", "uvarint", "varint", "varlong",
})


class ExtensionError(ValueError):
    """A vendor API registration that cannot work (bad key, range or definition)."""


@dataclass(slots=True, eq=False)
class VendorApi:
    """One registered vendor API (see the module contract)."""

    api_key: int
    name: str
    versions: tuple[int, int]
    flexible: tuple[int, int]          # flexible versions; NONE_RANGE when none
    request: CallableBody | None
    response: CallableBody | None
    owner: str                         # who registered it (plugin name), for problems
    # compiled field rows per kind when a JSON definition was given
    rows: dict[str, tuple] = field(default_factory=dict)

    def covers(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def is_flexible(self, version: int) -> bool:
        return self.flexible[0] <= version <= self.flexible[1]

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        return 1 if self.is_flexible(version) else 0

    def body_fn(self, kind: str) -> CallableBody | None:
        return self.request if kind == REQUEST else self.response


_registry: dict[int, list[VendorApi]] = {}
_listeners: list[Callable[[], None]] = []


def parse_versions(text: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"0-3"``, ``"2+"``, ``"1"``, ``"none"`` or a ``(lo, hi)`` pair -> ``(lo, hi)``."""
    if text is None:
        return NONE_RANGE
    if isinstance(text, tuple):
        lo, hi = text
        return int(lo), int(hi)
    text = str(text).strip()
    if text == "none" or not text:
        return NONE_RANGE
    try:
        if text.endswith("+"):
            return int(text[:-1]), OPEN_END
        if "-" in text:
            lo, hi = text.split("-", 1)
            return int(lo), int(hi)
        v = int(text)
    except ValueError:
        raise ExtensionError(f"bad version range {text!r} (use \"0-3\", \"2+\" or \"1\")") \
            from None
    return v, v


def _rows(fields: list[dict[str, Any]], common: dict[str, list[dict[str, Any]]],
          depth: int = 0) -> tuple:
    """Kafka JSON field definitions -> schema-table field rows (see schema_table.py)."""
    if depth > 32:
        raise ExtensionError("message definition nested too deeply")
    out = []
    for d in fields:
        if not isinstance(d, dict) or "name" not in d or "type" not in d:
            raise ExtensionError(f"a field needs a name and a type: {d!r}")
        t = str(d["type"])
        base = t[2:] if t.startswith("[]") else t
        children = d.get("fields")
        if children is None and base not in _PRIMITIVES:
            children = common.get(base)
            if children is None:
                raise ExtensionError(f"unknown type {t!r} of field {d['name']!r}")
        nullable = parse_versions(d.get("nullableVersions"))
        tagged = parse_versions(d.get("taggedVersions"))
        versions = parse_versions(d["versions"]) if "versions" in d else tagged
        flex = parse_versions(d["flexibleVersions"]) if "flexibleVersions" in d else None
        default = d.get("default")
        out.append((
            str(d["name"]), t, versions,
            None if nullable == NONE_RANGE else nullable,
            None if d.get("tag") is None else int(d["tag"]),
            None if tagged == NONE_RANGE else tagged,
            flex,
            None if default is None else str(default).lower() if isinstance(default, bool)
            else str(default),
            d.get("entityType"), None, " ".join(str(d.get("about", "")).split()),
            None if children is None else _rows(children, common, depth + 1),
        ))
    return tuple(out)


def _definition_rows(spec: dict[str, Any] | list[dict[str, Any]]) -> tuple:
    if isinstance(spec, list):
        return _rows(spec, {})
    fields = spec.get("fields")
    if not isinstance(fields, list):
        raise ExtensionError("a message definition needs a \"fields\" list")
    common = {str(c["name"]): c.get("fields", []) for c in spec.get("commonStructs", [])
              if isinstance(c, dict) and "name" in c}
    return _rows(fields, common)


def register_vendor_api(api_key: int, name: str, *, request: BodySpec | None = None,
                        response: BodySpec | None = None,
                        versions: str | tuple[int, int] = "0+",
                        flexible: str | tuple[int, int] | None = None,
                        owner: str = "extension") -> VendorApi:
    """Register a vendor API (see the module contract); returns its handle.

    ``versions``/``flexible`` take Kafka's version-range notation (``"0-3"``, ``"2+"``)
    or a pair; a JSON definition's ``validVersions``/``flexibleVersions`` are used when
    these are not given. Raises :class:`ExtensionError` on a registration that cannot
    work (this happens at registration time, never while decoding).
    """
    if not isinstance(api_key, int) or not 0 <= api_key <= 32767:
        raise ExtensionError(f"API key must be an integer 0-32767, not {api_key!r}")
    if not name or not isinstance(name, str):
        raise ExtensionError("a vendor API needs a name")
    if request is None and response is None:
        raise ExtensionError(f"vendor API {name}: give a request or a response decoder")
    rows: dict[str, tuple] = {}
    fns: dict[str, CallableBody | None] = {}
    for kind, spec in ((REQUEST, request), (RESPONSE, response)):
        if spec is None or callable(spec):
            fns[kind] = spec  # type: ignore[assignment]
            continue
        if not isinstance(spec, (dict, list)):
            raise ExtensionError(f"vendor API {name} {kind}: a callable or a message "
                                 f"definition (dict), not {type(spec).__name__}")
        rows[kind] = _definition_rows(spec)
        fns[kind] = None
        if isinstance(spec, dict):
            if versions == "0+" and spec.get("validVersions") is not None:
                versions = spec["validVersions"]
            if flexible is None and spec.get("flexibleVersions") is not None:
                flexible = spec["flexibleVersions"]
    vr = parse_versions(versions)
    if vr == NONE_RANGE or vr[0] < 0:
        raise ExtensionError(f"vendor API {name}: no valid versions in {versions!r}")
    api = VendorApi(api_key, name, vr, parse_versions(flexible), fns[REQUEST], fns[RESPONSE],
                    owner, rows)
    _registry.setdefault(api_key, []).append(api)
    _changed()
    return api


def unregister_vendor_api(handle: VendorApi) -> None:
    """Remove a registration (no-op when already removed)."""
    apis = _registry.get(handle.api_key)
    if apis and handle in apis:
        apis.remove(handle)
        if not apis:
            del _registry[handle.api_key]
        _changed()


def vendor_api(api_key: int | None, version: int | None = None) -> VendorApi | None:
    """The latest registration for ``api_key`` that covers ``version`` (any version when
    None); None when there is none."""
    apis = _registry.get(api_key) if api_key is not None else None  # type: ignore[arg-type]
    if not apis:
        return None
    for api in reversed(apis):
        if version is None or api.covers(version):
            return api
    return None


def vendor_name(api_key: int | None) -> str | None:
    api = vendor_api(api_key)
    return api.name if api is not None else None


def vendor_key_by_name(name: str) -> int | None:
    low = name.lower()
    for key, apis in _registry.items():
        if any(a.name.lower() == low for a in apis):
            return key
    return None


def vendor_apis() -> list[VendorApi]:
    """Every registration, by API key then registration order."""
    return [a for k in sorted(_registry) for a in _registry[k]]


def on_change(callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever a registration is added or removed."""
    _listeners.append(callback)


def _changed() -> None:
    for cb in list(_listeners):
        cb()
