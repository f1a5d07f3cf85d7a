"""pcapng files: section, interface and packet blocks, walked like pcap records.

Contract: :class:`PcapngWalker` walks blocks in any buffer (an ``mmap`` of the whole
file, or successive chunks of a stream) starting at a Section Header Block, and
yields packet tuples for Enhanced, Simple and (obsolete) Packet Blocks. Each section
has its own byte order and interfaces; each interface its own link type,
``if_tsresol`` and ``if_tsoffset``. Other blocks are skipped. ``walk`` returns the
position of the first block it could not complete; a block that cannot be valid sets
:attr:`PcapngWalker.error` and stops the walk; recoverable oddities (a packet for an
undefined interface) go to :attr:`PcapngWalker.problems`. Simple Packet Blocks carry
no timestamp and get the previous packet's. With the C kernel
(:data:`kwsniff.capture.packet.PCAP_KERNEL`) runs of well-formed Enhanced Packet Blocks
are cut in batches by its ``pcapng_epbs``, with the same results; every other block (and
every block without the kernel) takes the Python path, the reference.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass

from kwsniff.capture.packet import MAX_RECORD, PCAP_KERNEL, RELEASE_STEP, FrameCounter, Packet

SHB = 0x0A0D0D0A
IDB = 0x00000001
PB = 0x00000002    # obsolete Packet Block
SPB = 0x00000003
EPB = 0x00000006
DSB = 0x0000000A   # Decryption Secrets Block
TLS_KEY_LOG = 0x544C534B    # its secrets type: an NSS key log ("TLSK")
SHB_MAGIC = b"\n\r\r\n"
BOM_LE = b"\x4d\x3c\x2b\x1a"
BOM_BE = b"\x1a\x2b\x3c\x4d"

OPT_ENDOFOPT = 0
IF_NAME = 2
IF_TSRESOL = 9
IF_TSOFFSET = 14

MAX_BLOCK = MAX_RECORD + 4096
#: packets per call of the C kernel's block walker (bounds the copies held at once)
BATCH = 512
_MORE = 1


@dataclass(slots=True, frozen=True)
class Interface:
    """One Interface Description Block (``section`` counts from 0)."""

    section: int
    linktype: int
    snaplen: int
    units: int        # timestamp units per second (from if_tsresol; default 10**6)
    tsoffset: int     # seconds added to every timestamp (if_tsoffset)
    name: str | None


def tsresol_units(value: int) -> int:
    """Timestamp units per second for an ``if_tsresol`` option byte."""
    if value & 0x80:
        return 1 << (value & 0x7F)
    return 10 ** value


def byteorder_of(bom: bytes) -> str | None:
    """Struct byte order for a Section Header Block's byte-order magic, else None."""
    if bom == BOM_LE:
        return "<"
    if bom == BOM_BE:
        return ">"
    return None


