"""Capture-order release of exchanges (the reorder buffer).

Contract:

* Every exchange has an order key ``(frame, stream, direction, stream_offset)`` of the
  first byte of its first message (request, or response for an orphan).  Keys are
  unique and sort in capture order.
* Owners (conversations) declare the smallest key they may still produce with
  :meth:`Reorderer.set_open` (a waiting request, a partly received frame, undecided
  bytes), or None.  :meth:`Reorderer.drain` releases ready exchanges whose key is below
  every open key, assigning 1-based indexes in release order.
* Bound: when more than ``limit`` exchanges are waiting, or their frames (request and
  response bytes, :func:`frame_bytes`) hold more than ``byte_limit`` bytes in all
  (:attr:`Reorderer.held`: one slow request must not keep a busy capture's frames behind
  it in memory), :meth:`drain` calls the ``force`` callback of the owner holding the
  smallest open key (which stops waiting on its oldest item for the order: a request
  keeps waiting out of capture order, other items are given up) until the buffer fits;
  an exchange that still arrives with a key below one already released is released at
  once with the problem "released out of capture order".
* ``ready`` (the heap of waiting exchanges) is true exactly when exchanges wait. Its
  items are flat tuples ``(*key, seq, exchange)`` and those of ``marks`` (the owners'
  open keys) ``(*key, version, owner)``: the heaps compare ints, not nested tuples.
"""

from __future__ import annotations

from heapq import heapify
from typing import Any, Callable

from kwsniff.kafka.model import Exchange

Key = tuple

# positions in the heaps' flat items (after the four parts of the key)
_VERSION = 4
_OWNER = _ITEM = 5
#: the parts of a heap item that order it: the key's four and the sequence or version
#: number (unique, so the item's last part, an exchange or owner, is never compared)
_ORDER = 5


#: frame bytes the waiting exchanges may hold (``Reorderer.byte_limit``'s default)
BYTE_LIMIT = 128 << 20


def frame_bytes(exchange: Exchange) -> int:
    """The bytes of ``exchange``'s frames (request and response) that waiting holds."""
    n = 0
    msg = exchange.request
    if msg is not None and msg.raw is not None:
        n = len(msg.raw)
    msg = exchange.response
    if msg is not None and msg.raw is not None:
        n += len(msg.raw)
    return n


def _less(a: tuple, b: tuple) -> bool:
    """``a < b`` for two heap items (see :data:`_ORDER`), as tuple comparison says;
    compiled, the parts are compared as C integers."""
    for i in range(_ORDER):
        x = a[i]
        y = b[i]
        if x != y:
            return x < y
    return False


def _at_or_after(item: tuple, key: tuple) -> bool:
    """``item >= key`` for a heap item and an order key (four parts): an item whose
    key equals ``key`` is after it, as tuple comparison says."""
    for i in range(4):
        x = item[i]
        y = key[i]
        if x != y:
            return x > y
    return True


def _sift_up(heap: list, pos: int, item: tuple) -> None:
    """Put ``item`` at ``pos`` of ``heap`` or above it, moving the greater parents down
    (heapq's ``_siftdown`` with :func:`_less`)."""
    while pos > 0:
        parent_pos = (pos - 1) >> 1
        parent = heap[parent_pos]
        if not _less(item, parent):
            break
        heap[pos] = parent
        pos = parent_pos
    heap[pos] = item


def _push(heap: list, item: tuple) -> None:
    """heapq's push with :func:`_less` (the same heap invariant)."""
    heap.append(item)
    _sift_up(heap, len(heap) - 1, item)


def _pop(heap: list) -> tuple:
    """heapq's pop with :func:`_less` (the same heap invariant and result)."""
    last = heap.pop()
    n = len(heap)
    if not n:
        return last
    top = heap[0]
    # (as heapq: move the smaller child up to a leaf, then the last item up from there)
    pos = 0
    child = 1
    while child < n:
        right = child + 1
        if right < n and not _less(heap[child], heap[right]):
            child = right
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    _sift_up(heap, pos, last)
    return top


