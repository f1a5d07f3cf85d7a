"""Build hook for the optional compiled parts (everything else is in pyproject.toml).

* ``kwsniff._speedups``: the C accelerator. Optional: without a C compiler the build
  goes on without it and kwsniff runs its pure-Python path, with identical results
  (see kwsniff/accel.py).
* Cython builds of the hot-path modules listed in kwsniff/_compiled.py, compiled from
  their unchanged source. Optional too: without Cython or a compiler, or when one
  fails to build, that module runs from its source. The build records the SHA-256 of
  each source it compiled in kwsniff/_compiled_manifest.json; kwsniff runs a compiled
  module only while its source still has that hash (an edited module runs from source
  until the next ``pip install -e .``).
"""

import hashlib
import json
import os
import runpy

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
_compiled = runpy.run_path(os.path.join(HERE, "kwsniff", "_compiled.py"))
MODULES = _compiled["MODULES"]
MANIFEST = os.path.join(HERE, "kwsniff", "_compiled_manifest.json")


def _sha256(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _cython_extensions():
    """Cython extensions of MODULES (with the source hash each is built from), or []."""
    if os.environ.get("KWSNIFF_NO_CYTHON"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    exts = []
    for name in MODULES:
        source = os.path.join(*name.split(".")) + ".py"
        ext = Extension(name, [source], optional=True, extra_compile_args=["-O2"])
        ext.kwsniff_source_hash = _sha256(os.path.join(HERE, source))
        exts.append(ext)
    # annotation_typing off: the annotations stay documentation, as in the source
    built = cythonize(exts, language_level=3, build_dir="build/cython", quiet=True,
                      nthreads=os.cpu_count() or 1,
                      compiler_directives={"annotation_typing": False, "binding": True})
    for ext, orig in zip(built, exts):
        ext.optional = True
        ext.kwsniff_source_hash = orig.kwsniff_source_hash
    return built


class BuildExt(build_ext):
    """build_ext that records which Cython modules were built, from which source."""

    def run(self):
        self._built = {}
        super().run()
        if self.inplace or getattr(self, "editable_mode", False):
            manifest = MANIFEST             # (beside the source the extensions run from)
        else:
            manifest = os.path.join(self.build_lib, "kwsniff", "_compiled_manifest.json")
        os.makedirs(os.path.dirname(manifest), exist_ok=True)
        with open(manifest, "w", encoding="utf-8") as fh:
            json.dump({"modules": self._built}, fh, indent=1, sort_keys=True)
            fh.write("\n")

    def build_extension(self, ext):
        source_hash = getattr(ext, "kwsniff_source_hash", None)
        if source_hash is not None:
            target = self.get_ext_fullpath(ext.name)
            if os.path.exists(target):      # never leave an older build behind a failure
                os.remove(target)
        super().build_extension(ext)
        if source_hash is not None and os.path.exists(self.get_ext_fullpath(ext.name)):
            self._built[ext.name] = source_hash


setup(
    ext_modules=[Extension("kwsniff._speedups",
                           ["kwsniff/_speedups.c", "kwsniff/_speedups_decode.c",
                            "kwsniff/_speedups_tcp.c", "kwsniff/_speedups_order.c",
                            "kwsniff/_speedups_msg.c", "kwsniff/_speedups_conv.c",
                            "kwsniff/_speedups_engine.c", "kwsniff/_speedups_lane.c",
                            "kwsniff/_speedups_line.c", "kwsniff/_speedups_pipe.c"],
                           depends=["kwsniff/_speedups.h"], optional=True,
                           extra_compile_args=["-O2"])] + _cython_extensions(),
    cmdclass={"build_ext": BuildExt},
)
