"""Orphan responses: held, claimed by late requests, or decoded by inference (a mixin
of Conversation).

Contract: an orphan (a response whose request is unknown) waits in ``self.orphans``;
``_claim_orphan`` pairs it with a request framed late (after resynchronisation);
``_resolve`` decodes it with :func:`kwsniff.kafka.inference.infer_response` (tiers:
this connection's requests, the same client's other connections, the broker's
ApiVersions or every known pair) or leaves it undecoded with the reason, and emits it
as an ``orphan_response`` exchange.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kwsniff.kafka import decoding
from kwsniff.kafka.conv_inorder import InOrderPairing
from kwsniff.kafka.conv_state import Pending
from kwsniff.kafka.framing import Frame
from kwsniff.kafka.inference import ApiHistory, all_pairs, infer_response
from kwsniff.kafka.model import ORPHAN_RESPONSE, PAIRED, KafkaMessage


class OrphanHandling(InOrderPairing):
    """Orphan-response handling for a conversation (see the module docstring)."""

    __slots__ = ()

    ctx: Any
    orphans: deque
    history: ApiHistory
    client_key: Any
    broker_ranges: dict | None
    requests_since_orphan: int

    def _claim_orphan(self, corr: int, req: KafkaMessage, key: tuple) -> bool:
        """A request framed late (after resynchronisation) whose response was already
        seen and is still held as an orphan: pair them."""
        for o in self.orphans:
            if o.corr == corr and not o.done and o.msg.ts_last >= req.ts_last:
                self.orphans.remove(o)
                o.done = True
                stub = o.msg
                f = Frame(stub.raw, stub.stream_offset, stub.frame_first, stub.frame_last,
                          stub.ts_first, stub.ts_last, stub.missing, 0)
                msg = self._decode_response(stub.raw, req.api_key, req.api_version, f)
                f.missing = 0
                self._place(msg, f)      # stub.problems already describe gaps and skips
                msg.missing = stub.missing
                msg.problems.extend(stub.problems)
                self._after_response(msg, req)
                self._emit(key, self._exchange(PAIRED, req, msg))
                if not self.orphans:
                    self.requests_since_orphan = 0
                return True
        return False

    def _resolve_orphans(self, all_: bool, upto: Pending | None = None) -> None:
        while self.orphans:
            o = self.orphans.popleft()
            self._resolve(o)
            if not all_ and o is upto:
                break
        if not self.orphans:
            self.requests_since_orphan = 0

    def _resolve(self, o: Pending) -> None:
        if o.done:
            return
        o.done = True
        stub = o.msg
        tiers = [("connection", self.history.candidates())]
        if self.client_key is not None:
            tiers.append(("client", self.ctx.history(self.client_key).candidates()))
        if self.broker_ranges is not None:
            tiers.append(("apiversions", all_pairs(self.broker_ranges)))
        else:
            tiers.append(("bytes", all_pairs(None)))
        msg = None
        why = "bodies are not decoded" if not self.ctx.options.bodies else \
            "part of it is missing from the capture"
        if self.ctx.options.bodies and not stub.missing:
            msg, why = infer_response(stub.raw, tiers)
        problems: list[str] = []
        if msg is None:
            msg = decoding.header_response(stub.raw, None, None)
            problems.append(f"orphan response (its request was not captured) left undecoded: "
                            f"{why}")
        for attr in ("frame_first", "frame_last", "ts_first", "ts_last", "stream_offset"):
            setattr(msg, attr, getattr(stub, attr))
        msg.problems.extend(stub.problems)
        msg.missing = stub.missing
        self._after_response(msg, None)
        self._emit(o.key, self._exchange(ORPHAN_RESPONSE, None, msg, problems=problems))
