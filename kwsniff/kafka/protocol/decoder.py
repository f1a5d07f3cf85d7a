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
* ``defer=True`` (decoding workers that render only some exchanges) decodes the header
  and leaves a table body for :func:`complete_body`, which gives exactly the eager
  result; ``msg.deferred`` is set meanwhile, ``body`` is None and ``body_offset`` set.
* Decoders are compiled per (schema, version) on first use and cached for the process.
* API keys/versions the table lacks are decoded by vendor extensions when one is
  registered (:mod:`kwsniff.kafka.protocol.extensions`); a failing extension leaves the
  body undecoded with a problem naming it, as does a body nested more than
  :data:`~kwsniff.kafka.nesting.MAX_NESTING` levels deep.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kwsniff.kafka.model import REQUEST, RESPONSE, KafkaMessage
from kwsniff.kafka.nesting import TOO_DEEP, deeper_than
from kwsniff.kafka.protocol import cprogram, extensions
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
from kwsniff.text import counted

_I16 = struct.Struct(">h").unpack_from

_bodies: dict[tuple[int, str, int, bool], DecodeFn] = {}
_structs: dict[tuple[str, int, bool], DecodeFn] = {}


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
    if seg is None:
        return _vendor_body_decoder(api_key, kind, version, with_spans)
    fn = compile_decoder(seg[4], version, in_range(version, seg[2]), with_spans,
                         name=f"{seg[3].replace('-', '_').replace('.', '_')}_{api_key}_{kind}")
    _bodies[key] = fn
    return fn


_vendor_bodies: dict[tuple[int, str, int, bool], DecodeFn] = {}


def _vendor_body_decoder(api_key: int, kind: str, version: int,
                         with_spans: bool) -> DecodeFn | None:
    """Compiled decoder of a vendor API defined by a message definition, else None
    (not cached when absent: garbage api keys/versions must not grow the cache)."""
    key = (api_key, kind, version, with_spans)
    fn = _vendor_bodies.get(key)
    if fn is not None:
        return fn
    api = extensions.vendor_api(api_key, version)
    rows = api.rows.get(kind) if api is not None else None
    if rows is None:
        return None
    assert api is not None
    fn = compile_decoder(rows, version, api.is_flexible(version), with_spans,
                         name=f"vendor_{api_key}_{kind}")
    _vendor_bodies[key] = fn
    return fn


def struct_decoder(name: str, version: int, with_spans: bool = False) -> DecodeFn | None:
    key = (name, version, with_spans)
    try:
        return _structs[key]
    except KeyError:
        pass
    seg = struct_schema(name, version)
    if seg is None:
        return None
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
    return f"truncated: the data ends at byte {size}"


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


class _Plan:
    """Everything decode_request/decode_response need for one (api key, version, kind)."""

    __slots__ = ("header_version", "header_name", "header_fn", "body_fn", "missing", "vendor")

    def __init__(self, header_version: int, header_name: str, header_fn: DecodeFn | None,
                 body_fn: DecodeFn | None, missing: str | None,
                 vendor: extensions.VendorApi | None = None) -> None:
        self.header_version = header_version
        self.header_name = header_name
        self.header_fn = header_fn
        self.body_fn = body_fn
        self.missing = missing          # why there is no body decoder
        self.vendor = vendor            # a vendor extension decodes the body


# plans by api key, then version: request and response plans apart (int keys: this
# lookup runs for every message, and a tuple key costs more to make, hash and compare)
_plans: dict[str, dict[int, dict[int, _Plan]]] = {REQUEST: {}, RESPONSE: {}}
_vendor_plans: dict[tuple[int, int, str], _Plan] = {}
MAX_VENDOR_PLANS = 4096


def _forget_vendor_plans() -> None:
    _vendor_plans.clear()
    _vendor_bodies.clear()


extensions.on_change(_forget_vendor_plans)


