"""Build hook for the optional C accelerator (everything else is in pyproject.toml).

``kwsniff._speedups`` is optional: without a C compiler the build goes on without it
and kwsniff runs its pure-Python path, with identical results (see kwsniff/accel.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kwsniff._speedups",
                             ["kwsniff/_speedups.c", "kwsniff/_speedups_decode.c",
                              "kwsniff/_speedups_tcp.c", "kwsniff/_speedups_order.c"],
                             depends=["kwsniff/_speedups.h"], optional=True,
                             extra_compile_args=["-O2"])])
