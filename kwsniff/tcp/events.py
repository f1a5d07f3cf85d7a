"""Events emitted by :class:`kwsniff.tcp.reassembly.TcpReassembler`.

Contract, per connection and direction, in this order: one :class:`ConnectionOpened`;
then :class:`StreamData` and :class:`StreamGap` events that tile the direction's
byte stream without overlap or holes (each event's ``offset`` equals the previous
event's ``offset + len(data)`` or ``offset + length``; the first starts at 0); then
one :class:`ConnectionClosed`. ``frame``/``ts`` are the capture frame and timestamp
the data came from (for a gap: the frame whose arrival revealed it). Gap ``reason``
is one of the ``GAP_*`` values.
"""

from __future__ import annotations

from kwsniff.tcp.connection import Connection

GAP_SNAPLEN = "snaplen"              # the capture kept only the start of the packet
GAP_ACKED = "acked but not captured"  # the receiver acknowledged bytes the capture never saw
GAP_BUFFER = "buffer limit"          # the hole stayed open while the out-of-order buffer filled
GAP_CLOSED = "not captured before close"   # the hole was still open when the connection closed
GAP_END = "not captured before end of capture"  # still open when the capture ended
GAP_EVICTED = "not captured before eviction"    # still open when the connection was evicted


class ConnectionOpened:
    """The first packet of ``conn`` was seen."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def __repr__(self) -> str:
        return f"ConnectionOpened({self.conn.index})"


class StreamData:
    """``data`` at stream ``offset`` of ``direction``, from capture ``frame`` at ``ts``."""

    __slots__ = ("conn", "direction", "offset", "data", "frame", "ts")

    def __init__(self, conn: Connection, direction: int, offset: int, data: bytes,
                 frame: int, ts: float) -> None:
        self.conn = conn
        self.direction = direction
        self.offset = offset
        self.data = data
        self.frame = frame
        self.ts = ts

    def __repr__(self) -> str:
        return (f"StreamData({self.conn.index}, dir={self.direction}, offset={self.offset}, "
                f"len={len(self.data)}, frame={self.frame})")


class StreamGap:
    """``length`` bytes at ``offset`` of ``direction`` that will never be delivered."""

    __slots__ = ("conn", "direction", "offset", "length", "frame", "ts", "reason")

    def __init__(self, conn: Connection, direction: int, offset: int, length: int,
                 frame: int, ts: float, reason: str) -> None:
        self.conn = conn
        self.direction = direction
        self.offset = offset
        self.length = length
        self.frame = frame
        self.ts = ts
        self.reason = reason

    def __repr__(self) -> str:
        return (f"StreamGap({self.conn.index}, dir={self.direction}, offset={self.offset}, "
                f"length={self.length}, frame={self.frame}, reason={self.reason!r})")


class ConnectionClosed:
    """``conn`` ended (``reason`` is ``conn.close_reason``); no more events for it."""

    __slots__ = ("conn", "reason")

    def __init__(self, conn: Connection, reason: str) -> None:
        self.conn = conn
        self.reason = reason

    def __repr__(self) -> str:
        return f"ConnectionClosed({self.conn.index}, {self.reason!r})"


Event = ConnectionOpened | StreamData | StreamGap | ConnectionClosed