def _vendor_plan(kind: str, api_key: int, version: int) -> _Plan | None:
    """The plan of a vendor extension covering (key, version), cached until the
    registry changes; None when no extension covers it."""
    key = (api_key, version, kind)
    plan = _vendor_plans.get(key)
    if plan is not None:
        return plan
    api = extensions.vendor_api(api_key, version)
    if api is None:
        return None
    if kind == REQUEST:
        hv, hname = api.request_header_version(version), "RequestHeader"
    else:
        hv, hname = api.response_header_version(version), "ResponseHeader"
    body_fn = _vendor_body_decoder(api_key, kind, version, False)
    missing = None
    if body_fn is None and api.body_fn(kind) is None:
        missing = f"{api.name} (vendor API {api_key}, {api.owner}) {kind} v{version} has no {kind} decoder"
    plan = _Plan(hv, hname, struct_decoder(hname, hv), body_fn, missing,
                 api if body_fn is None and missing is None else None)
    if len(_vendor_plans) < MAX_VENDOR_PLANS:   # open version ranges must not grow it
        _vendor_plans[key] = plan
    return plan


def _plan(kind: str, api_key: int, version: int) -> _Plan:
    by_version = _plans[kind].get(api_key)
    if by_version is not None:
        plan = by_version.get(version)
        if plan is not None:
            return plan
    if kind == REQUEST:
        hv, hname = request_header_version(api_key, version), "RequestHeader"
    else:
        hv, hname = response_header_version(api_key, version), "ResponseHeader"
    if message_schema(api_key, kind, version) is None:
        vplan = _vendor_plan(kind, api_key, version)
        if vplan is not None:
            return vplan
    body_fn = body_decoder(api_key, kind, version)
    missing = None
    if body_fn is None:
        if (api_key, kind) not in MESSAGES:
            missing = f"unknown API key {api_key}"
        else:
            from kwsniff.kafka.protocol.api_keys import api_name

            rng = version_range(api_key, kind)
            known = f"v{rng[0]}-v{rng[1]}" if rng else "none"
            missing = (f"{api_name(api_key)} {kind} v{version} is not a known version "
                       f"(kwsniff decodes {known})")
    plan = _Plan(hv, hname, struct_decoder(hname, hv), body_fn, missing)
    if body_fn is not None:   # cache only real versions: memory stays bounded on garbage
        _plans[kind].setdefault(api_key, {})[version] = plan
    return plan


def _failed(buf: bytes, problems: list[str], exc: BaseException, what: str,
            spans_fn: DecodeFn | None, pos: int) -> int:
    """Report a decode failure with the last field that decoded; returns the stop offset."""
    after, stop = _locate(spans_fn, buf, pos)
    where = f" after {after} (offset {stop})" if after else f" at offset {stop}"
    problems.append(f"{what} decoded only partly: {_reason(exc, len(buf))}{where}")
    return stop


def _header(msg: KafkaMessage, plan: _Plan) -> int | None:
    msg.header_version = plan.header_version
    fn = plan.header_fn
    if fn is None:
        msg.problems.append(f"no {plan.header_name} v{plan.header_version} in the schema table")
        return None
    try:
        return fn(msg.raw, 0, msg.header, msg.problems, None)
    except DECODE_ERRORS as exc:
        spans_fn = struct_decoder(plan.header_name, plan.header_version, True)
        _failed(msg.raw, msg.problems, exc, f"{plan.header_name} v{plan.header_version}",
                spans_fn, 0)
        if plan.missing:   # the likely cause: say it, not only the header failure
            msg.problems.append(f"{plan.missing} (its header version was guessed)")
        msg.body_offset = msg.body_end = len(msg.raw)
        return None


