"""The packet tuple every capture source yields, and shared limits.

Contract: a packet is the plain tuple ``(frame, ts, linktype, data, orig_len)``:
``frame`` 1-based in file order, ``ts`` float epoch seconds, ``linktype`` the
LINKTYPE_* value of the packet's interface, ``data`` the captured bytes and
``orig_len`` the length on the wire (``orig_len > len(data)``: snap-length truncation).
"""

from __future__ import annotations

from typing import TypeAlias

Packet: TypeAlias = tuple[int, float, int, "bytes | memoryview", int]

#: Largest captured length accepted for one record/block. Larger values mean a
#: corrupt file; the limit also bounds the memory a streamed capture can need.
MAX_RECORD = 16 * 1024 * 1024

#: Bytes of a memory-mapped capture walked between two releases of the pages already
#: read (packets are yielded as copies), so resident memory does not grow with the file.
RELEASE_STEP = 8 * 1024 * 1024
