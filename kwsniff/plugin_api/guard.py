"""Failure isolation for plugin hooks: count failures, report the first one, check results.

Contract:

* A :class:`Guard` belongs to one hook of one plugin. :meth:`Guard.failed` is called
  with the exception (or a description of a bad return value) each time the hook
  fails; the first failure is reported at once through the reporter (one line naming
  the plugin and the hook), later ones are only counted. :meth:`Guard.summary` gives
  the count line for the end of the run.
* :func:`json_problem` says why a hook result is not a JSON-like value (None when it
  is): dicts (string keys; number/bool/None keys are accepted and become strings),
  lists/tuples, str, int, float, bool, None and bytes; no cycles; nested at most
  :data:`~kwsniff.kafka.nesting.MAX_NESTING` levels deep (the same bound in every
  build, unlike the recursion limit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kwsniff.kafka.nesting import TOO_DEEP, deeper_than

Reporter = Callable[[str], None]



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


def _reject(obj: Any) -> None:
    """``default=`` of the check below: bytes are fine (the export encodes them)."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return None
    raise TypeError(f"a {type(obj).__name__} value ({obj!r:.60}) is not JSON-like")


_check = json.JSONEncoder(default=_reject).encode


def json_problem(value: Any) -> str | None:
    """Why ``value`` is not JSON-like (see the module contract); None when it is.

    Runs the C JSON encoder once (dict keys that are numbers, booleans or None are
    accepted: they become strings in the export)."""
    try:
        _check(value)
    except RecursionError:
        return TOO_DEEP
    except (TypeError, ValueError) as exc:
        return str(exc)
    if deeper_than(value):
        return TOO_DEEP
    return None
