"""Size-delimited frames out of one direction of a reassembled TCP stream.

Contract:

* A :class:`Framer` is fed the ``StreamData`` chunks and ``StreamGap`` holes of one TCP
  direction, in stream order, and returns complete :class:`Frame` objects (int32 size
  prefix + that many bytes).  It never raises on bad bytes.
* States: ``BUFFERING`` (role/protocol not decided yet: bytes are kept, nothing is cut),
  ``SYNCED`` (the next byte is a frame start) and ``HUNTING`` (looking for the next
  plausible frame start after a gap, an implausible size or a capture that started
  mid-message).  While hunting, a *checker* supplied by the conversation judges each
  candidate start (:data:`NO`, :data:`WEAK`, :data:`STRONG`, :data:`SHORT`); a WEAK start is
  accepted once it chains into :data:`CHAIN_CONFIRM` plausible frames (a frame that
  begins and ends exactly on TCP segment boundaries counts twice; chained frames must
  carry growing ids at ``seq_offset``, i.e. correlation ids), into a STRONG frame, or
  into the end of the stream (for the stream's first frame, also into too few bytes
  before the end to tell: a lone request with bytes after it, then not on probation) -- unless a start the checker vouches for (STRONG) lies
  inside the frame it claims, which refutes it (so a false start cannot stall hunting
  or swallow real frames).  After accepting a start, complete frames that end exactly
  on it are recovered from the skipped region (so orphan responses right after a gap are
  not lost).  Unless the checker vouched for the accepted frame itself (STRONG), the next
  :data:`PROBATION` frames are checked again and held back: if one is implausible, the
  accepted start was wrong and hunting resumes just after it, so a false start never
  produces frames.  If the stream stops (hole or end) before a frame after the accepted
  one could be checked, the held frame is dropped as skipped unless the checker now
  vouches for it or it is plausible and exactly fills whole TCP segments.
* Bytes that belong to no frame are reported in :attr:`Frame.skipped_before` of the next
  frame and in :attr:`Framer.skipped_bytes`; holes in the capture are counted separately
  in :attr:`Framer.gap_bytes`.
* A gap inside a frame whose size is known does not lose sync: the frame is emitted with
  the bytes before the hole and :attr:`Frame.missing` set, and framing continues after it.
  Bytes of that frame captured after the hole are not kept; :attr:`Frame.discarded` counts
  them (they are part of ``missing``), so an owner that drops the frame can count every
  captured byte of it as skipped.
* Memory: a frame is buffered until complete (at most ``max_frame`` bytes); hunting keeps
  at most ``window`` bytes (older bytes are dropped and counted as skipped).
"""

from __future__ import annotations

import re
import struct
from collections import deque
from typing import Any, Callable

from kwsniff import _compiled

_I32 = struct.Struct(">i")

#: what :meth:`Framer.data` returns when the bytes only extended a partial frame (no
#: frame cut, :meth:`Framer.open_key` unchanged); empty, so callers may treat it as []
QUIET: tuple = ()

# checker verdicts
NO = 0
WEAK = 1
STRONG = 2
SHORT = 3          # not enough bytes yet to judge
CERTAIN = 4        # (internal) the checker itself vouched for the frame: no probation

BUFFERING = 0
SYNCED = 1
HUNTING = 2
FILLING = 3        # discarding the rest of a frame damaged by a gap

#: plausible frames in a row that confirm a WEAK start
CHAIN_CONFIRM = 3
#: how far back from an accepted start the framer looks for complete skipped frames
BACKFILL_LIMIT = 1 << 20
#: frames checked (and held back) after a resynchronisation before it is trusted
PROBATION = 3
#: how far apart consecutive ids (correlation ids) of chained frames may be
SEQ_SPREAD = 1_000_000

Checker = Callable[[bytearray, int, int], "tuple[int, int]"]

_NONZERO = re.compile(rb"[^\x00]")
_ZERO4 = b"\x00\x00\x00\x00"


