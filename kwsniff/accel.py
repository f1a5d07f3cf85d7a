"""Whether the compiled accelerator is used, and which one.

Contract: :data:`speedups` is the ``kwsniff._speedups`` C module when it was built, is
of the version this source expects, and ``KWSNIFF_PURE`` is not set to a non-empty
value other than ``0``; otherwise None, and callers use their pure-Python code. Both
give identical results (tests compare them); the C module only makes the per-packet
path faster. ``python -m kwsniff.accel`` says which path is in use and why, and which
modules run compiled (:mod:`kwsniff._compiled`).
"""

from __future__ import annotations

import os
from types import ModuleType

#: the C module version this source was written against (SPEEDUPS_VERSION in the .c)
EXPECTED_VERSION = 22


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get("KWSNIFF_PURE", "") not in ("", "0"):
        return None, "pure Python (KWSNIFF_PURE is set)"
    try:
        from kwsniff import _speedups  # type: ignore[attr-defined]
    except ImportError as err:
        return None, f"pure Python (the C accelerator is not built: {err})"
    version = getattr(_speedups, "VERSION", None)
    if version != EXPECTED_VERSION:
        return None, (f"pure Python (the C accelerator at {_speedups.__file__} is version "
                      f"{version}, this source needs {EXPECTED_VERSION}: rebuild it with "
                      "pip install -e .)")
    return _speedups, f"C accelerator ({_speedups.__file__})"


speedups, status = _load()

if __name__ == "__main__":
    import importlib

    from kwsniff import _compiled
    for name in _compiled.MODULES:
        importlib.import_module(name)
    print(status)
    print(_compiled.status())
