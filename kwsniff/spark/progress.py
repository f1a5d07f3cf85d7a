"""Step-by-step progress of a Spark command on standard error (pure Python).

Contract: ``Progress(total, stream)`` numbers steps ``[i/total]``; ``with
progress.step("consumer groups"):`` runs one step and ends with the line
``[7/23] consumer groups ... 1.8 s`` (``... failed after 1.8 s`` when the step
raises). On a terminal the line is shown while the step runs, with a bar of the steps
done, and completed in place; elsewhere (a file, a pipe, a test) only the completed line
is written, one per step. ``Progress.off()`` writes nothing. :attr:`Progress.timings`
keeps ``(name, seconds)`` of every finished step.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

BAR = 20


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, *, enabled: bool = True
                 ) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0
        self.timings: list[tuple[str, float]] = []
        try:
            self.live = enabled and self.stream.isatty()
        except (AttributeError, ValueError):
            self.live = False

    @classmethod
    def off(cls) -> Progress:
        return cls(0, enabled=False)

    def _label(self, name: str) -> str:
        width = len(str(max(self.total, self.done + 1)))
        return f"[{self.done + 1:>{width}}/{max(self.total, self.done + 1)}] {name} ..."

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        label = self._label(name)
        if self.live:
            filled = BAR * self.done // max(self.total, 1)
            self.stream.write(f"\r\x1b[K[{'#' * filled}{'.' * (BAR - filled)}] {label}")
            self.stream.flush()
        started = time.monotonic()
        try:
            yield
        except BaseException:
            self._finish(label, f"failed after {time.monotonic() - started:.1f} s")
            raise
        seconds = time.monotonic() - started
        self.timings.append((name, seconds))
        self._finish(label, f"{seconds:.1f} s")

    def _finish(self, label: str, outcome: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        prefix = "\r\x1b[K" if self.live else ""
        self.stream.write(f"{prefix}{label} {outcome}\n")
        self.stream.flush()
