"""Where the shared Kafka message definitions (``shared/kafka-protocol``) are.

Several protocol tests encode with an independent encoder that reads these raw
definitions. A fresh clone may live anywhere, so look in order at: the
``KWSNIFF_SHARED_PROTOCOL`` environment variable, ``../shared/kafka-protocol`` next to
the checkout, and ``/work/shared/kafka-protocol``. Tests that need it skip when none
exists.
"""

from __future__ import annotations

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def locate() -> Path:
    """The first candidate that is a directory (or the first candidate when none is)."""
    candidates = []
    env = os.environ.get("KWSNIFF_SHARED_PROTOCOL")
    if env:
        candidates.append(Path(env))
    candidates += [_ROOT.parent / "shared" / "kafka-protocol", Path("/work/shared/kafka-protocol")]
    for path in candidates:
        if path.is_dir():
            return path
    return candidates[0]


SHARED_PROTOCOL = locate()