def _candidate(buf: bytearray, p: int, lim: int) -> int:
    """Next index >= ``p`` (below ``lim``) where a frame may start, or -1: the size's top
    byte is 0 (frames under 16 MiB) and the size is not 0 (runs of zero bytes are
    skipped in one step)."""
    while True:
        p = buf.find(b"\x00", p, lim)
        if p < 0:
            return -1
        if not buf.startswith(_ZERO4, p):
            return p
        m = _NONZERO.search(buf, p, lim)
        if m is None:
            return -1
        p = max(p + 1, m.start() - 3)


class Frame:
    """One size-delimited frame; ``raw`` excludes the 4-byte size prefix. Holds bytes
    and numbers only. Constructor: ``Frame(raw, offset, frame_first, frame_last,
    ts_first, ts_last, missing=0, skipped_before=0)``; ``discarded`` starts at 0.
    (Compiled, ``framing.pxd`` makes it an extension type with the same attributes.)"""

    __slots__ = ("raw", "offset", "frame_first", "frame_last", "ts_first", "ts_last",
                 "missing", "skipped_before", "discarded")

    def __init__(self, raw: bytes, offset: int, frame_first: int, frame_last: int,
                 ts_first: float, ts_last: float, missing: int = 0, skipped_before: int = 0) -> None:
        self.raw = raw
        self.offset = offset                # stream offset of the size prefix
        self.frame_first = frame_first
        self.frame_last = frame_last
        self.ts_first = ts_first
        self.ts_last = ts_last
        self.missing = missing              # bytes of the frame lost in a capture gap
        self.skipped_before = skipped_before  # unframed bytes dropped just before this frame
        self.discarded = 0                  # bytes of missing that were captured after a hole

    def __repr__(self) -> str:
        return (f"Frame(len={len(self.raw)}, offset={self.offset}, frames={self.frame_first}-"
                f"{self.frame_last}, missing={self.missing}, skipped_before={self.skipped_before})")


def _whole_frame(raw: bytes, offset: int, frame: int, ts: float, skipped_before: int) -> Frame:
    """``Frame(raw, offset, frame, frame, ts, ts, 0, skipped_before)`` (the frames
    :meth:`Framer._fast` cuts; compiled, without the constructor's argument parsing)."""
    f = Frame.__new__(Frame)
    f.raw = raw
    f.offset = offset
    f.frame_first = frame
    f.frame_last = frame
    f.ts_first = ts
    f.ts_last = ts
    f.missing = 0
    f.skipped_before = skipped_before
    f.discarded = 0
    return f


#: the C kernel's frame scan (``frame_bodies(data, max_frame) -> (bodies, pos)``), or
#: None: :func:`_frame_bodies_py`
_kernel = _compiled.kernel("kwsniff.kafka._frames")


def _frame_bodies_py(data: bytes | memoryview, max_frame: int) -> tuple[list[bytes], int]:
    """The bodies (no size prefix) of the complete frames at the start of ``data``, one
    after the other, and the index where the scan stopped (the end, a partial frame, or
    a size below 0 or above ``max_frame``)."""
    bodies: list[bytes] = []
    n = len(data)
    pos = 0
    unpack = _I32.unpack_from
    while n - pos >= 4:
        size = unpack(data, pos)[0]
        if size < 0 or size > max_frame:
            break
        end = pos + 4 + size
        if end > n:
            break
        bodies.append(bytes(data[pos + 4:end]))
        pos = end
    return bodies, pos


_frame_bodies: Any = _kernel.frame_bodies if _kernel is not None else _frame_bodies_py


def _frames_at(bodies: list[bytes], offset: int, frame: int, ts: float,
               skip: int) -> list[Frame]:
    """The frames of ``bodies`` (consecutive, the first at stream ``offset``; see
    :func:`_frame_bodies_py`), all from one capture ``frame`` at ``ts``; the first with
    ``skip`` bytes skipped before it."""
    out: list[Frame] = []
    for raw in bodies:
        out.append(_whole_frame(raw, offset, frame, ts, skip))
        skip = 0
        offset += 4 + len(raw)
    return out


