"""IPv4 and IPv6 fragment reassembly, bounded in datagrams, bytes and time.

Contract: :meth:`FragmentReassembler.add` takes one fragment of a datagram (key,
byte offset, more-fragments flag, payload) and returns the datagram's whole payload
when the fragment completes it, else None. Overlapping fragment bytes: the first
copy wins. At most ``max_datagrams`` are pending (the oldest is dropped when a new
one would exceed it), a datagram is dropped when ``timeout`` seconds of capture time
pass without completing it, and payloads over 65535 bytes are refused. Every dropped
datagram is reported to ``problems`` with its frames; its bytes then show up as a
gap in the TCP stream.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from kwsniff.tcp.problems import ProblemLog

MAX_DATAGRAM = 65535


class _Datagram:
    __slots__ = ("pieces", "total", "first_frame", "first_ts", "label")

    def __init__(self, frame: int, ts: float, label: str) -> None:
        self.pieces: list[tuple[int, bytes]] = []
        self.total: int | None = None
        self.first_frame = frame
        self.first_ts = ts
        self.label = label


class FragmentReassembler:
    """Pending fragmented datagrams (see the module docstring)."""

    def __init__(self, problems: ProblemLog, *, max_datagrams: int = 256,
                 timeout: float = 60.0) -> None:
        self.problems = problems
        self.max_datagrams = max_datagrams
        self.timeout = timeout
        self.reassembled = 0
        self.dropped = 0
        # (oldest first; an OrderedDict: its first key is found in O(1) after the keys
        # before it were removed, a dict's is not)
        self._pending: OrderedDict[Hashable, _Datagram] = OrderedDict()

    def add(self, key: Hashable, offset: int, more: bool, payload: bytes, frame: int,
            ts: float, label: str) -> bytes | None:
        """Add one fragment; return the reassembled payload when it completes the datagram.

        ``label`` names the datagram in problem messages (e.g. ``"IPv4 id 0x1c46"``).
        """
        pending = self._pending
        self._expire(ts, frame)
        dgram = pending.get(key)
        if dgram is None:
            while len(pending) >= self.max_datagrams:
                old_key = next(iter(pending))
                self._drop(old_key, f"more than {self.max_datagrams} fragmented datagrams "
                                    f"pending at frame {frame}")
            dgram = pending[key] = _Datagram(frame, ts, label)
        end = offset + len(payload)
        if end > MAX_DATAGRAM:
            self._drop(key, f"fragment at frame {frame} extends past {MAX_DATAGRAM} bytes")
            return None
        if not more:
            if dgram.total is not None and dgram.total != end:
                self._drop(key, f"frame {frame} gives a different datagram end "
                                f"({end} vs {dgram.total})")
                return None
            dgram.total = end
        dgram.pieces.append((offset, payload))
        if dgram.total is None:
            return None
        return self._complete(key, dgram)

    def _complete(self, key: Hashable, dgram: _Datagram) -> bytes | None:
        """The payload if the pieces cover [0, total) (first copy wins on overlaps)."""
        total = dgram.total
        assert total is not None
        # stable sort keeps arrival order among equal offsets: earlier copies first
        pieces = sorted(dgram.pieces, key=lambda p: p[0])
        out = bytearray()
        for offset, data in pieces:
            have = len(out)
            if offset > have:
                return None
            end = offset + len(data)
            if end > have:
                out += data[have - offset:]
        if len(out) < total:
            return None
        del self._pending[key]
        self.reassembled += 1
        return bytes(out[:total])

    def _expire(self, ts: float, frame: int) -> None:
        pending = self._pending
        while pending:
            key = next(iter(pending))
            if ts - pending[key].first_ts <= self.timeout:
                return
            self._drop(key, f"incomplete after {self.timeout:g} s (at frame {frame})")

    def _drop(self, key: Hashable, why: str) -> None:
        dgram = self._pending.pop(key)
        self.dropped += 1
        self.problems.add(f"frame {dgram.first_frame}: fragmented {dgram.label} dropped: {why}")

    def finish(self) -> None:
        """Report every datagram still incomplete at the end of the capture."""
        for key in list(self._pending):
            self._drop(key, "incomplete at end of capture")
