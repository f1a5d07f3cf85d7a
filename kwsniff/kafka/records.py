"""Record sets carried by Produce requests and Fetch responses.

Contract: the protocol decoder wraps every ``records`` field in :class:`Records`
without parsing it; parsing (batch headers, then records, decompression) happens
lazily here, bounded by configured limits, and never raises on bad bytes.
"""

from __future__ import annotations


class Records:
    """The raw bytes of one partition's record set; parsed on demand."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)
