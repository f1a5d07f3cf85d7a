"""Classic libpcap files: file header and the record walker.

Contract: :class:`PcapWalker` is built from the 24-byte file header and walks
records in any buffer (an ``mmap`` of the whole file, or successive chunks of a
stream), yielding packet tuples ``(frame, ts, linktype, data, orig_len)``. ``walk``
returns the position of the first record it could not complete; the caller
supplies more bytes or, at end of input, reports :meth:`PcapWalker.truncation_problem`.
A record header that cannot be valid sets :attr:`PcapWalker.error` and stops the walk.
With the C kernel (:data:`kwsniff.capture.packet.PCAP_KERNEL`) records are cut in
batches by its ``pcap_batch``, with the same results; :meth:`PcapWalker._walk_py` is
the reference.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator

from kwsniff.capture.packet import MAX_RECORD, PCAP_KERNEL, RELEASE_STEP, FrameCounter, Packet

FILE_HEADER_LEN = 24
#: packets per call of the C kernel's record walker (bounds the copies held at once)
BATCH = 512
_MORE, _CORRUPT = 1, 2

# magic bytes -> (struct byte order, timestamp units per second, modified/Kuznetzov format)
PCAP_MAGICS: dict[bytes, tuple[str, int, bool]] = {
    b"\xd4\xc3\xb2\xa1": ("<", 1_000_000, False),
    b"\xa1\xb2\xc3\xd4": (">", 1_000_000, False),
    b"\x4d\x3c\xb2\xa1": ("<", 1_000_000_000, False),
    b"\xa1\xb2\x3c\x4d": (">", 1_000_000_000, False),
    b"\x34\xcd\xb2\xa1": ("<", 1_000_000, True),
    b"\xa1\xb2\xcd\x34": (">", 1_000_000, True),
}


def _corrupt(frame: int, incl: int) -> str:
    """The error of a record header after ``frame`` claiming ``incl`` captured bytes."""
    return (f"frame {frame + 1}: corrupt pcap record header (captured length {incl} is "
            f"larger than {MAX_RECORD}); the rest of the file is skipped")


class PcapWalker(FrameCounter):
    """Record walker for one pcap file (see the module docstring)."""

    __slots__ = ("byteorder", "units", "linktype", "snaplen", "version", "error",
                 "_rec", "_hdrlen")

    def __init__(self, header: bytes) -> None:
        order, units, modified = PCAP_MAGICS[bytes(header[:4])]
        major, minor, _zone, _sigfigs, snaplen, linkfield = struct.unpack_from(
            order + "HHiIII", header, 4)
        self.byteorder = order
        self.units = units
        # the top bits of the link type field carry FCS information (pcap spec, section 4)
        self.linktype = linkfield & 0x0FFFFFFF
        self.snaplen = snaplen
        self.version = (major, minor)
        FrameCounter.__init__(self)
        self.error: str | None = None
        # the modified format adds ifindex, protocol, pkt_type and padding (8 bytes)
        self._rec = struct.Struct(order + ("IIII8x" if modified else "IIII"))
        self._hdrlen = self._rec.size

    def _walk_py(self, buf: bytes | memoryview, pos: int, end: int,
                 on_end: Callable[[bytes | memoryview, int, int], None] | None = None,
                 release: Callable[[int], None] | None = None
                 ) -> Generator[Packet, None, int]:
        """Yield every complete record in ``buf[pos:end]``; return where the walk stopped
        (after calling ``on_end(buf, pos, end)`` if given). ``release(pos)`` is called
        every :data:`RELEASE_STEP` bytes: everything before ``pos`` has been yielded (as
        copies), so a memory-mapped caller can drop those pages."""
        unpack = self._rec.unpack_from
        hdrlen = self._hdrlen
        units = self.units
        linktype = self.linktype
        frame = self._frame
        mark = pos + RELEASE_STEP if release is not None else end
        while end - pos >= hdrlen:
            sec, frac, incl, orig = unpack(buf, pos)
            if incl > MAX_RECORD:
                self.error = _corrupt(frame, incl)
                break
            start = pos + hdrlen
            stop = start + incl
            if stop > end:
                break
            frame += 1
            self._frame = frame
            yield (frame, sec + frac / units, linktype, buf[start:stop], orig)
            pos = stop
            if pos > mark:
                release(pos)  # type: ignore[misc]
                mark = pos + RELEASE_STEP
        if on_end is not None:
            on_end(buf, pos, end)
        return pos

    def _walk_batches(self, buf: bytes | memoryview, pos: int, end: int,
                      on_end: Callable[[bytes | memoryview, int, int], None] | None = None,
                      release: Callable[[int], None] | None = None
                      ) -> Generator[Packet, None, int]:
        """``walk`` with the records cut by the C kernel, up to :data:`BATCH` per call
        (same packets, same release points, same errors)."""
        batch = PCAP_KERNEL.pcap_batch  # type: ignore[union-attr]
        big = self.byteorder == ">"
        hdrlen, units, linktype = self._hdrlen, self.units, self.linktype
        mark = pos + RELEASE_STEP if release is not None else end
        while True:
            packets, pos, frame, status, incl = batch(
                buf, pos, end, mark, big, hdrlen, units, linktype, self._frame, MAX_RECORD,
                BATCH)
            self._frame = frame
            # (frame counts down the packets of the batch not yet handed out)
            self._batch = batch_iter = iter(packets)
            yield from batch_iter
            self._batch = None
            if status == _MORE:
                if pos > mark:
                    release(pos)  # type: ignore[misc]
                    mark = pos + RELEASE_STEP
                continue
            if status == _CORRUPT:
                self.error = _corrupt(frame, incl)
            break
        if on_end is not None:
            on_end(buf, pos, end)
        return pos

    #: walk(buf, pos, end, on_end=None, release=None): yield every complete record in
    #: ``buf[pos:end]`` and return where the walk stopped (see :meth:`_walk_py`)
    walk = _walk_batches if PCAP_KERNEL is not None else _walk_py

    def truncation_problem(self, buf: bytes | memoryview, pos: int, end: int) -> str:
        """Describe the incomplete record at ``buf[pos:end]`` (the input ended inside it)."""
        have = end - pos
        frame = self.frame + 1
        if have < self._hdrlen:
            return (f"frame {frame}: capture ends inside a record header ({have} of "
                    f"{self._hdrlen} bytes); the last packet is incomplete and was skipped")
        incl = self._rec.unpack_from(buf, pos)[2]
        return (f"frame {frame}: capture ends inside a record ({have - self._hdrlen} of {incl} "
                "captured bytes present); the last packet is incomplete and was skipped")