def _vendor_body(msg: KafkaMessage, api: extensions.VendorApi, kind: str, version: int,
                 pos: int) -> None:
    """Body decoded by a vendor extension's callable; its failures become problems."""
    raw = msg.raw
    msg.body_offset = msg.body_end = pos
    fn = api.body_fn(kind)
    what = f"vendor API {api.name} ({api.owner}) {kind} v{version}"
    if fn is None:
        msg.problems.append(f"{what}: no decoder: body of {len(raw) - pos} bytes not decoded")
        return
    try:
        result = fn(raw, pos, version)
    except Exception as exc:  # noqa: BLE001 - an extension's failure never stops decoding
        msg.problems.append(f"{what} decoder failed: {type(exc).__name__}: {exc}")
        return
    end = len(raw)
    if isinstance(result, tuple) and len(result) == 2 and type(result[1]) is int:
        result, end = result
    if not isinstance(result, dict) or not pos <= end <= len(raw):
        msg.problems.append(f"{what} decoder returned {type(result).__name__}"
                            + ("" if isinstance(result, dict) else
                               ", not a dict or (dict, end offset)")
                            + ("" if pos <= end <= len(raw) else f" with end {end} outside "
                               f"the body [{pos}, {len(raw)}]")
                            + ": body not decoded")
        return
    if deeper_than(result):
        msg.problems.append(f"{what} decoder returned a body {TOO_DEEP}: body not decoded")
        return
    msg.body = result
    msg.body_end = end
    if end != len(raw):
        msg.problems.append(f"{counted(len(raw) - end, 'byte')} left over after the body")


def _body(msg: KafkaMessage, fn: DecodeFn | None, missing: str | None, kind: str,
          version: int, pos: int, vendor: extensions.VendorApi | None = None) -> None:
    if vendor is not None:
        _vendor_body(msg, vendor, kind, version, pos)
        return
    raw = msg.raw
    msg.body_offset = pos
    if fn is None:
        msg.body_end = pos
        msg.problems.append(f"{missing}: body of {len(raw) - pos} bytes not decoded")
        return
    body: dict[str, Any] = {}
    msg.body = body
    try:
        end = fn(raw, pos, body, msg.problems, None)
    except DECODE_ERRORS as exc:
        assert msg.api_key is not None
        spans_fn = body_decoder(msg.api_key, kind, version, True)
        msg.body_end = _failed(raw, msg.problems, exc, "body", spans_fn, pos)
        return
    msg.body_end = end
    if end != len(raw):
        msg.problems.append(f"{counted(len(raw) - end, 'byte')} left over after the body")


_REQUEST_START = struct.Struct(">hhi").unpack_from


def _defer(msg: KafkaMessage, plan: _Plan, kind: str, version: int, pos: int) -> bool:
    """Leave the body for :func:`complete_body` when it can be decoded later exactly as
    now: a table schema (not a vendor extension) after a header without problems."""
    if plan.vendor is not None or plan.body_fn is None or msg.problems:
        return False
    msg.body_offset = pos
    msg.deferred = (plan.body_fn, kind, version, pos)
    return True


def complete_body(msg: KafkaMessage) -> bool:
    """Decode a body :func:`decode_request` / :func:`decode_response` deferred (``defer``
    true): ``body``, ``body_end`` and the body's problems end up as an eager decode
    leaves them (its problems go before those added since, e.g. by the conversation
    layer). Returns False when nothing was deferred. Never raises."""
    deferred = msg.deferred
    if deferred is None:
        return False
    msg.deferred = None
    fn, kind, version, pos = deferred
    problems = msg.problems
    later = problems[:]                     # added after the header: they come after
    del problems[:]
    try:
        _body(msg, fn, None, kind, version, pos)
    except Exception as exc:  # noqa: BLE001 - contract: never raise on bad bytes
        problems.append(f"internal decoder error: {type(exc).__name__}: {exc}")
    problems += later
    return True


