"""ANSI colours for terminal output.

Contract: :func:`palette_for` decides once per run whether to colour (``--color
auto|always|never``; ``auto`` = only when the stream is a TTY, and never when the
``NO_COLOR`` environment variable is set). A disabled :class:`Palette` returns text
unchanged, so formatting code calls it unconditionally.
"""

from __future__ import annotations

import os
from typing import IO

COLOR_CHOICES = ("auto", "always", "never")

_RESET = "\x1b[0m"
_STYLES = {
    "time": "\x1b[2m",          # dim
    "addr": "\x1b[36m",         # cyan
    "api": "\x1b[1m",           # bold
    "error": "\x1b[1;31m",      # bold red
    "warn": "\x1b[33m",         # yellow
    "ok": "\x1b[32m",           # green
    "dim": "\x1b[2m",
    "name": "\x1b[34m",         # blue (field names in the tree)
    "highlight": "\x1b[7m",     # reverse video (selected bytes)
    "heading": "\x1b[1;4m",     # bold underline
}


class Palette:
    """Wraps text in ANSI styles when ``enabled``; identity otherwise."""

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def style(self, name: str, text: str) -> str:
        if not self.enabled or not text:
            return text
        return f"{_STYLES[name]}{text}{_RESET}"

    def time(self, text: str) -> str:
        return self.style("time", text)

    def addr(self, text: str) -> str:
        return self.style("addr", text)

    def api(self, text: str) -> str:
        return self.style("api", text)

    def error(self, text: str) -> str:
        return self.style("error", text)

    def warn(self, text: str) -> str:
        return self.style("warn", text)

    def ok(self, text: str) -> str:
        return self.style("ok", text)

    def dim(self, text: str) -> str:
        return self.style("dim", text)

    def name(self, text: str) -> str:
        return self.style("name", text)

    def highlight(self, text: str) -> str:
        return self.style("highlight", text)

    def heading(self, text: str) -> str:
        return self.style("heading", text)


PLAIN = Palette(False)


def palette_for(stream: IO[str], mode: str = "auto") -> Palette:
    """The palette for ``stream`` under ``--color mode`` (auto/always/never)."""
    if mode == "always":
        return Palette(True)
    if mode == "never":
        return PLAIN
    if os.environ.get("NO_COLOR"):
        return PLAIN
    isatty = getattr(stream, "isatty", None)
    try:
        return Palette(bool(isatty and isatty()))
    except (OSError, ValueError):
        return PLAIN
