"""A bounded time series: keeps at most ``capacity`` samples by halving its resolution.

Samples are appended in time order. When the series is full every other kept sample
is dropped and from then on only every ``stride``-th new sample is kept (the stride
doubles at each halving), so a long capture keeps an even picture of its whole span
in constant memory. The first and the latest sample are always available.
"""

from __future__ import annotations

from typing import Any


class Series:
    __slots__ = ("capacity", "stride", "seen", "samples", "last")

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = max(2, capacity)
        self.stride = 1
        self.seen = 0
        self.samples: list[Any] = []
        self.last: Any = None

    def add(self, sample: Any) -> None:
        self.last = sample
        keep = self.seen % self.stride == 0
        self.seen += 1
        if not keep:
            return
        self.samples.append(sample)
        if len(self.samples) >= self.capacity:
            self.samples = self.samples[::2]
            self.stride *= 2

    def all(self) -> list[Any]:
        """The kept samples, with the latest one last (even if its turn was skipped)."""
        if self.last is not None and (not self.samples or self.samples[-1] is not self.last):
            return self.samples + [self.last]
        return list(self.samples)

    @property
    def decimated(self) -> bool:
        return self.stride > 1
