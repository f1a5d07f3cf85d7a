"""Failure isolation for plugin hooks: count failures, report the first one, check results.

Contract:

* A :class:`Guard` belongs to one hook of one plugin. :meth:`Guard.failed` is called
  with the exception (or a description of a bad return value) each time the hook
  fails; the first failure is reported at once through the reporter (one line naming
  the plugin and the hook), later ones are only counted. :meth:`Guard.summary` gives
  the count line for the end of the run.
* :func:`json_problem` says why a hook result is not a JSON-like value (None when it
  is): dicts with string keys, lists/tuples, str, int, float, bool, None and bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Reporter = Callable[[str], None]

MAX_DEPTH = 64


class Guard:
    """Failure bookkeeping of one plugin hook (see the module contract)."""

    __slots__ = ("plugin", "hook", "report", "failures", "first")

    def __init__(self, plugin: str, hook: str, report: Reporter) -> None:
        self.plugin = plugin
        self.hook = hook
        self.report = report
        self.failures = 0
        self.first: str | None = None

    def failed(self, problem: BaseException | str, where: str = "",
               consequence: str = "") -> None:
        self.failures += 1
        if self.failures > 1:
            return
        text = problem if isinstance(problem, str) else \
            f"{type(problem).__name__}: {problem}"
        self.first = text
        self.report(f"plugin {self.plugin}: {self.hook} failed"
                    + (f" ({where})" if where else "") + f": {text}"
                    + (f"; {consequence}" if consequence else "")
                    + "; further failures of this hook are counted, not shown")

    def summary(self) -> str | None:
        if self.failures <= 1:
            return None
        return f"plugin {self.plugin}: {self.hook} failed {self.failures} times in all"


_SCALARS = (str, int, float, bool, type(None), bytes)


def json_problem(value: Any) -> str | None:
    """Why ``value`` is not JSON-like (see the module contract); None when it is."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, _SCALARS):
            continue
        if depth >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    return f"a dict key {k!r} ({type(k).__name__}) is not a string"
                stack.append((item, depth + 1))
        elif isinstance(v, (list, tuple)):
            stack.extend((item, depth + 1) for item in v)
        else:
            return f"a {type(v).__name__} value ({v!r:.60}) is not JSON-like"
    return None
