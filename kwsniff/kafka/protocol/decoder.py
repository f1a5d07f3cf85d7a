"""Decode Kafka request/response frames and embedded schemas from the schema table.

Contract (see also docs/architecture.md):

* :func:`decode_request` / :func:`decode_response` never raise on bad bytes. They fill
  a :class:`~kwsniff.kafka.model.KafkaMessage`: the header (always, as far as the bytes
  go), then the body. An unknown API key or version leaves ``body`` None with a problem
  saying why (the raw body stays at ``raw[body_offset:]``). A body that fails half-way
  keeps what was decoded before the failure in ``body`` and a problem says where and
  why; ``body_end`` is where decoding stopped. Bytes left after a complete body are
  reported with their count.
* ``header`` holds the header fields by Kafka name (``RequestApiKey``, ``CorrelationId``,
  ``ClientId``, ...) plus ``_unknown_tags`` when present. For an ApiVersions response
  that answers an unsupported version (error 35) the body is decoded as v0 and
  ``header["_body_version"] = 0`` says so.
* :func:`decode_struct` decodes one non-API schema (``schema.struct_names()``) at a
  given version and returns ``(dict, end_offset)``.
* :func:`field_spans` recomputes byte ranges on demand; bulk decoding never pays for it.
* Decoders are compiled per (schema, version) on first use and cached for the process.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, NamedTuple

from kwsniff.kafka.model import REQUEST, RESPONSE, KafkaMessage
from kwsniff.kafka.protocol.codegen import DECODE_ERRORS, DecodeError, DecodeFn, compile_decoder
from kwsniff.kafka.protocol.headers import (
    API_VERSIONS,
    apiversions_body_version,
    request_header_version,
    response_header_version,
)
from kwsniff.kafka.protocol.schema import (
    MESSAGES,
    in_range,
    message_schema,
    struct_schema,
    version_range,
)

_I16 = struct.Struct(">h").unpack_from

_bodies: dict[tuple[int, str, int, bool], DecodeFn | None] = {}
_structs: dict[tuple[str, int, bool], DecodeFn | None] = {}


class Span(NamedTuple):
    """Where one decoded field sits: ``raw[offset:offset + length]``.

    ``section`` is "header" or "body" (or the schema name for :func:`struct_spans`);
    ``path`` is the field path within it, names and list indexes, e.g.
    ``("TopicData", 0, "PartitionData", 1, "Records")``. Array elements and whole
    arrays/structs get spans too; an unknown tagged field is
    ``(..., "_unknown_tags", i)``.
    """

    section: str
    path: tuple[Any, ...]
    offset: int
    length: int


def body_decoder(api_key: int, kind: str, version: int, with_spans: bool = False) -> DecodeFn | None:
    """The compiled decoder of one message version, or None if the table lacks it."""
    key = (api_key, kind, version, with_spans)
    try:
        return _bodies[key]
    except KeyError:
        pass
    seg = message_schema(api_key, kind, version)
    fn = None
    if seg is not None:
        fn = compile_decoder(seg[4], version, in_range(version, seg[2]), with_spans,
                             name=f"{seg[3].replace('-', '_').replace('.', '_')}_{api_key}_{kind}")
    _bodies[key] = fn
    return fn


def struct_decoder(name: str, version: int, with_spans: bool = False) -> DecodeFn | None:
    key = (name, version, with_spans)
    try:
        return _structs[key]
    except KeyError:
        pass
    seg = struct_schema(name, version)
    fn = None
    if seg is not None:
        fn = compile_decoder(seg[4], version, in_range(version, seg[2]), with_spans, name=name)
    _structs[key] = fn
    return fn


def _path_text(path: tuple[Any, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _reason(exc: BaseException, size: int) -> str:
    if isinstance(exc, DecodeError):
        return str(exc)
    return f"truncated: the frame ends at byte {size}"


def _locate(fn_spans: DecodeFn | None, buf: bytes, pos: int) -> tuple[str, int]:
    """After a failed fast decode, find the last field that decoded (slow path)."""
    if fn_spans is None:
        return "", pos
    spans: list[tuple] = []
    try:
        fn_spans(buf, pos, {}, [], spans)
    except DECODE_ERRORS:
        pass
    if not spans:
        return "", pos
    path, off, length = max(spans, key=lambda s: (s[1] + s[2], -s[2]))
    return _path_text(path), off + length


def _run(fn: DecodeFn, spans_fn: Callable[[], DecodeFn | None], buf: bytes, pos: int,
         out: dict, problems: list[str], what: str) -> tuple[int, bool]:
    """Run a decoder; on failure report where it stopped. Returns (end, complete).

    ``spans_fn`` returns the span-recording variant; it is only compiled and run after
    a failure, to name the last field that decoded.
    """
    try:
        return fn(buf, pos, out, problems, None), True
    except DECODE_ERRORS as exc:
        after, stop = _locate(spans_fn(), buf, pos)
        where = f" after {after} (offset {stop})" if after else f" at offset {stop}"
        problems.append(f"{what} decoded only partly: {_reason(exc, len(buf))}{where}")
        return stop, False


def _header(msg: KafkaMessage, name: str, version: int, pos: int) -> int | None:
    fn = struct_decoder(name, version)
    if fn is None:
        msg.problems.append(f"no {name} v{version} in the schema table")
        return None
    end, ok = _run(fn, lambda: struct_decoder(name, version, True), msg.raw, pos, msg.header,
                   msg.problems, f"{name} v{version}")
    return end if ok else None


def _body(msg: KafkaMessage, kind: str, version: int, pos: int) -> None:
    api_key = msg.api_key
    assert api_key is not None
    msg.body_offset = msg.body_end = pos
    left = len(msg.raw) - pos
    if (api_key, kind) not in MESSAGES:
        msg.problems.append(f"unknown API key {api_key}: body of {left} bytes not decoded")
        return
    fn = body_decoder(api_key, kind, version)
    if fn is None:
        from kwsniff.kafka.protocol.api_keys import api_name

        rng = version_range(api_key, kind)
        known = f"v{rng[0]}-v{rng[1]}" if rng else "none"
        msg.problems.append(f"{api_name(api_key)} {kind} v{version} is not a known version "
                            f"(kwsniff decodes {known}): body of {left} bytes not decoded")
        return
    body: dict[str, Any] = {}
    msg.body = body
    end, ok = _run(fn, lambda: body_decoder(api_key, kind, version, True), msg.raw, pos,
                   body, msg.problems, "body")
    msg.body_end = end
    if ok and end < len(msg.raw):
        msg.problems.append(f"{len(msg.raw) - end} bytes left over after the body")


def decode_request(raw: bytes) -> KafkaMessage:
    """Decode one request frame (without its 4-byte size prefix); never raises."""
    msg = KafkaMessage(kind=REQUEST, raw=raw)
    try:
        _decode_request(msg)
    except Exception as exc:  # noqa: BLE001 - contract: never raise on bad bytes
        msg.problems.append(f"internal decoder error: {type(exc).__name__}: {exc}")
    return msg


def _decode_request(msg: KafkaMessage) -> None:
    raw = msg.raw
    if len(raw) < 8:
        msg.problems.append(f"request of {len(raw)} bytes is too short for a request header")
        if len(raw) >= 2:
            msg.api_key = _I16(raw, 0)[0]
        if len(raw) >= 4:
            msg.api_version = _I16(raw, 2)[0]
        msg.body_offset = msg.body_end = len(raw)
        return
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", raw, 0)
    msg.api_key, msg.api_version, msg.correlation_id = api_key, api_version, correlation_id
    hv = request_header_version(api_key, api_version)
    msg.header_version = hv
    pos = _header(msg, "RequestHeader", hv, 0)
    msg.client_id = msg.header.get("ClientId")
    if pos is None:
        msg.body_offset = msg.body_end = len(raw)
        return
    _body(msg, REQUEST, api_version, pos)


def decode_response(raw: bytes, api_key: int, api_version: int) -> KafkaMessage:
    """Decode one response frame given the request's api key and version; never raises."""
    msg = KafkaMessage(kind=RESPONSE, raw=raw, api_key=api_key, api_version=api_version)
    try:
        _decode_response(msg)
    except Exception as exc:  # noqa: BLE001 - contract: never raise on bad bytes
        msg.problems.append(f"internal decoder error: {type(exc).__name__}: {exc}")
    return msg


