"""How deeply nested a decoded value may be, and the check.

Contract:

* :data:`MAX_NESTING` is the deepest nesting of dicts and lists kwsniff keeps in a
  value it did not decode from a Kafka schema: JSON payloads and SASL/OAuth JSON,
  values and bodies returned by plugins. A value nested deeper is refused where it is
  made (shown as text, or as the plugin's failure), so every walker over decoded
  bodies (the tree, facts, the export) meets a bounded depth.
* The bound is explicit rather than left to Python's recursion limit because the
  limit is not a fixed depth: it depends on how many frames are already on the stack,
  and compiled modules (:mod:`kwsniff._compiled`) do not count against it at all. An
  explicit bound gives the same result in every build and every caller.
* :func:`deeper_than` walks with an explicit stack (any depth, no recursion).
"""

from __future__ import annotations

from typing import Any

#: the deepest nesting of dicts/lists kept in a decoded value (a scalar is 0, ``[]`` 1)
MAX_NESTING = 64
#: how a refusal names the bound (plugin failures and decode problems end with it)
TOO_DEEP = f"nested more than {MAX_NESTING} levels deep"


def deeper_than(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests dicts, lists and tuples more than ``limit`` levels deep.

    Containers are visited once each; a cycle counts as nesting without end."""
    if not isinstance(value, (dict, list, tuple)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        obj, depth = pop()
        if depth > limit:
            return True
        items = obj.values() if isinstance(obj, dict) else obj
        for item in items:
            if isinstance(item, (dict, list, tuple)):
                push((item, depth + 1))
    return False
