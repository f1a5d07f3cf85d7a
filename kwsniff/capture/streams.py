"""Sequential byte input for captures that cannot be memory-mapped.

Contract: :func:`detect_compression` names the compression of a file from its first
bytes (magic, not file name). :func:`decompressing_reader` wraps a binary file object
so that ``read(n)`` returns at most ``n`` decompressed bytes (bounded memory for any
input). :class:`PrefixedReader` replays bytes already read from a non-seekable input
(stdin, a pipe) before the rest of it.
"""

from __future__ import annotations

import io
import zlib
from typing import BinaryIO

# (magic prefix, name) in the order they are tested
COMPRESSION_MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
)

#: The longest magic above: how many bytes detection needs.
MAGIC_LEN = 6


def detect_compression(head: bytes) -> str | None:
    """The compression (a name from ``COMPRESSION_MAGICS``) of data starting with ``head``."""
    for magic, name in COMPRESSION_MAGICS:
        if head.startswith(magic):
            return name
    return None


class PrefixedReader(io.RawIOBase):
    """A raw, read-only stream: ``prefix`` first, then the rest of ``inner``."""

    def __init__(self, prefix: bytes, inner: BinaryIO) -> None:
        super().__init__()
        self._prefix = memoryview(prefix)
        self._inner = inner
        self._read1 = getattr(inner, "read1", inner.read)

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        n = len(b)
        if self._prefix:
            k = min(n, len(self._prefix))
            b[:k] = self._prefix[:k]
            self._prefix = self._prefix[k:]
            return k
        data = self._read1(n)
        k = len(data)
        b[:k] = data
        return k


class GzipReader(io.RawIOBase):
    """Streaming gzip decompression (all members) straight on zlib, bounded per read.

    ``read1(n)``/``read(n)`` return at most ``n`` decompressed bytes; a truncated stream
    raises EOFError and bytes after the last member that are not another member raise
    ValueError, once everything before them has been returned.
    """

    IN_CHUNK = 1 << 18

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self._raw = raw
        self._read_raw = getattr(raw, "read1", raw.read)
        self._z = zlib.decompressobj(31)
        self._pending = b""       # compressed input not yet given to ``_z``
        self._done = False

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = 1 << 20
        while not self._done:
            z = self._z
            if z.eof:
                rest = z.unused_data + self._pending
                self._pending = b""
                if not rest:
                    rest = self._read_raw(self.IN_CHUNK)
                    if not rest:
                        self._done = True
                        break
                if not rest.startswith(b"\x1f\x8b"):
                    self._done = True
                    raise ValueError(f"{len(rest)}+ bytes after the last gzip member are "
                                     "not gzip data")
                self._z = z = zlib.decompressobj(31)
                self._pending = rest
            data = z.unconsumed_tail or self._pending or self._read_raw(self.IN_CHUNK)
            self._pending = b""
            if not data:
                self._done = True
                raise EOFError("compressed data ends before the end of the gzip stream")
            out = z.decompress(data, n)
            if out:
                return out
        return b""

    read = read1

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read1(len(b))
        b[:len(data)] = data
        return len(data)


def decompressing_reader(name: str, raw: BinaryIO) -> BinaryIO:
    """A file object reading the decompressed content of ``raw`` (``name`` from detection)."""
    if name == "gzip":
        return GzipReader(raw)  # type: ignore[return-value]
    if name == "bzip2":
        import bz2
        return bz2.BZ2File(raw, mode="rb")
    if name == "xz":
        import lzma
        return lzma.LZMAFile(raw, mode="rb")
    if name == "zstd":
        import zstandard
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    if name == "lz4":
        import lz4.frame
        return lz4.frame.LZ4FrameFile(raw, mode="rb")
    raise ValueError(f"unknown compression {name!r}")


def read_some(reader: BinaryIO, n: int) -> bytes:
    """Up to ``n`` bytes, without waiting for more than one read (b"" only at EOF)."""
    read1 = getattr(reader, "read1", None)
    if read1 is not None:
        return read1(n)
    return reader.read(n)


def read_at_least(reader: BinaryIO, n: int, limit: int) -> bytes:
    """At least ``n`` bytes (fewer only at EOF), reading at most ``limit`` in total."""
    parts = []
    have = 0
    while have < n:
        chunk = read_some(reader, limit - have)
        if not chunk:
            break
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)