def _decode_response(msg: KafkaMessage) -> None:
    raw = msg.raw
    api_key, api_version = msg.api_key, msg.api_version
    assert api_key is not None and api_version is not None
    if len(raw) < 4:
        msg.problems.append(f"response of {len(raw)} bytes is too short for a response header")
        msg.body_offset = msg.body_end = len(raw)
        return
    hv = response_header_version(api_key, api_version)
    msg.header_version = hv
    pos = _header(msg, "ResponseHeader", hv, 0)
    msg.correlation_id = msg.header.get("CorrelationId")
    if pos is None:
        msg.body_offset = msg.body_end = len(raw)
        return
    version = _response_body_version(msg, pos)
    _body(msg, RESPONSE, version, pos)


def _response_body_version(msg: KafkaMessage, pos: int) -> int:
    version = msg.api_version
    assert version is not None
    if msg.api_key == API_VERSIONS and len(msg.raw) >= pos + 2:
        error = _I16(msg.raw, pos)[0]
        body_version = apiversions_body_version(version, error)
        if body_version != version:
            msg.header["_body_version"] = body_version
            return body_version
    return version


def decode_struct(name: str, version: int, buf: bytes, offset: int = 0,
                  problems: list[str] | None = None) -> tuple[dict[str, Any], int]:
    """Decode the non-API schema ``name`` at ``version`` from ``buf[offset:]``.

    Returns ``(fields, end_offset)``; never raises. Problems (unknown schema/version,
    truncation, malformed data) go to ``problems`` when given, else into the returned
    dict under ``"_problems"``. On failure the dict holds what decoded before it and
    ``end_offset`` is where decoding stopped.
    """
    out: dict[str, Any] = {}
    found: list[str] = [] if problems is None else problems
    start = len(found)
    end = offset
    try:
        fn = struct_decoder(name, version)
        if fn is None:
            found.append(_unknown_struct(name, version))
        else:
            end, _ = _run(fn, lambda: struct_decoder(name, version, True), buf, offset, out,
                          found, f"{name} v{version}")
    except Exception as exc:  # noqa: BLE001 - contract: never raise on bad bytes
        found.append(f"internal decoder error: {type(exc).__name__}: {exc}")
    if problems is None and len(found) > start:
        out["_problems"] = found
    return out, end


