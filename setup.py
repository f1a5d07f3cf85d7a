"""Build hook for the optional compiled parts (everything else is in pyproject.toml).

Both kinds are listed in kwsniff/_compiled.py and both are optional: without a C
compiler (or Cython), or when one fails to build, kwsniff runs that part from its
Python source, with identical results.

* KERNELS: the hand-written C kernels, each in the folder of the layer it serves.
* MODULES: Cython builds of the hot-path modules from their unchanged ``.py`` source,
  typed by the ``.pxd`` beside the module where there is one.

The build records the SHA-256 of what each extension was compiled from in
kwsniff/_compiled_manifest.json; kwsniff runs a compiled module or kernel only while
its files still have that hash (an edited one runs from source until the next
``pip install -e .``).
"""

import json
import os
import runpy

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
_compiled = runpy.run_path(os.path.join(HERE, "kwsniff", "_compiled.py"))
MODULES = _compiled["MODULES"]
KERNELS = _compiled["KERNELS"]
PKG = os.path.join(HERE, "kwsniff")
MANIFEST = os.path.join(HERE, "kwsniff", "_compiled_manifest.json")


def _kernel_extensions():
    """The C kernels of KERNELS (with the hash of the files each is built from)."""
    exts = []
    for name, files in KERNELS.items():
        sources = [f"kwsniff/{f}" for f in files if f.endswith(".c")]
        headers = [f"kwsniff/{f}" for f in files if not f.endswith(".c")]
        if not all(os.path.exists(os.path.join(HERE, f)) for f in sources + headers):
            continue                        # (an incomplete checkout: runs from Python)
        ext = Extension(name, sources, depends=headers, optional=True,
                        include_dirs=sorted({os.path.dirname(h) for h in headers}),
                        extra_compile_args=["-O2"])
        ext.kwsniff_source_hash = _compiled["source_hash"](_compiled["kernel_files"](name, PKG))
        exts.append(ext)
    return exts


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
        ext.kwsniff_source_hash = _compiled["source_hash"](_compiled["module_files"](name, PKG))
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
        self._previous = _compiled["read_manifest"](MANIFEST) if self.inplace or getattr(
            self, "editable_mode", False) else {}
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
            if (not self.force and os.path.exists(target)
                    and self._previous.get(ext.name) == source_hash):
                self._built[ext.name] = source_hash     # built from these very files
                return
            if os.path.exists(target):      # never leave an older build behind a failure
                os.remove(target)
        super().build_extension(ext)
        if source_hash is not None and os.path.exists(self.get_ext_fullpath(ext.name)):
            self._built[ext.name] = source_hash


class BuildPy(build_py):
    """build_py that also removes what a previous build left in ``build/lib`` and the
    source no longer has (setuptools only ever adds files there: a deleted ``.pxd`` or
    module would otherwise reach every later wheel)."""

    def run(self):
        super().run()
        keep = {os.path.normpath(p) for p in self.get_outputs(include_bytecode=True)}
        root = os.path.join(self.build_lib, "kwsniff")
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.normpath(os.path.join(dirpath, name))
                if path in keep or name.endswith((".so", ".pyd")) \
                        or name == "_compiled_manifest.json":
                    continue        # (extensions and their manifest: build_ext's)
                os.remove(path)


setup(
    ext_modules=_kernel_extensions() + _cython_extensions(),
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
)
