"""Classic pcap files at the byte level, for tests (independent of kwsniff's reader).

:func:`records` lists ``(header, data)`` of every packet record; :func:`split` writes
them into chunks of ``per_file`` packets, named like ``tcpdump -C`` names its files
(``base``, ``base1``, ``base2``, ... so that name order is not capture order past 9).
"""

from __future__ import annotations

import struct
from pathlib import Path

GLOBAL_HEADER = 24
RECORD_HEADER = 16


def _order(head: bytes) -> str:
    magic = head[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return "<"
    if magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        return ">"
    raise ValueError("not a classic pcap file")


def records(path: Path) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    raw = path.read_bytes()
    order = _order(raw)
    out = []
    pos = GLOBAL_HEADER
    while pos + RECORD_HEADER <= len(raw):
        header = raw[pos:pos + RECORD_HEADER]
        caplen = struct.unpack(order + "IIII", header)[2]
        out.append((header, raw[pos + RECORD_HEADER:pos + RECORD_HEADER + caplen]))
        pos += RECORD_HEADER + caplen
    return raw[:GLOBAL_HEADER], out


def record_times(path: Path) -> list[float]:
    head, recs = records(path)
    order = _order(head)
    nano = head[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    out = []
    for header, _ in recs:
        sec, frac = struct.unpack(order + "II", header[:8])
        out.append(sec + frac / (1e9 if nano else 1e6))
    return out


def split(path: Path, directory: Path, per_file: int, base: str = "rotated.pcap") -> list[Path]:
    head, recs = records(path)
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for n, start in enumerate(range(0, len(recs), per_file)):
        target = directory / (base if n == 0 else f"{base}{n}")
        with open(target, "wb") as fh:
            fh.write(head)
            for header, data in recs[start:start + per_file]:
                fh.write(header)
                fh.write(data)
        files.append(target)
    return files
