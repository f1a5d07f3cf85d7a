"""What a conversation may still emit, for the capture-order reorder buffer (a mixin
of Conversation).

Contract: ``open_key()`` is the smallest order key the conversation may still produce
(a waiting request, token or orphan, a partial frame, bytes being hunted or detected);
``_refresh()`` reports it to :class:`kwsniff.kafka.ordering.Reorderer`; ``_force()``
stops waiting on the oldest item when the reorder buffer overflows: a Kafka request
keeps waiting for its response but no longer holds back the order (its exchange is
released out of capture order when it completes; the run keeps at most the reorder
limit of such requests, the oldest beyond it are reported unanswered), any other item
is given up.  An undecided
connection on a non-Kafka port stops holding others back after ``UNDECIDED_HOLD``
seconds of capture time.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kwsniff.kafka import conv_state
from kwsniff.kafka.conv_state import KAFKA, KAFKA07, UNDECIDED


class ReleaseControl:
    """Open-key bookkeeping for a conversation (see the module docstring). The root of
    the conversation's chain of bases: it holds every attribute of a conversation (the
    other links add none), so a link running from source on top of compiled ones
    (an edited module before the rebuild) uses the same fields."""

    __slots__ = ("conn", "ctx", "state", "client_dir", "client_by", "kafka_port", "framers",
                 "pending", "fifo", "orphans", "recent", "history", "sasl_raw", "sasl_wait",
                 "sasl_client_id", "requests_since_orphan", "corr_hi", "last_req_corr",
                 "last_resp_corr", "broker_ranges", "client_key", "unordered_partial",
                 "loss_seen", "last_client_id", "last_pair", "undecided_chunks",
                 "next_decide", "summary", "waiting_bytes")

    ctx: Any
    conn: Any
    state: str
    kafka_port: bool
    pending: dict
    fifo: deque
    orphans: deque
    framers: tuple
    unordered_partial: bool

    def open_key(self) -> tuple | None:
        """Smallest order key this conversation may still emit an exchange with."""
        best: tuple | None = None
        if self.pending:
            for p in self.pending.values():
                if not p.unordered:
                    best = p.key
                    break
        if self.fifo:
            k = self.fifo[0].key
            if best is None or k < best:
                best = k
        if self.orphans:
            k = self.orphans[0].key
            if best is None or k < best:
                best = k
        state = self.state
        if state == UNDECIDED and not self.kafka_port and \
                self.ctx.now - (self.conn.first_ts or 0.0) > conv_state.UNDECIDED_HOLD:
            # content detection on another port is taking long: stop holding back the
            # rest of the capture for it (if it turns out to be Kafka, its first
            # exchanges may come out of capture order, flagged)
            return best
        if (state == KAFKA or state == UNDECIDED or state == KAFKA07) \
                and not self.unordered_partial:
            f0, f1 = self.framers
            k2 = f0.open_key()
            if k2 is not None:
                k = (k2[0], self.conn.index, 0, k2[1])
                if best is None or k < best:
                    best = k
            k2 = f1.open_key()
            if k2 is not None:
                k = (k2[0], self.conn.index, 1, k2[1])
                if best is None or k < best:
                    best = k
        return best

    def _refresh(self) -> None:
        if self.unordered_partial:
            f0, f1 = self.framers
            if f0.open_key() is None and f1.open_key() is None:
                self.unordered_partial = False
        self.ctx.reorder.set_open(self, self.open_key())

    def _force(self) -> bool:
        """Reorder buffer overflow: stop holding back the order with the oldest thing we
        wait for (see the module contract); False when nothing can be done."""
        cands = []
        if self.pending:
            for p in self.pending.values():
                if not p.unordered:
                    cands.append(p)
                    break
        if self.fifo:
            cands.append(self.fifo[0])
        if self.orphans:
            cands.append(self.orphans[0])
        item = min(cands, key=lambda p: p.key) if cands else None
        framer_key = None
        if not self.unordered_partial:
            for d in (0, 1):
                k2 = self.framers[d].open_key()
                if k2 is not None:
                    k = (k2[0], self.conn.index, d, k2[1])
                    framer_key = k if framer_key is None or k < framer_key else framer_key
        if item is not None and (framer_key is None or item.key <= framer_key):
            if item.kind == "orphan":
                self._resolve_orphans(all_=False, upto=item)
            elif item.kind == "kafka":
                # a request may be answered much later (a JoinGroup waits for the
                # rebalance, a Fetch for data): it keeps waiting, out of the order
                limit = self.ctx.reorder.limit
                for old in self.ctx.unordered.add(item):
                    old.conv._unanswered(old, "no response while more than "
                                              f"{limit} requests waited out of capture order "
                                              "(reorder buffer limit)")
            else:
                if item.kind in ("sasl", "0.7") and self.fifo and self.fifo[0] is item:
                    self.fifo.popleft()
                self._unanswered(item, "no response before the reorder buffer limit "
                                       f"({self.ctx.reorder.limit} exchanges) was reached")
            self.ctx.reorder.set_open(self, self.open_key())
            return True
        if framer_key is not None:
            self.unordered_partial = True
            self.ctx.reorder.set_open(self, self.open_key())
            return True
        return False
