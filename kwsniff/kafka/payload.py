"""Rendering of record keys, values and header values, and the payload-decoder hooks.

Contract:

* :func:`render_payload` turns bytes into a :class:`Rendered` view: a registered
  decoder's result when one matches the topic and handles the bytes, else pretty JSON
  (objects and arrays nested at most :data:`~kwsniff.kafka.nesting.MAX_NESTING`
  levels deep), else text (valid UTF-8 without control characters other than
  tab/newline/CR), else hex. It never raises.
* :func:`register_payload_decoder` is the hook plugins use: ``func(topic, partition,
  part, data)`` with ``part`` one of ``"key"``, ``"value"``, ``"header"``; it returns
  the decoded object (anything JSON-serialisable, or a str) or None when the bytes are
  not its format. An exception inside ``func`` is caught and reported in
  ``Rendered.problems``; rendering falls back to the built-in views.
* Topic patterns are shell-style globs (``"orders.*"``) or compiled regular
  expressions; ``None`` or ``"*"`` matches every topic, including an unknown (None) one.
  Decoders are tried in registration order.
* ``header_keys`` (globs) restricts a decoder to header values of those header names
  (it then sees only ``part="header"``); with ``pass_header_key=True`` the header name
  (None for keys and values) is passed as a fifth argument.
* A decoder raises :class:`PayloadProblem` to say "this is my format, but it is
  malformed": the message becomes a problem (``"<name>: <message>"``) and the next
  decoder is tried; it is not reported as a decoder failure.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from kwsniff.kafka.nesting import deeper_than

PARTS = ("key", "value", "header")

PayloadDecoder = Callable[..., Any]


class PayloadProblem(Exception):
    """Raised by a payload decoder for data of its format that it cannot decode."""

KIND_NULL = "null"
KIND_EMPTY = "empty"
KIND_JSON = "json"
KIND_TEXT = "text"
KIND_HEX = "hex"
KIND_DECODED = "decoded"


class Rendered:
    """A payload shown for people: ``kind`` (null, empty, json, text, hex, decoded),
    ``text`` (display string, possibly shortened), ``obj`` (the parsed JSON or a
    decoder's result), ``decoder`` (the decoder's name), ``problems``, ``truncated``.

    The pretty text of a JSON payload is made on first use of ``text`` (views that
    show ``obj`` themselves, like the -V tree, never pay for it)."""

    __slots__ = ("kind", "_text", "obj", "decoder", "problems", "_truncated", "_limit")

    def __init__(self, kind: str, text: str | None, obj: Any = None,
                 decoder: str | None = None, problems: list[str] | None = None,
                 truncated: bool = False) -> None:
        self.kind = kind
        self._text = text           # None: pretty JSON of ``obj``, made when asked for
        self.obj = obj
        self.decoder = decoder
        self.problems = problems if problems is not None else []
        self._truncated = truncated
        self._limit: int | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = json.dumps(self.obj, indent=2, ensure_ascii=False)
            _cut(self, self._limit)
        return self._text  # type: ignore[return-value]

    @text.setter
    def text(self, value: str) -> None:
        self._text = value

    @property
    def truncated(self) -> bool:
        if self._text is None:
            _ = self.text
        return self._truncated

    @truncated.setter
    def truncated(self, value: bool) -> None:
        self._truncated = value

    def _fields(self) -> tuple[Any, ...]:
        return (self.kind, self.text, self.obj, self.decoder, self.problems, self.truncated)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Rendered):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Rendered(kind={self.kind!r}, text={self.text!r}, obj={self.obj!r}, "
                f"decoder={self.decoder!r}, problems={self.problems!r}, "
                f"truncated={self.truncated!r})")


@dataclass(slots=True, eq=False)
class _Registration:
    name: str
    pattern: str | re.Pattern[str] | None
    func: PayloadDecoder
    parts: frozenset[str]
    header_keys: tuple[str, ...] | None = None
    pass_header_key: bool = False

    def matches(self, topic: str | None, part: str, header_key: str | None = None) -> bool:
        if part not in self.parts:
            return False
        if self.header_keys is not None and (
                header_key is None
                or not any(fnmatch.fnmatchcase(header_key, k) for k in self.header_keys)):
            return False
        pat = self.pattern
        if pat is None or pat == "*":
            return True
        if topic is None:
            return False
        if isinstance(pat, re.Pattern):
            return pat.fullmatch(topic) is not None
        return fnmatch.fnmatchcase(topic, pat)


_registry: list[_Registration] = []


def register_payload_decoder(pattern: str | re.Pattern[str] | None, func: PayloadDecoder, *,
                             parts: tuple[str, ...] | list[str] = PARTS,
                             name: str | None = None,
                             header_keys: tuple[str, ...] | list[str] | None = None,
                             pass_header_key: bool = False) -> object:
    """Register ``func`` for topics matching ``pattern``; returns a handle for
    :func:`unregister_payload_decoder`."""
    bad = set(parts) - set(PARTS)
    if bad:
        raise ValueError(f"unknown payload parts {sorted(bad)}; use {PARTS}")
    if header_keys is not None:
        header_keys = tuple(header_keys)
        parts = ("header",)
    reg = _Registration(name or getattr(func, "__name__", "decoder"), pattern, func,
                        frozenset(parts), header_keys, pass_header_key)
    _registry.append(reg)
    return reg


def unregister_payload_decoder(handle: object) -> None:
    """Remove a registration (no-op when already removed)."""
    if handle in _registry:
        _registry.remove(handle)  # type: ignore[arg-type]


def registered_decoders() -> list[tuple[str, Any, tuple[str, ...]]]:
    """(name, pattern, parts) of every registration, in the order they are tried."""
    return [(r.name, r.pattern, tuple(sorted(r.parts))) for r in _registry]


def decode_with_hooks(data: bytes, topic: str | None, partition: int | None,
                      part: str, header_key: str | None = None
                      ) -> tuple[Any, str | None, list[str]]:
    """Try the registered decoders: (result or None, decoder name, problems)."""
    problems: list[str] = []
    for reg in list(_registry):
        if not reg.matches(topic, part, header_key):
            continue
        try:
            if reg.pass_header_key:
                result = reg.func(topic, partition, part, data, header_key)
            else:
                result = reg.func(topic, partition, part, data)
        except PayloadProblem as exc:
            problems.append(f"{reg.name}: {exc}")
            continue
        except Exception as exc:  # a plugin's failure never breaks decoding
            problems.append(f"payload decoder {reg.name} failed: {type(exc).__name__}: {exc}")
            continue
        if result is not None:
            return result, reg.name, problems
    return None, None, problems


_JSON_START = frozenset(b"{[")
_WS = b" \t\r\n"
# control characters other than tab, newline, carriage return
_HEAD = 32
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])


def as_text(data: bytes) -> str | None:
    """``data`` as text when it is valid UTF-8 without control characters, else None."""
    # In UTF-8 these code points are exactly these single bytes (never part of a
    # multi-byte sequence): deleting them from the bytes is a fast exact test, made
    # first because binary data nearly always has one (no decoding error to raise),
    # and on a short head first (where binary data nearly always has one).
    head = data[:_HEAD]
    if len(head.translate(None, _CONTROL_BYTES)) != len(head):
        return None
    if len(data) > _HEAD and len(data.translate(None, _CONTROL_BYTES)) != len(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def hex_string(data: bytes, max_bytes: int | None = None) -> str:
    """Lower-case hex, cut after ``max_bytes`` bytes with a trailing ``...``."""
    if max_bytes is not None and len(data) > max_bytes:
        return data[:max_bytes].hex() + "..."
    return data.hex()


def has_decoders() -> bool:
    """Is any payload decoder registered (else :func:`builtin_view` is the whole
    rendering)?"""
    return bool(_registry)


def builtin_view(data: bytes, max_chars: int | None = None) -> tuple[str, Any, str | None, bool]:
    """The built-in view of non-empty ``data``: ``(kind, obj, text, truncated)`` with
    kind ``json`` (``obj`` parsed, ``text`` None: made on demand), ``text`` or ``hex``
    (``text`` cut after ``max_chars`` characters plus ``...``, then ``truncated``).
    :func:`render_payload` wraps it in a :class:`Rendered`; hot paths may use the tuple."""
    text = as_text(data)
    if text is None:
        shown = hex_string(data, max_chars // 2 + 1 if max_chars is not None else None)
        if max_chars is not None and len(shown) > max_chars:
            return KIND_HEX, None, shown[:max_chars] + "...", True
        return KIND_HEX, None, shown, False
    stripped = data.lstrip(_WS)
    if stripped and stripped[0] in _JSON_START:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):   # (JSON nested too deeply: shown as text)
            pass
        else:
            if not deeper_than(obj):           # (the same bound in every build)
                return KIND_JSON, obj, None, False
    if max_chars is not None and len(text) > max_chars:
        return KIND_TEXT, None, text[:max_chars] + "...", True
    return KIND_TEXT, None, text, False


def render_payload(data: bytes | None, *, topic: str | None = None, partition: int | None = None,
                   part: str = "value", max_chars: int | None = None,
                   hooks: bool = True, header_key: str | None = None) -> Rendered:
    """Render ``data`` for display; ``max_chars`` shortens ``text`` (``truncated`` set);
    ``header_key`` is the header name when ``part="header"``."""
    if data is None:
        return Rendered(KIND_NULL, "null")
    if not data:
        return Rendered(KIND_EMPTY, "")
    data = bytes(data)
    problems: list[str] = []
    if hooks and _registry:
        obj, name, problems = decode_with_hooks(data, topic, partition, part, header_key)
        if name is not None:
            if isinstance(obj, str):
                text = obj
            else:
                try:
                    text = json.dumps(obj, indent=2, ensure_ascii=False, default=_json_default)
                except (TypeError, ValueError):
                    text = repr(obj)
            return _cut(Rendered(KIND_DECODED, text, obj, name, problems), max_chars)
    kind, obj, text, truncated = builtin_view(data, max_chars)
    if kind == KIND_JSON:
        lazy = Rendered(KIND_JSON, None, obj, problems=problems)
        lazy._limit = max_chars     # the pretty text is made (and cut) on first use
        return lazy
    return Rendered(kind, text, problems=problems, truncated=truncated)


def render_headers(headers: list[tuple[str, bytes | None]], *, topic: str | None = None,
                   partition: int | None = None, max_chars: int | None = None) -> list[tuple[str, Rendered]]:
    """Render every header value (``part="header"``)."""
    return [(k, render_payload(v, topic=topic, partition=partition, part="header",
                               max_chars=max_chars, header_key=k)) for k, v in headers]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    return repr(obj)


def _cut(r: Rendered, max_chars: int | None) -> Rendered:
    text = r._text
    if max_chars is not None and text is not None and len(text) > max_chars:
        r._text = text[:max_chars] + "..."
        r._truncated = True
    return r
