"""Pairing in order, without correlation ids: raw SASL tokens (SaslHandshake v0) and
the Kafka 0.7 protocol (a mixin of Conversation).

Contract: client frames wait in ``self.fifo``; each broker frame answers the oldest
one it can (0.7: a request completed before the response began; after a capture hole
the oldest whose response layout fits strictly, older ones becoming ``unanswered`` and
the pairing flagged as uncertain).  PRODUCE/MULTIPRODUCE expect no response.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kwsniff.kafka import decoding, legacy07
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


class InOrderPairing:
    """SASL v0 token and 0.7 pairing for a conversation (see the module docstring)."""

    ctx: Any
    fifo: deque
    summary: Any
    framers: tuple
    loss_seen: int

    def _sasl_token(self, f: Frame, d: int, client: bool, note: str | None = None) -> None:
        mech = self.summary.sasl_mechanism
        kind = REQUEST if client else RESPONSE
        body, raw = decoding.decode_sasl_token(f.raw, mech, client, self.ctx.options.show_secrets)
        msg = KafkaMessage(kind=kind, raw=raw, header={"SaslMechanism": mech}, body=body,
                           body_end=len(raw))
        for p in body.get("problems") or ():
            msg.problems.append(f"SASL token: {p}")
        if note:
            msg.problems.append(note)
        self._place(msg, f)
        key = self._key(f, d)
        if client:
            self.fifo.append(Pending(key, msg, self, "sasl"))
            return
        if self.fifo:
            p = self.fifo.popleft()
            p.done = True
            self._emit(p.key, self._exchange(PAIRED, p.msg, msg, protocol=PROTO_SASL))
        else:
            self._emit(key, self._exchange(ORPHAN_RESPONSE, None, msg, protocol=PROTO_SASL))

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
