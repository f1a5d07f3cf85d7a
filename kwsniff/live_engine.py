"""Drive the engine from a live packet source: same decoding path, live release.

Contract:

* :class:`LiveDecoder` feeds batches of packet tuples (``LiveSource.batches()``: lists,
  ``[]`` when idle) through the same TCP parser, reassembler and
  :class:`~kwsniff.engine.Engine` as file decoding, and yields each
  :class:`~kwsniff.kafka.model.Exchange` **as soon as it completes** (response seen,
  ``acks=0`` produce, timed out, connection closed): exchange ``index`` values count
  completions, not capture order, so nothing is held back behind a long-poll Fetch or a
  JoinGroup waiting for a rebalance. Frame numbers still match the ``-w`` file.
* Wall-clock time drives timeouts while no packet arrives: after every batch (empty
  ones included) at most once per ``sweep`` seconds it calls :meth:`Engine.tick` with
  ``clock()``, so requests without a response become ``unanswered`` after the engine's
  ``timeout`` even on a silent link.
* When the batches end (stop, duration, error) it closes every connection and yields
  what is left, as files do at their end; :attr:`engine` then holds the run summary.
* Memory: nothing here keeps exchanges; the engine's and TCP layer's limits apply.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from kwsniff.engine import Engine, EngineOptions, hand_over
from kwsniff.kafka.model import Exchange
from kwsniff.kafka.ordering import Reorderer
from kwsniff.tcp import TcpEventStream

PacketTuple = tuple[int, float, int, bytes, int]

#: wall-clock seconds between sweeps for expired requests on an idle link
SWEEP_SECONDS = 0.5


class CompletionOrder(Reorderer):
    """A reorder buffer that releases every finished exchange at once (live capture).

    Nothing is held back, so the owners' open keys and force callbacks are not needed:
    they are not recorded (no reference to a closed conversation survives it).
    """

    __slots__ = ()

    def register(self, owner: Any, force: Callable[[], bool]) -> None:
        return None

    def set_open(self, owner: Any, key: tuple | None) -> None:
        return None

    def forget(self, owner: Any) -> None:
        return None

    def drain(self, final: bool = False) -> list[Exchange]:
        out: list[Exchange] = []
        ready = self.ready
        while ready:
            ex = heapq.heappop(ready)[-1]      # (*key, seq, exchange)
            ex.index = self.next_index
            self.next_index += 1
            out.append(ex)
        self.held = 0           # (nothing waits)
        return out


class LiveDecoder:
    """Packets in batches -> exchanges as they complete (see the module docstring)."""

    def __init__(self, options: EngineOptions | None = None, *,
                 on_batch: Callable[[Sequence[PacketTuple]], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 sweep: float = SWEEP_SECONDS) -> None:
        self.engine = Engine(options)
        ctx = self.engine.ctx
        ctx.reorder = CompletionOrder(ctx.reorder.limit)
        self.tcp = TcpEventStream((), self.engine.options.tcp)
        self.engine.follow(self.tcp)
        self.on_batch = on_batch
        self.clock = clock
        self.sweep = sweep
        self.packets = 0

    def run(self, batches: Iterable[Sequence[PacketTuple]]) -> Iterator[Exchange]:
        """Decode ``batches``; yield exchanges as they complete, the rest at the end."""
        engine = self.engine
        feed_event = engine.feed_event
        parse = self.tcp.parser.parse
        reassemble = self.tcp.reassembler.feed
        summary = engine.summary
        on_batch = self.on_batch
        clock = self.clock
        next_sweep = clock() + self.sweep
        for batch in batches:
            if batch:
                if on_batch is not None:
                    on_batch(batch)
                for frame, ts, linktype, data, orig_len in batch:
                    seg = parse(frame, ts, linktype, data, orig_len)
                    if seg is None:
                        continue
                    events = reassemble(frame, ts, seg)
                    for ev in events:
                        done = feed_event(ev)
                        if done:
                            yield from hand_over(done)
                self.packets += len(batch)
                self.tcp.packets = summary.packets = self.packets
            now = clock()
            if now >= next_sweep:
                next_sweep = now + self.sweep
                done = engine.tick(now)
                if done:
                    yield from hand_over(done)
        yield from hand_over(self.finish())

    def finish(self) -> list[Exchange]:
        """Close every connection and release what is left (called by :meth:`run`)."""
        self.tcp.parser.finish()
        out: list[Exchange] = []
        for ev in self.tcp.reassembler.finish():
            out.extend(self.engine.feed_event(ev))
        out.extend(self.engine.finish())
        summary = self.engine.summary
        summary.tcp = self.tcp.stats
        summary.packets = max(summary.packets, self.packets)
        return out
