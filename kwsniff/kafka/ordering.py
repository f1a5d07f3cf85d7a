"""Capture-order release of exchanges (the reorder buffer).

Contract:

* Every exchange has an order key ``(frame, stream, direction, stream_offset)`` of the
  first byte of its first message (request, or response for an orphan).  Keys are
  unique and sort in capture order.
* Owners (conversations) declare the smallest key they may still produce with
  :meth:`Reorderer.set_open` (a waiting request, a partly received frame, undecided
  bytes), or None.  :meth:`Reorderer.drain` releases ready exchanges whose key is below
  every open key, assigning 1-based indexes in release order.
* Bound: when more than ``limit`` exchanges are waiting, :meth:`drain` calls the
  ``force`` callback of the owner holding the smallest open key (which gives up its
  oldest waiting item, e.g. reports a request as unanswered) until the buffer fits;
  an exchange that still arrives with a key below one already released is released at
  once with the problem "released out of capture order".
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

from kwsniff.kafka.model import Exchange

Key = tuple


class Reorderer:
    """The reorder buffer (see the module contract).

    The watermark (smallest open key and its owner) is kept up to date as owners move
    their keys, and found again by one ``min`` over the owners only when its own owner
    moved it up: owners mostly move their keys up and seldom hold the smallest one.
    """

    __slots__ = ("ready", "current", "limit", "next_index", "last_key", "_seq", "forcers",
                 "out_of_order", "forced", "_wm", "_wm_owner", "_wm_known")

    def __init__(self, limit: int = 10_000) -> None:
        self.ready: list[tuple[Key, int, Exchange]] = []
        self.current: dict[Any, Key] = {}
        self.forcers: dict[Any, Callable[[], bool]] = {}
        self.limit = limit
        self.next_index = 1
        self.last_key: Key | None = None
        self._seq = 0
        self.out_of_order = 0
        self.forced = 0
        self._wm: Key | None = None          # smallest open key (when _wm_known)
        self._wm_owner: Any = None
        self._wm_known = True

    def add(self, key: Key, exchange: Exchange) -> None:
        self._seq += 1
        heapq.heappush(self.ready, (key, self._seq, exchange))

    def register(self, owner: Any, force: Callable[[], bool]) -> None:
        self.forcers[owner] = force

    def set_open(self, owner: Any, key: Key | None) -> None:
        current = self.current
        cur = current.get(owner)
        if cur == key:
            return
        if key is None:
            current.pop(owner, None)
        else:
            current[owner] = key
        if not self._wm_known:
            return
        if owner is self._wm_owner:
            if key is not None and key < cur:     # type: ignore[operator]
                self._wm = key                    # moved down: still the smallest
            else:
                self._wm_known = False            # moved up or closed: look again later
        elif key is not None and (self._wm is None or key < self._wm):
            self._wm = key
            self._wm_owner = owner

    def forget(self, owner: Any) -> None:
        self.set_open(owner, None)
        self.forcers.pop(owner, None)

    def _watermark(self) -> tuple[Key | None, Any]:
        if not self._wm_known:
            current = self.current
            if current:
                owner = min(current, key=current.__getitem__)
                self._wm, self._wm_owner = current[owner], owner
            else:
                self._wm = self._wm_owner = None
            self._wm_known = True
        return self._wm, self._wm_owner

    def drain(self, final: bool = False) -> list[Exchange]:
        out: list[Exchange] = []
        ready = self.ready
        while ready:
            if final:
                wm = owner = None
            elif self._wm_known:
                wm, owner = self._wm, self._wm_owner
            else:
                wm, owner = self._watermark()
            if wm is not None and ready[0][0] >= wm:
                if len(ready) <= self.limit:
                    break
                force = self.forcers.get(owner)
                self.forced += 1
                if force is None or not force() or self.current.get(owner) == wm:
                    # the owner cannot give anything up: stop ordering on it
                    self.set_open(owner, None)
                continue
            key, _, ex = heapq.heappop(ready)
            if self.last_key is not None and key < self.last_key:
                ex.problems.append("released out of capture order (reorder buffer limit)")
                self.out_of_order += 1
            else:
                self.last_key = key
            ex.index = self.next_index
            self.next_index += 1
            out.append(ex)
        return out

    def __len__(self) -> int:
        return len(self.ready)
