"""Decode speed of Produce, Fetch and Metadata (messages/s), and generated vs interpreted.

Slow (opt-in with --all); prints the rates (run with -s to see them) and checks
conservative floors so that a large regression fails.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from kwsniff.kafka.protocol import decode_request, decode_response

protocol_wire = pytest.importorskip("protocol_wire")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not protocol_wire.SHARED.is_dir(),
                                 reason="../shared/kafka-protocol is not present")]


def _frame(key: int, kind: str, version: int, shape: Callable[[dict], None]) -> bytes:
    schema = protocol_wire.schema_for(key, kind, version)
    maker = protocol_wire.ValueMaker(f"speed/{key}/{kind}/{version}", tags=False)
    values = maker.struct(schema.fields, version)
    shape(values)
    flexible = protocol_wire.within(version, schema.flexible)
    body = protocol_wire.Encoder(version, flexible).struct(schema.fields, values)
    hv = (protocol_wire.request_header_version(key, version, flexible) if kind == "request"
          else protocol_wire.response_header_version(key, flexible))
    return protocol_wire.header_bytes(kind, key, version, 5, "producer-1", hv) + body


def _produce(v: dict[str, Any]) -> None:
    topic = v["TopicData"][0]
    v["TopicData"] = [topic]
    part = topic["PartitionData"][0]
    topic["PartitionData"] = [dict(part, Index=i, Records=protocol_wire.Records(bytes(1000)))
                              for i in range(3)]
    v["TransactionalId"] = None


def _fetch(v: dict[str, Any]) -> None:
    topic = v["Responses"][0]
    v["Responses"] = [topic]
    part = topic["Partitions"][0]
    topic["Partitions"] = [dict(part, PartitionIndex=i, AbortedTransactions=None,
                                Records=protocol_wire.Records(bytes(1000))) for i in range(5)]


def _metadata(v: dict[str, Any]) -> None:
    v["Brokers"] = [dict(v["Brokers"][0], NodeId=i) for i in range(5)]
    topic = v["Topics"][0]
    part = topic["Partitions"][0]
    v["Topics"] = [dict(topic, Name=f"topic-{i}",
                        Partitions=[dict(part, PartitionIndex=j) for j in range(6)])
                   for i in range(10)]


CASES = [
    ("Produce v9 request, 3 x 1 KB", 0, "request", 9, _produce, 20_000),
    ("Fetch v12 response, 5 x 1 KB", 1, "response", 12, _fetch, 10_000),
    ("Metadata v12 response, 10 topics x 6 partitions", 3, "response", 12, _metadata, 1_000),
]


def _rate(fn: Callable[[], Any]) -> float:
    best = 0.0
    for _ in range(5):
        n = 0
        start = time.perf_counter()
        while time.perf_counter() - start < 0.2:
            for _ in range(20):
                fn()
            n += 20
        best = max(best, n / (time.perf_counter() - start))
    return best


@pytest.mark.parametrize("label,key,kind,version,shape,floor", CASES)
def test_decode_rate(label: str, key: int, kind: str, version: int,
                     shape: Callable[[dict], None], floor: int) -> None:
    raw = _frame(key, kind, version, shape)
    if kind == "request":
        fn: Callable[[], Any] = lambda: decode_request(raw)  # noqa: E731
    else:
        fn = lambda: decode_response(raw, key, version)  # noqa: E731
    assert fn().problems == []
    rate = _rate(fn)
    print(f"\n{label}: {len(raw)} bytes, {rate:,.0f} messages/s")
    assert rate > floor
