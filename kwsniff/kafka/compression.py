"""Decompression of Kafka record payloads, bounded by a size limit.

Contract:

* :func:`decompress` never raises on bad input. It returns a :class:`Decompressed`
  whose ``data`` holds everything that could be decompressed (possibly partial) and
  whose ``problem`` says why the output is incomplete (corrupt or truncated stream,
  unknown codec, output over the limit), or is ``None`` when the stream was complete.
* Output never exceeds the limit (``limit`` argument, else the process-wide default set
  with :func:`set_max_decompressed`, 64 MiB to start with): a decompression bomb costs
  at most ``limit`` bytes of memory plus one codec chunk.
* Codecs (Kafka's attribute values): 0 none, 1 gzip, 2 snappy (raw, or the xerial block
  framing the Java client writes), 3 lz4 (frame format, including the wrong header
  checksum Kafka wrote before KIP-57), 4 zstd (frames with or without a content size).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

# (cramjam, lz4 and zstandard are imported by the functions that use them: ~9 ms of
# start-up that summary lines, which never decompress, do not pay)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024
_max_decompressed = DEFAULT_MAX_DECOMPRESSED

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_MAGIC = 0xFD2FB528
_CHUNK = 1 << 18          # first read size of the streaming codecs; doubles up to _MAX_CHUNK
_MAX_CHUNK = 1 << 22


def codec_name(codec: int) -> str:
    """Name of a codec number (``"codec-7"`` for numbers Kafka does not define)."""
    return CODEC_NAMES.get(codec, f"codec-{codec}")


def set_max_decompressed(limit: int) -> None:
    """Set the default per-batch decompressed-size limit in bytes (must be > 0)."""
    global _max_decompressed
    if limit <= 0:
        raise ValueError("the decompressed-size limit must be positive")
    _max_decompressed = int(limit)


def get_max_decompressed() -> int:
    """The default per-batch decompressed-size limit in bytes."""
    return _max_decompressed


@dataclass(slots=True)
class Decompressed:
    """Result of :func:`decompress`: output bytes, why they are incomplete, how framed."""

    data: bytes
    problem: str | None = None
    framing: str | None = None    # e.g. "xerial", "raw", "frame", "pre-KIP-57 header checksum"


def decompress(codec: int, data: bytes | bytearray | memoryview, limit: int | None = None) -> Decompressed:
    """Decompress one Kafka payload with ``codec``; output capped at ``limit`` bytes."""
    cap = _max_decompressed if limit is None else limit
    buf = bytes(data)
    try:
        if codec == GZIP:
            return _gunzip(buf, cap)
        if codec == SNAPPY:
            return _unsnappy(buf, cap)
        if codec == LZ4:
            return _unlz4(buf, cap)
        if codec == ZSTD:
            return _unzstd(buf, cap)
        if codec == NONE:
            return Decompressed(buf)
    except Exception as exc:  # a codec library failing in an unforeseen way: report, never raise
        return Decompressed(b"", f"{codec_name(codec)}: {type(exc).__name__}: {exc}")
    return Decompressed(b"", f"unknown compression codec {codec}")


def _over(cap: int) -> str:
    return f"decompressed size exceeds the limit of {cap} bytes; output cut at the limit"


# -- gzip -------------------------------------------------------------------------------

def _gunzip(buf: bytes, cap: int) -> Decompressed:
    out: list[bytes] = []
    total = 0
    rest = buf
    members = 0
    while rest:
        members += 1
        d = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
        pending = rest
        while True:
            try:
                chunk = d.decompress(pending, cap - total + 1)
            except zlib.error as exc:
                return Decompressed(b"".join(out), f"gzip: corrupt stream ({exc})")
            out.append(chunk)
            total += len(chunk)
            if total > cap:
                return Decompressed(b"".join(out)[:cap], _over(cap))
            pending = d.unconsumed_tail
            if d.eof or not pending:
                break
        if not d.eof:
            return Decompressed(b"".join(out), "gzip: stream ends before its end marker (truncated)")
        rest = d.unused_data
        if rest and rest[:2] != b"\x1f\x8b":
            return Decompressed(b"".join(out), f"gzip: {len(rest)} bytes of garbage after the stream")
    return Decompressed(b"".join(out), None, "multi-member" if members > 1 else None)


# -- snappy -----------------------------------------------------------------------------

def _snappy_len(block: bytes | memoryview) -> int | None:
    """Uncompressed length from a raw snappy block's varint preamble (None if malformed)."""
    result = shift = 0
    for i in range(min(len(block), 5)):
        b = block[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    return None


def _snappy_block(block: bytes | memoryview, room: int, cap: int) -> tuple[bytes, str | None]:
    import cramjam

    size = _snappy_len(block)
    if size is None:
        return b"", "snappy: malformed length preamble"
    if size > room:
        return b"", _over(cap)
    try:
        return bytes(cramjam.snappy.decompress_raw(block)), None
    except cramjam.DecompressionError as exc:
        return b"", f"snappy: corrupt block ({exc})"


def _unsnappy(buf: bytes, cap: int) -> Decompressed:
    if not buf.startswith(XERIAL_MAGIC):
        data, problem = _snappy_block(buf, cap, cap)
        return Decompressed(data, problem, "raw")
    # xerial: magic, int32 version, int32 compatible version (values vary by writer and are
    # not checked), then blocks of [int32 length][raw snappy block].
    if len(buf) < 16:
        return Decompressed(b"", "snappy: xerial header truncated", "xerial")
    out: list[bytes] = []
    total = 0
    pos = 16
    view = memoryview(buf)
    while pos < len(buf):
        if pos + 4 > len(buf):
            return Decompressed(b"".join(out), f"snappy: xerial block length at byte {pos} truncated", "xerial")
        (n,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        if n < 0 or pos + n > len(buf):
            return Decompressed(b"".join(out), f"snappy: xerial block of {n} bytes at byte {pos - 4} "
                                f"overruns the {len(buf)}-byte stream", "xerial")
        data, problem = _snappy_block(view[pos:pos + n], cap - total, cap)
        out.append(data)
        total += len(data)
        if problem:
            return Decompressed(b"".join(out), problem, "xerial")
        pos += n
    return Decompressed(b"".join(out), None, "xerial")


# -- lz4 --------------------------------------------------------------------------------

def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of a short input (used only for lz4 frame header checksums)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF
    n = len(data)
    i = 0

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed & m, (seed - p1) & m]
        while i + 16 <= n:
            for j in range(4):
                lane = int.from_bytes(data[i:i + 4], "little")
                v[j] = (rotl((v[j] + lane * p2) & m, 13) * p1) & m
                i += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while i + 4 <= n:
        h = (rotl((h + int.from_bytes(data[i:i + 4], "little") * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    h ^= h >> 16
    return h


def _lz4_header_end(buf: bytes, start: int) -> int | None:
    """Offset of the header checksum byte of the lz4 frame at ``start`` (None if short)."""
    if len(buf) < start + 7:
        return None
    flg = buf[start + 4]
    end = start + 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    return end if end < len(buf) else None


def _fix_legacy_lz4_checksum(buf: bytes, start: int) -> bytes | None:
    """If the frame at ``start`` carries Kafka's pre-KIP-57 header checksum (computed over
    the magic number too), return a copy of ``buf`` with the correct checksum, else None."""
    hc_at = _lz4_header_end(buf, start)
    if hc_at is None:
        return None
    legacy = (xxh32(buf[start:hc_at]) >> 8) & 0xFF
    if buf[hc_at] != legacy:
        return None
    correct = (xxh32(buf[start + 4:hc_at]) >> 8) & 0xFF
    return buf[:hc_at] + bytes((correct,)) + buf[hc_at + 1:]


def _unlz4(buf: bytes, cap: int) -> Decompressed:
    import lz4.frame

    out: list[bytes] = []
    total = 0
    rest = buf
    framing = "frame"
    while rest:
        if rest[:4] != _LZ4_MAGIC:
            where = len(buf) - len(rest)
            what = "does not start with" if where == 0 else f"has garbage at byte {where} instead of"
            return Decompressed(b"".join(out), f"lz4: stream {what} an lz4 frame", framing)
        dec = lz4.frame.LZ4FrameDecompressor()
        chunk_size = _CHUNK
        try:
            try:
                chunk = dec.decompress(rest, max_length=min(chunk_size, cap - total + 1))
            except RuntimeError as exc:
                fixed = _fix_legacy_lz4_checksum(rest, 0) if "headerChecksum" in str(exc) else None
                if fixed is None:
                    raise
                framing = "frame, pre-KIP-57 header checksum"
                dec = lz4.frame.LZ4FrameDecompressor()
                chunk = dec.decompress(fixed, max_length=min(chunk_size, cap - total + 1))
            while True:
                out.append(chunk)
                total += len(chunk)
                if total > cap:
                    return Decompressed(b"".join(out)[:cap], _over(cap), framing)
                if dec.eof or not chunk:
                    break
                chunk_size = min(chunk_size * 2, _MAX_CHUNK)
                chunk = dec.decompress(b"", max_length=min(chunk_size, cap - total + 1))
        except RuntimeError as exc:
            return Decompressed(b"".join(out), f"lz4: corrupt frame ({exc})", framing)
        if not dec.eof:
            return Decompressed(b"".join(out), "lz4: frame ends before its end mark (truncated)", framing)
        rest = dec.unused_data
    return Decompressed(b"".join(out), None, framing)


# -- zstd -------------------------------------------------------------------------------

def _zstd_frames_complete(buf: bytes) -> str | None:
    """Walk zstd frame and block headers; return why the stream is incomplete, or None."""
    pos = 0
    n = len(buf)
    while pos < n:
        if n - pos < 4:
            return f"{n - pos} stray bytes after the last frame"
        magic = int.from_bytes(buf[pos:pos + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if pos + 8 > n:
                return "skippable frame header truncated"
            pos += 8 + int.from_bytes(buf[pos + 4:pos + 8], "little")
            if pos > n:
                return "skippable frame truncated"
            continue
        if magic != _ZSTD_MAGIC:
            return f"no zstd frame at byte {pos}"
        if pos + 5 > n:
            return "frame header truncated"
        fhd = buf[pos + 4]
        single = fhd & 0x20
        fcs = (0, 2, 4, 8)[fhd >> 6] or (1 if single else 0)
        pos += 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + fcs
        while True:
            if pos + 3 > n:
                return "stream ends inside a frame (truncated)"
            hdr = int.from_bytes(buf[pos:pos + 3], "little")
            btype = (hdr >> 1) & 3
            size = 1 if btype == 1 else hdr >> 3
            if btype == 3:
                return f"reserved block type at byte {pos}"
            pos += 3 + size
            if pos > n:
                return "stream ends inside a block (truncated)"
            if hdr & 1:
                break
        if fhd & 0x04:
            pos += 4
            if pos > n:
                return "frame checksum truncated"
    return None


def _unzstd(buf: bytes, cap: int) -> Decompressed:
    import zstandard

    out: list[bytes] = []
    total = 0
    chunk_size = _CHUNK
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(buf, read_across_frames=True)
        while True:
            chunk = reader.read(min(chunk_size, cap - total + 1))
            if not chunk:
                break
            out.append(chunk)
            total += len(chunk)
            if total > cap:
                return Decompressed(b"".join(out)[:cap], _over(cap))
            chunk_size = min(chunk_size * 2, _MAX_CHUNK)
    except zstandard.ZstdError as exc:
        return Decompressed(b"".join(out), f"zstd: corrupt stream ({exc})")
    incomplete = _zstd_frames_complete(buf)
    return Decompressed(b"".join(out), f"zstd: {incomplete}" if incomplete else None)
