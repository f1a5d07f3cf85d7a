"""The zstd decompressor (Kafka codec 4), bounded output; see :mod:`fuzz.targets._codec`."""

from __future__ import annotations

from collections.abc import Iterable

from fuzz.targets import _codec
from fuzz.targets._samples import samples

MAX_LEN = 8192
CODEC = 4


def seeds() -> Iterable[bytes]:
    return samples(CODEC)


def one_input(data: bytes) -> None:
    _codec.check(CODEC, data)