class Reorderer:
    __slots__ = ("ready", "marks", "current", "versions", "limit", "byte_limit", "held",
                 "next_index", "last_key", "_seq", "forcers", "out_of_order", "forced",
                 "dirty")

    def __init__(self, limit: int = 10_000, byte_limit: int = BYTE_LIMIT) -> None:
        self.ready: list[tuple] = []     # (frame, stream, direction, offset, seq, exchange)
        self.marks: list[tuple] = []     # (frame, stream, direction, offset, version, owner)
        self.current: dict[Any, Key] = {}
        self.versions: dict[Any, int] = {}
        self.forcers: dict[Any, Callable[[], bool]] = {}
        self.limit = limit
        self.byte_limit = byte_limit
        self.held = 0            # frame bytes of the waiting exchanges (see frame_bytes)
        self.dirty = False       # something was added or an open key moved since drain()
        self.next_index = 1
        self.last_key: Key | None = None
        self._seq = 0
        self.out_of_order = 0
        self.forced = 0

    def add(self, key: Key, exchange: Exchange) -> None:
        self._seq += 1
        _push(self.ready, key + (self._seq, exchange))
        self.held += frame_bytes(exchange)
        self.dirty = True

    def register(self, owner: Any, force: Callable[[], bool]) -> None:
        self.forcers[owner] = force

    def set_open(self, owner: Any, key: Key | None) -> None:
        cur = self.current.get(owner)
        if cur == key:
            return
        self.dirty = True
        # (versions are unique across owners: equal keys of two owners, e.g. two parts of
        # one connection, never compare the owners)
        self._seq += 1
        ver = self._seq
        self.versions[owner] = ver
        if key is None:
            self.current.pop(owner, None)
        else:
            self.current[owner] = key
            _push(self.marks, key + (ver, owner))
            if len(self.marks) > 2 * len(self.current) + 64:
                self._rebuild()

    def forget(self, owner: Any) -> None:
        self.set_open(owner, None)
        self.versions.pop(owner, None)
        self.forcers.pop(owner, None)

    def _rebuild(self) -> None:
        self.marks = [k + (self.versions[o], o) for o, k in self.current.items()]
        heapify(self.marks)

    def _watermark(self) -> tuple[Key | None, Any]:
        marks = self.marks
        versions = self.versions
        current = self.current
        while marks:
            mark = marks[0]
            owner = mark[_OWNER]
            if versions.get(owner) == mark[_VERSION]:
                key = current.get(owner)
                if key is not None:
                    return key, owner
            _pop(marks)
        return None, None

    def drain(self, final: bool = False) -> list[Exchange]:
        """Release what can be released now (everything when ``final``); calling it is
        only useful when :attr:`dirty` (else it releases nothing)."""
        out: list[Exchange] = []
        ready = self.ready
        # (the open keys change only when an owner is forced: the watermark is read
        # again only then)
        wm, owner = (None, None) if final else self._watermark()
        while ready:
            # (a flat item whose key equals wm compares greater: it waits, as it must)
            if wm is not None and _at_or_after(ready[0], wm):
                if len(ready) <= self.limit and self.held <= self.byte_limit:
                    break
                force = self.forcers.get(owner)
                self.forced += 1
                if force is None or not force() or self.current.get(owner) == wm:
                    # the owner cannot give anything up: stop ordering on it
                    self.set_open(owner, None)
                wm, owner = self._watermark()
                continue
            item = _pop(ready)
            ex = item[_ITEM]
            self.held -= frame_bytes(ex)
            key = item[:4]
            if self.last_key is not None and key < self.last_key:
                ex.problems.append("released out of capture order (reorder buffer limit)")
                self.out_of_order += 1
            else:
                self.last_key = key
            ex.index = self.next_index
            self.next_index += 1
            out.append(ex)
        if not ready:
            self.held = 0       # (exact again should a frame have changed while waiting)
        self.dirty = False
        return out

    def __len__(self) -> int:
        return len(self.ready)

