"""Protocols embedded in Kafka message bodies, decoded in place after the body.

Contract: the conversation layer calls :func:`annotate` on every decoded message
(``msg.api_key``, ``msg.api_version`` and ``msg.body`` set; responses preferably with
their paired request). It never raises; problems go to ``msg.problems``.

Representation of a decoded embedded value: the bytes field stays as it is (bytes)
and a sibling key ``"_decoded_<Field>"`` is added next to it in the same dict, e.g.
``protocol["Metadata"]`` (bytes) and ``protocol["_decoded_Metadata"]``. The decoded
value is always a dict ``{"schema": str, "version": int | None, "data": ... }`` with
optional ``"problems"`` (list of str) and ``"decoded_as"`` (a newer version decoded
with the newest known schema). ``data`` is None when decoding failed.

What is decoded:

* JoinGroup protocol metadata, JoinGroup response member metadata, DescribeGroups
  member metadata (ConsumerProtocolSubscription v0-3) and SyncGroup / DescribeGroups
  assignments (ConsumerProtocolAssignment v0-3) when the protocol type is "consumer"
  (taken from the body, else from the paired request, else recognised by shape).
* SaslAuthenticate ``AuthBytes`` (schema ``"SASL <mechanism>"``, version None, data from
  :func:`kwsniff.kafka.sasl.decode_sasl_token`). Unless ``context.show_secrets``, the
  ``AuthBytes`` bytes themselves are replaced by a copy with the secret bytes masked
  with ``*`` (so exports and trees never carry passwords), the same bytes are masked in
  the frame (``msg.raw``, which hex views show) and ``"_redacted_AuthBytes": True`` is
  set. SaslHandshake records the mechanism per
  connection in the context.
* ``records`` fields of Produce requests and Fetch/ShareFetch/FetchSnapshot responses
  are tagged with ``topic``/``partition`` (topic ids resolved through names learnt
  from Metadata/CreateTopics/DescribeTopicPartitions responses when a context is
  given), which makes records of internal topics decode with their schemas.

For raw SASL tokens sent after SaslHandshake v0 (no Kafka framing), the conversation
layer calls :func:`decode_raw_sasl_token`.
"""

from __future__ import annotations

from typing import Any, Hashable

from kwsniff.kafka import sasl as _sasl
from kwsniff.kafka.internal_topics import decode_prefixed
from kwsniff.kafka.model import KafkaMessage
from kwsniff.kafka.protocol.decoder import field_spans
from kwsniff.kafka.records import Records

SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"
CONSUMER = "consumer"
_CONSUMER_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform")
_MAX_TOPIC_IDS = 1 << 20

Body = dict[str, Any]


class AnnotateContext:
    """State carried across messages of one capture: create one, pass it to every call.

    ``show_secrets`` disables SASL redaction; ``topic_names`` maps topic ids (uuid text)
    to names (bounded); ``sasl_mechanisms`` maps a connection key to its mechanism.
    """

    __slots__ = ("show_secrets", "topic_names", "sasl_mechanisms")

    def __init__(self, show_secrets: bool = False) -> None:
        self.show_secrets = show_secrets
        self.topic_names: dict[str, str] = {}
        self.sasl_mechanisms: dict[Hashable, str] = {}

    def learn_topic(self, topic_id: Any, name: Any) -> None:
        if (isinstance(topic_id, str) and isinstance(name, str) and name
                and topic_id != "00000000-0000-0000-0000-000000000000"
                and (topic_id in self.topic_names or len(self.topic_names) < _MAX_TOPIC_IDS)):
            self.topic_names[topic_id] = name


def annotate(msg: KafkaMessage, *, request: KafkaMessage | None = None,
             context: AnnotateContext | None = None, connection: Hashable = None) -> None:
    """Decode the embedded protocols of ``msg`` in place (see the module contract).

    ``request`` is the paired request of a response; ``connection`` identifies the TCP
    connection (any hashable, e.g. its index) for SASL state in ``context``.
    """
    body = msg.body
    if not isinstance(body, dict) or msg.api_key is None:
        return
    ctx = context or AnnotateContext()
    handler = _HANDLERS.get((msg.api_key, msg.kind))
    if handler is None:
        return
    try:
        handler(msg, body, request, ctx, connection)
    except Exception as exc:  # a body of unexpected shape: report, never raise
        msg.problems.append(f"embedded decoding failed: {type(exc).__name__}: {exc}")


