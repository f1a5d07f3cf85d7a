"""The packet tuple every capture source yields, and shared limits.

Contract: a packet is the plain tuple ``(frame, ts, linktype, data, orig_len)``:
``frame`` 1-based in file order, ``ts`` float epoch seconds, ``linktype`` the
LINKTYPE_* value of the packet's interface, ``data`` the captured bytes and
``orig_len`` the length on the wire (``orig_len > len(data)``: snap-length truncation).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeAlias

from kwsniff import _compiled

Packet: TypeAlias = tuple[int, float, int, "bytes | memoryview", int]

#: Largest captured length accepted for one record/block. Larger values mean a
#: corrupt file; the limit also bounds the memory a streamed capture can need.
MAX_RECORD = 16 * 1024 * 1024

#: Bytes of a memory-mapped capture walked between two releases of the pages already
#: read (packets are yielded as copies), so resident memory does not grow with the file.
RELEASE_STEP = 8 * 1024 * 1024

#: the C kernel of the pcap and pcapng walkers (:mod:`kwsniff.capture._pcap`: records and
#: Enhanced Packet Blocks cut in batches), or None: the walkers' Python code cuts them.
#: The one place the capture layer chooses.
PCAP_KERNEL = _compiled.kernel("kwsniff.capture._pcap")


class FrameCounter:
    """Base of the capture file walkers: :attr:`frame`, the number of the last packet
    yielded, exact also while a batch cut by the C kernel is being handed out."""

    __slots__ = ("_frame", "_batch")

    def __init__(self) -> None:
        self._frame = 0                                 # packets cut so far
        self._batch: Iterator[Packet] | None = None     # the batch being yielded, if any

    @property
    def frame(self) -> int:
        """The number of the last packet yielded (0 before the first)."""
        batch = self._batch
        if batch is None:
            return self._frame
        # the packets of the batch not yet handed out are still counted in _frame
        return self._frame - batch.__length_hint__()  # type: ignore[attr-defined]
