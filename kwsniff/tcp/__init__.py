"""TCP: link/IP/TCP header parsing and per-connection, per-direction stream reassembly.

``iter_tcp_events(packets)`` composes :class:`PacketParser` and :class:`TcpReassembler`
over packet tuples and yields :mod:`kwsniff.tcp.events`; see ``docs/tcp-reassembly.md``.
"""

from __future__ import annotations

from kwsniff.tcp.connection import Connection
from kwsniff.tcp.events import (
    ConnectionClosed,
    ConnectionOpened,
    Event,
    StreamData,
    StreamGap,
)
from kwsniff.tcp.packet import PacketParser, Segment, format_ip
from kwsniff.tcp.problems import ProblemLog
from kwsniff.tcp.reassembly import TcpReassembler
from kwsniff.tcp.stream import TcpEventStream, TcpOptions, TcpStats, iter_tcp_events

__all__ = [
    "Connection", "ConnectionClosed", "ConnectionOpened", "Event", "PacketParser",
    "ProblemLog", "Segment", "StreamData", "StreamGap", "TcpEventStream", "TcpOptions",
    "TcpReassembler", "TcpStats", "format_ip", "iter_tcp_events",
]
