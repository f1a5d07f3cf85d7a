"""Trace context in record headers (W3C traceparent, B3, SkyWalking sw8) as exchange fields.

Enable with ``--plugin-opt trace.enabled=true``. Every record a Produce request or a
Fetch response carries is searched for

* W3C Trace Context: ``traceparent: 00-<trace id>-<parent span id>-<flags>``;
* Zipkin B3, single header ``b3: <trace id>-<span id>[-<sampled>[-<parent span id>]]``
  and multi header ``X-B3-TraceId``/``X-B3-SpanId``/``X-B3-ParentSpanId``/``X-B3-Sampled``
  (header names case-insensitive);
* Apache SkyWalking v8: ``sw8: <sample>-<trace id>-<segment id>-<span id>-...`` (the
  ids base64-encoded; the span is shown as ``<segment id>.<span id>``),

and the exchange gets the fields ``trace.id``, ``trace.span``, ``trace.format`` (all
multi-valued, distinct values in record order) and ``trace.records`` (records that
carry trace context): usable in display filters
(``-Y 'trace.id == "4bf92f3577b34da6a3ce929d0e0e4736"'``), shown in the summary line
and the ``-V`` tree, and exported as ``plugins.trace`` so that Spark jobs can join
Kafka requests with traces. The headers themselves are shown decoded in the tree and
the export. Costs a decode of every record, hence opt-in.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from kwsniff.kafka.model import Exchange
from kwsniff.plugin_api import (
    PayloadProblem,
    PayloadWhere,
    PluginContext,
    TopicMap,
    exchange_records,
    per_exchange,
)

DESCRIPTION = "trace context from record headers (W3C traceparent, B3, sw8) as fields"
OPTIONS = {
    "enabled": "true turns the plugin on (it decodes every record)",
    "topics": "only records of these topics (globs; default: all)",
    "digest": "show trace.id in the summary line (default true)",
}

MAX_VALUES = 256     # distinct ids kept per exchange and field (memory bound)

_HEX = re.compile(r"[0-9a-f]+\Z")
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\Z")


@dataclass(frozen=True, slots=True)
class TraceContext:
    """The trace context one record carries."""

    format: str              # "w3c", "b3", "b3-multi", "sw8"
    trace_id: str
    span_id: str | None
    parent_id: str | None = None
    sampled: bool | None = None


def _hex_id(text: str, lengths: tuple[int, ...]) -> str | None:
    t = text.strip().lower()
    if len(t) in lengths and _HEX.match(t) and t.strip("0"):
        return t
    return None


def parse_traceparent(value: str) -> TraceContext | None:
    """W3C ``traceparent`` (version 00; later versions by their first four fields)."""
    m = _TRACEPARENT.match(value.strip().lower())
    if m is None:
        return None
    version, trace_id, parent, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or not trace_id.strip("0") \
            or not parent.strip("0"):
        return None
    return TraceContext("w3c", trace_id, parent, None, bool(int(flags, 16) & 1))


_B3_SAMPLED = {"1": True, "d": True, "0": False}


def parse_b3(value: str) -> TraceContext | None:
    """Zipkin B3 single header; a sampling-only value (``0``/``1``/``d``) has no ids."""
    parts = value.strip().split("-")
    if len(parts) < 2 or len(parts) > 4:
        return None
    trace_id = _hex_id(parts[0], (16, 32))
    span_id = _hex_id(parts[1], (16,))
    if trace_id is None or span_id is None:
        return None
    sampled = None
    if len(parts) >= 3:
        if parts[2].lower() not in _B3_SAMPLED:
            return None
        sampled = _B3_SAMPLED[parts[2].lower()]
    parent = _hex_id(parts[3], (16,)) if len(parts) == 4 else None
    if len(parts) == 4 and parent is None:
        return None
    return TraceContext("b3", trace_id, span_id, parent, sampled)


def parse_b3_multi(headers: dict[str, str]) -> TraceContext | None:
    """Zipkin B3 multi headers (keys lower-cased)."""
    trace_id = _hex_id(headers.get("x-b3-traceid", ""), (16, 32))
    span_id = _hex_id(headers.get("x-b3-spanid", ""), (16,))
    if trace_id is None or span_id is None:
        return None
    parent = _hex_id(headers.get("x-b3-parentspanid", ""), (16,))
    flag = headers.get("x-b3-sampled", "").strip().lower()
    sampled = True if flag in ("1", "true") or headers.get("x-b3-flags", "").strip() == "1" \
        else False if flag in ("0", "false") else None
    return TraceContext("b3-multi", trace_id, span_id, parent, sampled)


def _b64(text: str) -> str | None:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None


def parse_sw8_fields(value: str) -> dict[str, Any] | None:
    """The eight fields of a SkyWalking v8 ``sw8`` header, base64 decoded."""
    parts = value.strip().split("-")
    if len(parts) != 8 or parts[0] not in ("0", "1") or not parts[3].lstrip("-").isdigit():
        return None
    decoded = [_b64(p) for p in (parts[1], parts[2], parts[4], parts[5], parts[6], parts[7])]
    if any(d is None for d in decoded):
        return None
    trace_id, segment, service, instance, endpoint, address = decoded
    return {"sampled": parts[0] == "1", "trace_id": trace_id, "segment_id": segment,
            "span_id": int(parts[3]), "parent_service": service,
            "parent_service_instance": instance, "parent_endpoint": endpoint,
            "address": address}


def parse_sw8(value: str) -> TraceContext | None:
    f = parse_sw8_fields(value)
    if f is None or not f["trace_id"]:
        return None
    return TraceContext("sw8", f["trace_id"], f"{f['segment_id']}.{f['span_id']}", None,
                        f["sampled"])


def _text(value: bytes | None) -> str | None:
    if value is None or len(value) > 1024:
        return None
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        return None


def record_contexts(headers: list[tuple[str, bytes | None]]) -> list[TraceContext]:
    """Every trace context in one record's headers (several formats may co-exist)."""
    out: list[TraceContext] = []
    multi: dict[str, str] = {}
    for key, raw in headers:
        low = key.lower()
        if low not in ("traceparent", "b3", "sw8") and not low.startswith("x-b3-"):
            continue
        text = _text(raw)
        if text is None:
            continue
        if low == "traceparent":
            ctx = parse_traceparent(text)
        elif low == "b3":
            ctx = parse_b3(text)
        elif low == "sw8":
            ctx = parse_sw8(text)
        else:
            multi[low] = text
            continue
        if ctx is not None:
            out.append(ctx)
    if multi:
        ctx = parse_b3_multi(multi)
        if ctx is not None:
            out.append(ctx)
    return out


