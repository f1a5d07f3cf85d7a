"""The conversation layer's single door to the message decoders.

Contract:

* :func:`decode_request` / :func:`decode_response` call the protocol decoder
  (:mod:`kwsniff.kafka.protocol`) and never raise: an exception inside it becomes a
  problem on the returned message, which still carries the header fields parsed here.
  :func:`annotate` runs the embedded-data decoder (:mod:`kwsniff.kafka.embedded`).
* With ``defer`` (decoding workers that render only some of the exchanges), bodies
  the conversation layer does not need (:func:`deferrable`) are left undecoded;
  :func:`complete` decodes and annotates them before an exchange is rendered.
* :func:`header_request` / :func:`header_response` parse only the fixed header prefix
  (used when bodies are not wanted and for frames cut by a capture gap).
* :func:`decode_sasl_token` decodes a raw SASL token (SaslHandshake v0 flow) and masks
  its secrets.
"""

from __future__ import annotations

import struct
from typing import Any

from kwsniff.kafka import embedded as _embedded
from kwsniff.kafka import protocol as _protocol
from kwsniff.kafka import sasl as _sasl
from kwsniff.kafka.model import REQUEST, RESPONSE, KafkaMessage
from kwsniff.kafka.plausible import CONTROLLED_SHUTDOWN
from kwsniff.kafka.protocol.decoder import complete_body, misfit
from kwsniff.kafka.protocol.decoder import decode_request as _decode_request
from kwsniff.kafka.protocol.decoder import decode_response as _decode_response
from kwsniff.kafka.topic_ids import has_topic_ids

_HHI = struct.Struct(">hhi")
_HH = struct.Struct(">hh").unpack_from
_H = struct.Struct(">h")
_I = struct.Struct(">i")


def header_request(raw: bytes) -> KafkaMessage:
    """Request with only the header prefix parsed (api key, version, correlation, client)."""
    msg = KafkaMessage(kind=REQUEST, raw=raw)
    if len(raw) < 8:
        msg.problems.append(f"request too short for a header ({len(raw)} bytes)")
        return msg
    key, ver, corr = _HHI.unpack_from(raw, 0)
    msg.api_key, msg.api_version, msg.correlation_id = key, ver, corr
    msg.header = {"ApiKey": key, "ApiVersion": ver, "CorrelationId": corr}
    if key == CONTROLLED_SHUTDOWN and ver == 0:
        msg.header_version = 0
        msg.body_offset = 8
        return msg
    if len(raw) >= 10:
        n = _H.unpack_from(raw, 8)[0]
        if n == -1:
            msg.client_id = None
            msg.body_offset = 10
        elif 0 <= n <= len(raw) - 10:
            msg.client_id = raw[10:10 + n].decode("utf-8", "replace")
            msg.body_offset = 10 + n
        msg.header["ClientId"] = msg.client_id
    return msg


def header_response(raw: bytes, api_key: int | None, api_version: int | None) -> KafkaMessage:
    """Response with only the correlation id parsed."""
    msg = KafkaMessage(kind=RESPONSE, raw=raw, api_key=api_key, api_version=api_version)
    if len(raw) >= 4:
        msg.correlation_id = _I.unpack_from(raw, 0)[0]
        msg.header = {"CorrelationId": msg.correlation_id}
        msg.body_offset = 4
    else:
        msg.problems.append(f"response too short for a header ({len(raw)} bytes)")
    return msg


#: APIs whose bodies the conversation layer reads only to annotate them for output
#: (never to pair, detect, learn or count): deferrable where no ``TopicId`` is in them
DEFERRABLE_APIS = frozenset({0, 1, 2, 8, 9, 12})  # Produce Fetch ListOffsets OffsetCommit
#                                                  # OffsetFetch Heartbeat
# answers by kind, then api key, then version (int keys: this runs for every message,
# and a tuple key costs more to make, hash and compare); _deferrable_count bounds them
_deferrable: dict[str, dict[int, dict[int, bool]]] = {REQUEST: {}, RESPONSE: {}}
_deferrable_count = [0]


def deferrable(api_key: int, kind: str, version: int) -> bool:
    """Whether a ``kind`` body of ``api_key`` v``version`` may be decoded later (see
    :func:`complete`): an API of :data:`DEFERRABLE_APIS` in a version without topic ids."""
    by_version = _deferrable[kind].get(api_key)
    if by_version is not None:
        known = by_version.get(version)
        if known is not None:
            return known
    known = api_key in DEFERRABLE_APIS and not has_topic_ids(api_key, kind, version)
    if _deferrable_count[0] < 4096:         # garbage versions must not grow it
        _deferrable_count[0] += 1
        _deferrable[kind].setdefault(api_key, {})[version] = known
    return known


def decode_request(raw: bytes, bodies: bool = True, defer: bool = False) -> KafkaMessage:
    """Decode a request frame (header + body); never raises. With ``defer`` a
    :func:`deferrable` body is left for :func:`complete` (``msg.deferred`` set)."""
    if not bodies:
        return header_request(raw)
    try:
        if defer and len(raw) >= 4:
            key, ver = _HH(raw, 0)
            defer = deferrable(key, REQUEST, ver)
        return _decode_request(raw, defer)
    except Exception as err:  # noqa: BLE001 - a decoder bug must not stop the capture
        msg = header_request(raw)
        msg.problems.append(f"internal decoder error: {type(err).__name__}: {err}")
        return msg


