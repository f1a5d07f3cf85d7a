"""Packets in, TCP stream events out: parsing and reassembly composed.

Contract: :func:`iter_tcp_events` (or :class:`TcpEventStream`) consumes packet tuples
(from a :class:`~kwsniff.capture.CaptureSource`, a live source or any iterable) and
yields the events of :mod:`kwsniff.tcp.events` in capture order; when the packets run
out it closes every open connection (``ConnectionClosed(reason="end of capture")``).
:attr:`TcpEventStream.stats` is a snapshot of the counters at any time; parser and
reassembler problems share one bounded :class:`~kwsniff.tcp.problems.ProblemLog`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass

from kwsniff.capture.packet import Packet
from kwsniff.tcp.events import Event
from kwsniff.tcp.packet import ETH_IPV4_TCP, PacketParser
from kwsniff.tcp.problems import ProblemLog
from kwsniff.tcp.reassembly import TcpReassembler


@dataclass(slots=True)
class TcpOptions:
    """Limits and switches of the TCP layer (the defaults suit multi-GB captures)."""

    max_buffer: int = 8 << 20          # out-of-order bytes buffered per direction
    max_total_buffer: int = 256 << 20  # ... and over all connections
    max_connections: int = 65536       # connections tracked at once (open and recently closed)
    gap_on_ack: bool = True            # a hole the peer acknowledged is a gap at once
    defragment: bool = True            # reassemble IP fragments (else skip them)
    max_fragmented: int = 256          # fragmented datagrams pending at once
    fragment_timeout: float = 60.0     # seconds of capture time to complete a datagram
    max_problems: int = 1000           # problem messages kept (the rest are counted)


@dataclass(slots=True, frozen=True)
class TcpStats:
    """Counters of a :class:`TcpEventStream` at one moment."""

    packets: int
    tcp_packets: int
    non_tcp_packets: int        # not TCP, unsupported link type, or malformed
    malformed_packets: int      # subset of non_tcp_packets reported in ``problems``
    connections: int
    retransmissions: int        # segments whose bytes were all delivered already
    keepalives: int
    out_of_order: int           # segments that arrived ahead of a hole
    overlap_conflicts: int      # overlapping copies whose bytes differed
    gaps: int
    gap_bytes: int
    fragments_reassembled: int
    problems: tuple[str, ...]
    problems_dropped: int       # problems beyond the limit, counted only


class TcpEventStream:
    """An iterable of TCP stream events over packet tuples (see the module docstring)."""

    def __init__(self, packets: Iterable[Packet], options: TcpOptions | None = None) -> None:
        opts = options or TcpOptions()
        self.options = opts
        self.problems = ProblemLog(opts.max_problems)
        self.parser = PacketParser(self.problems, defragment=opts.defragment,
                                   max_fragmented=opts.max_fragmented,
                                   fragment_timeout=opts.fragment_timeout)
        self.reassembler = TcpReassembler(self.problems, max_buffer=opts.max_buffer,
                                          max_total_buffer=opts.max_total_buffer,
                                          max_connections=opts.max_connections,
                                          gap_on_ack=opts.gap_on_ack)
        self.packets = 0
        self._packets = packets
        self._iterator: Generator[Event, None, None] | None = None

    def __iter__(self) -> Iterator[Event]:
        if self._iterator is None:
            self._iterator = self._run()
        return self._iterator

    def _run(self) -> Generator[Event, None, None]:
        parse = self.parser.parse
        feed = self.reassembler.feed
        # the C kernel's copy of parse's Ethernet/IPv4/TCP fast path (None from it: the
        # packet needs the full parser, which then decides as it always does)
        fast = ETH_IPV4_TCP
        count = 0
        for frame, ts, linktype, data, orig_len in self._packets:
            count += 1
            self.packets = count
            seg = None
            if linktype == 1 and fast is not None:
                seg = fast(data)
            if seg is None:
                seg = parse(frame, ts, linktype, data, orig_len)
                if seg is None:
                    continue
            events = feed(frame, ts, seg)
            if events:
                yield from events
        self.parser.finish()
        yield from self.reassembler.finish()

    @property
    def stats(self) -> TcpStats:
        """The counters now (a snapshot)."""
        p, r = self.parser, self.reassembler
        return TcpStats(
            packets=self.packets, tcp_packets=self.packets - p.non_tcp,
            non_tcp_packets=p.non_tcp, malformed_packets=p.malformed,
            connections=r.connections, retransmissions=r.retransmissions,
            keepalives=r.keepalives, out_of_order=r.out_of_order,
            overlap_conflicts=r.overlap_conflicts, gaps=r.gaps, gap_bytes=r.gap_bytes,
            fragments_reassembled=p.fragments.reassembled,
            problems=tuple(self.problems.messages), problems_dropped=self.problems.dropped)


def iter_tcp_events(packets: Iterable[Packet], options: TcpOptions | None = None
                    ) -> TcpEventStream:
    """Parse and reassemble ``packets``; iterate the result for events, read ``.stats``."""
    return TcpEventStream(packets, options)