class _LazyBounds:
    """``(segment starts, segment ends)`` as buffer indexes, computed on first index."""

    __slots__ = ("framer", "value")

    def __init__(self, framer: Framer) -> None:
        self.framer = framer
        self.value: tuple[set[int], set[int]] | None = None

    def __getitem__(self, i: int) -> set[int]:
        if self.value is None:
            self.value = self.framer._seg_bounds()
        return self.value[i]


class Framer:
    """Cuts one TCP direction into frames; see the module docstring for the contract."""

    __slots__ = ("buf", "pos", "base", "segs", "state", "check", "max_frame", "window",
                 "scan", "skipped_bytes", "gap_bytes", "gaps", "_pending_skip", "problems",
                 "_fill_end", "_fill_frame", "last_offset", "frames_cut", "resyncs",
                 "first_offset", "probation", "held", "held_start", "seq_offset", "_look",
                 "want_end", "guard")

    def __init__(self, check: Checker, max_frame: int = 100 << 20, window: int = 4 << 20) -> None:
        self.buf = bytearray()
        self.pos = 0                # index in buf of the first unconsumed byte
        self.base = 0               # stream offset of buf[0]
        self.segs: deque[list] = deque()   # [start_offset, end_offset, frame, ts]
        self.state = BUFFERING
        self.check = check
        self.max_frame = max_frame
        self.window = window
        self.scan = 0               # hunting: buffer index to resume scanning at
        self.skipped_bytes = 0
        self.gap_bytes = 0
        self.gaps = 0
        self.resyncs = 0
        self._pending_skip = 0
        self.problems: list[str] = []   # drained by the owner
        self._fill_end = 0
        self._fill_frame: Frame | None = None
        self.last_offset: int | None = None   # stream offset expected next (None: nothing yet)
        self.frames_cut = 0
        self.first_offset: int | None = None  # stream offset of the first byte or hole seen
        self.probation = 0          # frames still to check after a resynchronisation
        # set by the owner: guard(buf, pos, end) -> True when the bytes at pos cannot
        # start a message; asked once per frame that spans segments (where a wrong size
        # would swallow the frames after it), so a bad size makes the framer hunt
        self.guard: Any = None
        self.held: list[Frame] = []  # frames cut during probation, released when it passes
        self.held_start = 0         # buffer index of the accepted resynchronisation point
        self.seq_offset: int | None = None  # where a chained frame's growing id sits (corr id)
        self._look: tuple[int, int] | None = None  # (claim start, next byte to examine)
        # stream offset where the partial frame at buf[pos] ends when SYNCED outside
        # probation, else 0: data ending before it only extends that frame (see data())
        self.want_end = 0

    # ------------------------------------------------------------------ input
    def data(self, offset: int, data: bytes | memoryview, frame: int, ts: float) -> list[Frame]:
        """Add stream bytes; return the frames completed by them (:data:`QUIET` when
        the bytes only extend the partial frame: :meth:`extend`)."""
        if self.extend(offset, data, frame, ts):
            return QUIET
        n = len(data)
        if n == 0:
            return []
        if self.last_offset is None:
            self.base = offset
            self.first_offset = offset
        elif offset != self.last_offset:
            if offset > self.last_offset:
                out = self.gap(self.last_offset, offset - self.last_offset, frame, ts)
            else:                                  # overlap: keep only the new part
                cut = self.last_offset - offset
                if cut >= n:
                    return []
                data = data[cut:]
                offset += cut
                n -= cut
                out = []
            out.extend(self.data(offset, data, frame, ts))
            return out
        self.last_offset = offset + n
        self.want_end = 0
        state = self.state
        if state == SYNCED and self.pos == len(self.buf) and not self.probation:
            return self._fast(offset, data, frame, ts)
        if state == FILLING:
            return self._fill(offset, data, frame, ts)
        self.buf += data
        self.segs.append([offset, offset + n, frame, ts])
        if state == SYNCED:
            return self._cut()
        if state == HUNTING:
            return self._hunt(False)
        return []

    def extend(self, offset: int, data: bytes | memoryview, frame: int, ts: float) -> bool:
        """Take ``data`` if it only extends the partial frame (the next bytes, ending
        before it does; nothing to cut, :meth:`open_key` unchanged): returns True; else
        changes nothing and returns False."""
        end = offset + len(data)
        if end >= self.want_end or offset != self.last_offset or end == offset:
            return False
        self.last_offset = end
        self.buf += data
        self.segs.append([offset, end, frame, ts])
        return True

    def gap(self, offset: int, length: int, frame: int, ts: float) -> list[Frame]:
        """``length`` bytes at ``offset`` will never arrive."""
        self.want_end = 0
        if length <= 0:
            return []
        out: list[Frame] = self._settle()
        self.gaps += 1
        self.gap_bytes += length
        resume = offset + length
        if self.last_offset is None:
            self.first_offset = offset
            self.base = resume
            self.last_offset = resume
            if self.state == SYNCED:
                self.state = HUNTING
            return out
        if self.state == HUNTING:
            # judge what we have as if the stream ended at the hole; a start found there
            # leaves us SYNCED inside a frame the hole cuts, handled below
            out.extend(self._hunt(True))
            out.extend(self._settle())
            if self.state == HUNTING:
                self._drop_all(count=True)
        state = self.state
        if state == BUFFERING:
            # keep nothing from before the hole: the decision will be made on what follows
            self._drop_all(count=True)
        elif state == FILLING:
            fill = self._fill_frame
            assert fill is not None
            if resume > self._fill_end:   # the hole runs past the damaged frame
                self._fill_frame = None
                fill.ts_last = ts
                out.append(fill)
                self._drop_all(count=False)
                self.state = HUNTING
        elif state == SYNCED:
            avail = len(self.buf) - self.pos
            if avail >= 4:
                size = _I32.unpack_from(self.buf, self.pos)[0]
                start = self.base + self.pos
                end = start + 4 + size
                head = bytes(self.buf[self.pos + 4:])
                ff, tf = self._locate(start)
                fr = Frame(head, start, ff, frame, tf, ts, missing=size - len(head),
                           skipped_before=self._take_skip())
                self.problems.append(
                    f"frame {frame}: {length} bytes missing from the capture inside a "
                    f"{size}-byte message at stream offset {start}")
                self._drop_all(count=False)
                if resume < end:
                    self.state = FILLING
                    self._fill_end = end
                    self._fill_frame = fr
                else:
                    out.append(fr)
                    self.state = HUNTING
            else:
                self._drop_all(count=True)
                self.state = HUNTING
        self.base = resume
        self.last_offset = resume
        self.scan = 0
        return out

    def finish(self) -> list[Frame]:
        """End of stream: flush what can be flushed, report the rest."""
        self.want_end = 0
        out: list[Frame] = self._settle()
        if self.state == HUNTING:
            out.extend(self._hunt(True))
            out.extend(self._settle())
        if self.state == FILLING and self._fill_frame is not None:
            out.append(self._fill_frame)
            self._fill_frame = None
        elif self.state == SYNCED and len(self.buf) - self.pos >= 4:
            size = _I32.unpack_from(self.buf, self.pos)[0]
            start = self.base + self.pos
            head = bytes(self.buf[self.pos + 4:])
            ff, tf = self._locate(start)
            fl, tl = self._locate(self.base + len(self.buf) - 1)
            out.append(Frame(head, start, ff, fl, tf, tl, missing=size - len(head),
                             skipped_before=self._take_skip()))
            self.problems.append(
                f"frame {fl}: capture ends inside a {size}-byte message "
                f"({size - len(head)} bytes missing)")
            self.pos = len(self.buf)
        rest = len(self.buf) - self.pos
        if rest:
            self.skipped_bytes += rest
            self._pending_skip += rest
        self.buf = bytearray()
        self.pos = 0
        self.segs.clear()
        return out

    # --------------------------------------------------------------- control
    def start(self, synced: bool) -> list[Frame]:
        """Leave BUFFERING: cut frames from the start (synced) or hunt for a boundary."""
        if self.state != BUFFERING:
            return []
        self.want_end = 0
        self.state = SYNCED if synced else HUNTING
        self.scan = self.pos
        if not self.buf:
            return []
        return self._cut() if synced else self._hunt(False)

    def buffered(self) -> memoryview:
        """The bytes held while BUFFERING (for detection); valid until the next call."""
        return memoryview(self.buf)[self.pos:]

    def first_frame_number(self) -> int | None:
        """Capture frame of the oldest byte still buffered (None when nothing is)."""
        k = self.open_key()
        return k[0] if k is not None else None

    def open_key(self) -> tuple[int, int] | None:
        """``(capture frame, stream offset)`` of the oldest byte that may still start a
        frame (a partial frame, bytes being hunted or buffered), or None."""
        if self._fill_frame is not None:
            return (self._fill_frame.frame_first, self._fill_frame.offset)
        if self.held:
            return (self.held[0].frame_first, self.held[0].offset)
        if self.pos < len(self.buf) and self.segs:
            off = self.base + self.pos
            return (self._locate(off)[0], off)
        return None

    def discard(self) -> None:
        """Forget everything buffered (connection ignored)."""
        self.want_end = 0
        self.buf = bytearray()
        self.pos = 0
        self.segs.clear()

    def take_skip(self) -> int:
        """Skipped bytes not yet attributed to a frame (reported at finish)."""
        return self._take_skip()

    # --------------------------------------------------------------- internal
    def _take_skip(self) -> int:
        n = self._pending_skip
        self._pending_skip = 0
        return n

    def _drop_all(self, count: bool) -> None:
        self.want_end = 0
        rest = len(self.buf) - self.pos
        if count and rest:
            self.skipped_bytes += rest
            self._pending_skip += rest
        self.buf = bytearray()
        self.pos = 0
        self.segs.clear()

    def _skip_to(self, index: int) -> None:
        n = index - self.pos
        if n > 0:
            self.skipped_bytes += n
            self._pending_skip += n
        self.pos = index

    def _locate(self, offset: int) -> tuple[int, float]:
        """Capture frame and timestamp of the segment holding stream ``offset``."""
        segs = self.segs
        for seg in segs:
            if seg[1] > offset:
                return seg[2], seg[3]
        if segs:
            last = segs[-1]
            return last[2], last[3]
        return 0, 0.0

    def _trim_segs(self) -> None:
        consumed = self.base + (min(self.pos, self.held_start) if self.probation else self.pos)
        segs = self.segs
        while segs and segs[0][1] <= consumed:
            segs.popleft()

    def _compact(self) -> None:
        if self.probation:
            return                  # a rollback may need the bytes since held_start
        pos = self.pos
        if pos == len(self.buf):
            self.buf = bytearray()
            self.base += pos
            self.pos = 0
            self.scan = 0
        elif pos > 65536 and pos * 2 > len(self.buf):
            del self.buf[:pos]
            self.base += pos
            self.scan = max(0, self.scan - pos)
            self.pos = 0

    def _fast(self, offset: int, data: bytes | memoryview, frame: int, ts: float) -> list[Frame]:
        """SYNCED with an empty buffer: cut frames straight out of ``data``."""
        n = len(data)
        max_frame = self.max_frame
        bodies, pos = _frame_bodies(data, max_frame)
        if bodies:
            out = _frames_at(bodies, offset, frame, ts, self._pending_skip)
            self._pending_skip = 0
            self.frames_cut += len(out)
        else:
            out = []
        if pos < n:
            self.buf = bytearray(data[pos:])
            self.base = offset + pos
            self.pos = 0
            self.segs.append([offset, offset + n, frame, ts])
            if n - pos >= 4:
                size = _I32.unpack_from(self.buf, 0)[0]
                if size < 0 or size > max_frame:
                    self._lost_sync(size)
                    out.extend(self._hunt(False))
                elif self.guard is not None and self.guard(self.buf, 0, n - pos):
                    self._lost_sync(size, "no message header after the size")
                    out.extend(self._hunt(False))
                else:
                    self.want_end = offset + pos + 4 + size
        else:
            self.base = offset + n
        return out

    def _lost_sync(self, size: int, why: str = "") -> None:
        frame, _ = self._locate(self.base + self.pos)
        self.problems.append(
            f"frame {frame}: implausible message size {size} at stream offset "
            f"{self.base + self.pos}{' (' + why + ')' if why else ''}; resynchronising")
        self.state = HUNTING
        self.scan = self.pos

    def _emit(self, start: int, size: int) -> Frame:
        """Frame at buffer index ``start`` of ``size`` bytes (complete in buf)."""
        buf = self.buf
        soff = self.base + start
        ff, tf = self._locate(soff)
        fl, tl = self._locate(soff + 3 + size)
        # one copy (slicing the bytearray first would copy the frame twice)
        raw = bytes(memoryview(buf)[start + 4:start + 4 + size])
        fr = Frame(raw, soff, ff, fl, tf, tl, 0, self._take_skip())
        self.frames_cut += 1
        return fr

    def _cut(self) -> list[Frame]:
        out: list[Frame] = []
        buf = self.buf
        n = len(buf)
        max_frame = self.max_frame
        while n - self.pos >= 4:
            size = _I32.unpack_from(buf, self.pos)[0]
            if size < 0 or size > max_frame:
                if self.probation:
                    out.extend(self._rollback(f"implausible message size {size}"))
                    return out
                self._lost_sync(size)
                out.extend(self._hunt(False))
                return out
            if self.probation:
                verdict = self.check(buf, self.pos, n)[0]
                if verdict == SHORT:
                    break
                if verdict == NO:
                    out.extend(self._rollback("an implausible message header"))
                    return out
            if n - self.pos < 4 + size:
                if not self.probation:
                    if self.guard is not None and self.guard(buf, self.pos, n):
                        self._lost_sync(size, "no message header after the size")
                        out.extend(self._hunt(False))
                        return out
                    self.want_end = self.base + self.pos + 4 + size
                break
            fr = self._emit(self.pos, size)
            self.pos += 4 + size
            if self.probation:
                self.held.append(fr)
                self.probation -= 1
                if not self.probation:
                    out.extend(self._release())
            else:
                out.append(fr)
            self._trim_segs()
        self._compact()
        return out

    def _release(self) -> list[Frame]:
        """End probation: the held frames are real."""
        held = self.held
        self.held = []
        self.probation = 0
        return held

    def _settle(self) -> list[Frame]:
        """The stream stops (hole or end) during probation: keep the held frames only if
        a frame after the accepted start was checked too, else drop them as skipped; then
        cut the whole frames after them that the probation's check left uncut (SHORT: it
        wanted bytes that will not come)."""
        if not self.probation:
            return []
        out = self._end_probation()
        if self.state == SYNCED:
            # (a size that turns out implausible leaves the rest to be counted as skipped)
            out.extend(self._cut())
        return out

    def _end_probation(self) -> list[Frame]:
        """:meth:`_settle`'s verdict on the held frames: released, or dropped as skipped."""
        held = self.held
        if len(held) >= 2:
            return self._release()
        if held:
            start = self.held_start
            verdict = self.check(self.buf, start, len(self.buf))[0]
            if verdict == STRONG:
                return self._release()      # what is known now vouches for it
            starts, ends = self._seg_bounds()
            if verdict == WEAK and start in starts and start + 4 + len(held[0].raw) in ends:
                return self._release()      # a plausible frame that fills whole segments
        self.held = []
        self.probation = 0
        n = sum(4 + len(h.raw) for h in held)
        if n:
            self.skipped_bytes += n
            self._pending_skip += n + sum(h.skipped_before for h in held)
            self.problems.append(
                f"frame {held[0].frame_first}: {n} bytes framed after a resynchronisation "
                "were dropped: the stream stopped before the new start could be confirmed")
        return []

    def _rollback(self, why: str) -> list[Frame]:
        """Probation failed: the resynchronisation point was wrong; hunt again after it."""
        start = self.held_start
        frame, _ = self._locate(self.base + start)
        self.problems.append(
            f"frame {frame}: {why} follows the resynchronisation point at stream offset "
            f"{self.base + start}; resynchronising again")
        for h in self.held:
            self._pending_skip += h.skipped_before
        self.held = []
        self.probation = 0
        self.pos = start
        self.scan = start + 1
        self.state = HUNTING
        return self._hunt(False)

    def _fill(self, offset: int, data: bytes | memoryview, frame: int, ts: float) -> list[Frame]:
        """Discard the rest of a gap-damaged frame, then go back to SYNCED."""
        end = offset + len(data)
        fill_end = self._fill_end
        fr = self._fill_frame
        assert fr is not None
        if end <= fill_end:
            fr.discarded += len(data)
            self.base = end
            return []
        fr.discarded += fill_end - offset
        fr.frame_last = frame
        fr.ts_last = ts
        self._fill_frame = None
        self.state = SYNCED
        self.buf = bytearray()
        self.pos = 0
        self.segs.clear()
        self.base = fill_end
        self.last_offset = fill_end
        rest = data[fill_end - offset:]
        out = [fr]
        out.extend(self.data(fill_end, rest, frame, ts))
        return out

    # ---------------------------------------------------------------- hunting
    def _seg_bounds(self) -> tuple[set[int], set[int]]:
        base = self.base
        starts = {s[0] - base for s in self.segs}
        ends = {s[1] - base for s in self.segs}
        return starts, ends

    def _lazy_bounds(self) -> _LazyBounds:
        """:meth:`_seg_bounds`, made on first use: hunting through bytes where no frame
        header is plausible never needs them (building them per chunk would cost time
        quadratic in the chunks held)."""
        return _LazyBounds(self)

    def _judge(self, p: int, end: int, final: bool,
               bounds: _LazyBounds) -> int:
        """Verdict on a frame start at buffer index ``p``: CERTAIN or STRONG (accept), NO,
        SHORT (wait for more bytes)."""
        verdict, size = self.check(self.buf, p, end)
        if verdict == STRONG:
            return CERTAIN
        if verdict == SHORT:
            if final:
                return NO
            return NO if size and self._refuted(p, size, end) else SHORT
        if verdict != WEAK or size > self.window:
            return NO
        result = self._chain(p, size, end, final, bounds)
        if result != NO and self._refuted(p, size, end):
            return NO
        return result

    def _chain(self, p: int, size: int, end: int, final: bool,
               bounds: _LazyBounds) -> int:
        """Follow the frames chained after a WEAK start at ``p``."""
        buf = self.buf
        check = self.check
        q = p + 4 + size
        chain = 2 if p in bounds[0] and q in bounds[1] else 1
        seq_off = self.seq_offset
        prev = _I32.unpack_from(buf, p + seq_off)[0] if seq_off is not None and \
            p + seq_off + 4 <= end else None
        while True:
            if q == end:
                return STRONG if final else SHORT
            if q > end:
                return NO if final else SHORT
            v2, size2 = check(buf, q, end)
            if v2 == STRONG:
                return STRONG
            if v2 == SHORT:
                if final:
                    # a plausible header whose frame the end of the bytes cuts: as good
                    # as a chain that ends exactly there
                    if size2 > 0:
                        return STRONG
                    # too few bytes left to tell: after the stream's very first frame
                    # (a lone request with trailing bytes), that frame is real
                    return CERTAIN if self.base + p == self.first_offset and \
                        not self.gap_bytes else NO
                return SHORT
            if v2 != WEAK or size2 > self.window:
                return NO
            if prev is not None and seq_off is not None:
                if q + seq_off + 4 > end:
                    return NO if final else SHORT
                nxt = _I32.unpack_from(buf, q + seq_off)[0]
                if not prev < nxt <= prev + SEQ_SPREAD:
                    return NO
                prev = nxt
            chain += 1
            if chain >= CHAIN_CONFIRM:
                return STRONG
            q += 4 + size2

    def _refuted(self, p: int, size: int, end: int) -> bool:
        """Whether a start the checker vouches for (STRONG) lies inside the frame claimed
        at ``p`` -- then ``p`` is not a frame start.  Scans each byte once per claim."""
        lim = min(end, p + 4 + size)
        look = self._look
        q = look[1] if look is not None and look[0] == p else p + 1
        buf = self.buf
        check = self.check
        resume = -1
        while q < lim:
            q = _candidate(buf, q, lim)
            if q < 0:
                break
            v = check(buf, q, end)[0]
            if v == STRONG:
                self._look = None
                return True
            if v == SHORT and resume < 0:
                resume = q
            q += 1
        self._look = (p, resume if resume >= 0 else max(p + 1, lim - 16))
        return False

    def _hunt(self, final: bool) -> list[Frame]:
        out: list[Frame] = []
        buf = self.buf
        end = len(buf)
        p = max(self.scan, self.pos)
        bounds = self._lazy_bounds()
        while p < end:
            if end - p < 4:
                break
            p = _candidate(buf, p, end)
            if p < 0:
                p = end
                break
            verdict = self._judge(p, end, final, bounds)
            if verdict == STRONG or verdict == CERTAIN:
                out.extend(self._accept(p, bounds, verdict == CERTAIN))
                out.extend(self._cut())
                return out
            if verdict == SHORT:
                self.scan = p
                self._bound_window()
                return out
            p += 1
        # nothing found in what we have
        self.scan = max(self.pos, end - 3) if not final else end
        if final:
            self._skip_to(end)
            self._trim_segs()
            self._compact()
        else:
            self._bound_window()
        return out

    def _bound_window(self) -> None:
        excess = (len(self.buf) - self.pos) - self.window
        if excess > 0:
            self._skip_to(self.pos + excess)
            self.scan = max(self.scan, self.pos)
            self._trim_segs()
            self._compact()

    def _accept(self, p: int, bounds: _LazyBounds, certain: bool = False) -> list[Frame]:
        """Sync at buffer index ``p``; recover complete frames that end exactly at ``p``."""
        self.state = SYNCED
        self.resyncs += 1
        out: list[Frame] = []
        start = self.pos
        if p > start:
            chain = self._backfill(max(start, p - BACKFILL_LIMIT), p)
            if chain:
                self._skip_to(chain[0])
                for q in chain:
                    size = _I32.unpack_from(self.buf, q)[0]
                    out.append(self._emit(q, size))
                    self.pos = q + 4 + size
            else:
                self._skip_to(p)
            skipped = out[0].skipped_before if out else self._pending_skip
            if skipped:
                fr_no, _ = self._locate(self.base + start)
                self.problems.append(
                    f"frame {fr_no}: resynchronised after skipping {skipped} bytes "
                    f"at stream offset {self.base + start}")
        self.pos = p
        self.scan = p
        self.probation = 0 if certain else PROBATION
        self.held_start = p
        self._trim_segs()
        return out

    def _backfill(self, lo: int, p: int) -> list[int]:
        """Starts of the longest chain of plausible frames in [lo, p) ending exactly at p."""
        buf = self.buf
        check = self.check
        q = lo
        while q < p - 3:
            q = _candidate(buf, q, p)
            if q < 0:
                return []
            chain: list[int] = []
            r = q
            while r < p:
                verdict, size = check(buf, r, p)
                if verdict not in (WEAK, STRONG):
                    break
                chain.append(r)
                r += 4 + size
            if r == p and chain:
                return chain
            q += 1
        return []
