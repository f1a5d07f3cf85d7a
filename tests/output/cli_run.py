"""Helpers the output tests share: run the CLI in-process, bound a test's wall time."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kwsniff.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    """`kwsniff argv` in this process: (exit code, standard output, standard error)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@contextmanager
def time_limit(seconds: int, what: str) -> Iterator[None]:
    """Raise TimeoutError(what) in the main thread if the block runs longer than
    `seconds` (SIGALRM), so a test that hangs fails instead of blocking the suite."""
    def too_long(*_: object) -> None:
        raise TimeoutError(what)

    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
