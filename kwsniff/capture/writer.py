"""Writing pcap and pcapng files (test fixtures, `live -w`, exporting selections).

Contract: :class:`PcapWriter` writes a classic pcap file (microsecond or nanosecond
timestamps, either byte order); :class:`PcapngWriter` writes pcapng with any number of
sections and interfaces (each with its own link type, snap length, ``if_tsresol`` and
``if_tsoffset``), Enhanced Packet Blocks (optionally with a comment), Simple Packet
Blocks and arbitrary extra blocks. Both accept a path or a binary file object, write
``data`` as given (``orig_len`` defaults to ``len(data)``) and are context managers;
``flush()`` makes everything written so far readable by another process.
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO

from kwsniff.capture.pcap import PCAP_MAGICS
from kwsniff.capture.pcapng import (
    BOM_LE,
    EPB,
    IDB,
    IF_NAME,
    IF_TSOFFSET,
    IF_TSRESOL,
    SHB,
    SPB,
    tsresol_units,
)

OPT_COMMENT = 1
SHB_USERAPPL = 4


def _split_ts(ts: float, units: int) -> tuple[int, int]:
    """``ts`` (epoch seconds) as (whole seconds, fraction in ``units`` per second)."""
    sec = int(ts // 1)
    frac = round((ts - sec) * units)
    if frac >= units:
        sec, frac = sec + 1, frac - units
    return sec, frac


class _Output:
    def __init__(self, file: str | os.PathLike[str] | BinaryIO) -> None:
        if isinstance(file, (str, os.PathLike)):
            self._file: BinaryIO = open(file, "wb")  # noqa: SIM115 - closed by close()
            self._owned = True
        else:
            self._file = file
            self._owned = False
        self.packets = 0

    def flush(self) -> None:
        """Push buffered output to the operating system."""
        self._file.flush()

    def close(self) -> None:
        """Flush, and close the file if this writer opened it."""
        if self._file.closed:
            return
        self._file.flush()
        if self._owned:
            self._file.close()

    def __enter__(self) -> _Output:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PcapWriter(_Output):
    """A classic pcap file with one link type."""

    def __init__(self, file: str | os.PathLike[str] | BinaryIO, linktype: int = 1, *,
                 snaplen: int = 262144, nanosecond: bool = False, byteorder: str = "<") -> None:
        super().__init__(file)
        if byteorder not in ("<", ">"):
            raise ValueError("byteorder must be '<' or '>'")
        self.units = 1_000_000_000 if nanosecond else 1_000_000
        magic = next(m for m, (order, units, modified) in PCAP_MAGICS.items()
                     if order == byteorder and units == self.units and not modified)
        self._rec = struct.Struct(byteorder + "IIII")
        self._file.write(magic + struct.pack(byteorder + "HHiIII", 2, 4, 0, 0, snaplen, linktype))

    def write(self, ts: float, data: bytes | bytearray | memoryview,
              orig_len: int | None = None) -> None:
        """Append one packet captured at ``ts`` (epoch seconds)."""
        sec, frac = _split_ts(ts, self.units)
        n = len(data)
        self._file.write(self._rec.pack(sec, frac, n, n if orig_len is None else orig_len))
        self._file.write(data)
        self.packets += 1


def _options(order: str, options: list[tuple[int, bytes]]) -> bytes:
    if not options:
        return b""
    out = bytearray()
    for code, value in options:
        out += struct.pack(order + "HH", code, len(value)) + value
        out += b"\0" * (-len(value) % 4)
    out += struct.pack(order + "HH", 0, 0)
    return bytes(out)


class PcapngWriter(_Output):
    """A pcapng file; a first section is started on creation."""

    def __init__(self, file: str | os.PathLike[str] | BinaryIO, *, byteorder: str = "<",
                 application: str | None = "kwsniff") -> None:
        super().__init__(file)
        self._application = application
        self._interfaces: list[tuple[int, int]] = []  # (units per second, tsoffset) per id
        self.new_section(byteorder)

    def new_section(self, byteorder: str | None = None) -> None:
        """Start a new section (its interfaces start again from 0)."""
        if byteorder is not None:
            if byteorder not in ("<", ">"):
                raise ValueError("byteorder must be '<' or '>'")
            self._order = byteorder
        order = self._order
        bom = BOM_LE if order == "<" else BOM_LE[::-1]
        opts = []
        if self._application:
            opts.append((SHB_USERAPPL, self._application.encode()))
        body = bom + struct.pack(order + "HHq", 1, 0, -1) + _options(order, opts)
        self.write_block(SHB, body)
        self._interfaces = []

    def add_interface(self, linktype: int, *, snaplen: int = 0, tsresol: int = 6,
                      tsoffset: int = 0, name: str | None = None) -> int:
        """Describe an interface; returns its id. ``tsresol`` is the raw ``if_tsresol``
        byte (6 = microseconds, 9 = nanoseconds, 0x80 | n = 2**-n seconds)."""
        opts: list[tuple[int, bytes]] = []
        if name is not None:
            opts.append((IF_NAME, name.encode()))
        if tsresol != 6:
            opts.append((IF_TSRESOL, bytes([tsresol])))
        if tsoffset:
            opts.append((IF_TSOFFSET, struct.pack(self._order + "q", tsoffset)))
        self.write_block(IDB, struct.pack(self._order + "HHI", linktype, 0, snaplen)
                         + _options(self._order, opts))
        self._interfaces.append((tsresol_units(tsresol), tsoffset))
        return len(self._interfaces) - 1

    def write(self, ts: float, data: bytes | bytearray | memoryview,
              orig_len: int | None = None, *, interface: int = 0,
              comment: str | None = None) -> None:
        """Append an Enhanced Packet Block captured at ``ts`` (epoch seconds)."""
        units, tsoffset = self._interfaces[interface]
        sec, frac = _split_ts(ts - tsoffset, units)
        ticks = sec * units + frac
        if not 0 <= ticks < 1 << 64:
            raise ValueError(f"timestamp {ts} is not representable on interface {interface}")
        n = len(data)
        opts = _options(self._order, [(OPT_COMMENT, comment.encode())] if comment else [])
        body = (struct.pack(self._order + "IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF,
                            n, n if orig_len is None else orig_len)
                + bytes(data) + b"\0" * (-n % 4) + opts)
        self.write_block(EPB, body)
        self.packets += 1

    def write_simple(self, data: bytes | bytearray | memoryview,
                     orig_len: int | None = None) -> None:
        """Append a Simple Packet Block (interface 0, no timestamp)."""
        n = len(data)
        self.write_block(SPB, struct.pack(self._order + "I", n if orig_len is None else orig_len)
                         + bytes(data) + b"\0" * (-n % 4))
        self.packets += 1

    def write_block(self, block_type: int, body: bytes) -> None:
        """Append a raw block (body padded to 4 bytes) in the section's byte order."""
        body = body + b"\0" * (-len(body) % 4)
        total = len(body) + 12
        head = struct.pack(self._order + "II", block_type, total)
        self._file.write(head + body + struct.pack(self._order + "I", total))