class PcapngWalker(FrameCounter):
    """Block walker for one pcapng stream (see the module docstring)."""

    __slots__ = ("error", "problems", "interfaces", "sections", "_order", "_hdr", "_epb", "_len", "_ifaces", "_last_ts", "secrets")

    #: the C kernel's walker of Enhanced Packet Block runs (None: every block takes the
    #: Python path)
    epb_batch = PCAP_KERNEL.pcapng_epbs if PCAP_KERNEL is not None else None

    def __init__(self) -> None:
        FrameCounter.__init__(self)
        self.error: str | None = None
        self.problems: list[str] = []
        self.interfaces: list[Interface] = []   # every interface of every section
        # NSS key logs of Decryption Secrets Blocks, in file order (editcap --inject-secrets)
        self.secrets: list[bytes] = []
        self.sections = 0
        self._ifaces: list[tuple[int, int, int, int]] = []  # current section's interfaces
        self._last_ts = 0.0
        self._set_order("<")

    def _set_order(self, order: str) -> None:
        self._order = order
        self._hdr = struct.Struct(order + "II")
        self._epb = struct.Struct(order + "IIIII")
        self._len = struct.Struct(order + "I")

    def walk(self, buf: bytes | memoryview, pos: int, end: int,
             on_end: Callable[[bytes | memoryview, int, int], None] | None = None,
             release: Callable[[int], None] | None = None
             ) -> Generator[Packet, None, int]:
        """Yield the packets of every complete block in ``buf[pos:end]``; return where it
        stopped (after calling ``on_end(buf, pos, end)`` if given). ``release(pos)`` is
        called every :data:`RELEASE_STEP` bytes, as by the pcap walker."""
        hdr = self._hdr.unpack_from
        epb = self._epb.unpack_from
        blen_at = self._len.unpack_from
        ifaces = self._ifaces
        frame = self._frame
        ts = self._last_ts
        mark = pos + RELEASE_STEP if release is not None else end
        epbs = self.epb_batch
        while end - pos >= 12:
            if epbs is not None:
                packets, pos, frame, status = epbs(buf, pos, end, mark, self._order == ">",
                                                   ifaces, frame, MAX_BLOCK, BATCH)
                if packets:
                    self._frame = frame
                    ts = packets[-1][1]
                    # (frame counts down the packets of the batch not yet handed out)
                    self._batch = batch = iter(packets)
                    yield from batch
                    self._batch = None
                if pos > mark:
                    release(pos)  # type: ignore[misc]
                    mark = pos + RELEASE_STEP
                if status == _MORE or end - pos < 12:
                    continue
            btype, blen = hdr(buf, pos)
            if btype == SHB:
                order = byteorder_of(bytes(buf[pos + 8:pos + 12]))
                if order is None:
                    self.error = (f"corrupt pcapng: section header at byte {pos} has no valid "
                                  "byte-order magic; the rest of the file is skipped")
                    break
                blen = struct.unpack_from(order + "I", buf, pos + 4)[0]
            if blen < 12 or blen & 3 or blen > MAX_BLOCK:
                self.error = (f"corrupt pcapng: block at byte {pos} (after frame {frame}) has "
                              f"invalid length {blen}; the rest of the file is skipped")
                break
            if blen > end - pos:
                break
            if btype == EPB:
                if blen < 32:
                    self.error = self._bad_block("enhanced packet", pos, frame)
                    break
                ifid, hi, lo, cap, orig = epb(buf, pos + 8)
                if cap > blen - 32 or blen_at(buf, pos + blen - 4)[0] != blen:
                    self.error = self._bad_block("enhanced packet", pos, frame)
                    break
                if ifid < len(ifaces):
                    linktype, units, offset, _snap = ifaces[ifid]
                    frame += 1
                    self._frame = frame
                    ts = ((hi << 32) | lo) / units + offset
                    yield (frame, ts, linktype, buf[pos + 28:pos + 28 + cap], orig)
                else:
                    self.problems.append(
                        f"packet block at byte {pos} (after frame {frame}) refers to undefined "
                        f"interface {ifid}; skipped")
            else:
                if btype == SHB:
                    trailer = struct.unpack_from(order + "I", buf, pos + blen - 4)[0]
                else:
                    trailer = blen_at(buf, pos + blen - 4)[0]
                if trailer != blen:
                    self.error = self._bad_block(f"type 0x{btype:08x}", pos, frame)
                    break
                packet = self._other_block(btype, buf, pos, blen, ts)
                if self.error:
                    break
                if packet is not None:
                    frame += 1
                    self._frame = frame
                    ts = packet[0]
                    yield (frame, *packet)
                # a section header changes byte order and interfaces
                hdr = self._hdr.unpack_from
                epb = self._epb.unpack_from
                blen_at = self._len.unpack_from
                ifaces = self._ifaces
            pos += blen
            if pos > mark:
                release(pos)  # type: ignore[misc]
                mark = pos + RELEASE_STEP
        self._last_ts = ts
        if on_end is not None:
            on_end(buf, pos, end)
        return pos

    def _bad_block(self, kind: str, pos: int, frame: int) -> str:
        return (f"corrupt pcapng: {kind} block at byte {pos} (after frame {frame}) is "
                "inconsistent with its length; the rest of the file is skipped")

    def _other_block(self, btype: int, buf: bytes | memoryview, pos: int, blen: int,
                     last_ts: float) -> tuple[float, int, bytes | memoryview, int] | None:
        """Handle a non-EPB block; return ``(ts, linktype, data, orig_len)`` for packets.

        A Simple Packet Block has no timestamp: it gets ``last_ts``, the timestamp of
        the packet before it (0.0 when it is the first packet).
        """
        order = self._order
        if btype == SHB:
            order = byteorder_of(bytes(buf[pos + 8:pos + 12])) or "<"
            if blen < 28:
                self.error = self._bad_block("section header", pos, self.frame)
                return None
            major = struct.unpack_from(order + "H", buf, pos + 12)[0]
            if major != 1:
                self.error = (f"unsupported pcapng version {major} in section header at byte "
                              f"{pos}; the rest of the file is skipped")
                return None
            self._set_order(order)
            self.sections += 1
            self._ifaces = []
        elif btype == IDB:
            if blen < 20:
                self.error = self._bad_block("interface description", pos, self.frame)
                return None
            linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", buf, pos + 8)
            units, tsoffset, name = 1_000_000, 0, None
            for code, value in self._options(buf, pos + 16, pos + blen - 4):
                if code == IF_TSRESOL and len(value) >= 1:
                    units = tsresol_units(value[0])
                elif code == IF_TSOFFSET and len(value) >= 8:
                    tsoffset = struct.unpack_from(order + "q", value)[0]
                elif code == IF_NAME:
                    name = bytes(value).decode("utf-8", "replace").rstrip("\0")
            self._ifaces.append((linktype, units, tsoffset, snaplen))
            self.interfaces.append(Interface(max(self.sections - 1, 0), linktype, snaplen,
                                             units, tsoffset, name))
        elif btype == DSB:
            if blen >= 20:
                stype, slen = struct.unpack_from(order + "II", buf, pos + 8)
                if stype == TLS_KEY_LOG and 16 + slen <= blen - 4:
                    self.secrets.append(bytes(buf[pos + 16:pos + 16 + slen]))
        elif btype == SPB:
            if not self._ifaces:
                self.problems.append(f"simple packet block at byte {pos} (after frame "
                                     f"{self.frame}) but the section has no interface; skipped")
                return None
            linktype, _units, _offset, snaplen = self._ifaces[0]
            orig = struct.unpack_from(order + "I", buf, pos + 8)[0]
            cap = min(orig, blen - 16)
            if snaplen:
                cap = min(cap, snaplen)
            return (last_ts, linktype, buf[pos + 12:pos + 12 + cap], orig)
        elif btype == PB:
            if blen < 32:
                self.error = self._bad_block("packet", pos, self.frame)
                return None
            ifid, _drops, hi, lo, cap, orig = struct.unpack_from(order + "HHIIII", buf, pos + 8)
            if cap > blen - 32:
                self.error = self._bad_block("packet", pos, self.frame)
                return None
            if ifid >= len(self._ifaces):
                self.problems.append(f"packet block at byte {pos} (after frame {self.frame}) "
                                     f"refers to undefined interface {ifid}; skipped")
                return None
            linktype, units, offset, _snap = self._ifaces[ifid]
            return (((hi << 32) | lo) / units + offset, linktype, buf[pos + 28:pos + 28 + cap],
                    orig)
        return None

    def _options(self, buf: bytes | memoryview, pos: int, end: int
                 ) -> Generator[tuple[int, bytes | memoryview], None, None]:
        """Yield ``(code, value)`` for the options in ``buf[pos:end]`` (stops at a bad one)."""
        unpack = struct.Struct(self._order + "HH").unpack_from
        while end - pos >= 4:
            code, length = unpack(buf, pos)
            if code == OPT_ENDOFOPT:
                return
            start = pos + 4
            if start + length > end:
                return
            yield code, buf[start:start + length]
            pos = start + ((length + 3) & ~3)

    def truncation_problem(self, buf: bytes | memoryview, pos: int, end: int) -> str:
        """Describe the incomplete block at ``buf[pos:end]`` (the input ended inside it)."""
        have = end - pos
        if have >= 8:
            btype, blen = self._hdr.unpack_from(buf, pos)
            if btype in (EPB, SPB, PB):
                return (f"frame {self.frame + 1}: capture ends inside a packet block ({have} of "
                        f"{blen} bytes); the last packet is incomplete and was skipped")
            return (f"capture ends inside a block of type 0x{btype:08x} ({have} of {blen} "
                    f"bytes) after frame {self.frame}")
        return f"capture ends inside a block header ({have} bytes) after frame {self.frame}"