def decode_response(raw: bytes, api_key: int, api_version: int, bodies: bool = True,
                    defer: bool = False) -> KafkaMessage:
    """Decode a response frame as ``(api_key, api_version)``; never raises. ``defer``
    as for :func:`decode_request`."""
    if not bodies:
        return header_response(raw, api_key, api_version)
    try:
        defer = defer and deferrable(api_key, RESPONSE, api_version)
        return _decode_response(raw, api_key, api_version, defer)
    except Exception as err:  # noqa: BLE001
        msg = header_response(raw, api_key, api_version)
        msg.problems.append(f"internal decoder error: {type(err).__name__}: {err}")
        return msg


def complete(exchange: Any, context: Any) -> None:
    """Decode the deferred bodies of ``exchange`` and annotate them as the conversation
    layer annotates bodies it decodes at once (``context``: the run's annotate context),
    so that it is then exactly what an eager decode gives. Never raises."""
    req, resp = exchange.request, exchange.response
    if req is not None and req.deferred is not None and complete_body(req):
        annotate(req, None, context, exchange.stream)
    if resp is not None and resp.deferred is not None and complete_body(resp):
        annotate(resp, req, context, exchange.stream)


def decodes_exactly(msg: KafkaMessage | None) -> bool:
    """True when every byte of the frame was consumed without a problem."""
    return (msg is not None and msg.body is not None and not msg.problems
            and msg.body_end == len(msg.raw))


def decodes_nearly(msg: KafkaMessage | None, slack: int = 8) -> bool:
    """True when decoding got through all but at most ``slack`` bytes of the frame (real
    messages from buggy peers can carry a stray byte; garbage almost never parses that
    far)."""
    return (msg is not None and msg.body is not None and msg.body_end > 4
            and len(msg.raw) - slack <= msg.body_end <= len(msg.raw))


def try_response(raw: bytes, api_key: int, api_version: int) -> KafkaMessage | None:
    """Decode for candidate testing (no annotation); None when the decoder fails."""
    try:
        return _protocol.decode_response(raw, api_key, api_version)
    except Exception:  # noqa: BLE001 - a candidate that crashes the decoder does not fit
        return None


def fits_exactly(raw: bytes, api_key: int, api_version: int) -> KafkaMessage | None:
    """The message of :func:`try_response` when it :func:`decodes_exactly`, else None;
    a candidate the field decoder kernel already rules out
    (:func:`kwsniff.kafka.protocol.decoder.misfit`) is not decoded in full."""
    if misfit(raw, api_key, api_version):
        return None
    msg = try_response(raw, api_key, api_version)
    return msg if decodes_exactly(msg) else None


def new_annotate_context(show_secrets: bool = False) -> Any:
    """The run-wide state of the embedded-data annotator."""
    return _embedded.AnnotateContext(show_secrets=show_secrets)


def annotate(msg: KafkaMessage, request: KafkaMessage | None = None, context: Any = None,
             connection: Any = None) -> None:
    """Decode embedded protocols of a decoded message in place; never raises."""
    if msg.body is None:
        return
    try:
        _embedded.annotate(msg, request=request, context=context, connection=connection)
    except Exception as err:  # noqa: BLE001
        msg.problems.append(f"internal error while decoding embedded data: "
                            f"{type(err).__name__}: {err}")


def decode_sasl_token(token: bytes, mechanism: str | None, from_client: bool,
                      show_secrets: bool = False) -> tuple[dict[str, Any], bytes]:
    """A raw SASL token (SaslHandshake v0 flow) -> ``(decoded, raw to keep)``.

    ``raw to keep`` has its secret bytes masked unless ``show_secrets``; ``decoded`` is
    ``{"schema": "SASL <mechanism>", "version": None, "data": {...}}``.
    """
    try:
        out = _embedded.decode_raw_sasl_token(token, mechanism, from_client=from_client,
                                              show_secrets=show_secrets)
    except Exception as err:  # noqa: BLE001
        return {"schema": f"SASL {mechanism or 'unknown'}", "version": None, "data": None,
                "problems": [f"internal SASL decoder error: {type(err).__name__}: {err}"]}, token
    data = out.get("data") if isinstance(out, dict) else None
    spans = data.get("secret_spans") if isinstance(data, dict) else None
    if spans and not show_secrets:
        try:
            token = _sasl.redact_token(token, spans)
        except Exception:  # noqa: BLE001 - fall back to hiding the whole token
            token = b"*" * len(token)
    return out, token


def sasl_token_clean(token: bytes, mechanism: str | None, from_client: bool) -> str | None:
    """The message kind (``client-first``, ``server-final``, ...) of a raw SASL token
    that decodes without a problem as ``mechanism``'s, else None (a resynchronisation
    check: such bytes may start a token frame)."""
    try:
        data = _sasl.decode_sasl_token(token, mechanism, from_client=from_client)
    except Exception:  # noqa: BLE001
        return None
    message = data.get("message")
    if data.get("problems") or not isinstance(message, str) or message == "empty":
        return None
    return message


def sasl_shape(token: bytes) -> str | None:
    """The SASL mechanism a client token looks like (PLAIN, SCRAM, GSSAPI, OAUTHBEARER),
    or None when it has no recognisable shape."""
    try:
        mech = _sasl.decode_sasl_token(token, None, from_client=True).get("mechanism")
    except Exception:  # noqa: BLE001
        return None
    return mech if isinstance(mech, str) and mech else None
