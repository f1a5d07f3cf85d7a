"""Which kwsniff modules run compiled, and the guard that keeps a stale build from running.

Two kinds of compiled code, both optional (without a compiler kwsniff runs from source,
with identical results):

* :data:`MODULES`: hot-path Python modules that ``setup.py`` compiles with Cython from
  their unchanged ``.py`` source, typed by the augmenting ``.pxd`` file beside the
  module where there is one (Cython's pure-Python mode). The ``.py`` is the one source
  of the behaviour; the build only makes it faster.
* :data:`KERNELS`: hand-written C extensions that turn bytes into numbers and tuples
  (pcap records, packet headers, the frame scan, record batches, the schema-program
  field decoder). Each sits in the folder of the layer it serves, beside the Python
  reference it must match, and knows nothing of wording, pairing or ordering. A layer
  asks for its kernel with :func:`kernel` in one place and uses its Python reference
  when that returns None.

The build records the SHA-256 of each source it compiled in :data:`MANIFEST`
(``_compiled_manifest.json`` beside this file): for a module the ``.py`` (and its
``.pxd``), for a kernel its C files; only for extensions that were built.
* :func:`install` (called by ``kwsniff/__init__.py`` before any submodule is imported)
  puts :class:`Guard` first on ``sys.meta_path``. For a module of :data:`MODULES` it
  lets the normal import (the extension module first) go ahead only when compiled
  modules are enabled and the ``.py`` beside it still has the recorded hash; otherwise
  (``KWSNIFF_PURE`` set, no manifest, the source edited since
  the build) it imports the ``.py`` source, so an edit is never shadowed by an old
  build. Modules not in :data:`MODULES` are not touched.
* :func:`kernel` imports a kernel of :data:`KERNELS` only when compiled code is enabled
  and every C file it was built from still has the recorded hash; otherwise it returns
  None (and :func:`status` says why).
* ``KWSNIFF_PURE=1`` (any value but empty or ``0``) is the one switch: every module
  runs from its source and no kernel is used.
* :func:`status` says which modules run compiled and why the others do not;
  ``python -m kwsniff.accel`` prints it.

This module imports nothing from kwsniff and must itself stay uncompiled.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from typing import Any

#: modules compiled by setup.py (dotted names); the summary, -V and export paths
MODULES: tuple[str, ...] = (
    "kwsniff.engine",
    "kwsniff.capture.pcap",
    "kwsniff.capture.pcapng",
    "kwsniff.tcp.events",
    "kwsniff.tcp.packet",
    "kwsniff.tcp.reassembly",
    "kwsniff.tcp.stream",
    "kwsniff.kafka.compression",
    "kwsniff.kafka.conn_summary",
    "kwsniff.kafka.conv_inorder",
    "kwsniff.kafka.conv_orphans",
    "kwsniff.kafka.conv_release",
    "kwsniff.kafka.conv_resync",
    "kwsniff.kafka.conv_state",
    "kwsniff.kafka.conversation",
    "kwsniff.kafka.decoding",
    "kwsniff.kafka.detect",
    "kwsniff.kafka.embedded",
    "kwsniff.kafka.framing",
    "kwsniff.kafka.inference",
    "kwsniff.kafka.model",
    "kwsniff.kafka.nesting",
    "kwsniff.kafka.ordering",
    "kwsniff.kafka.payload",
    "kwsniff.kafka.plausible",
    "kwsniff.kafka.records",
    "kwsniff.kafka.topic_ids",
    "kwsniff.kafka.protocol.cprogram",
    "kwsniff.kafka.protocol.decoder",
    "kwsniff.kafka.protocol.enums",
    "kwsniff.output.digest",
    "kwsniff.output.facts",
    "kwsniff.output.facts_walk",
    "kwsniff.output.fields",
    "kwsniff.output.jsonl",
    "kwsniff.output.pipeline",
    "kwsniff.output.skim",
    "kwsniff.output.stats",
    "kwsniff.output.summary",
    "kwsniff.output.tree",
    "kwsniff.commands.decode",
    "kwsniff.commands.parallel",
    "kwsniff.commands.parallel_pipe",
    "kwsniff.tui.spill",
)

#: hand-written C kernels: extension name -> its files under kwsniff/ (C sources first,
#: then the headers they include); the hash of all of them guards the build
KERNELS: dict[str, tuple[str, ...]] = {
    "kwsniff.capture._pcap": ("capture/_pcap.c",),
    "kwsniff.tcp._headers": ("tcp/_headers.c",),
    "kwsniff.kafka._frames": ("kafka/_frames.c", "kafka/_bytes.h"),
    "kwsniff.kafka._records": ("kafka/_records.c", "kafka/_bytes.h"),
    "kwsniff.kafka.protocol._fields": ("kafka/protocol/_fields.c", "kafka/_bytes.h"),
}

_HERE = os.path.dirname(os.path.abspath(__file__))
#: where the build records the source hashes of the modules it compiled
MANIFEST = os.path.join(_HERE, "_compiled_manifest.json")


def source_path(module: str, root: str = _HERE) -> str:
    """The ``.py`` file of ``module`` (a name in :data:`MODULES`) under ``root``."""
    parts = module.split(".")[1:]
    return os.path.join(root, *parts[:-1], parts[-1] + ".py")


def module_files(module: str, root: str = _HERE) -> list[str]:
    """The files a module of :data:`MODULES` is compiled from: its ``.py`` and, when
    there is one, the augmenting ``.pxd`` beside it, then the ``.py`` and ``.pxd`` of
    each kwsniff module that ``.pxd`` cimports (``from kwsniff.x cimport ...``), and of
    theirs: a module compiled against another's extension types runs compiled only
    while that one does."""
    source = source_path(module, root)
    pxd = source[:-3] + ".pxd"
    if not os.path.exists(pxd):
        return [source]
    files = [source, pxd]
    # the modules it cimports (their extension types are compiled in)
    todo = [pxd]
    while todo:
        with open(todo.pop(), encoding="utf-8") as fh:
            text = fh.read()
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 4 and words[0] == "from" and words[2] == "cimport" \
                    and words[1].startswith("kwsniff."):
                dep_py = source_path(words[1], root)
                dep = dep_py[:-3] + ".pxd"
                if dep not in files and os.path.exists(dep):
                    files += [dep_py, dep]
                    todo.append(dep)
    return files


def kernel_files(name: str, root: str = _HERE) -> list[str]:
    """The files a kernel of :data:`KERNELS` is built from (absolute paths)."""
    return [os.path.join(root, *rel.split("/")) for rel in KERNELS[name]]


def source_hash(path: str | list[str]) -> str | None:
    """SHA-256 (hex) of a file's bytes, or of several files' (their bytes with each
    length before them, in order); None when one cannot be read."""
    paths = [path] if isinstance(path, str) else path
    digest = hashlib.sha256()
    try:
        for p in paths:
            with open(p, "rb") as fh:
                data = fh.read()
            if len(paths) > 1:
                digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
    except OSError:
        return None
    return digest.hexdigest()


def read_manifest(path: str = MANIFEST) -> dict[str, str]:
    """``{module: source hash}`` recorded by the build; empty when there is none or it
    cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        modules = data.get("modules") if isinstance(data, dict) else None
        if isinstance(modules, dict):
            return {k: v for k, v in modules.items() if isinstance(k, str) and isinstance(v, str)}
    except (OSError, ValueError):
        pass
    return {}