def _unknown_struct(name: str, version: int) -> str:
    from kwsniff.kafka.protocol.schema import struct_versions

    rng = struct_versions(name)
    if rng is None:
        return f"unknown schema {name!r}"
    return f"{name} v{version} is not a known version (kwsniff decodes v{rng[0]}-v{rng[1]})"


def _spans_of(fn: DecodeFn | None, section: str, buf: bytes, pos: int,
              out: list[Span]) -> None:
    if fn is None:
        return
    raw_spans: list[tuple] = []
    try:
        fn(buf, pos, {}, [], raw_spans)
    except DECODE_ERRORS:
        pass
    out.extend(Span(section, p, o, n) for p, o, n in raw_spans)


def field_spans(msg: KafkaMessage) -> list[Span]:
    """Byte ranges (within ``msg.raw``) of every header and body field of a decoded message.

    Computed on demand by re-decoding with span recording; fields after a decode failure
    are absent. Never raises.
    """
    out: list[Span] = []
    try:
        if msg.header_version is None or msg.api_key is None or msg.api_version is None:
            return out
        name = "RequestHeader" if msg.kind == REQUEST else "ResponseHeader"
        _spans_of(struct_decoder(name, msg.header_version, True), "header", msg.raw, 0, out)
        if msg.body is None:
            return out
        version = msg.header.get("_body_version", msg.api_version)
        fn = body_decoder(msg.api_key, msg.kind, version, with_spans=True)
        _spans_of(fn, "body", msg.raw, msg.body_offset, out)
    except Exception:  # noqa: BLE001 - spans are a view aid; never break the caller
        pass
    return out


def struct_spans(name: str, version: int, buf: bytes, offset: int = 0) -> list[Span]:
    """Byte ranges of the fields of a :func:`decode_struct` result; never raises."""
    out: list[Span] = []
    try:
        _spans_of(struct_decoder(name, version, True), name, buf, offset, out)
    except Exception:  # noqa: BLE001
        pass
    return out
