"""One TCP connection as seen in the capture (the ``conn`` of every stream event).

Contract: ``index`` is stable and 0-based in order of each connection's first packet
(like tshark's ``tcp.stream``); ``a`` is the endpoint that sent that first packet and
``b`` the other, as ``(ip: str, port: int)``. Direction 0 is ``a -> b``, 1 is
``b -> a``. ``a_is_client`` is True when ``a`` sent the SYN (or ``b`` the SYN-ACK),
False for the opposite, None when no handshake packet was captured. Per direction:
``packets`` counts TCP segments (including retransmissions and pure ACKs), ``bytes``
sums TCP payload lengths on the wire (including retransmitted and snaplen-truncated
bytes, like the sum of tshark's ``tcp.len``), ``gap_bytes`` sums the bytes reported
in ``StreamGap`` events. ``close_reason`` is None while open, else one of the
``CLOSE_*`` values. Setting ``ignored = True`` (e.g. after protocol detection says
"not Kafka") stops data and gap events for the connection; counting continues.
``sink`` (None by default) lets the consumer take in-order bytes without an event:
``sink(direction, offset, data, frame, ts)`` is called where a ``StreamData`` would be
made for the next bytes of a direction and no other event comes from the same
segment; when it returns True the bytes are the consumer's and no event is made (the
tiling of each direction then holds for the events and the sink's bytes together).
"""

from __future__ import annotations

from typing import Any

CLOSE_FIN = "fin"                    # both sides sent FIN and all data up to them is accounted for
CLOSE_RST = "rst"                    # a RST was seen
CLOSE_PORT_REUSED = "port reused"    # a new SYN on the same 4-tuple started a new connection
CLOSE_EVICTED = "evicted"            # the connection table was full; least recently active dropped
CLOSE_END = "end of capture"         # still open when the capture ended


class Connection:
    """A TCP connection and its per-direction counters (see the module docstring)."""

    __slots__ = ("index", "a", "b", "a_is_client", "first_ts", "last_ts", "first_frame",
                 "last_frame", "packets", "bytes", "gap_bytes", "close_reason", "ignored",
                 "sink", "reopened", "unseen_bytes")

    def __init__(self, index: int, a: tuple[str, int], b: tuple[str, int],
                 a_is_client: bool | None, ts: float, frame: int) -> None:
        self.index = index
        self.a = a
        self.b = b
        self.a_is_client = a_is_client
        self.first_ts = ts
        self.last_ts = ts
        self.first_frame = frame
        self.last_frame = frame
        self.packets = [0, 0]
        self.bytes = [0, 0]
        self.gap_bytes = [0, 0]
        self.close_reason: str | None = None
        self.ignored = False
        # a consumer's fast path for in-order bytes (see kwsniff.tcp.reassembly)
        self.sink: Any = None
        # times data after a RST (or after both FINs) reopened it (see kwsniff.tcp.reassembly)
        self.reopened = 0
        # of an ignored connection, the bytes the capture missed that no gap reported
        # (known when it closes, from its FINs or the peer's acknowledgments)
        self.unseen_bytes = 0

    @property
    def client(self) -> tuple[str, int] | None:
        """The endpoint that opened the connection, if the handshake was captured."""
        if self.a_is_client is None:
            return None
        return self.a if self.a_is_client else self.b

    @property
    def server(self) -> tuple[str, int] | None:
        """The endpoint that accepted the connection, if the handshake was captured."""
        if self.a_is_client is None:
            return None
        return self.b if self.a_is_client else self.a

    def endpoints(self, direction: int) -> tuple[tuple[str, int], tuple[str, int]]:
        """``(source, destination)`` of ``direction`` (0: a -> b, 1: b -> a)."""
        return (self.a, self.b) if direction == 0 else (self.b, self.a)

    def __repr__(self) -> str:
        a = _fmt(self.a)
        b = _fmt(self.b)
        state = self.close_reason or "open"
        return (f"<Connection {self.index} {a} <-> {b} client="
                f"{'a' if self.a_is_client else 'b' if self.a_is_client is False else '?'} "
                f"packets={self.packets} bytes={self.bytes} {state}>")


def _fmt(endpoint: tuple[str, int]) -> str:
    ip, port = endpoint
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
