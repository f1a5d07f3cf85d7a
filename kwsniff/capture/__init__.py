"""Capture input: pcap, pcapng (files, gzip, stdin) and live interfaces -> raw packets.

``open_capture(path)`` returns a :class:`CaptureSource` yielding packet tuples
``(frame, ts, linktype, data, orig_len)``; :mod:`kwsniff.capture.writer` writes
pcap/pcapng files.
"""

from __future__ import annotations

from kwsniff.capture.packet import MAX_RECORD, Packet
from kwsniff.capture.source import CaptureSource, open_capture

__all__ = ["MAX_RECORD", "CaptureSource", "Packet", "open_capture"]
