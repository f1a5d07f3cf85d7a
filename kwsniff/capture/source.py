"""Opening captures: files (memory-mapped), compressed files and standard input.

Contract: :func:`open_capture` detects the format (pcap or pcapng) and compression
(gzip, zstd, lz4, xz, bzip2) from the bytes, never from the name, and returns a
:class:`CaptureSource`: a context manager and a single-pass iterable of packet tuples
(see :mod:`kwsniff.capture.packet`). Regular uncompressed files are memory-mapped and
never read whole (pages already walked are released every ``RELEASE_STEP`` bytes, so
resident memory does not grow with the file); compressed files and standard input are
read in bounded chunks.
Anything that makes the input unusable is a :class:`~kwsniff.errors.CaptureError` with
a one-line message, raised by :func:`open_capture`; problems found while reading (a
truncated last record, corrupt compressed data, corrupt blocks) go to
:attr:`CaptureSource.problems` and end the iteration after every good packet before them.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
import sys
from collections.abc import Generator, Iterator
from typing import BinaryIO

from kwsniff.capture.packet import Packet
from kwsniff.capture.pcap import FILE_HEADER_LEN, PCAP_MAGICS, PcapWalker
from kwsniff.capture.pcapng import SHB_MAGIC, PcapngWalker, byteorder_of
from kwsniff.capture.streams import (
    MAGIC_LEN,
    PrefixedReader,
    decompressing_reader,
    detect_compression,
    read_at_least,
    read_some,
)
from kwsniff.errors import CaptureError

#: Bytes requested per read when streaming.
CHUNK = 1 << 20
#: madvise advice dropping already-read pages of the mapping (None where unavailable)
_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)

Walker = PcapWalker | PcapngWalker


class CaptureSource:
    """An opened capture: iterate it once for packet tuples; close it (or use ``with``).

    Attributes: ``name`` (path or ``"<stdin>"``), ``format`` (``"pcap"`` or
    ``"pcapng"``), ``compression`` (None or the detected codec), ``problems``
    (non-fatal problems, with frame numbers), ``packets`` (packets yielded so far).
    """

    def __init__(self, name: str, fmt: str, walker: Walker, *, compression: str | None = None,
                 mapped: mmap.mmap | None = None, start: int = 0, reader: BinaryIO | None = None,
                 head: bytes = b"", owned: list[object] | None = None) -> None:
        self.name = name
        self.format = fmt
        self.compression = compression
        self.problems: list[str] = []
        self._walker = walker
        self._mapped = mapped
        self._start = start
        self._reader = reader
        self._head = head
        self._owned = owned or []
        self._iterator: Generator[Packet, None, object] | None = None
        self._closed = False
        self._released = 0          # mapped bytes before this were dropped from memory

    @property
    def tls_secrets(self) -> list[bytes]:
        """NSS key logs found so far in the capture (pcapng Decryption Secrets Blocks)."""
        return getattr(self._walker, "secrets", None) or []

    @property
    def packets(self) -> int:
        """Packets yielded so far (all of them once iteration has finished)."""
        return self._walker.frame

    @property
    def linktypes(self) -> list[int]:
        """Link types of the capture's interfaces seen so far, in order of first appearance."""
        walker = self._walker
        if isinstance(walker, PcapWalker):
            return [walker.linktype]
        return list(dict.fromkeys(i.linktype for i in walker.interfaces))

    @property
    def snaplen(self) -> int | None:
        """The pcap file header's snap length (None for pcapng, where it is per interface)."""
        return self._walker.snaplen if isinstance(self._walker, PcapWalker) else None

    def __iter__(self) -> Iterator[Packet]:
        if self._closed:
            raise ValueError(f"{self.name}: capture source is closed")
        if self._iterator is not None:
            raise RuntimeError(f"{self.name}: a capture source can be iterated only once")
        if self._mapped is not None:
            # the walker itself is the iterator: no extra generator layer per packet
            self._iterator = self._walker.walk(self._mapped, self._start, len(self._mapped),
                                               self._finish, self._release_mapped)
        else:
            self._iterator = self._walk_stream()
        return self._iterator

    def _release_mapped(self, pos: int) -> None:
        """Drop the mapped pages before ``pos`` from memory (they were read and copied):
        resident memory stays flat however large the file (re-read if touched again)."""
        mapped = self._mapped
        done = pos - pos % mmap.PAGESIZE
        if mapped is None or done <= self._released or not _DONTNEED:
            return
        try:
            mapped.madvise(_DONTNEED, self._released, done - self._released)
        except (OSError, ValueError):
            return
        self._released = done

    def _walk_stream(self) -> Generator[Packet, None, None]:
        walker = self._walker
        buf = self._head
        pos = self._start
        self._head = b""
        while True:
            pos = yield from walker.walk(buf, pos, len(buf))
            if walker.error:
                break
            chunk = self._read_chunk()
            if not chunk:
                break
            buf = buf[pos:] + chunk
            pos = 0
        self._finish(buf, pos, len(buf))

    def _read_chunk(self) -> bytes:
        assert self._reader is not None
        try:
            return read_some(self._reader, CHUNK)
        except Exception as err:  # noqa: BLE001 - decompressors raise many types on bad data
            what = f"{self.compression} data" if self.compression else "input"
            self.problems.append(f"after frame {self.packets}: {what} is corrupt or truncated "
                                 f"({type(err).__name__}: {err}); reading stopped there")
            return b""

    def _finish(self, buf: bytes | mmap.mmap, pos: int, end: int) -> None:
        walker = self._walker
        if isinstance(walker, PcapngWalker):
            self.problems.extend(walker.problems)
            walker.problems.clear()
        if walker.error:
            self.problems.append(walker.error)
        elif pos < end:
            self.problems.append(walker.truncation_problem(buf, pos, end))

    def close(self) -> None:
        """Release the file, mapping and any iteration in progress (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._iterator is not None:
            self._iterator.close()
        if self._mapped is not None:
            self._mapped.close()
            self._mapped = None
        for obj in reversed(self._owned):
            with contextlib.suppress(Exception):   # closing must not fail
                obj.close()  # type: ignore[attr-defined]

    def __enter__(self) -> CaptureSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        comp = f"+{self.compression}" if self.compression else ""
        return f"<CaptureSource {self.name!r} {self.format}{comp} packets={self.packets}>"


def open_capture(path: str | bytes | os.PathLike[str] | BinaryIO) -> CaptureSource:
    """Open a capture file, ``"-"`` for standard input, or a binary file object.

    Raises :class:`~kwsniff.errors.CaptureError` (one-line message) when the input is
    missing, unreadable, empty or not a pcap/pcapng capture.
    """
    owned: list[object] = []
    is_path = isinstance(path, (str, bytes, os.PathLike))
    if is_path and os.fsdecode(path) == "-":  # type: ignore[arg-type]
        name = "<stdin>"
        if sys.stdin is None:
            raise CaptureError("there is no standard input to read a capture from")
        fileobj: BinaryIO = sys.stdin.buffer
        if fileobj.isatty():
            raise CaptureError("standard input is a terminal: pipe a capture into it "
                               "(e.g. `tcpdump -w - ...|kwsniff decode -`)")
    elif is_path:
        name = os.fsdecode(path)  # type: ignore[arg-type]
        try:
            fileobj = open(name, "rb")  # noqa: SIM115 - owned by the CaptureSource
        except OSError as err:
            raise CaptureError(f"{name}: {_os_reason(err)}") from None
        owned.append(fileobj)
    else:
        fileobj = path
        name = str(getattr(path, "name", "<file object>"))
    try:
        return _open(name, fileobj, owned)
    except BaseException:
        for obj in owned:
            obj.close()  # type: ignore[attr-defined]
        raise


def _os_reason(err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return "no such file"
    if isinstance(err, IsADirectoryError):
        return "is a directory, not a capture file"
    if isinstance(err, PermissionError):
        return "permission denied"
    return (err.strerror or str(err)).lower()


def _regular_size(fileobj: BinaryIO) -> int | None:
    """Size of ``fileobj`` if it is a regular file at offset 0, else None."""
    try:
        st = os.fstat(fileobj.fileno())
        if not stat.S_ISREG(st.st_mode) or fileobj.tell() != 0:
            return None
    except (OSError, AttributeError, ValueError):
        return None
    return st.st_size


def _open(name: str, fileobj: BinaryIO, owned: list[object]) -> CaptureSource:
    size = _regular_size(fileobj)
    if size == 0:
        raise CaptureError(f"{name}: empty file, not a capture")
    try:
        magic = read_at_least(fileobj, MAGIC_LEN, MAGIC_LEN)
    except OSError as err:
        raise CaptureError(f"{name}: cannot read: {_os_reason(err)}") from None
    if not magic:
        raise CaptureError(f"{name}: empty input, not a capture")
    compression = detect_compression(magic)

    if compression is None and size is not None:
        try:
            mapped = mmap.mmap(fileobj.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            mapped = None
        if mapped is not None:
            if hasattr(mapped, "madvise"):
                mapped.madvise(mmap.MADV_SEQUENTIAL)
            try:
                fmt, walker, start = _detect(name, mapped[:64], None)
            except CaptureError:
                mapped.close()
                raise
            return CaptureSource(name, fmt, walker, mapped=mapped, start=start, owned=owned)

    # streaming: put back the bytes already read
    if size is not None:
        fileobj.seek(0)
        raw: BinaryIO = fileobj
    else:
        raw = PrefixedReader(magic, fileobj)  # type: ignore[assignment]
        owned.append(raw)
    reader = raw
    if compression is not None:
        reader = decompressing_reader(compression, raw)
        owned.append(reader)
    try:
        head = read_at_least(reader, FILE_HEADER_LEN, max(FILE_HEADER_LEN, CHUNK))
    except Exception as err:  # noqa: BLE001 - decompressors raise many types on bad data
        what = f"{compression} data" if compression else "input"
        raise CaptureError(f"{name}: {what} is corrupt or unreadable "
                           f"({type(err).__name__}: {err})") from None
    fmt, walker, start = _detect(name, head, compression)
    return CaptureSource(name, fmt, walker, compression=compression, reader=reader, head=head,
                         start=start, owned=owned)


def _detect(name: str, head: bytes, compression: str | None) -> tuple[str, Walker, int]:
    """Format, walker and first record offset from the first bytes of the (decompressed) input."""
    inside = f" ({compression}-compressed)" if compression else ""
    if head[:4] == SHB_MAGIC:
        if len(head) < 12 or byteorder_of(head[8:12]) is None:
            raise CaptureError(f"{name}: corrupt pcapng file{inside}: the section header has no "
                               "valid byte-order magic")
        return "pcapng", PcapngWalker(), 0
    if head[:4] in PCAP_MAGICS:
        if len(head) < FILE_HEADER_LEN:
            raise CaptureError(f"{name}: truncated pcap file{inside}: the file header has "
                               f"{len(head)} of {FILE_HEADER_LEN} bytes")
        return "pcap", PcapWalker(head[:FILE_HEADER_LEN]), FILE_HEADER_LEN
    if not head:
        raise CaptureError(f"{name}: the {compression} data is empty, not a capture")
    shown = head[:8].hex(" ")
    raise CaptureError(f"{name}: not a pcap or pcapng capture{inside} (starts with {shown})")
