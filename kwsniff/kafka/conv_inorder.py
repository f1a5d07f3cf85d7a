"""Pairing in order, without correlation ids: raw SASL tokens (SaslHandshake v0) and
the Kafka 0.7 protocol (a mixin of Conversation).

Contract: client frames wait in ``self.fifo``; each broker frame answers the oldest
one it can (0.7: a request completed before the response began; after a capture hole
the oldest whose response layout fits strictly, older ones becoming ``unanswered`` and
the pairing flagged as uncertain; SASL: after lost or skipped bytes the oldest of the
message kind it answers, e.g. SCRAM server-final -> client-final, older tokens becoming
``unanswered``, else the oldest, flagged as uncertain).  PRODUCE/MULTIPRODUCE expect no
response.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kwsniff.kafka import decoding, legacy07
from kwsniff.kafka.conv_release import ReleaseControl
from kwsniff.kafka.conv_state import PROTO_SASL, Pending
from kwsniff.kafka.framing import Frame
from kwsniff.kafka.model import (
    NO_RESPONSE_EXPECTED,
    ORPHAN_RESPONSE,
    PAIRED,
    REQUEST,
    RESPONSE,
    KafkaMessage,
)


#: the client message a broker's SASL message answers (SCRAM, RFC 5802)
_SASL_ANSWERS = {"server-first": "client-first", "server-final": "client-final"}


def _sasl_message(msg: KafkaMessage) -> str | None:
    """The message kind of a raw SASL token's decoded body, if any."""
    data = msg.body.get("data") if isinstance(msg.body, dict) else None
    message = data.get("message") if isinstance(data, dict) else None
    return message if isinstance(message, str) else None


class InOrderPairing(ReleaseControl):
    """SASL v0 token and 0.7 pairing for a conversation (see the module docstring)."""

    __slots__ = ()

    ctx: Any
    fifo: deque
    summary: Any
    framers: tuple
    loss_seen: int
    sasl_client_id: str | None

    def _place(self, msg: KafkaMessage, f: Frame) -> None:
        """Copy the position of frame ``f`` (frames, times, stream offset, what is missing
        or was skipped before it) onto ``msg``, the message decoded from it."""
        msg.frame_first = f.frame_first
        msg.frame_last = f.frame_last
        msg.ts_first = f.ts_first
        msg.ts_last = f.ts_last
        msg.stream_offset = f.offset
        if f.missing:
            msg.missing = f.missing
            msg.problems.append(f"{f.missing} bytes of this message are missing from the "
                                "capture; only its start was decoded")
        if f.skipped_before:
            msg.problems.append(f"resynchronised: {f.skipped_before} bytes before this "
                                "message were skipped")

    def _sasl_token(self, f: Frame, d: int, client: bool, note: str | None = None) -> None:
        mech = self.summary.sasl_mechanism
        kind = REQUEST if client else RESPONSE
        body, raw = decoding.decode_sasl_token(f.raw, mech, client, self.ctx.options.show_secrets)
        msg = KafkaMessage(kind=kind, raw=raw, header={"SaslMechanism": mech}, body=body,
                           body_end=len(raw))
        if client:      # a raw token has no header: the client id is its SaslHandshake's
            msg.client_id = self.sasl_client_id
        for p in body.get("problems") or ():
            msg.problems.append(f"SASL token: {p}")
        if note:
            msg.problems.append(note)
        self._place(msg, f)
        key = self._key(f, d)
        if client:
            self.fifo.append(Pending(key, msg, self, "sasl"))
            return
        if not self.fifo:
            self._emit(key, self._exchange(ORPHAN_RESPONSE, None, msg, protocol=PROTO_SASL,
                                           problems=["a SASL token from the broker with no "
                                                     "client token waiting (lost in a "
                                                     "capture gap, or not captured)"]))
            return
        # tokens answer in order; after lost or skipped bytes a token may be missing on
        # either side: a broker token answers the oldest waiting client token of the
        # message kind it answers (SCRAM), else the oldest one, marked uncertain
        loss = sum(fr.gap_bytes + fr.skipped_bytes for fr in self.framers)
        uncertain = loss != self.loss_seen
        self.loss_seen = loss
        chosen = self.fifo[0]
        if uncertain:
            want = _SASL_ANSWERS.get(_sasl_message(msg))
            match = next((p for p in self.fifo if _sasl_message(p.msg) == want), None) \
                if want is not None else None
            if match is not None:
                chosen, uncertain = match, False
        while self.fifo[0] is not chosen:
            self._unanswered(self.fifo.popleft(), "no response: a later SASL token was "
                                                  "answered (its response was probably lost "
                                                  "in a capture gap)")
        self.fifo.popleft()
        chosen.done = True
        problems = ["paired by order after a capture gap: the pairing is uncertain"] \
            if uncertain else None
        self._emit(chosen.key, self._exchange(PAIRED, chosen.msg, msg, protocol=PROTO_SASL,
                                              problems=problems))

    # ------------------------------------------------------------------- 0.7
    def _legacy(self, client: bool, f: Frame, d: int) -> None:
        key = self._key(f, d)
        if client:
            msg = legacy07.decode_request(f.raw)
            self._place(msg, f)
            self.summary.note_request(msg.api_key, None)
            if legacy07.expects_response(msg.api_key):
                self.fifo.append(Pending(key, msg, self, "0.7"))
            else:
                self._emit(key, self._exchange(NO_RESPONSE_EXPECTED, msg, None,
                                               protocol=legacy07.PROTOCOL))
            return
        # responses come in request order; only requests complete before the response
        # began can be answered by it
        ready = [p for p in self.fifo if p.msg.ts_last <= f.ts_first]
        loss = sum(fr.gap_bytes + fr.skipped_bytes for fr in self.framers)
        uncertain = loss != self.loss_seen
        chosen = ready[0] if ready else None
        msg = None
        if chosen is not None and uncertain:
            # bytes were lost since the last pairing: requests or responses may be
            # missing, so prefer the oldest waiting request whose layout fits exactly
            for p in ready:
                m = legacy07.response_fits(f.raw, p.msg)
                if m is not None:
                    chosen, msg = p, m
                    break
        if chosen is None:
            msg = legacy07.infer_response(f.raw)
            self._place(msg, f)
            self._emit(key, self._exchange(ORPHAN_RESPONSE, None, msg, protocol=legacy07.PROTOCOL))
            return
        while self.fifo and self.fifo[0] is not chosen:
            self._unanswered(self.fifo.popleft(), "no response: a later request was answered "
                                                  "(its response was probably lost in a capture gap)")
        self.fifo.popleft()
        chosen.done = True
        self.loss_seen = loss
        if msg is None:
            msg = legacy07.decode_response(f.raw, chosen.msg)
        self._place(msg, f)
        err = msg.header.get("ErrorCode")
        if err:
            self.summary.error_responses += 1
            self.summary.errors[err] = self.summary.errors.get(err, 0) + 1
        problems = ["paired by order after a capture gap: the pairing is uncertain"] \
            if uncertain else None
        self._emit(chosen.key, self._exchange(PAIRED, chosen.msg, msg, protocol=legacy07.PROTOCOL,
                                              problems=problems))