def disabled_reason(environ: Any = os.environ) -> str | None:
    """Why compiled modules are switched off by the environment, or None."""
    if environ.get("KWSNIFF_PURE", "") not in ("", "0"):
        return "KWSNIFF_PURE is set"
    return None


class Guard:
    """A ``sys.meta_path`` finder: see the module contract."""

    def __init__(self, manifest: dict[str, str], disabled: str | None, root: str = _HERE) -> None:
        self.manifest = manifest
        self.disabled = disabled
        self.root = root
        self.compiled: list[str] = []        # modules let through to their extension
        self.from_source: dict[str, str] = {}  # module -> why it runs from source

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _MODULE_SET:
            return None
        source = source_path(fullname, self.root)
        why = self.reason(fullname, source)
        if why is None:
            self.compiled.append(fullname)
            return None                     # the path finders load the extension
        self.from_source[fullname] = why
        if not os.path.exists(source):
            return None                     # (nothing better to offer)
        return importlib.util.spec_from_file_location(
            fullname, source, loader=importlib.machinery.SourceFileLoader(fullname, source))

    def reason(self, fullname: str, source: str) -> str | None:
        """Why ``fullname`` must run from its source, or None when its build may run."""
        if self.disabled is not None:
            return self.disabled
        recorded = self.manifest.get(fullname)
        if recorded is None:
            return "not compiled"
        if source_hash(module_files(fullname, self.root)) != recorded:
            return "source changed since the build (rebuild: pip install -e .)"
        return None


_MODULE_SET = frozenset(MODULES)
_guard: Guard | None = None


def install() -> Guard:
    """Put the guard first on ``sys.meta_path`` (once); returns it."""
    global _guard
    if _guard is None:
        _guard = Guard(read_manifest(), disabled_reason())
        sys.meta_path.insert(0, _guard)
    return _guard


#: kernel name -> why it is not used (filled by :func:`kernel`)
kernels_unused: dict[str, str] = {}


def kernel(name: str) -> Any:
    """The kernel extension ``name`` (a key of :data:`KERNELS`) when compiled code is
    enabled and it was built from the C files beside it as they are now; else None, the
    reason kept in :data:`kernels_unused`. Call it once, at the layer's import."""
    guard = install()
    why = guard.disabled
    if why is None:
        recorded = guard.manifest.get(name)
        if recorded is None:
            why = "not built"
        elif source_hash(kernel_files(name, guard.root)) != recorded:
            why = "C source changed since the build (rebuild: pip install -e .)"
    if why is None:
        try:
            return importlib.import_module(name)
        except ImportError as err:
            why = f"cannot be imported: {err}"
    kernels_unused[name] = why
    return None


def status() -> str:
    """One line: how many of :data:`MODULES` imported so far run compiled, and why the
    others run from source."""
    guard = _guard
    if guard is None:
        return "compiled modules: guard not installed"
    if guard.disabled is not None:
        return f"compiled modules and C kernels: off ({guard.disabled})"
    if not guard.manifest:
        return "compiled modules and C kernels: none built (pure Python source)"
    loaded = [m for m in MODULES if m in sys.modules]
    native = [m for m in loaded if not str(getattr(sys.modules[m], "__file__", "")).endswith(".py")]
    text = f"compiled modules: {len(native)} of {len(loaded)} imported run compiled"
    reasons: dict[str, list[str]] = {}
    for m, why in guard.from_source.items():
        reasons.setdefault(why, []).append(m)
    for why, mods in reasons.items():
        text += f"; {len(mods)} from source ({why}: {', '.join(sorted(mods))})"
    used = [k for k in KERNELS if k in sys.modules]
    text += f"\nC kernels: {len(used)} of {len(KERNELS)} in use"
    for name, why in sorted(kernels_unused.items()):
        text += f"; {name} not used ({why})"
    return text
