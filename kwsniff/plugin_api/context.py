"""What a plugin's ``register(api)`` receives: the registration API of one plugin.

Contract (documented for plugin authors in docs/plugins.md):

* ``api.name``, ``api.options`` (:class:`~kwsniff.plugin_api.options.PluginOptions`),
  ``api.source`` (file or entry point the plugin came from).
* ``api.payload_decoder(func, topics=..., parts=..., headers=..., name=...)``:
  ``func(data: bytes, where: PayloadWhere) -> object | None`` decodes record keys,
  values or header values of matching topics (see :mod:`kwsniff.kafka.payload`).
* ``api.vendor_api(api_key, name, request=..., response=..., versions=..., flexible=...)``:
  decoders for an API key/version Kafka's schema table lacks; a callable gets
  ``(reader: KafkaReader, version)`` positioned at the body and returns a dict, or a
  Kafka JSON message definition is given instead.
* ``api.exchange_field(name, func, type=..., multi=..., description=..., export=...,
  digest=..., tree=...)``: a field ``"<plugin>.<name>"`` computed by
  ``func(exchange)`` for display filters, the export, the summary digest and the tree.
* ``api.digest(api_key, request=..., response=...)``: summary-line digests of an API.
* ``api.report(message)``: a notice shown once (at most 20 different ones).
* Every hook is wrapped: an exception or a bad return value is reported once (naming
  the plugin and the hook), counted, and the call falls back to kwsniff's own view;
  it never stops decoding. Registration mistakes (bad names, types) raise
  :class:`PluginError` from the ``api`` call, which makes the loader skip the plugin.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from kwsniff.kafka import payload as _payload
from kwsniff.kafka.model import Exchange
from kwsniff.kafka.nesting import TOO_DEEP, deeper_than
from kwsniff.kafka.protocol import extensions as _ext
from kwsniff.plugin_api.guard import Guard, Reporter, json_problem
from kwsniff.plugin_api.helpers import KafkaReader, topic_pattern
from kwsniff.plugin_api.options import PluginOptions

PayloadProblem = _payload.PayloadProblem
PARTS = _payload.PARTS
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\Z")
MAX_NOTICES = 20     # different notices shown per plugin (a capture must not flood stderr)


class PluginError(Exception):
    """A plugin registered something that cannot work (the plugin is skipped)."""


class PayloadWhere(NamedTuple):
    """Where a payload comes from: topic (None when unknown), partition, part
    (``"key"``, ``"value"`` or ``"header"``) and, for headers, the header name."""

    topic: str | None
    partition: int | None
    part: str
    header_key: str | None = None


class BadResult(Exception):
    """A hook returned something kwsniff cannot use."""


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "number": (int, float), "string": (str,), "name": (str,),
    "address": (str,),
}


class PluginContext:
    """The registration API of one plugin (see the module contract)."""

    def __init__(self, name: str, options: PluginOptions, source: str,
                 report: Reporter) -> None:
        self.name = name
        self.options = options
        self.source = source
        self._report = report
        self.guards: list[Guard] = []
        self._undo: list[Callable[[], None]] = []
        self._notices: set[str] = set()

    # ------------------------------------------------------------------ bookkeeping
    def guard(self, hook: str) -> Guard:
        g = Guard(self.name, hook, self._report)
        self.guards.append(g)
        return g

    def registered(self) -> bool:
        """Whether the plugin registered anything (that :meth:`undo_all` would remove)."""
        return bool(self._undo)

    def undo_all(self) -> None:
        """Remove everything this plugin registered (reverse order)."""
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception:  # noqa: BLE001 - best effort on shutdown
                pass

    def report(self, message: str) -> None:
        """Show ``message`` once (to standard error, or the application's reporter);
        after :data:`MAX_NOTICES` different ones, the rest are dropped (said once)."""
        notices = self._notices
        if message in notices or len(notices) > MAX_NOTICES:
            return
        notices.add(message)
        if len(notices) > MAX_NOTICES:
            self._report(f"plugin {self.name}: more than {MAX_NOTICES} notices; "
                         "the others are not shown")
            return
        self._report(f"plugin {self.name}: {message}")

    # ------------------------------------------------------------------ payloads
    def payload_decoder(self, func: Callable[[bytes, PayloadWhere], Any], *,
                        topics: str | list[str] | re.Pattern[str] | None = "*",
                        parts: tuple[str, ...] | list[str] | str = ("value",),
                        headers: list[str] | tuple[str, ...] | None = None,
                        name: str | None = None) -> None:
        """Decode record keys/values/header values of ``topics`` (globs or a regex).

        ``headers`` (globs of header names) makes it a header decoder. ``func`` returns
        a JSON-like object (or a str) or None when the bytes are not its format; it
        raises :class:`PayloadProblem` for bytes of its format it cannot decode.
        """
        if isinstance(parts, str):
            parts = (parts,)
        bad = set(parts) - set(PARTS)
        if bad:
            raise PluginError(f"unknown payload parts {sorted(bad)}; use {list(PARTS)}")
        label = name or self.name
        guard = self.guard(f"payload decoder {label}")
        pattern = topics if isinstance(topics, re.Pattern) else topic_pattern(topics)

        def hook(topic: str | None, partition: int | None, part: str, data: bytes,
                 header_key: str | None = None) -> Any:
            where = PayloadWhere(topic, partition, part, header_key)
            try:
                result = func(data, where)
            except PayloadProblem:
                raise
            except Exception as exc:
                guard.failed(exc, _where_text(where), "the data is shown undecoded")
                raise
            if result is None or isinstance(result, str):
                return result
            problem = json_problem(result)
            if problem is not None:
                guard.failed(f"returned {problem}", _where_text(where),
                             "the data is shown undecoded")
                raise BadResult(f"returned {problem}")
            return result

        handle = _payload.register_payload_decoder(
            pattern, hook, parts=tuple(parts), name=label,
            header_keys=tuple(headers) if headers is not None else None,
            pass_header_key=True)
        self._undo.append(lambda: _payload.unregister_payload_decoder(handle))

    # ------------------------------------------------------------------ vendor APIs
    def vendor_api(self, api_key: int, name: str, *,
                   request: Callable[[KafkaReader, int], dict[str, Any]] | dict[str, Any]
                   | None = None,
                   response: Callable[[KafkaReader, int], dict[str, Any]] | dict[str, Any]
                   | None = None,
                   versions: str | tuple[int, int] = "0+",
                   flexible: str | tuple[int, int] | None = None) -> None:
        """Decode API ``api_key`` (one Kafka's schema table lacks) as ``name``."""
        wrapped: dict[str, Any] = {}
        for kind, spec in (("request", request), ("response", response)):
            wrapped[kind] = self._vendor_body(name, kind, spec) if callable(spec) else spec
        try:
            handle = _ext.register_vendor_api(api_key, name, request=wrapped["request"],
                                              response=wrapped["response"], versions=versions,
                                              flexible=flexible, owner=f"plugin {self.name}")
        except _ext.ExtensionError as err:
            raise PluginError(str(err)) from None
        self._undo.append(lambda: _ext.unregister_vendor_api(handle))
        self._undo.append(_clear_name_caches)
        _clear_name_caches()

    def _vendor_body(self, api: str, kind: str,
                     func: Callable[[KafkaReader, int], Any]) -> Callable[[bytes, int, int], Any]:
        guard = self.guard(f"{api} {kind} decoder")

        def body(raw: bytes, pos: int, version: int) -> Any:
            reader = KafkaReader(raw, pos)
            try:
                result = func(reader, version)
            except Exception as exc:
                guard.failed(exc, f"v{version}", "the body is shown undecoded")
                raise
            if not isinstance(result, dict):
                guard.failed(f"returned {type(result).__name__}, not a dict", f"v{version}",
                             "the body is shown undecoded")
                return result
            if deeper_than(result):
                problem = f"returned a body {TOO_DEEP}"
                guard.failed(problem, f"v{version}", "the body is shown undecoded")
                raise BadResult(problem)
            return result, reader.pos

        return body

    # ------------------------------------------------------------------ exchange fields
    def exchange_field(self, name: str, func: Callable[[Exchange], Any], *,
                       type: str = "string", multi: bool = False, description: str = "",
                       export: bool = True, digest: bool = False, tree: bool = True) -> str:
        """Add the exchange field ``"<plugin>.<name>"``; returns its full name."""
        from kwsniff.output import extra_fields as _extra

        full = f"{self.name}.{name}".lower()
        if not _FIELD_NAME.match(full):
            raise PluginError(f"field name {full!r}: use lower-case letters, digits and _")
        kinds = _FIELD_TYPES.get(type)
        if kinds is None:
            raise PluginError(f"field {full}: type {type!r} is not one of "
                              f"{', '.join(_FIELD_TYPES)}")
        guard = self.guard(f"field {full}")

        def get(exchange: Exchange) -> Any:
            try:
                value = func(exchange)
            except Exception as exc:  # noqa: BLE001 - a plugin never breaks output
                guard.failed(exc, f"exchange {exchange.index}", "the field has no value")
                return None
            problem = _field_problem(value, kinds, multi)
            if problem is not None:
                guard.failed(f"returned {problem}", f"exchange {exchange.index}",
                             "the field has no value")
                return None
            return list(value) if multi and isinstance(value, tuple) else value

        spec = _extra.ExtraField(full, get, type, multi, description, export, digest, tree)
        try:
            _extra.register_extra_field(spec)
        except ValueError as err:
            raise PluginError(str(err)) from None
        self._undo.append(lambda: _extra.unregister_extra_field(spec))
        return full

    # ------------------------------------------------------------------ digests
    def digest(self, api_key: int, *, request: Callable[..., str] | None = None,
               response: Callable[..., str] | None = None) -> None:
        """Summary-line digest functions for ``api_key`` (replacing kwsniff's own):
        ``request(body, version, facts) -> str``,
        ``response(body, version, facts, request_body) -> str``."""
        from kwsniff.output import digest as _digest

        old = (_digest._REQUEST.get(api_key), _digest._RESPONSE.get(api_key))
        req = self._guard_str(f"request digest of API {api_key}", request)
        resp = self._guard_str(f"response digest of API {api_key}", response)
        _digest.register_digest(api_key, req, resp)

        def undo() -> None:
            for table, fn, prev in ((_digest._REQUEST, req, old[0]),
                                    (_digest._RESPONSE, resp, old[1])):
                if fn is not None and table.get(api_key) is fn:
                    if prev is None:
                        del table[api_key]
                    else:
                        table[api_key] = prev

        self._undo.append(undo)

    def _guard_str(self, hook: str, func: Callable[..., str] | None
                   ) -> Callable[..., str] | None:
        if func is None:
            return None
        guard = self.guard(hook)

        def wrapped(*args: Any) -> str:
            try:
                text = func(*args)
            except Exception as exc:
                guard.failed(exc, "", "the generic digest is shown")
                raise
            if not isinstance(text, str):
                guard.failed(f"returned {type(text).__name__}, not a str", "",
                             "the generic digest is shown")
                raise BadResult("digest is not a str")
            return text

        return wrapped


def _where_text(where: PayloadWhere) -> str:
    part = f"header {where.header_key!r}" if where.part == "header" else where.part
    topic = f"topic {where.topic!r}" if where.topic is not None else "unknown topic"
    return f"{topic}, {part}"


def _field_problem(value: Any, kinds: tuple[type, ...], multi: bool) -> str | None:
    if value is None:
        return None
    items = value if multi else [value]
    if multi and not isinstance(value, (list, tuple)):
        return f"{type(value).__name__}, not a list (the field is multi-valued)"
    for v in items:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, kinds):
            return f"{type(v).__name__} {v!r:.40}, not {' or '.join(k.__name__ for k in kinds)}"
    return None


def _clear_name_caches() -> None:
    """API names are cached by the output layer; a new vendor API renames its key."""
    from kwsniff.output import names

    names.api_label.cache_clear()
