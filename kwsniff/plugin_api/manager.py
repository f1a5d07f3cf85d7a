"""Finding, loading and unloading plugins; reporting their failures.

Contract:

* Plugins are found, in this order: each ``--plugins DIR`` (in the order given), the
  shipped plugins (:data:`SHIPPED_DIR`, see :func:`shipped_dir`: the source tree's
  ``plugins/`` directory, or the copy a wheel installs under
  ``<prefix>/share/kwsniff/plugins``), then installed distributions' entry points in
  the group ``"kwsniff.plugins"``
  (:data:`ENTRY_POINT_GROUP`). In a directory, a plugin is a ``NAME.py`` file or a
  ``NAME/`` package (names starting with ``_`` or ``.`` are ignored); an entry point
  names a module or a ``register`` callable. NAME (file stem, package or entry-point
  name) is the plugin's name. The first plugin of a name wins; a later one of the same
  name is reported as shadowed and not loaded.
* A plugin module defines ``register(api)`` and optionally ``DESCRIPTION`` and
  ``OPTIONS`` (``{key: description}``; when given, an option key it does not list
  is a :class:`~kwsniff.plugin_api.options.OptionError`). ``NAME.enabled=false``
  skips a plugin.
* :meth:`PluginManager.load` never raises for a broken plugin: an import error, a
  missing ``register``, an exception inside it or a bad registration is reported once
  (naming the plugin and its source), whatever it registered is removed, and loading
  goes on. Option mistakes raise :class:`OptionError` (a user error that stops the
  command): those of the command line (unknown plugin or key) and a value a plugin's
  ``register`` rejects (``api.options`` raising it).
* A plugin whose ``register`` registered nothing (shipped plugins wait for options
  that turn them on) has the status :data:`IDLE`, "loaded, disabled"; one that
  registered something is :data:`ACTIVE`.
* :meth:`PluginManager.close` removes every registration and returns the end-of-run
  failure counts (``summary_lines``).
* Reports go to ``reporter`` (default: one line on standard error, prefixed
  ``kwsniff: ``); applications that own the terminal (the TUI) pass their own.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import kwsniff
from kwsniff.plugin_api.context import PluginContext, PluginError
from kwsniff.plugin_api.guard import Reporter
from kwsniff.plugin_api.options import OptionError, PluginOptions

ENTRY_POINT_GROUP = "kwsniff.plugins"


def shipped_dir(package_file: str = kwsniff.__file__, prefix: str = sys.prefix) -> Path:
    """Where the shipped plugins are: ``plugins/`` of the source tree the package runs
    from (a checkout or an editable install: next to the package directory, beside the
    ``pyproject.toml`` of kwsniff), else the copy a wheel installs as data files under
    ``<prefix>/share/kwsniff/plugins``. A ``plugins`` directory next to an installed
    package (e.g. another distribution's package in site-packages) is never used."""
    root = Path(package_file).resolve().parent.parent
    beside = root / "plugins"
    try:
        ours = beside.is_dir() and 'name = "kwsniff"' in (root / "pyproject.toml").read_text(
            encoding="utf-8", errors="replace")
    except OSError:
        ours = False
    return beside if ours else Path(prefix) / "share" / "kwsniff" / "plugins"


SHIPPED_DIR = shipped_dir()
GENERIC_OPTIONS = {"enabled": "false skips the plugin"}

ACTIVE = "active"
#: loaded, but its register() registered nothing (it waits for options that turn it on)
IDLE = "loaded, disabled"
DISABLED = "disabled"
FAILED = "failed"
SHADOWED = "shadowed"


def stderr_reporter(message: str) -> None:
    print(f"kwsniff: {message}", file=sys.stderr, flush=True)


@dataclass(slots=True)
class Candidate:
    """A plugin found but not loaded yet."""

    name: str
    source: str                          # file path or "entry point NAME = VALUE"
    load: Callable[[], Any]              # -> module or register callable


@dataclass(slots=True, eq=False)
class LoadedPlugin:
    """What happened to one plugin."""

    name: str
    source: str
    status: str
    description: str = ""
    error: str | None = None
    options: dict[str, str] = field(default_factory=dict)   # documented option keys
    context: PluginContext | None = None


# Imported plugin modules by path, so a plugin is executed once per process
# (register() runs once per manager).
_modules: dict[str, ModuleType] = {}


def _import_path(name: str, path: Path) -> ModuleType:
    key = str(path)
    mod = _modules.get(key)
    if mod is not None:
        return mod
    safe = "".join(c if c.isalnum() else "_" for c in name)
    modname = f"kwsniff_plugin_{safe}_{abs(hash(key)) & 0xFFFFFF:06x}"
    if path.is_dir():
        spec = importlib.util.spec_from_file_location(
            modname, path / "__init__.py", submodule_search_locations=[str(path)])
    else:
        spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    _modules[key] = mod
    return mod


def find_in_dir(directory: Path) -> list[Candidate]:
    """Plugin candidates of one directory, sorted by name."""
    out = []
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return out
    for p in entries:
        if p.name.startswith(("_", ".")):
            continue
        if p.is_file() and p.suffix == ".py":
            name = p.stem
        elif p.is_dir() and (p / "__init__.py").is_file():
            name = p.name
        else:
            continue
        out.append(Candidate(name, str(p), lambda n=name, path=p: _import_path(n, path)))
    return out


_entry_points: dict[tuple[str, ...], list[Any]] = {}


def no_entry_points_possible(group: str) -> bool:
    """True only when ``importlib.metadata.entry_points(group=group)`` must be empty:
    the standard path finder is the only finder of distributions, every ``sys.path``
    entry is a directory (or missing), and no ``entry_points.txt`` of a ``*.dist-info``
    or ``*.egg-info`` there mentions ``group`` at all. False means "ask importlib"."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and getattr(finder, "find_distributions", None) is not None:
            return False
    needle = group.encode()
    for entry in sys.path:
        root = entry or "."
        if root.lower().endswith(".egg"):
            return False              # an egg: importlib also reads its EGG-INFO
        try:
            children = os.listdir(root)
        except OSError:
            if os.path.exists(root):  # a zip file, or a directory we cannot list
                return False
            continue
        for child in children:
            if not child.lower().endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(root, child, "entry_points.txt"), "rb") as fh:
                    text = fh.read()
            except FileNotFoundError:
                continue
            except OSError:
                if os.path.exists(os.path.join(root, child, "entry_points.txt")):
                    return False      # unreadable here: importlib decides
                continue
            if needle in text:
                return False
    return True


def find_entry_points() -> list[Candidate]:
    """Plugin candidates of installed distributions (group ``kwsniff.plugins``).

    ``importlib.metadata`` finds them (~20 ms with its import) unless
    :func:`no_entry_points_possible` shows in ~1 ms that none can exist; the result
    is kept per ``sys.path`` (a process that runs several commands scans once)."""
    key = tuple(sys.path)
    eps = _entry_points.get(key)
    if eps is None:
        try:
            if no_entry_points_possible(ENTRY_POINT_GROUP):
                eps = []
            else:
                from importlib.metadata import entry_points
                eps = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        except Exception:  # noqa: BLE001 - broken metadata of some distribution
            eps = []
        _entry_points.clear()
        _entry_points[key] = eps
    return [Candidate(ep.name, f"entry point {ep.name} = {ep.value}", ep.load) for ep in eps]


def _option_message(plugin: str, text: str) -> str:
    """An option mistake a plugin raised, worded as :class:`PluginOptions`' own:
    ``plugin avro: option schemas: /x is not a directory``."""
    if text.startswith(f"plugin {plugin}:"):
        return text
    key, colon, _ = text.partition(": ")
    if colon and key.replace("_", "").replace(".", "").isalnum():
        return f"plugin {plugin}: option {text}"
    return f"plugin {plugin}: bad option: {text}"


class PluginManager:
    """Loads plugins and keeps what they registered (see the module contract)."""

    def __init__(self, reporter: Reporter | None = None) -> None:
        self.reporter: Reporter = reporter or stderr_reporter
        self.plugins: list[LoadedPlugin] = []
        self._closed = False

    def report(self, message: str) -> None:
        try:
            self.reporter(message)
        except Exception:  # noqa: BLE001 - reporting must not break decoding
            pass

    # ------------------------------------------------------------------ loading
    def discover(self, dirs: Sequence[str | Path] = (), *, shipped: bool = True,
                 entry_points: bool = True) -> list[Candidate]:
        """Candidates in load order (see the module contract); missing ``--plugins``
        directories raise :class:`OptionError`."""
        found: list[Candidate] = []
        for d in dirs:
            p = Path(d)
            if not p.is_dir():
                raise OptionError(f"--plugins {d}: not a directory")
            found.extend(find_in_dir(p))
        if shipped and SHIPPED_DIR.is_dir():
            found.extend(find_in_dir(SHIPPED_DIR))
        if entry_points:
            found.extend(find_entry_points())
        return found

    def load(self, dirs: Sequence[str | Path] = (), *,
             options: dict[str, PluginOptions] | None = None, shipped: bool = True,
             entry_points: bool = True) -> list[LoadedPlugin]:
        """Discover and load plugins; returns what happened to each."""
        return self.load_candidates(self.discover(dirs, shipped=shipped,
                                                  entry_points=entry_points), options)

    def load_candidates(self, candidates: Iterable[Candidate],
                        options: dict[str, PluginOptions] | None = None) -> list[LoadedPlugin]:
        options = dict(options or {})
        seen: dict[str, LoadedPlugin] = {p.name: p for p in self.plugins}
        done: list[LoadedPlugin] = []
        for cand in candidates:
            first = seen.get(cand.name)
            if first is not None:
                if first.source != cand.source:
                    self.report(f"plugin {cand.name} ({cand.source}) is shadowed by "
                                f"{first.source} and not loaded")
                    done.append(LoadedPlugin(cand.name, cand.source, SHADOWED))
                continue
            plugin = self._load_one(cand, options.get(cand.name) or PluginOptions(cand.name))
            seen[cand.name] = plugin
            self.plugins.append(plugin)
            done.append(plugin)
        unknown = sorted(set(options) - set(seen))
        if unknown:
            names = ", ".join(sorted(seen)) or "none"
            raise OptionError(f"plugin option for {', '.join(unknown)}: no such plugin "
                              f"(plugins found: {names})")
        return done

    def _load_one(self, cand: Candidate, opts: PluginOptions) -> LoadedPlugin:
        plugin = LoadedPlugin(cand.name, cand.source, FAILED)
        if not opts.get_bool("enabled", True):
            plugin.status = DISABLED
            return plugin
        try:
            obj = cand.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken plugin is skipped
            return self._failed(plugin, f"failed to load: {type(exc).__name__}: {exc}")
        register = obj if callable(obj) and not isinstance(obj, ModuleType) else \
            getattr(obj, "register", None)
        if isinstance(obj, ModuleType):
            plugin.description = str(getattr(obj, "DESCRIPTION", "") or
                                     (obj.__doc__ or "").strip().split("\n")[0])
            declared = getattr(obj, "OPTIONS", None)
            if isinstance(declared, dict):
                plugin.options = {str(k): str(v) for k, v in declared.items()}
                unknown = [k for k in opts if k not in plugin.options and
                           k not in GENERIC_OPTIONS]
                if unknown:
                    known = ", ".join(sorted(plugin.options)) or "none"
                    raise OptionError(f"plugin {cand.name} has no option "
                                      f"{', '.join(unknown)} (its options: {known})")
        if not callable(register):
            return self._failed(plugin, "has no register(api) function")
        ctx = PluginContext(cand.name, opts, cand.source, self.report)
        plugin.context = ctx
        try:
            register(ctx)
        except OptionError as exc:
            # a mistake in an option stops the command, as on the command line
            ctx.undo_all()
            raise OptionError(_option_message(cand.name, str(exc))) from None
        except PluginError as exc:
            ctx.undo_all()
            return self._failed(plugin, f"bad registration: {exc}")
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            ctx.undo_all()
            return self._failed(plugin, f"register() failed: {type(exc).__name__}: {exc}")
        plugin.status = ACTIVE if ctx.registered() else IDLE
        return plugin

    def _failed(self, plugin: LoadedPlugin, error: str) -> LoadedPlugin:
        plugin.status = FAILED
        plugin.error = error
        plugin.context = None
        self.report(f"plugin {plugin.name} ({plugin.source}) {error}; skipped")
        return plugin

    # ------------------------------------------------------------------ end of run
    def summary_lines(self) -> list[str]:
        """Failure counts of hooks that failed more than once."""
        out = []
        for p in self.plugins:
            if p.context is not None:
                for g in p.context.guards:
                    line = g.summary()
                    if line:
                        out.append(line)
        return out

    def close(self) -> list[str]:
        """Remove every registration; returns :meth:`summary_lines` (computed first)."""
        lines = self.summary_lines()
        if not self._closed:
            self._closed = True
            for p in reversed(self.plugins):
                if p.context is not None:
                    p.context.undo_all()
        return lines

    def __enter__(self) -> PluginManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def listing(self) -> list[str]:
        """Human-readable lines: every plugin, its status, source and options."""
        out = []
        for p in self.plugins:
            head = f"{p.name:<12} {p.status:<16} {p.source}"
            out.append(head)
            if p.description:
                out.append(f"    {p.description}")
            if p.error:
                out.append(f"    error: {p.error}")
            if p.context is not None and len(p.context.options):
                given = ", ".join(f"{k}={p.context.options.get(k)!r}" for k in p.context.options)
                out.append(f"    options given: {given}")
            for key, desc in p.options.items():
                out.append(f"    {p.name}.{key}: {desc}")
        return out
