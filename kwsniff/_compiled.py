"""Which kwsniff modules run compiled (Cython builds of their own source), and the guard
that keeps a stale build from running.

Contract:

* :data:`MODULES` names the hot-path modules that ``setup.py`` compiles with Cython when
  it can (an optional build step, like the C accelerator). Each compiled module is
  built from the unchanged ``.py`` file beside it, so it computes exactly what the
  source computes; it only runs faster. The build records the SHA-256 of each source it
  compiled in :data:`MANIFEST` (``_compiled_manifest.json`` beside this file), only for
  modules whose extension was built.
* :func:`install` (called by ``kwsniff/__init__.py`` before any submodule is imported)
  puts :class:`Guard` first on ``sys.meta_path``. For a module of :data:`MODULES` it
  lets the normal import (the extension module first) go ahead only when compiled
  modules are enabled and the ``.py`` beside it still has the recorded hash; otherwise
  (``KWSNIFF_COMPILED=0``, ``KWSNIFF_PURE`` set, no manifest, the source edited since
  the build) it imports the ``.py`` source, so an edit is never shadowed by an old
  build. Modules not in :data:`MODULES` are not touched.
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
    "kwsniff.kafka.conn_summary",
    "kwsniff.kafka.conv_inorder",
    "kwsniff.kafka.conv_orphans",
    "kwsniff.kafka.conv_release",
    "kwsniff.kafka.conv_resync",
    "kwsniff.kafka.conv_state",
    "kwsniff.kafka.conversation",
    "kwsniff.kafka.decoding",
    "kwsniff.kafka.embedded",
    "kwsniff.kafka.framing",
    "kwsniff.kafka.model",
    "kwsniff.kafka.ordering",
    "kwsniff.kafka.records",
    "kwsniff.kafka.protocol.cprogram",
    "kwsniff.kafka.protocol.decoder",
    "kwsniff.output.digest",
    "kwsniff.output.facts",
    "kwsniff.output.facts_walk",
    "kwsniff.output.fields",
    "kwsniff.output.jsonl",
    "kwsniff.output.pipeline",
    "kwsniff.output.skim",
    "kwsniff.output.summary",
    "kwsniff.output.tree",
    "kwsniff.commands.decode",
    "kwsniff.commands.parallel",
    "kwsniff.commands.parallel_pipe",
)

_HERE = os.path.dirname(os.path.abspath(__file__))
#: where the build records the source hashes of the modules it compiled
MANIFEST = os.path.join(_HERE, "_compiled_manifest.json")


def source_path(module: str, root: str = _HERE) -> str:
    """The ``.py`` file of ``module`` (a name in :data:`MODULES`) under ``root``."""
    parts = module.split(".")[1:]
    return os.path.join(root, *parts[:-1], parts[-1] + ".py")


def source_hash(path: str) -> str | None:
    """SHA-256 (hex) of a file's bytes; None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


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
    if environ.get("KWSNIFF_COMPILED", "") == "0":
        return "KWSNIFF_COMPILED=0"
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
        if source_hash(source) != recorded:
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


def status() -> str:
    """One line: how many of :data:`MODULES` imported so far run compiled, and why the
    others run from source."""
    guard = _guard
    if guard is None:
        return "compiled modules: guard not installed"
    if guard.disabled is not None:
        return f"compiled modules: off ({guard.disabled})"
    if not guard.manifest:
        return "compiled modules: none built (pure Python source)"
    loaded = [m for m in MODULES if m in sys.modules]
    native = [m for m in loaded if not str(getattr(sys.modules[m], "__file__", "")).endswith(".py")]
    text = f"compiled modules: {len(native)} of {len(loaded)} imported run compiled"
    reasons: dict[str, list[str]] = {}
    for m, why in guard.from_source.items():
        reasons.setdefault(why, []).append(m)
    for why, mods in reasons.items():
        text += f"; {len(mods)} from source ({why}: {', '.join(sorted(mods))})"
    return text
