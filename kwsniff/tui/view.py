"""The exchange list's view of the store: which rows, in which order.

Contract:

* :class:`ViewSpec` says what the user asked for: a display filter, a connection
  (stream) and a sort column/direction. An *identity* spec (none of them) needs no
  work: position ``p`` is row ``store.first_row + p``.
* :class:`ViewBuilder` computes the rows of any other spec in a background thread
  (:meth:`ViewBuilder.run`): it scans the store from the first row, keeps matching row
  ids in :attr:`ViewBuilder.rows` (an ``array('q')``, ascending for unsorted views),
  follows the store while the loader adds rows, and for sorted views re-sorts at an
  interval that grows with the cost of a sort, so a million rows stay responsive.
  Readers (the UI thread) only read ``rows`` (the reference may be replaced by a
  sorted copy; the array it points to only grows), ``scanned`` and ``complete``.
* Sorting is stable: equal keys keep capture order (``reverse`` keeps it too).
* :func:`position_of` finds a row's position in a rows array (for keeping the selected
  exchange selected when the view changes); :func:`find_match` the next search match.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwsniff.tui.rowfacts import Matcher
from kwsniff.tui.store import F_ERRORS, NONE_INT, ExchangeStore

SCAN_CHUNK = 4096
IDLE_SECONDS = 0.1
MIN_RESORT_SECONDS = 0.5

#: sortable columns of the exchange list: key -> label
SORT_COLUMNS = {
    "no": "No.", "time": "Time", "client": "Client", "client_id": "Client id",
    "api": "API", "corr": "Corr", "latency": "Latency", "status": "Status",
    "error": "Error", "digest": "Digest",
}


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """What the exchange list shows: filter, connection, sort."""

    expression: str = ""               # display filter text ("" = all)
    matcher: Matcher | None = None     # compiled form of ``expression``
    stream: int | None = None          # one connection, or None for all
    sort: str | None = None            # a key of SORT_COLUMNS, None = capture order
    reverse: bool = False

    @property
    def identity(self) -> bool:
        return self.matcher is None and self.stream is None and \
            (self.sort is None or (self.sort == "no" and not self.reverse))

    @property
    def sorted(self) -> bool:
        return self.sort is not None and not (self.sort == "no" and not self.reverse)


def sort_key_function(store: ExchangeStore, column: str) -> tuple[Callable[[int], Any], bool]:
    """``(key(row), numeric)``: the sort key of a row for ``column``."""
    def loc(row: int) -> Any:
        return store.locate(row)

    if column in ("no", "time", "latency", "corr", "api", "status"):
        def numeric(row: int) -> float:
            found = loc(row)
            if found is None:
                return math.inf
            seg, i = found
            if column == "no":
                return float(seg.index[i])
            if column == "time":
                return seg.ts[i]
            if column == "latency":
                v = seg.latency[i]
                return math.inf if v != v else v
            if column == "corr":
                c = seg.corr[i]
                return math.inf if c == NONE_INT else float(c)
            if column == "api":
                return seg.api_key[i] * 1000.0 + seg.api_version[i]
            return float(seg.status[i])
        return numeric, True

    if column == "error":
        def errors(row: int) -> float:
            found = loc(row)
            if found is None:
                return math.inf
            seg, i = found
            codes = store.facts_table[seg.facts[i]][F_ERRORS]
            return float(codes[0]) if codes else 0.0
        return errors, True

    if column == "client":
        texts: dict[int, str] = {}

        def client(row: int) -> str:
            found = loc(row)
            if found is None:
                return ""
            seg, i = found
            rid = seg.route[i]
            text = texts.get(rid)
            if text is None:
                addr = store.routes[rid][0]
                text = texts[rid] = f"{addr[0]}:{addr[1]:05d}"
            return text
        return client, False

    if column == "client_id":
        def client_id(row: int) -> str:
            found = loc(row)
            if found is None:
                return ""
            seg, i = found
            return store.client_ids[seg.client_id[i]] or ""
        return client_id, False

    if column == "digest":
        return store.digest_text, False
    raise ValueError(f"unknown sort column {column!r}")


def find_match(rows: Any, count: int, first_row: int, is_sorted: bool, matches: list[int],
               start: int, forward: bool) -> int | None:
    """The next (``forward``) or previous position after ``start`` whose row is in
    ``matches`` (ascending row ids), wrapping around; None when no row of the view
    matches. ``rows`` is the view's rows array (None: identity view of ``count`` rows
    from ``first_row``)."""
    if not count or not matches:
        return None
    if rows is None or not is_sorted:
        # positions ascend with row ids: walk the matches from the current row
        current = first_row + start if rows is None else rows[start]
        if forward:
            i = bisect_right(matches, current)
            order = itertools.chain(matches[i:], matches[:i])
        else:
            i = bisect_left(matches, current)
            order = itertools.chain(reversed(matches[:i]), reversed(matches[i:]))
        for row in order:
            if rows is None:
                p: int | None = row - first_row
                if not 0 <= p < count:   # type: ignore[operator]
                    continue
            else:
                p = position_of(rows, row, ascending=True)
                if p is None or p >= count:
                    continue
            if p != start:
                return p
        return None
    wanted = set(matches)
    if forward:
        positions = itertools.chain(range(start + 1, count), range(0, start))
    else:
        positions = itertools.chain(range(start - 1, -1, -1), range(count - 1, start, -1))
    for p in positions:
        if rows[p] in wanted:
            return p
    return None


def position_of(rows: Any, row: int, ascending: bool) -> int | None:
    """Position of ``row`` in ``rows`` (bisect when ascending), or None."""
    if ascending:
        i = bisect_left(rows, row)
        return i if i < len(rows) and rows[i] == row else None
    try:
        return rows.index(row)
    except ValueError:
        return None


class ViewBuilder:
    """Computes the rows of a non-identity :class:`ViewSpec` (see the module contract)."""

    def __init__(self, store: ExchangeStore, spec: ViewSpec,
                 loader_done: Callable[[], bool]) -> None:
        self.store = store
        self.spec = spec
        self.loader_done = loader_done
        self.rows: array = array("q")
        self.scanned = store.first_row      # rows below this were examined
        self.complete = False
        self.generation = 0                 # bumped whenever ``rows`` is replaced
        self._cancel = threading.Event()
        self._matched = array("q")          # unsorted matches (sorted views only)
        self._keys: Any = None
        self._key: Callable[[int], Any] | None = None
        self._dirty = False
        self._next_sort = 0.0

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def progress(self) -> float | None:
        """Fraction of the stored rows examined so far (None when complete)."""
        if self.complete:
            return None
        store = self.store
        total = store.count - store.first_row
        return 1.0 if total <= 0 else max(0.0, (self.scanned - store.first_row) / total)

    def run(self) -> None:
        """Scan, follow and sort until cancelled (or complete when the loader is done)."""
        spec = self.spec
        store = self.store
        if spec.sorted:
            self._key, numeric = sort_key_function(store, spec.sort or "no")
            self._keys = array("d") if numeric else []
        while not self._cancel.is_set():
            count = store.count
            if self.scanned < store.first_row:
                self.scanned = store.first_row
            if self.scanned < count:
                end = min(count, self.scanned + SCAN_CHUNK)
                self._scan(self.scanned, end)
                self.scanned = end
                if spec.sorted and self._dirty and time.monotonic() >= self._next_sort:
                    self._sort()
                continue
            if spec.sorted and self._dirty:
                self._sort()
            if self.loader_done() and self.scanned >= store.count:
                self.complete = True
                return
            time.sleep(IDLE_SECONDS)

    def _scan(self, start: int, end: int) -> None:
        spec = self.spec
        store = self.store
        matcher = spec.matcher
        stream = spec.stream
        out = self._matched if spec.sorted else self.rows
        found: list[int] = []
        if stream is not None:
            for row in range(start, end):
                loc = store.locate(row)
                if loc is None:
                    continue
                seg, i = loc
                if seg.stream[i] == stream and (matcher is None or matcher(store, row)):
                    found.append(row)
        elif matcher is not None:
            for row in range(start, end):
                if matcher(store, row):
                    found.append(row)
        else:
            found = [row for row in range(max(start, store.first_row), end)]
        if not found:
            return
        if spec.sorted:
            key = self._key
            assert key is not None
            self._keys.extend(key(r) for r in found)
            self._dirty = True
        out.extend(found)

    def _sort(self) -> None:
        started = time.monotonic()
        matched = self._matched
        keys = self._keys
        n = min(len(matched), len(keys))
        order = sorted(range(n), key=keys.__getitem__, reverse=self.spec.reverse)
        self.rows = array("q", [matched[i] for i in order])
        self.generation += 1
        self._dirty = False
        cost = time.monotonic() - started
        self._next_sort = time.monotonic() + max(MIN_RESORT_SECONDS, 5 * cost)

