"""Block-buffered standard output for the streaming commands.

Contract: inside :func:`batched`, when standard output is an unbuffered, write-through
:class:`io.TextIOWrapper` (``PYTHONUNBUFFERED=1`` or ``python -u``, common in container
images) that is not a terminal, ``sys.stdout`` is replaced by a block-buffered text
stream over the same file descriptor (same encoding and error handler, the descriptor
is not closed). Without it, every line of ``decode`` output became a ``write`` system
call (a tenth of a one-process run's time on small exchanges). Everything else is left
alone: a terminal (line-buffered output stays prompt), any stream that already buffers,
replaced streams (tests, embedding). Commands that must show output promptly
(``live``) flush it themselves. On leaving the block the buffer is flushed (errors such
as a closed pipe propagate) and the original stream comes back.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def _needs_buffer(out: object) -> bool:
    if type(out) is not io.TextIOWrapper or not out.write_through or out.line_buffering:
        return False
    try:
        return not out.isatty()
    except (OSError, ValueError):
        return False


@contextmanager
def batched() -> Iterator[None]:
    """Standard output block-buffered inside the block (see the module docstring)."""
    out = sys.stdout
    if not _needs_buffer(out):
        yield
        return
    assert isinstance(out, io.TextIOWrapper)
    try:
        out.flush()
        stream = open(out.fileno(), "w", encoding=out.encoding,  # noqa: SIM115
                      errors=out.errors, closefd=False)
    except (OSError, ValueError):
        yield
        return
    sys.stdout = stream
    try:
        yield
    finally:
        if sys.stdout is stream:
            sys.stdout = out
        stream.flush()
