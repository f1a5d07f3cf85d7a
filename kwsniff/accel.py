"""What runs compiled: ``python -m kwsniff.accel`` prints it.

Contract: importing every hot-path module (:data:`kwsniff._compiled.MODULES`) and asking
for every C kernel (:data:`kwsniff._compiled.KERNELS`) the way the layers do, it prints
how many modules run their Cython build and how many kernels are in use, and why the
others run from their Python source (not built, ``KWSNIFF_PURE`` set, or a source
edited since the build). Both paths give identical output; only the speed differs.
"""

from __future__ import annotations

import importlib

from kwsniff import _compiled


def report() -> str:
    """The status text (imports the hot-path modules and the kernels first)."""
    for name in _compiled.MODULES:
        importlib.import_module(name)
    for name in _compiled.KERNELS:
        _compiled.kernel(name)
    return _compiled.status()


if __name__ == "__main__":
    print(report())
