"""Cyclic-GC thresholds for processes that stream a capture through the decoder.

Contract: :func:`for_streaming` raises the young-generation threshold to
:data:`GC_YOUNG` net allocations (Python's default is 700) and keeps the older
generations' thresholds. The decoding leaves no reference cycles behind
(tests/robustness/test_no_cycles.py): every exchange is freed by reference counting,
so frequent collections only re-walk live objects. Collections still run, so memory
stays bounded should a cycle appear. Used by the streaming commands (``decode``,
``export``, ``stats``, ``live``), by the TUI's decoder process and, while it decodes a
partition, by ``spark-decode``'s executor code (:func:`streaming` restores the previous
thresholds after); the TUI's own process keeps Python's defaults (its widget tree is
cyclic and pauses matter there).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: allocations (net) between young-generation collections while streaming (each
#: collection walks the young objects still alive: on 300,000 chatty benchmark packets
#: the engine ran about 8 % slower at 50,000 than with collections off, and about as
#: fast at 200,000)
GC_YOUNG = 200_000


def for_streaming() -> None:
    """Set the streaming thresholds (see the module docstring)."""
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])


@contextmanager
def streaming() -> Iterator[None]:
    """The streaming thresholds inside the block, the previous ones after it."""
    before = gc.get_threshold()
    for_streaming()
    try:
        yield
    finally:
        gc.set_threshold(*before)
