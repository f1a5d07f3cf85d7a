"""The engine's TLS path: a connection the Kafka detector found to carry TLS is handed
to a :class:`TlsLink`, which runs the :mod:`kwsniff.tls` session over its ciphertext
and an inner :class:`~kwsniff.kafka.conversation.Conversation` over the decrypted
application data (the connection's plaintext stream, in plaintext offsets).

Plaintext connections never reach this module: the engine decides once per connection
(when detection says TLS), and only then routes that connection's events here.
"""

from __future__ import annotations

from typing import Any

from kwsniff.kafka.conversation import Conversation
from kwsniff.tls.keylog import KeyLog
from kwsniff.tls.session import TlsSession


class TlsLink:
    """One TLS connection: ``data``/``gap`` take TCP stream events of the connection,
    ``inner`` is the Kafka conversation of the decrypted stream (None until the first
    plaintext byte), ``session.info`` what the handshake showed."""

    __slots__ = ("conn", "ctx", "session", "inner", "outer_summary", "kafka_port", "reported",
                 "gap_bytes")

    def __init__(self, outer: Conversation, keylog: KeyLog | None, live: bool) -> None:
        self.conn = outer.conn
        self.ctx = outer.ctx
        self.inner: Conversation | None = None
        self.outer_summary = outer.summary
        self.kafka_port = outer.kafka_port
        self.reported = False
        self.gap_bytes = 0          # holes in the TCP stream (bytes the capture missed)
        self.session = TlsSession(keylog, self._plain, self._plain_gap, outer.client_dir, live)
        outer.summary.tls = self.session.info
        # the bytes detection buffered: the client's first, then the server's
        order = (outer.client_dir, 1 - outer.client_dir) if outer.client_dir is not None \
            else (0, 1)
        for d in order:
            fr = outer.framers[d]
            buf = bytes(fr.buffered())
            if buf:
                seg = fr.segs[-1] if fr.segs else None
                frame = seg[2] if seg is not None else self.conn.first_frame
                ts = seg[3] if seg is not None else (self.conn.first_ts or 0.0)
                self.session.data(d, buf, frame, ts)
        for fr in outer.framers:
            fr.discard()

    # ------------------------------------------------------------- TCP side
    def data(self, d: int, data: Any, frame: int, ts: float) -> None:
        self.session.data(d, data, frame, ts)

    def gap(self, d: int, length: int, frame: int, ts: float, reason: str) -> None:
        self.gap_bytes += length
        self.session.gap(d, length, frame, ts, reason)

    # ------------------------------------------------------- plaintext side
    def _conv(self) -> Conversation:
        conv = self.inner
        if conv is None:
            conv = self.inner = Conversation(self.conn, self.ctx)
            conv.summary.tls = self.session.info
            if conv.client_dir is None and self.session.client_dir is not None:
                conv.client_dir = self.session.client_dir
                conv.client_by = "tls"
        return conv

    def _plain(self, d: int, offset: int, data: bytes, frame: int, ts: float) -> None:
        self._conv().data(d, offset, data, frame, ts)

    def _plain_gap(self, d: int, offset: int, length: int, frame: int, ts: float,
                   reason: str) -> None:
        if self.inner is None and not self.session.info.decrypted_records:
            return                              # nothing decrypted yet: nothing to frame
        # (the run counts the connection's bytes as TLS record bytes, not these: see
        # RunSummary.tls_bytes)
        stats = self.ctx.stats
        gaps, gap_bytes = stats.gaps, stats.gap_bytes
        self._conv().gap(d, offset, length, frame, ts, reason)
        stats.gaps, stats.gap_bytes = gaps, gap_bytes

    @property
    def decrypted(self) -> bool:
        return self.session.info.key == "found" and self.session.info.decrypted_records > 0
