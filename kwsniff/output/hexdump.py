"""Hex dumps of Kafka frames, in the layout of ``tshark -x``.

Contract:

* :func:`frame_bytes` returns a frame exactly as it crossed the wire: the 4-byte
  big-endian size prefix followed by ``raw``. Offsets in dumps and in the detail
  tree's byte ranges are positions in these bytes (0 = first byte of the size prefix).
* :func:`hexdump_lines` yields one line per 16 bytes::

      0000  00 00 00 2a 00 00 00 09  00 00 00 07 00 0a 72 64   ...*..........rd

  Non-printable bytes show as ``.`` in the ASCII column. With ``highlight=(start, end)``
  and a :class:`~kwsniff.output.color.Palette`, bytes in that half-open range are shown
  emphasised (the TUI and ``-x`` with a selected field use it).
* ``limit`` caps the number of bytes dumped; a final line says how many were left out
  (``... N more bytes not shown``, followed by ``more`` when given).
"""

from __future__ import annotations

from collections.abc import Iterator

from kwsniff.output.color import Palette

_PRINTABLE = bytes(b if 0x20 <= b < 0x7F else 0x2E for b in range(256))
_HEX = [f"{b:02x}" for b in range(256)]


def frame_bytes(raw: bytes | memoryview, size: int | None = None) -> bytes:
    """The frame as captured: 4-byte big-endian size prefix + ``raw``.

    ``size`` is the frame's size on the wire including the prefix (``KafkaMessage.size``);
    it differs from ``len(raw) + 4`` when bytes were lost in a capture gap.
    """
    length = (size - 4) if size is not None else len(raw)
    return (length & 0xFFFFFFFF).to_bytes(4, "big", signed=False) + bytes(raw)


def hexdump_lines(data: bytes | memoryview, *, base: int = 0, limit: int | None = None,
                  highlight: tuple[int, int] | None = None,
                  palette: Palette | None = None, more: str = "") -> Iterator[str]:
    """Yield ``tshark -x`` style lines for ``data``; offsets start at ``base``."""
    data = bytes(data)
    total = len(data)
    shown = total if limit is None else max(0, min(limit, total))
    width = max(4, len(f"{base + max(shown - 1, 0):x}"))
    hl = highlight if (highlight and palette and palette.enabled) else None
    for start in range(0, shown, 16):
        chunk = data[start:min(start + 16, shown)]
        if hl is None:
            ascii_col = chunk.translate(_PRINTABLE).decode("ascii")
            if len(chunk) > 8:
                hex_col = f"{chunk[:8].hex(' ')}  {chunk[8:].hex(' ')}"
            else:
                hex_col = chunk.hex(" ") + " "
            hex_col += "   " * (16 - len(chunk))
            yield f"{base + start:0{width}x}  {hex_col}   {ascii_col}"
            continue
        else:
            hexes = []
            chars = []
            for i, b in enumerate(chunk):
                pos = start + i
                h, c = _HEX[b], chr(_PRINTABLE[b])
                if hl[0] <= pos < hl[1]:
                    h, c = palette.highlight(h), palette.highlight(c)
                hexes.append(h)
                chars.append(c)
            ascii_col = "".join(chars)
        pad = 16 - len(chunk)
        left = " ".join(hexes[:8])
        right = " ".join(hexes[8:])
        hex_col = f"{left}  {right}" if right else left
        hex_col += "   " * pad + (" " if len(chunk) <= 8 else "")
        yield f"{base + start:0{width}x}  {hex_col}   {ascii_col}"
    if shown < total:
        yield f"... {total - shown} more bytes not shown{more}"


def hexdump(data: bytes | memoryview, **kwargs: object) -> str:
    """The dump of :func:`hexdump_lines` as one string (no trailing newline)."""
    return "\n".join(hexdump_lines(data, **kwargs))  # type: ignore[arg-type]