@dataclass(slots=True)
class ExchangeTraces:
    ids: list[str]
    spans: list[str]
    formats: list[str]
    records: int


def _add(seen: dict[str, None], value: str | None) -> None:
    if value is not None and value not in seen and len(seen) < MAX_VALUES:
        seen[value] = None


def exchange_traces(exchange: Exchange, topics: TopicMap[bool] | None) -> ExchangeTraces:
    """Trace contexts of every record the exchange carries."""
    ids: dict[str, None] = {}
    spans: dict[str, None] = {}
    formats: dict[str, None] = {}
    count = 0
    for _side, topic, _partition, record in exchange_records(exchange):
        if not record.headers or (topics is not None and not topics.get(topic)):
            continue
        found = record_contexts(record.headers)
        if found:
            count += 1
        for ctx in found:
            _add(ids, ctx.trace_id)
            _add(spans, ctx.span_id)
            _add(formats, ctx.format)
    return ExchangeTraces(list(ids), list(spans), list(formats), count)


def decode_header(data: bytes, where: PayloadWhere) -> Any:
    """A trace header value, field by field (for the tree and the export)."""
    text = _text(data)
    key = (where.header_key or "").lower()
    if text is None:
        raise PayloadProblem(f"{where.header_key} is not ASCII text")
    if key == "sw8":
        fields = parse_sw8_fields(text)
        if fields is None:
            raise PayloadProblem("not a SkyWalking v8 sw8 value")
        return {"format": "sw8", **fields}
    ctx = parse_traceparent(text) if key == "traceparent" else parse_b3(text)
    if ctx is None:
        if key == "b3" and text.strip().lower() in _B3_SAMPLED:
            return {"format": "b3", "sampled": _B3_SAMPLED[text.strip().lower()]}
        raise PayloadProblem(f"not a valid {where.header_key} value")
    out: dict[str, Any] = {"format": ctx.format, "trace_id": ctx.trace_id}
    if ctx.format == "w3c":
        out["parent_id"] = ctx.span_id
        out["flags"] = text.strip()[53:55]
    else:
        out["span_id"] = ctx.span_id
        if ctx.parent_id is not None:
            out["parent_span_id"] = ctx.parent_id
    if ctx.sampled is not None:
        out["sampled"] = ctx.sampled
    return out


def register(api: PluginContext) -> None:
    if not api.options.get_bool("enabled", False):
        return   # opt-in: walking every record costs time
    globs = api.options.get_list("topics")
    topics: TopicMap[bool] | None = TopicMap({g: True for g in globs}) \
        if globs and "*" not in globs else None
    digest = api.options.get_bool("digest", True)

    @per_exchange
    def traces(exchange: Exchange) -> ExchangeTraces:
        return exchange_traces(exchange, topics)

    api.exchange_field("id", lambda ex: traces(ex).ids, multi=True, digest=digest,
                       description="trace ids in record headers (W3C traceparent, B3, sw8)")
    api.exchange_field("span", lambda ex: traces(ex).spans, multi=True,
                       description="span ids in record headers (W3C: the parent id; "
                                   "sw8: segment id.span id)")
    api.exchange_field("format", lambda ex: traces(ex).formats, multi=True,
                       description="trace header formats seen: w3c, b3, b3-multi, sw8")
    api.exchange_field("records", lambda ex: traces(ex).records or None, type="int",
                       description="records carrying trace context")
    api.payload_decoder(decode_header, topics=globs or "*",
                        headers=["traceparent", "Traceparent", "b3", "B3", "sw8", "SW8"],
                        name="trace")
