"""The JSON Lines export (``kwsniff export``): one object per exchange, streamed.

Contract (documented in ``docs/export-schema.md``; machine-readable in
``kwsniff/output/export_schema.json``):

* Every line is one JSON object with ``"schema": SCHEMA_ID`` and a ``"kind"``:
  ``"exchange"`` (one per exchange, capture order), ``"record"`` (with ``--records``:
  one per record, right after its exchange), ``"summary"`` (one last line with the run
  counters).
* The exchange object's top-level fields are a fixed contract (see the doc).
* Bytes anywhere (record keys/values/header values, ``bytes`` fields of bodies, unknown
  tagged fields) are ``{"text": "..."}`` when valid UTF-8 without control characters
  other than tab/CR/LF, else ``{"base64": "..."}``; exactly one key. ``null`` stays null.
* In ``request``/``response`` bodies a ``records`` field becomes a record-set summary
  ``{"size", "batch_count", "record_count", "codecs", "truncated", "batches"}``, the
  ``batches`` being each batch's header (:func:`batch_header`; records themselves
  are ``"record"`` lines); a uuid is its text; unknown tagged fields ``_unknown_tags``
  are ``[[tag, bytes], ...]``; NaN/infinite floats become null.
* A message whose body was not decoded (unknown API key or version) carries its body
  bytes in ``request_raw``/``response_raw`` (the bytes convention above); decoded
  bodies have no such key.
* Plugins: exchange fields they add are in ``"plugins"`` (only when a plugin added
  export fields); record keys/values/headers their payload decoders decode are in
  ``key_decoded``/``value_decoded`` and a header's ``"decoded"``.
* Nothing is buffered beyond one exchange: memory does not grow with the capture.
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from collections.abc import Iterator
from typing import IO, Any

from kwsniff.kafka.model import Exchange, KafkaMessage
from kwsniff.kafka.payload import as_text, decode_with_hooks, registered_decoders
from kwsniff.kafka.records import Batch, Record, Records
from kwsniff.output import extra_fields
from kwsniff.output.facts import ExchangeFacts, TopicNames, records_count
from kwsniff.output.fields import format_address
from kwsniff.output.names import SASL_PROTOCOL, api_label, error_label

SCHEMA_ID = "kwsniff.exchange/1"
KIND_EXCHANGE = "exchange"
KIND_RECORD = "record"
KIND_SUMMARY = "summary"


def encode_bytes(data: bytes | bytearray | memoryview | None) -> dict[str, str] | None:
    """``{"text": ...}`` for clean UTF-8 text, else ``{"base64": ...}``; None for None."""
    if data is None:
        return None
    raw = bytes(data)
    text = as_text(raw)
    if text is not None:
        return {"text": text}
    return {"base64": base64.b64encode(raw).decode("ascii")}


def decode_bytes(value: dict[str, str] | None) -> bytes | None:
    """Inverse of :func:`encode_bytes` (for consumers and tests)."""
    if value is None:
        return None
    if "text" in value:
        return value["text"].encode("utf-8")
    return base64.b64decode(value["base64"])


def batch_header(batch: Batch) -> dict[str, Any]:
    """The export form of one batch's header: what joins a produced batch with its
    fetched copies and tells an idempotent producer's retries apart (``kwsniff analyze``
    feeds it to :mod:`kwsniff.output.insights`). Fields a batch's format lacks are null
    (legacy messages: no delta, producer or sequence); ``record_count`` is null for a
    legacy compressed wrapper that could not be decompressed."""
    return {
        "base_offset": batch.base_offset,
        "last_offset_delta": batch.last_offset_delta,
        "record_count": batch.record_count,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "transactional": batch.transactional,
        "control": batch.control,
        "truncated": batch.truncated,
    }


def records_summary(records: Records) -> dict[str, Any]:
    """The export form of a ``records`` field inside a body (batch headers; legacy
    compressed wrappers are decompressed to count their messages)."""
    count = records_count(records, exact=True)
    batches = records.batches
    codecs = sorted({b.codec_name for b in batches if b.attributes is not None})
    return {
        "size": len(records),
        "batch_count": len(batches),
        "record_count": count,
        "codecs": codecs,
        "truncated": records.truncated,
        "batches": [batch_header(b) for b in batches],
    }


def json_default(obj: Any) -> Any:
    """``default=`` hook of :func:`json.dumps` for the types decoded bodies hold."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return encode_bytes(obj)
    if isinstance(obj, Records):
        return records_summary(obj)
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return repr(obj)


