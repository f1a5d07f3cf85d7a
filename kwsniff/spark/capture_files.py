"""The capture files of a ``spark-decode`` run: survey, order, frame numbering, segments.

Contract:

* :func:`survey` opens one file and counts its packets (first/last timestamp, the
  capture layer's problems); an unreadable file gets ``error`` set instead of raising.
* :func:`number_files` orders the readable files by their first packet's time (then
  command-line position: rotated files of one capture come out in capture order whatever
  their names) and gives each a frame ``offset``: the files are numbered as if
  concatenated in that order (``mergecap -a``), so global frame ``offset + n`` is frame
  ``n`` of that file. :func:`locate` maps a global frame back to ``(file, local frame)``.
* :func:`read_segments` yields, for every TCP packet of one file (at most the surveyed
  packet count, so a file still growing cannot overlap the next file's numbers), the
  item ``((connection_key, ts, global_frame), segment)`` where ``connection_key`` is the
  direction-independent 4-tuple (the smaller of the two flow keys) and ``segment`` the
  TCP layer's segment tuple; then one ``((b"", 0.0, 0), ("problem", text))`` per
  link/IP-layer problem. IP fragments are reassembled within a file only.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from kwsniff.capture import open_capture
from kwsniff.errors import CaptureError
from kwsniff.tcp import PacketParser, ProblemLog, TcpOptions
from kwsniff.tcp.packet import reverse_key

PROBLEM_KEY = b""


@dataclass(frozen=True, slots=True)
class CaptureFile:
    """One input file and where its frames sit in the global numbering."""

    position: int                     # 0-based position on the command line
    path: str
    packets: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    problems: tuple[str, ...] = ()
    error: str | None = None          # unreadable: skipped
    rank: int = -1                    # 0-based place in capture order (-1: skipped)
    offset: int = 0                   # global frame = offset + local frame

    @property
    def first_frame(self) -> int:
        return self.offset + 1

    @property
    def last_frame(self) -> int:
        return self.offset + self.packets

    def as_row(self) -> dict[str, Any]:
        return {"capture": self.path, "position": self.position, "rank": self.rank,
                "packets": self.packets,
                "first_frame": self.first_frame if self.packets else None,
                "last_frame": self.last_frame if self.packets else None,
                "first_ts": self.first_ts, "last_ts": self.last_ts,
                "problems": list(self.problems), "error": self.error}


def survey(position: int, path: str) -> CaptureFile:
    """Count the packets of one file (see the module contract)."""
    try:
        with open_capture(path) as source:
            n = 0
            first = last = None
            for packet in source:
                ts = packet[1]
                if first is None:
                    first = ts
                last = ts
                n += 1
            return CaptureFile(position, path, n, first, last, tuple(source.problems))
    except CaptureError as err:
        return CaptureFile(position, path, error=str(err))
    except OSError as err:
        return CaptureFile(position, path, error=f"{path}: {err.strerror or err}")


def number_files(files: list[CaptureFile]) -> list[CaptureFile]:
    """Ranks and frame offsets (see the module contract); unreadable files keep rank -1."""
    readable = sorted((f for f in files if f.error is None),
                      key=lambda f: (f.first_ts is None, f.first_ts or 0.0, f.position))
    out = {}
    offset = 0
    for rank, f in enumerate(readable):
        out[f.position] = replace(f, rank=rank, offset=offset)
        offset += f.packets
    return [out.get(f.position, f) for f in files]


@dataclass
class FrameMap:
    """Global frame -> file lookups (sorted by offset)."""

    files: list[CaptureFile]
    _starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.files = sorted((f for f in self.files if f.rank >= 0 and f.packets),
                            key=lambda f: f.offset)
        self._starts = [f.first_frame for f in self.files]

    def locate(self, frame: int) -> tuple[CaptureFile, int] | None:
        i = bisect.bisect_right(self._starts, frame) - 1
        if i < 0:
            return None
        f = self.files[i]
        if frame > f.last_frame:
            return None
        return f, frame - f.offset

    def capture_of(self, frame: int) -> str:
        found = self.locate(frame)
        return found[0].path if found is not None else ""


def connection_key(flow_key: bytes) -> bytes:
    """The same key for both directions of a 4-tuple."""
    rev = reverse_key(flow_key)
    return flow_key if flow_key <= rev else rev


def read_segments(f: CaptureFile, tcp: TcpOptions | None = None
                  ) -> Iterator[tuple[tuple[bytes, float, int], Any]]:
    """Keyed TCP segments of one file (see the module contract)."""
    opts = tcp or TcpOptions()
    problems = ProblemLog(opts.max_problems)
    parser = PacketParser(problems, defragment=opts.defragment,
                          max_fragmented=opts.max_fragmented,
                          fragment_timeout=opts.fragment_timeout)
    parse = parser.parse
    offset = f.offset
    limit = f.packets
    try:
        with open_capture(f.path) as source:
            for frame, ts, linktype, data, orig_len in source:
                if frame > limit:
                    problems.add(f"{f.path}: more packets than when the run started "
                                 f"({limit}); the rest were skipped (was it still being "
                                 "written?)")
                    break
                g = offset + frame
                seg = parse(g, ts, linktype, data, orig_len)
                if seg is not None:
                    yield (connection_key(seg[0]), ts, g), seg
    except (CaptureError, OSError) as err:
        problems.add(f"{f.path}: {err}")
    parser.finish()
    for text in problems.messages:
        yield (PROBLEM_KEY, 0.0, 0), ("problem", text)
    if problems.dropped:
        yield (PROBLEM_KEY, 0.0, 0), ("problem", f"{f.path}: {problems.dropped} more "
                                                  "packet problems not listed")
