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