def decode_raw_sasl_token(data: bytes, mechanism: str | None = None, *, from_client: bool | None = None,
                          show_secrets: bool = False) -> dict[str, Any]:
    """A raw SASL token (after SaslHandshake v0, without its 4-byte length prefix) as
    ``{"schema": "SASL <mechanism>", "version": None, "data": {...}}``; ``data`` also
    holds ``secret_spans`` for masking (see :func:`kwsniff.kafka.sasl.redact_token`)."""
    tok = _sasl.decode_sasl_token(data, mechanism, from_client=from_client, show_secrets=show_secrets)
    return {"schema": f"SASL {tok.get('mechanism') or 'unknown'}", "version": None, "data": tok}


# -- consumer protocol ------------------------------------------------------------------

def decode_subscription(data: bytes) -> dict[str, Any]:
    """ConsumerProtocolSubscription (int16 version + fields), any version."""
    return decode_prefixed(SUBSCRIPTION, data)


def decode_assignment(data: bytes) -> dict[str, Any]:
    """ConsumerProtocolAssignment (int16 version + fields), any version."""
    return decode_prefixed(ASSIGNMENT, data)


def _is_consumer(protocol_type: Any, request: KafkaMessage | None) -> bool | None:
    """True/False when the protocol type is known, None when it must be guessed."""
    if isinstance(protocol_type, str):
        return protocol_type == CONSUMER
    if request is not None and isinstance(request.body, dict):
        req_type = request.body.get("ProtocolType")
        if isinstance(req_type, str):
            return req_type == CONSUMER
    return None


def _put(msg: KafkaMessage, holder: dict[str, Any], field: str, schema: str,
         known: bool | None, where: str) -> None:
    raw = holder.get(field)
    if not isinstance(raw, (bytes, bytearray)) or not raw:
        return
    decoded = decode_prefixed(schema, bytes(raw))
    if known is None:
        # protocol type unknown (old JoinGroup responses without their request): keep
        # the decoding only when it fits exactly and the version is plausible
        if decoded["data"] is None or decoded.get("problems") or not 0 <= (decoded["version"] or 0) <= 16:
            return
        decoded["note"] = "protocol type not seen; decoded as the consumer protocol by shape"
    holder[f"_decoded_{field}"] = decoded
    for p in decoded.get("problems") or ():
        msg.problems.append(f"{where}: {schema}: {p}")


def _join_group_request(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                        ctx: AnnotateContext, conn: Hashable) -> None:
    known = _is_consumer(body.get("ProtocolType"), None)
    if known is False:
        return
    for i, proto in enumerate(body.get("Protocols") or ()):
        _put(msg, proto, "Metadata", SUBSCRIPTION, known, f"Protocols[{i}].Metadata")


def _join_group_response(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                         ctx: AnnotateContext, conn: Hashable) -> None:
    known = _is_consumer(body.get("ProtocolType"), request)
    if known is None and body.get("ProtocolName") in _CONSUMER_ASSIGNORS:
        known = True
    if known is False:
        return
    for i, member in enumerate(body.get("Members") or ()):
        _put(msg, member, "Metadata", SUBSCRIPTION, known, f"Members[{i}].Metadata")


def _sync_group_request(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                        ctx: AnnotateContext, conn: Hashable) -> None:
    known = _is_consumer(body.get("ProtocolType"), None)
    if known is False:
        return
    for i, a in enumerate(body.get("Assignments") or ()):
        _put(msg, a, "Assignment", ASSIGNMENT, known, f"Assignments[{i}].Assignment")


def _sync_group_response(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                         ctx: AnnotateContext, conn: Hashable) -> None:
    known = _is_consumer(body.get("ProtocolType"), request)
    if known is False:
        return
    _put(msg, body, "Assignment", ASSIGNMENT, known, "Assignment")


def _describe_groups_response(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                              ctx: AnnotateContext, conn: Hashable) -> None:
    for g, group in enumerate(body.get("Groups") or ()):
        if group.get("ProtocolType") != CONSUMER:
            continue
        for m, member in enumerate(group.get("Members") or ()):
            _put(msg, member, "MemberMetadata", SUBSCRIPTION, True,
                 f"Groups[{g}].Members[{m}].MemberMetadata")
            _put(msg, member, "MemberAssignment", ASSIGNMENT, True,
                 f"Groups[{g}].Members[{m}].MemberAssignment")


