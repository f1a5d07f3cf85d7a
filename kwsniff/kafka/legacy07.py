"""The Kafka 0.7 wire protocol (before correlation ids existed).

Layouts (``../shared/seeds/``, "Kafka Wire Format"): every frame is ``int32 length`` +
payload.  A request payload starts with ``int16 REQUEST_TYPE``:

* PRODUCE (0) / FETCH (1) / OFFSETS (4): ``int16 topic length, topic, int32 partition``
  then PRODUCE ``int32 messages length, messages``; FETCH ``int64 offset, int32 max size``;
  OFFSETS ``int64 time, int32 max number``.
* MULTIFETCH (2) / MULTIPRODUCE (3): ``int16 count`` then ``count`` times the per-partition
  part of FETCH / PRODUCE (topic, partition, ...).

A response payload is ``int16 ERROR_CODE`` then: FETCH the message set; MULTIFETCH one
``int32 size, int16 error code, message set`` per requested partition; OFFSETS ``int32
count, int64[count]``.  PRODUCE and MULTIPRODUCE have no response, so responses pair
with the oldest request still waiting on the connection.

Contract: decoding never raises; decoded bodies use Kafka-style field names; message
sets are :func:`kwsniff.kafka.records.parse_message_set_07` objects.  ``api_key`` of a
0.7 message holds the REQUEST_TYPE, ``api_version`` and ``correlation_id`` are None.
"""

from __future__ import annotations

import struct
from typing import Any

from kwsniff.kafka.model import REQUEST, RESPONSE, KafkaMessage
from kwsniff.kafka.records import parse_message_set_07

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = 0, 1, 2, 3, 4
REQUEST_NAMES = {PRODUCE: "PRODUCE", FETCH: "FETCH", MULTIFETCH: "MULTIFETCH",
                 MULTIPRODUCE: "MULTIPRODUCE", OFFSETS: "OFFSETS"}
ERROR_NAMES = {-1: "Unknown", 0: "NoError", 1: "OffsetOutOfRange", 2: "InvalidMessage",
               3: "WrongPartition", 4: "InvalidFetchSize"}
PROTOCOL = "kafka-0.7"

_TOPIC_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class _Cut(Exception):
    """The payload ended before a field did (or a field is impossible)."""


def request_name(request_type: int | None) -> str:
    return REQUEST_NAMES.get(request_type, f"UNKNOWN({request_type})") if request_type is not None \
        else "UNKNOWN"


def expects_response(request_type: int | None) -> bool:
    return request_type in (FETCH, MULTIFETCH, OFFSETS)


