"""Output-layer tests import their message builders from this folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):  # noqa: ANN001 - pytest hook
    # kafka-python (the independent encoder used by these tests) uses deprecated
    # importlib.resources calls; their warnings are noise here.
    for text in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{text}:DeprecationWarning")
