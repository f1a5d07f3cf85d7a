"""Exceptions that carry a message meant for the user.

Contract: anything raised as :class:`UserError` (or a subclass) is a mistake or an
environment problem the user can fix (missing file, bad filter, no permission, ...).
The CLI prints its message as one line and exits with :attr:`UserError.exit_code`;
it never shows a traceback for it unless ``--debug`` is given.
"""


class UserError(Exception):
    """A problem the user can fix; ``str(err)`` is a complete one-line explanation."""

    exit_code = 2


class CaptureError(UserError):
    """A capture file or interface cannot be read (missing, unreadable, not a capture)."""


class OutputError(UserError):
    """Output cannot be written (disk full, closed device, no permission): exit status 1.

    ``str(err)`` is ``cannot write NAME: REASON`` where NAME is the file name or
    "standard output" (see :func:`output_error`)."""

    exit_code = 1


def output_name(path: str | None) -> str:
    """How the CLI names an output: the path, or "standard output" for None and "-"."""
    return "standard output" if path is None or path == "-" else path


def output_error(path: str | None, err: OSError) -> OutputError:
    """The :class:`OutputError` for ``err`` raised while writing ``path`` (None or "-"
    for standard output)."""
    return OutputError(f"cannot write {output_name(path)}: {err.strerror or err}")
