"""A bounded list of problem messages shared by the parser and the reassembler.

Contract: ``messages`` keeps the first ``limit`` messages (each names its frame where
known); later ones are only counted in ``dropped``, so a hostile capture cannot grow
memory through problem reports.
"""

from __future__ import annotations


class ProblemLog:
    """Bounded problem messages (see the module docstring)."""

    __slots__ = ("messages", "limit", "dropped")

    def __init__(self, limit: int = 1000) -> None:
        self.messages: list[str] = []
        self.limit = limit
        self.dropped = 0

    def add(self, message: str) -> None:
        if len(self.messages) < self.limit:
            self.messages.append(message)
        else:
            self.dropped += 1

    def __len__(self) -> int:
        return len(self.messages) + self.dropped

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.messages)
