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

from typing import Any

PAIRED = "paired"
NO_RESPONSE_EXPECTED = "no_response_expected"
UNANSWERED = "unanswered"
ORPHAN_RESPONSE = "orphan_response"
STATUSES = (PAIRED, NO_RESPONSE_EXPECTED, UNANSWERED, ORPHAN_RESPONSE)

REQUEST = "request"
RESPONSE = "response"


_MESSAGE_FIELDS = ("kind", "raw", "api_key", "api_version", "correlation_id", "client_id",
                   "header", "header_version", "body", "body_offset", "body_end", "problems",
                   "inferred", "frame_first", "frame_last", "ts_first", "ts_last",
                   "stream_offset", "missing", "deferred")


class KafkaMessage:
    """One Kafka frame and what was decoded from it.

    (A plain class with ``__slots__`` rather than a dataclass: compiled, ``model.pxd``
    makes it an extension type whose fields the hot modules read as C struct fields,
    and whose constructor is compiled too.)"""

    __slots__ = _MESSAGE_FIELDS

    def __init__(self, kind: str, raw: bytes, api_key: int | None = None,
                 api_version: int | None = None, correlation_id: int | None = None,
                 client_id: str | None = None, header: dict[str, Any] | None = None,
                 header_version: int | None = None, body: dict[str, Any] | None = None,
                 body_offset: int = 0, body_end: int = 0, problems: list[str] | None = None,
                 inferred: str | None = None, frame_first: int = 0, frame_last: int = 0,
                 ts_first: float = 0.0, ts_last: float = 0.0, stream_offset: int = 0,
                 missing: int = 0, deferred: Any = None) -> None:
        self.kind = kind                    # REQUEST or RESPONSE
        self.raw = raw                      # frame bytes after the 4-byte size prefix
        self.api_key = api_key              # for responses: from the paired/inferred request
        self.api_version = api_version
        self.correlation_id = correlation_id  # None for the 0.7 protocol
        self.client_id = client_id          # requests only
        self.header = {} if header is None else header  # header fields (incl. tagged)
        self.header_version = header_version
        self.body = body                    # None when the body could not be decoded
        self.body_offset = body_offset      # offset of the body within ``raw``
        self.body_end = body_end            # offset where decoding stopped within ``raw``
        self.problems = [] if problems is None else problems
        self.inferred = inferred            # how api key/version were guessed for orphans
        # where in the capture
        self.frame_first = frame_first      # capture frame carrying the first byte (size prefix)
        self.frame_last = frame_last        # capture frame carrying the last byte
        self.ts_first = ts_first
        self.ts_last = ts_last
        self.stream_offset = stream_offset  # offset of the size prefix in its TCP direction
        self.missing = missing              # bytes of the frame lost in a capture gap (raw is cut)
        # a body left for later (kwsniff.kafka.protocol.decoder.complete_body), else None
        self.deferred = deferred

    def __repr__(self) -> str:
        return _repr(self, _MESSAGE_FIELDS)

    def state(self) -> list[Any]:
        """Every field, in :data:`_MESSAGE_FIELDS` order: ``KafkaMessage(*state)`` is an
        equal message (the TUI's spill records are made of it)."""
        return [self.kind, self.raw, self.api_key, self.api_version, self.correlation_id,
                self.client_id, self.header, self.header_version, self.body,
                self.body_offset, self.body_end, self.problems, self.inferred,
                self.frame_first, self.frame_last, self.ts_first, self.ts_last,
                self.stream_offset, self.missing, self.deferred]

    @property
    def size(self) -> int:
        """Bytes on the wire including the 4-byte size prefix."""
        return len(self.raw) + 4 + self.missing


_EXCHANGE_FIELDS = ("index", "stream", "client", "broker", "status", "request", "response",
                    "protocol", "problems", "tls")


class Exchange:
    """A request and its response (or an unpaired half), the unit of all output.
    (A plain class with ``__slots__``: see :class:`KafkaMessage`.)"""

    __slots__ = _EXCHANGE_FIELDS

    def __init__(self, index: int, stream: int, client: tuple[str, int],
                 broker: tuple[str, int], status: str, request: KafkaMessage | None = None,
                 response: KafkaMessage | None = None, protocol: str = "kafka",
                 problems: list[str] | None = None, tls: Any = None) -> None:
        self.index = index                  # 1-based, in capture order of the first message
        self.stream = stream                # TCP connection index (like tshark's tcp.stream)
        self.client = client
        self.broker = broker
        self.status = status
        self.request = request
        self.response = response
        self.protocol = protocol            # "kafka", "kafka-0.7" or "kafka-sasl" (raw SASL tokens)
        self.problems = [] if problems is None else problems  # exchange-level (pairing, gaps)
        self.tls = tls                      # kwsniff.tls.TlsInfo when carried by decrypted TLS

    def __repr__(self) -> str:
        return _repr(self, _EXCHANGE_FIELDS)

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


def _repr(obj: Any, names: tuple[str, ...]) -> str:
    """``Class(field=value, ...)``, as a dataclass would show it."""
    inner = ", ".join(f"{n}={getattr(obj, n, None)!r}" for n in names)
    return f"{type(obj).__name__}({inner})"
