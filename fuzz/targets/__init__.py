"""The fuzz targets, one module per layer.

Contract: a target module defines ``one_input(data: bytes) -> None``, which returns
normally for every input and raises only when kwsniff broke an invariant (an exception
escaping a public API, an unbounded result, lost bytes, a contract violation);
``seeds() -> Iterable[bytes]`` (starting inputs, from the real captures where
possible); ``MAX_LEN`` (libFuzzer's ``-max_len``) and optionally ``DICTIONARY`` (tokens
for libFuzzer's ``-dict``) and ``INSTRUMENT_GENERATED`` (see :mod:`fuzz.main`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: every target, in the order the runner uses
TARGETS = (
    "capture", "tcp_packets", "tcp_reassembly", "framing", "conversation", "protocol",
    "structs", "fields", "lane", "records", "gzip", "snappy", "lz4", "zstd", "legacy07",
    "embedded", "filter",
)


def load(name: str) -> ModuleType:
    """The target module called ``name`` (a KeyError names the known ones)."""
    if name not in TARGETS:
        raise KeyError(f"unknown fuzz target {name!r}; known: {', '.join(TARGETS)}")
    return importlib.import_module(f"fuzz.targets.{name}")
