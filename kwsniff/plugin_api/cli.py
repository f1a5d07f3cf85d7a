"""The plugin options every decoding command takes, and the per-run plugin session.

Contract:

* :func:`add_plugin_arguments` adds the ``plugins`` argument group: ``--plugins DIR``
  (repeatable), ``--plugin-opt NAME.KEY=VALUE`` (repeatable), ``--plugin-config FILE``
  (TOML), ``--no-default-plugins`` and ``--list-plugins``.
* :func:`plugin_session` (a context manager, used by ``kwsniff.cli.main`` around every
  command) loads the plugins when the command has these options and removes them
  afterwards, printing the end-of-run failure counts. ``session.done`` is True when the
  command must not run (``--list-plugins`` printed the list). Commands without the
  options get an empty session. Mistakes in the options raise
  :class:`~kwsniff.plugin_api.options.OptionError` (a user error).
* :func:`active_manager` is the manager of the running session (None outside one), for
  applications that want to list plugins or redirect reports (the TUI).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from kwsniff.plugin_api.guard import Reporter

_active: list[object] = []


def add_plugin_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("plugins", "payload decoders, vendor APIs and extra "
                                                 "fields (see docs/plugins.md)")
    group.add_argument("--plugins", metavar="DIR", action="append", default=None,
                       help="also load the plugins in DIR (repeatable; they take precedence "
                            "over the shipped ones)")
    group.add_argument("--plugin-opt", metavar="NAME.KEY=VALUE", action="append",
                       default=None, help="an option for plugin NAME, e.g. "
                                          "avro.schemas=schemas/ (repeatable)")
    group.add_argument("--plugin-config", metavar="FILE",
                       help="plugin options from a TOML file: one [NAME] table per plugin "
                            "(--plugin-opt wins)")
    group.add_argument("--no-default-plugins", action="store_true",
                       help="do not load the shipped plugins/ directory nor installed "
                            "(entry-point) plugins")
    group.add_argument("--list-plugins", action="store_true",
                       help="list the plugins found, their status and options, and exit")


@dataclass(slots=True)
class PluginSession:
    """The plugins of one command run."""

    manager: object | None = None     # PluginManager, or None when the command has none
    done: bool = False                # the command must not run (--list-plugins)


def has_plugin_arguments(args: argparse.Namespace) -> bool:
    return hasattr(args, "plugin_opt")


@contextmanager
def plugin_session(args: argparse.Namespace, *, reporter: Reporter | None = None,
                   out: IO[str] | None = None) -> Iterator[PluginSession]:
    """Load the command's plugins for the duration of the block (see the contract)."""
    if not has_plugin_arguments(args):
        yield PluginSession()
        return
    from kwsniff.plugin_api.manager import PluginManager
    from kwsniff.plugin_api.options import collect_options

    options = collect_options(args.plugin_opt or (), getattr(args, "plugin_config", None))
    manager = PluginManager(reporter)
    _active.append(manager)
    try:
        manager.load(args.plugins or (), options=options,
                     shipped=not args.no_default_plugins,
                     entry_points=not args.no_default_plugins)
        session = PluginSession(manager)
        if getattr(args, "list_plugins", False):
            stream = out or sys.stdout
            lines = manager.listing()
            for line in lines or ["no plugins found"]:
                stream.write(line + "\n")
            session.done = True
        yield session
    finally:
        _active.remove(manager)
        for line in manager.close():
            manager.report(line)


def active_manager() -> object | None:
    """The plugin manager of the running command, if any."""
    return _active[-1] if _active else None
