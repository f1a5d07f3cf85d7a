"""Small wording helpers shared by every layer (a leaf module: it imports nothing).

Contract: :func:`counted` gives ``"1 byte"`` / ``"2 bytes"`` / ``"0 bytes"`` — a count
and its noun, singular only for exactly one.
"""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun agreeing with it (``plural`` defaults to ``singular + "s"``)."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