# -- SASL -------------------------------------------------------------------------------

def _sasl_handshake_request(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                            ctx: AnnotateContext, conn: Hashable) -> None:
    mech = body.get("Mechanism")
    if isinstance(mech, str) and mech:
        ctx.sasl_mechanisms[conn] = mech.upper()


def _sasl_authenticate(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                       ctx: AnnotateContext, conn: Hashable) -> None:
    raw = body.get("AuthBytes")
    if not isinstance(raw, (bytes, bytearray)):
        return
    mech = ctx.sasl_mechanisms.get(conn)
    dec = decode_raw_sasl_token(bytes(raw), mech, from_client=msg.kind == "request",
                                show_secrets=ctx.show_secrets)
    body["_decoded_AuthBytes"] = dec
    spans = dec["data"].get("secret_spans") or []
    if spans and not ctx.show_secrets:
        masked = _sasl.redact_token(bytes(raw), spans)
        body["AuthBytes"] = masked
        body["_redacted_AuthBytes"] = True
        _mask_in_frame(msg, bytes(raw), masked)
    for p in dec["data"].get("problems") or ():
        msg.problems.append(f"AuthBytes: SASL: {p}")


def _mask_in_frame(msg: KafkaMessage, token: bytes, masked: bytes) -> None:
    """The frame itself (``msg.raw``: hex views) with the token's secret bytes masked
    too: at the AuthBytes field's place (from its byte range), else wherever the token's
    bytes occur in the frame (never left unmasked)."""
    frame = bytes(msg.raw)
    for span in field_spans(msg):
        if span.section == "body" and span.path == ("AuthBytes",):
            start = span.offset + span.length - len(token)
            if start >= 0 and frame[start:start + len(token)] == token:
                msg.raw = frame[:start] + masked + frame[start + len(token):]
                return
    msg.raw = frame.replace(token, masked) if token else frame


# -- records tagging --------------------------------------------------------------------

def _tag(records: Any, topic: Any, partition: Any) -> None:
    if isinstance(records, Records):
        if isinstance(topic, str) and topic:
            records.topic = topic
        if isinstance(partition, int):
            records.partition = partition


def _topic_of(entry: dict[str, Any], name_key: str, ctx: AnnotateContext) -> str | None:
    for key in (name_key, "_topic_name"):
        name = entry.get(key)
        if isinstance(name, str) and name:
            return name
    tid = entry.get("TopicId")
    return ctx.topic_names.get(tid) if isinstance(tid, str) else None


def _produce_request(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                     ctx: AnnotateContext, conn: Hashable) -> None:
    for t in body.get("TopicData") or ():
        topic = _topic_of(t, "Name", ctx)
        for p in t.get("PartitionData") or ():
            _tag(p.get("Records"), topic, p.get("Index"))


def _fetch_response(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                    ctx: AnnotateContext, conn: Hashable) -> None:
    for t in body.get("Responses") or ():
        topic = _topic_of(t, "Topic", ctx)
        for p in t.get("Partitions") or ():
            _tag(p.get("Records"), topic, p.get("PartitionIndex"))


def _fetch_snapshot_response(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                             ctx: AnnotateContext, conn: Hashable) -> None:
    for t in body.get("Topics") or ():
        for p in t.get("Partitions") or ():
            # only a chunk at position 0 starts on a batch boundary
            if p.get("Position") == 0:
                _tag(p.get("UnalignedRecords"), t.get("Name"), p.get("Index"))


def _learn_topics(msg: KafkaMessage, body: Body, request: KafkaMessage | None,
                  ctx: AnnotateContext, conn: Hashable) -> None:
    for t in body.get("Topics") or ():
        if isinstance(t, dict):
            ctx.learn_topic(t.get("TopicId"), t.get("Name"))


_HANDLERS = {
    (0, "request"): _produce_request,
    (1, "response"): _fetch_response,
    (78, "response"): _fetch_response,
    (59, "response"): _fetch_snapshot_response,
    (3, "response"): _learn_topics,
    (19, "response"): _learn_topics,
    (75, "response"): _learn_topics,
    (11, "request"): _join_group_request,
    (11, "response"): _join_group_response,
    (14, "request"): _sync_group_request,
    (14, "response"): _sync_group_response,
    (15, "response"): _describe_groups_response,
    (17, "request"): _sasl_handshake_request,
    (36, "request"): _sasl_authenticate,
    (36, "response"): _sasl_authenticate,
}
