"""Compressed seed samples for the decompressor targets (from the codec libraries)."""

from __future__ import annotations

import struct

import cramjam
import lz4.frame
import zstandard

from fuzz import wire

_TEXTS = (b"", b"a", b"kafka " * 40, bytes(range(256)) * 4, bytes(5000))


def samples(codec: int) -> list[bytes]:
    out: list[bytes] = []
    for t in _TEXTS:
        if codec == 1:
            out.append(wire.gzip_bytes(t))
        elif codec == 2:
            raw = bytes(cramjam.snappy.compress_raw(t))
            out.append(raw)
            # xerial framing as the Java client writes it
            out.append(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw))
                       + raw)
        elif codec == 3:
            out.append(lz4.frame.compress(t))
            out.append(lz4.frame.compress(t, content_checksum=True, block_linked=False))
        elif codec == 4:
            out.append(zstandard.ZstdCompressor().compress(t))
            out.append(zstandard.ZstdCompressor(write_content_size=False).compress(t))
    if codec in (1, 3, 4):   # decompression bombs: 1 MiB of zeros in a few bytes
        bomb = bytes(1 << 20)
        out.append(wire.gzip_bomb(len(bomb)) if codec == 1 else lz4.frame.compress(bomb)
                   if codec == 3 else zstandard.ZstdCompressor(level=19).compress(bomb))
    return out