def _sanitize(obj: Any) -> Any:
    """Replace non-finite floats by None (slow path, only when dumps refused them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v) for v in obj]
    if isinstance(obj, (bytes, bytearray, memoryview, Records, uuid.UUID)):
        return json_default(obj)
    return obj


def dumps(obj: Any) -> str:
    """Compact, UTF-8 friendly JSON text of one export object (no newline)."""
    try:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=json_default)
    except ValueError:
        return json.dumps(_sanitize(obj), ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False, default=json_default)


def _frames(msg: KafkaMessage | None) -> list[int] | None:
    return [msg.frame_first, msg.frame_last] if msg is not None else None


def _undecoded_body(msg: KafkaMessage | None) -> dict[str, str] | None:
    """The body bytes of a message whose body was not decoded (an unknown API key or
    version, a header that could not be read) as export bytes, so that nothing the
    capture held is missing from the export; None when the body was decoded."""
    if msg is None or msg.body is not None or msg.deferred is not None:
        return None
    raw = msg.raw
    start = msg.body_offset
    if raw is None or start <= 0 or start >= len(raw):
        return None
    return encode_bytes(raw[start:])


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value


def record_set_problems(facts: ExchangeFacts) -> list[str]:
    """Problems of the exchange's record sets found by batch-header and CRC checks
    (record-level problems appear once records are decoded, e.g. in record objects)."""
    out: list[str] = []
    for side, topic, partition, records in facts.record_sets():
        for problem in records.problems:
            out.append(f"{side}: records {topic}[{partition}]: {problem}")
    return out


def _api_name(exchange: Exchange) -> str | None:
    """``api_name``: the API's name; ``"SASL"`` for raw SASL token exchanges (which have
    no API key); None when the API is unknown."""
    if exchange.api_key is None and exchange.protocol != SASL_PROTOCOL:
        return None
    return api_label(exchange.api_key, exchange.protocol)


class ExportEncoder:
    """Builds export objects for exchanges of one capture.

    ``capture`` is the name written in every exchange's ``capture`` field; ``records``
    adds ``"record"`` objects; ``names`` is the topic-id map shared with the filter.
    """

    def __init__(self, capture: str, *, records: bool = False,
                 names: TopicNames | None = None) -> None:
        self.capture = capture
        self.records = records
        self.names = names if names is not None else TopicNames()
        self.exchanges = 0
        self.record_lines = 0
        self.problems = 0
        self.record_set_problems = 0     # problems found only by the record-set checks

    def facts(self, exchange: Exchange) -> ExchangeFacts:
        return ExchangeFacts(exchange, self.names, exact=True)

    def exchange_object(self, exchange: Exchange, facts: ExchangeFacts | None = None
                        ) -> dict[str, Any]:
        """The ``"exchange"`` object (see ``docs/export-schema.md``)."""
        f = facts if facts is not None else self.facts(exchange)
        f.require_exact()   # even if the facts were first made for the display filter
        req, resp = exchange.request, exchange.response
        codes = f.error_codes
        problems = exchange.all_problems() + record_set_problems(f)
        latency = exchange.latency_ms
        obj = {
            "schema": SCHEMA_ID,
            "kind": KIND_EXCHANGE,
            "index": exchange.index,
            "capture": self.capture,
            "stream": exchange.stream,
            "client": format_address(exchange.client),
            "broker": format_address(exchange.broker),
            "ts": exchange.ts,
            "request_end_ts": exchange.request_end_ts,
            "response_ts": exchange.response_ts,
            "latency_ms": _finite(round(latency, 6) if latency is not None else None),
            "api_key": exchange.api_key,
            "api_name": _api_name(exchange),
            "api_version": exchange.api_version,
            "correlation_id": exchange.correlation_id,
            "client_id": exchange.client_id,
            "status": exchange.status,
            "request": req.body if req is not None else None,
            "response": resp.body if resp is not None else None,
            "topics": f.topics,
            "error_codes": codes,
            "record_count": f.record_count,
            "request_bytes": f.request_bytes,
            "response_bytes": f.response_bytes,
            "problems": problems,
            # additions beyond the fixed contract
            "protocol": exchange.protocol,
            "error_names": [error_label(c, exchange.protocol) for c in codes],
            "partitions": sorted(f.partitions),
            "groups": f.groups,
            "request_header": req.header if req is not None else None,
            "request_frames": _frames(req),
            "response_frames": _frames(resp),
        }
        if exchange.tls is not None:
            obj["tls"] = exchange.tls.to_dict()     # carried by decrypted TLS
        for name, msg in (("request_raw", req), ("response_raw", resp)):
            raw = _undecoded_body(msg)
            if raw is not None:
                obj[name] = raw
        if extra_fields._extra and extra_fields.has_export_fields():
            obj["plugins"] = extra_fields.export_values(exchange)
        return obj

    def record_objects(self, exchange: Exchange, facts: ExchangeFacts | None = None
                       ) -> Iterator[dict[str, Any]]:
        """One ``"record"`` object per record of the exchange (request, then response)."""
        f = facts if facts is not None else self.facts(exchange)
        hooks = bool(registered_decoders())
        base = {
            "schema": SCHEMA_ID,
            "kind": KIND_RECORD,
            "capture": self.capture,
            "exchange": exchange.index,
            "stream": exchange.stream,
            "correlation_id": exchange.correlation_id,
            "api_key": exchange.api_key,
            "api_name": _api_name(exchange),
            "api_version": exchange.api_version,
        }
        for side, topic, partition, records in f.record_sets():
            t = records.topic if records.topic is not None else topic
            p = records.partition if records.partition is not None else partition
            for bi, batch in enumerate(records.batches):
                for ri, record in enumerate(batch.records):
                    yield self._record_object(base, side, t, p, bi, ri, batch, record, hooks)

    def _record_object(self, base: dict[str, Any], side: str, topic: str | None,
                       partition: int | None, bi: int, ri: int, batch: Batch, record: Record,
                       hooks: bool) -> dict[str, Any]:
        seq = None
        if batch.base_sequence is not None and batch.base_sequence >= 0 \
                and record.offset is not None and batch.base_offset is not None:
            seq = batch.base_sequence + (record.offset - batch.base_offset)
        obj = dict(base)
        key_decoded = record.key_decoded
        value_decoded = record.value_decoded
        problems = list(record.problems or ())
        if hooks and key_decoded is None and record.key is not None:
            key_decoded, _, probs = decode_with_hooks(bytes(record.key), topic, partition, "key")
            problems.extend(probs)
        if hooks and value_decoded is None and record.value is not None:
            value_decoded, _, probs = decode_with_hooks(bytes(record.value), topic, partition,
                                                        "value")
            problems.extend(probs)
        headers = [{"key": k, "value": encode_bytes(v)} for k, v in record.headers]
        if hooks:
            for h, (k, v) in zip(headers, record.headers):
                if v is not None:
                    decoded, _, probs = decode_with_hooks(bytes(v), topic, partition, "header", k)
                    problems.extend(probs)
                    if decoded is not None:
                        h["decoded"] = decoded
        obj.update({
            "side": side,
            "topic": topic,
            "partition": partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "timestamp_type": batch.timestamp_type,
            "key": encode_bytes(record.key),
            "value": encode_bytes(record.value),
            "headers": headers,
            "size": record.size,
            "codec": batch.codec_name if batch.attributes is not None else None,
            "magic": batch.magic,
            "batch_index": bi,
            "record_index": ri,
            "batch_base_offset": batch.base_offset,
            "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch,
            "sequence": seq,
            "transactional": batch.transactional,
            "control": record.control,
            "key_decoded": key_decoded,
            "value_decoded": value_decoded,
            "problems": problems,
        })
        return obj

    def lines(self, exchange: Exchange, facts: ExchangeFacts | None = None) -> Iterator[str]:
        """The JSON text lines (without newline) for one exchange."""
        f = facts if facts is not None else self.facts(exchange)
        obj = self.exchange_object(exchange, f)
        self.exchanges += 1
        self.problems += len(obj["problems"])
        self.record_set_problems += len(obj["problems"]) - len(exchange.all_problems())
        yield dumps(obj)
        if self.records:
            for rec in self.record_objects(exchange, f):
                self.record_lines += 1
                yield dumps(rec)

    def summary_object(self, counters: dict[str, Any]) -> dict[str, Any]:
        """The final ``"summary"`` object: export counts plus the run counters."""
        obj: dict[str, Any] = {
            "schema": SCHEMA_ID,
            "kind": KIND_SUMMARY,
            "capture": self.capture,
            "exported_exchanges": self.exchanges,
            "exported_records": self.record_lines,
        }
        for key in SUMMARY_COUNTERS:
            value = counters.get(key)
            obj[key] = int(value) if isinstance(value, (int, float)) else 0
        obj["not_kafka"] = [dict(row) for row in counters.get("not_kafka") or []]
        return obj


#: Run counters every summary object carries (integers; 0 when the engine has none).
SUMMARY_COUNTERS = ("packets", "connections", "exchanges", "problems", "skipped_bytes",
                    "gap_bytes", "not_kafka_connections", "not_kafka_bytes", "frame_bytes",
                    "tls_bytes", "tls_decrypted_bytes", "tls_undecrypted_bytes",
                    "tls_gap_bytes")


class JsonlWriter:
    """Writes export lines to a text stream, one object per line, flushing as it goes."""

    def __init__(self, stream: IO[str], encoder: ExportEncoder) -> None:
        self.stream = stream
        self.encoder = encoder

    def write_exchange(self, exchange: Exchange, facts: ExchangeFacts | None = None) -> None:
        write = self.stream.write
        for line in self.encoder.lines(exchange, facts):
            write(line)
            write("\n")

    def write_summary(self, counters: dict[str, Any]) -> None:
        self.stream.write(dumps(self.encoder.summary_object(counters)))
        self.stream.write("\n")
