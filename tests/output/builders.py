"""Exchanges built from real Kafka bytes for output tests.

Messages are encoded by kafka-python (an independent implementation of the protocol)
and decoded by kwsniff's own decoder, so tests see exactly what the engine produces.
"""

from __future__ import annotations

import re
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from kwsniff.kafka import embedded
from kwsniff.kafka.model import PAIRED, Exchange, KafkaMessage
from kwsniff.kafka.protocol import decode_request, decode_response

T0 = 1_700_000_000.0
_CONTEXT = embedded.AnnotateContext()


def record_batch(values: list[bytes | None], *, keys: list[bytes | None] | None = None,
                 codec: int = 0, base_ts: int = 1_700_000_000_000,
                 headers: list[tuple[str, bytes]] | None = None,
                 producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    """A magic-2 record batch with one record per value."""
    pid, epoch, seq = producer
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=pid, producer_epoch=epoch,
                                        base_sequence=seq, batch_size=1 << 20)
    for i, value in enumerate(values):
        key = keys[i] if keys else None
        builder.append(i, timestamp=base_ts + i, key=key, value=value, headers=headers or [])
    return bytes(builder.build())


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _build(top: Any, klass: Any, fields: list[dict[str, Any]], data: dict[str, Any]) -> Any:
    kwargs = {}
    for f in fields:
        name, typ = f["name"], f["type"]
        if name not in data:
            continue
        value = data[name]
        sub_fields = f.get("fields")
        if sub_fields is None and typ.lstrip("[]") in {s["name"] for s in
                                                        top._json.get("commonStructs") or []}:
            sub_fields = next(s["fields"] for s in top._json["commonStructs"]
                              if s["name"] == typ.lstrip("[]"))
        if sub_fields is not None and value is not None:
            sub = getattr(klass, typ.lstrip("[]"), None) or getattr(top, typ.lstrip("[]"))
            if typ.startswith("[]"):
                value = [_build(top, sub, sub_fields, v) for v in value]
            else:
                value = _build(top, sub, sub_fields, value)
        kwargs[_snake(name)] = value
    return klass(**kwargs)


def build(cls: Any, version: int, data: dict[str, Any]) -> Any:
    """A kafka-python message object from a dict keyed by Kafka's JSON field names."""
    versioned = cls[version]
    return _build(cls, versioned, cls._json["fields"], data)


def request(obj: Any, *, correlation_id: int = 1, client_id: str = "test-client",
            frame: int = 1, ts: float = T0) -> KafkaMessage:
    """Encode a kafka-python request object and decode it with kwsniff."""
    obj.with_header(correlation_id=correlation_id, client_id=client_id)
    raw = bytes(obj.encode(header=True))
    msg = decode_request(raw)
    msg.frame_first = msg.frame_last = frame
    msg.ts_first = msg.ts_last = ts
    embedded.annotate(msg, context=_CONTEXT)
    return msg


def response(obj: Any, req: KafkaMessage, *, frame: int = 2, ts: float = T0 + 0.0032
             ) -> KafkaMessage:
    """Encode a kafka-python response object answering ``req``; decode it with kwsniff."""
    obj.with_header(correlation_id=req.correlation_id)
    raw = bytes(obj.encode(header=True))
    msg = decode_response(raw, req.api_key, req.api_version)
    msg.frame_first = msg.frame_last = frame
    msg.ts_first = msg.ts_last = ts
    embedded.annotate(msg, request=req, context=_CONTEXT)
    return msg


def exchange(req: KafkaMessage | None, resp: KafkaMessage | None, *, index: int = 1,
             stream: int = 0, status: str = PAIRED) -> Exchange:
    return Exchange(index=index, stream=stream, client=("10.0.0.1", 50000 + stream),
                    broker=("10.0.0.2", 9092), status=status, request=req, response=resp)