def decode_request(raw: bytes, defer: bool = False) -> KafkaMessage:
    """Decode one request frame (without its 4-byte size prefix); never raises. With
    ``defer`` the body may be left for :func:`complete_body` (``msg.deferred`` set)."""
    msg = KafkaMessage(kind=REQUEST, raw=raw)
    try:
        if len(raw) < 8:
            msg.problems.append(f"request of {len(raw)} bytes is too short for a request header")
            if len(raw) >= 2:
                msg.api_key = _I16(raw, 0)[0]
            if len(raw) >= 4:
                msg.api_version = _I16(raw, 2)[0]
            msg.body_offset = msg.body_end = len(raw)
            return msg
        api_key, api_version, msg.correlation_id = _REQUEST_START(raw, 0)
        msg.api_key, msg.api_version = api_key, api_version
        plan = _plan(REQUEST, api_key, api_version)
        pos = _header(msg, plan)
        msg.client_id = msg.header.get("ClientId")
        if pos is not None and not (defer and _defer(msg, plan, REQUEST, api_version, pos)):
            _body(msg, plan.body_fn, plan.missing, REQUEST, api_version, pos, plan.vendor)
    except Exception as exc:  # noqa: BLE001 - contract: never raise on bad bytes
        msg.problems.append(f"internal decoder error: {type(exc).__name__}: {exc}")
    return msg


def decode_response(raw: bytes, api_key: int, api_version: int,
                    defer: bool = False) -> KafkaMessage:
    """Decode one response frame given the request's api key and version; never raises.
    With ``defer`` the body may be left for :func:`complete_body` (not an ApiVersions
    body)."""
    msg = KafkaMessage(kind=RESPONSE, raw=raw, api_key=api_key, api_version=api_version)
    try:
        if len(raw) < 4:
            msg.problems.append(f"response of {len(raw)} bytes is too short for a response header")
            msg.body_offset = msg.body_end = len(raw)
            return msg
        plan = _plan(RESPONSE, api_key, api_version)
        pos = _header(msg, plan)
        msg.correlation_id = msg.header.get("CorrelationId")
        if pos is None:
            return msg
        fn, missing, version = plan.body_fn, plan.missing, api_version
        if defer and api_key != API_VERSIONS and _defer(msg, plan, RESPONSE, version, pos):
            return msg
        if api_key == API_VERSIONS and len(raw) >= pos + 2:
            version = apiversions_body_version(api_version, _I16(raw, pos)[0])
            if version != api_version:
                msg.header["_body_version"] = version
                fn = body_decoder(api_key, RESPONSE, version)
        _body(msg, fn, missing, RESPONSE, version, pos, plan.vendor)
    except Exception as exc:  # noqa: BLE001 - contract: never raise on bad bytes
        msg.problems.append(f"internal decoder error: {type(exc).__name__}: {exc}")
    return msg


def misfit(raw: bytes, api_key: int, api_version: int) -> bool:
    """True when the response frame ``raw`` certainly does not decode exactly (every
    byte, no problem) as ``(api_key, api_version)``, known from the C field decoder
    alone: it declines the header or the body, or the body ends before the frame. (The
    kernel declines exactly where the generated Python decoder would raise or report a
    problem: ``tests/protocol/test_fields_kernel.py``.) False when that cannot be told
    without the full decoding: no kernel, a vendor extension, no body decoder, an
    ApiVersions response (its body layout may fall back to v0), or the kernel accepts. Candidate testing (:mod:`kwsniff.kafka.inference`) calls it before
    :func:`decode_response`, which would otherwise run (and first compile) the Python
    decoder of every wrong candidate and locate where it failed. Never raises."""
    if api_key == API_VERSIONS:
        return False
    try:
        plan = _plan(RESPONSE, api_key, api_version)
    except Exception:  # noqa: BLE001 - the full decoding decides
        return False
    if plan.vendor is not None or plan.header_fn is None or plan.body_fn is None:
        return False
    header_program = getattr(plan.header_fn, "program", None)
    body_program = getattr(plan.body_fn, "program", None)
    decode_fields = cprogram.decode_fields
    if header_program is None or body_program is None or decode_fields is None \
            or type(raw) is not bytes:
        return False
    pos = decode_fields(raw, 0, {}, header_program)
    if pos is None:
        return True
    end = decode_fields(raw, pos, {}, body_program)
    return end is None or end != len(raw)


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
            try:
                end = fn(buf, offset, out, found, None)
            except DECODE_ERRORS as exc:
                end = _failed(buf, found, exc, f"{name} v{version}",
                              struct_decoder(name, version, True), offset)
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