class _Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def take(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise _Cut
        self.pos = p + n
        return p

    def i16(self) -> int:
        return _H.unpack_from(self.buf, self.take(2))[0]

    def i32(self) -> int:
        return _I.unpack_from(self.buf, self.take(4))[0]

    def i64(self) -> int:
        return _Q.unpack_from(self.buf, self.take(8))[0]

    def topic(self) -> str:
        n = self.i16()
        if n <= 0 or n > 255:
            raise _Cut
        p = self.take(n)
        raw = bytes(self.buf[p:p + n])
        if not _TOPIC_CHARS.issuperset(raw):
            raise _Cut
        return raw.decode("ascii")

    def partition(self) -> int:
        v = self.i32()
        if v < -1:
            raise _Cut
        return v


def _produce_part(r: _Reader, parse_messages: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"Topic": r.topic(), "Partition": r.partition()}
    n = r.i32()
    p = r.take(n)
    data = bytes(r.buf[p:p + n])
    part["MessagesLength"] = n
    part["Messages"] = _message_set(data, 0, part["Topic"], part["Partition"]) \
        if parse_messages else data
    return part


def _fetch_part(r: _Reader) -> dict[str, Any]:
    part = {"Topic": r.topic(), "Partition": r.partition(), "Offset": r.i64(), "MaxSize": r.i32()}
    if part["Offset"] < 0 or part["MaxSize"] < 0:
        raise _Cut
    return part


def _message_set(data: bytes, base_offset: int, topic: str | None = None,
                 partition: int | None = None) -> Any:
    ms = parse_message_set_07(data, base_offset)
    ms.topic = topic
    ms.partition = partition
    return ms


def parse_request(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None,
                  parse_messages: bool = True) -> tuple[int, dict[str, Any]] | None:
    """``(request_type, body)`` when ``buf[pos:end]`` is exactly one 0.7 request payload."""
    if end is None:
        end = len(buf)
    r = _Reader(buf, pos, end)
    try:
        rtype = r.i16()
        body: dict[str, Any]
        if rtype == PRODUCE:
            body = _produce_part(r, parse_messages)
        elif rtype == FETCH:
            body = _fetch_part(r)
        elif rtype == OFFSETS:
            body = {"Topic": r.topic(), "Partition": r.partition(), "Time": r.i64(),
                    "MaxNumber": r.i32()}
            if body["MaxNumber"] < 0 or body["Time"] < -2:
                return None
        elif rtype in (MULTIFETCH, MULTIPRODUCE):
            count = r.i16()
            if count <= 0:
                return None
            parts = [(_fetch_part(r) if rtype == MULTIFETCH else _produce_part(r, parse_messages))
                     for _ in range(count)]
            body = {"Count": count, ("Fetches" if rtype == MULTIFETCH else "Produces"): parts}
        else:
            return None
    except (_Cut, struct.error):
        return None
    if r.pos != end:
        return None
    return rtype, body


def plausible_request_at(buf: bytes | bytearray | memoryview, pos: int, end: int,
                         max_frame: int) -> int | None:
    """Frame size if a complete 0.7 request frame starts at ``pos`` and parses exactly."""
    if end - pos < 6:
        return None
    size = _I.unpack_from(buf, pos)[0]
    if size < 8 or size > max_frame or pos + 4 + size > end:
        return None
    rtype = _H.unpack_from(buf, pos + 4)[0]
    if rtype < 0 or rtype > 4:
        return None
    if parse_request(buf, pos + 4, pos + 4 + size, parse_messages=False) is None:
        return None
    return size


def decode_request(raw: bytes) -> KafkaMessage:
    """A 0.7 request frame (without its size prefix) as a :class:`KafkaMessage`."""
    msg = KafkaMessage(kind=REQUEST, raw=raw)
    if len(raw) >= 2:
        rtype = _H.unpack_from(raw, 0)[0]
        msg.api_key = rtype
        msg.header = {"RequestType": rtype, "RequestTypeName": request_name(rtype)}
        msg.body_offset = 2
    parsed = parse_request(raw)
    if parsed is None:
        msg.problems.append(f"not a well-formed Kafka 0.7 {request_name(msg.api_key)} request "
                            f"({len(raw)} bytes)")
        return msg
    msg.body = parsed[1]
    msg.body_end = len(raw)
    return msg


def decode_response(raw: bytes, request: KafkaMessage | None) -> KafkaMessage:
    """A 0.7 response frame; its layout depends on the request it answers."""
    msg = KafkaMessage(kind=RESPONSE, raw=raw)
    rtype = request.api_key if request is not None else None
    msg.api_key = rtype
    if len(raw) < 2:
        msg.problems.append(f"Kafka 0.7 response too short ({len(raw)} bytes)")
        return msg
    error = _H.unpack_from(raw, 0)[0]
    msg.header = {"ErrorCode": error, "ErrorName": ERROR_NAMES.get(error, "Unknown")}
    msg.body_offset = 2
    req_body = request.body if request is not None and request.body else {}
    body: dict[str, Any] = {"ErrorCode": error}
    r = _Reader(raw, 2, len(raw))
    try:
        if rtype == FETCH:
            body["Topic"] = req_body.get("Topic")
            body["Partition"] = req_body.get("Partition")
            body["Messages"] = _message_set(raw[2:], req_body.get("Offset", 0) or 0,
                                            body["Topic"], body["Partition"])
            r.pos = len(raw)
        elif rtype == MULTIFETCH:
            fetches = req_body.get("Fetches") or []
            parts = []
            i = 0
            while r.pos < r.end:
                size = r.i32()
                if size < 2:
                    raise _Cut
                err = r.i16()
                p = r.take(size - 2)
                req = fetches[i] if i < len(fetches) else {}
                parts.append({"Topic": req.get("Topic"), "Partition": req.get("Partition"),
                              "ErrorCode": err, "ErrorName": ERROR_NAMES.get(err, "Unknown"),
                              "Messages": _message_set(raw[p:p + size - 2], req.get("Offset", 0) or 0,
                                                       req.get("Topic"), req.get("Partition"))})
                i += 1
            body["Responses"] = parts
            if fetches and len(parts) != len(fetches):
                msg.problems.append(f"MULTIFETCH response has {len(parts)} parts for "
                                    f"{len(fetches)} requested partitions")
        elif rtype == OFFSETS:
            n = r.i32()
            if n < 0 or n * 8 != r.end - r.pos:
                raise _Cut
            body["Offsets"] = [r.i64() for _ in range(n)]
        else:
            msg.problems.append("Kafka 0.7 response without a request to give its layout")
            msg.body = body
            msg.body_end = 2
            return msg
    except (_Cut, struct.error):
        msg.problems.append(f"malformed Kafka 0.7 {request_name(rtype)} response at byte {r.pos}")
        msg.body = body
        msg.body_end = r.pos
        return msg
    msg.body = body
    msg.body_end = len(raw)
    return msg


def plausible_response_at(buf: bytes | bytearray | memoryview, pos: int, end: int,
                          max_frame: int) -> int | None:
    """Frame size if a 0.7 response frame (size + known error code) may start at ``pos``."""
    if end - pos < 6:
        return None
    size = _I.unpack_from(buf, pos)[0]
    if size < 2 or size > max_frame:
        return None
    err = _H.unpack_from(buf, pos + 4)[0]
    if err not in ERROR_NAMES:
        return None
    return size


def _clean_set(ms: Any) -> bool:
    try:
        return not ms.problems and not ms.truncated and all(b.crc_ok is not False for b in ms.batches)
    except Exception:  # noqa: BLE001 - a parser bug means "does not fit"
        return False


def response_fits(raw: bytes, request: KafkaMessage) -> KafkaMessage | None:
    """The response decoded as an answer to ``request`` if its layout fits strictly
    (no problem, clean message sets with valid CRCs), else None."""
    msg = decode_response(raw, request)
    if msg.problems or msg.body is None:
        return None
    body = msg.body
    sets = [body["Messages"]] if "Messages" in body else \
        [p["Messages"] for p in body.get("Responses") or ()]
    if not all(_clean_set(ms) for ms in sets):
        return None
    return msg


def infer_response(raw: bytes) -> KafkaMessage:
    """Decode a 0.7 response whose request was not captured, from its bytes alone.

    Candidates: OFFSETS (count matches the length), FETCH (one clean message set whose
    CRCs check).  The first that fits wins; ``inferred`` says how many fit.
    """
    fits: list[KafkaMessage] = []
    for rtype in (OFFSETS, FETCH):
        stub = KafkaMessage(kind=REQUEST, raw=b"", api_key=rtype, body={})
        msg = decode_response(raw, stub)
        if msg.problems or msg.body is None:
            continue
        if rtype == FETCH and not _clean_set(msg.body["Messages"]):
            continue
        fits.append(msg)
    if fits:
        best = fits[0]
        best.inferred = f"bytes: {len(fits)} of 2 candidates fit"
        return best
    msg = decode_response(raw, None)
    msg.problems.append("orphan 0.7 response: its layout could not be inferred")
    return msg
