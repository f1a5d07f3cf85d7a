"""The decoded units every layer above ``kafka/`` works with.

Contract:

* :class:`KafkaMessage` is one size-delimited Kafka frame (a request or a response),
  with where it came from in the capture and what was decoded from it. ``raw`` holds
  the frame *without* its 4-byte size prefix; ``frame_offset`` says where ``raw``
  started in the TCP stream (the size prefix sits 4 bytes before it).
* :class:`Exchange` is the unit of output: one request and its response, or one
  unpaired half. ``status`` is one of :data:`STATUSES`.
* Decoded bodies are plain dicts keyed by the field names of Kafka's message
  definitions (``"Topics"``, ``"PartitionIndex"``, ...); arrays are lists; ``records``
  fields hold :class:`kwsniff.kafka.records.Records`; unknown tagged fields are kept
  under the key ``"_unknown_tags"`` as a list of ``(tag, bytes)``.
* Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PAIRED = "paired"
NO_RESPONSE_EXPECTED = "no_response_expected"
UNANSWERED = "unanswered"
ORPHAN_RESPONSE = "orphan_response"
STATUSES = (PAIRED, NO_RESPONSE_EXPECTED, UNANSWERED, ORPHAN_RESPONSE)

REQUEST = "request"
RESPONSE = "response"


@dataclass(slots=True, eq=False)
class KafkaMessage:
    """One Kafka frame and what was decoded from it."""

    kind: str                          # REQUEST or RESPONSE
    raw: bytes                         # frame bytes after the 4-byte size prefix
    api_key: int | None = None         # for responses: from the paired/inferred request
    api_version: int | None = None
    correlation_id: int | None = None  # None for the 0.7 protocol
    client_id: str | None = None       # requests only
    header: dict[str, Any] = field(default_factory=dict)  # header fields (incl. tagged)
    header_version: int | None = None
    body: dict[str, Any] | None = None  # None when the body could not be decoded
    body_offset: int = 0               # offset of the body within ``raw``
    body_end: int = 0                  # offset where decoding stopped within ``raw``
    problems: list[str] = field(default_factory=list)
    inferred: str | None = None        # how api key/version were guessed for orphans
    # where in the capture
    frame_first: int = 0               # capture frame carrying the first byte (size prefix)
    frame_last: int = 0                # capture frame carrying the last byte
    ts_first: float = 0.0
    ts_last: float = 0.0
    stream_offset: int = 0             # offset of the size prefix in its TCP direction
    missing: int = 0                   # bytes of the frame lost in a capture gap (raw is cut)
    # a body left for later (kwsniff.kafka.protocol.decoder.complete_body), else None
    deferred: Any = None

    @property
    def size(self) -> int:
        """Bytes on the wire including the 4-byte size prefix."""
        return len(self.raw) + 4 + self.missing


@dataclass(slots=True, eq=False)
class Exchange:
    """A request and its response (or an unpaired half), the unit of all output."""

    index: int                         # 1-based, in capture order of the first message
    stream: int                        # TCP connection index (like tshark's tcp.stream)
    client: tuple[str, int]
    broker: tuple[str, int]
    status: str
    request: KafkaMessage | None = None
    response: KafkaMessage | None = None
    protocol: str = "kafka"            # "kafka", "kafka-0.7" or "kafka-sasl" (raw SASL tokens)
    problems: list[str] = field(default_factory=list)  # exchange-level (pairing, gaps)

    def _first(self) -> KafkaMessage:
        msg = self.request or self.response
        assert msg is not None, "an exchange always has a request or a response"
        return msg

    @property
    def api_key(self) -> int | None:
        return self._first().api_key

    @property
    def api_version(self) -> int | None:
        return self._first().api_version

    @property
    def correlation_id(self) -> int | None:
        return self._first().correlation_id

    @property
    def client_id(self) -> str | None:
        return self.request.client_id if self.request else None

    @property
    def ts(self) -> float:
        """The exchange's time: the capture time of the request's first frame (the
        response's for an orphan) — the frame whose order gives :attr:`index`, so
        numbers and times go up together, as in Wireshark."""
        return self._first().ts_first

    @property
    def request_end_ts(self) -> float | None:
        """Request completed (the capture time of its last byte; latency counts from
        here); None without a request."""
        return self.request.ts_last if self.request else None

    @property
    def response_ts(self) -> float | None:
        return self.response.ts_last if self.response else None

    @property
    def latency_ms(self) -> float | None:
        """Request completed -> response completed, in ms (Wireshark's convention)."""
        if self.request is None or self.response is None:
            return None
        return (self.response.ts_last - self.request.ts_last) * 1000.0

    def all_problems(self) -> list[str]:
        out = list(self.problems)
        for msg in (self.request, self.response):
            if msg is not None:
                out.extend(f"{msg.kind}: {p}" for p in msg.problems)
        return out
