"""Engine tests share the synthetic-stream helpers of tests/conversation."""

from __future__ import annotations

import sys
from pathlib import Path

_HELPERS = str(Path(__file__).resolve().parent.parent / "conversation")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)
