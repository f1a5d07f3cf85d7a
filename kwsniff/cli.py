"""Command-line entry point: ``kwsniff SUBCOMMAND ...``.

Each subcommand lives in ``kwsniff.commands.<module>`` and provides
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported lazily so
``kwsniff decode`` never pays for Textual or PySpark.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
import traceback
from contextlib import AbstractContextManager, nullcontext
from typing import NoReturn

from kwsniff import __version__, gc_policy, stdout_policy
from kwsniff.errors import UserError, output_error

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "decode": ("decode", "decode a capture and print Kafka exchanges (summary, -V tree, -x hex)"),
    "export": ("export", "write decoded exchanges as JSON Lines"),
    "stats": ("stats", "per-API counts, latency percentiles, errors, top topics and clients"),
    "live": ("live", "decode Kafka traffic live from a network interface"),
    "tui": ("tui", "interactive terminal UI over a capture or a live interface"),
    "analyze": ("analyze", "PySpark analysis of JSON Lines exports"),
    "spark-decode": ("spark_decode", "decode many captures in parallel on Spark into Parquet"),
    "protocols": ("protocols", "list the Kafka API keys and versions kwsniff decodes"),
}


#: commands that stream a capture through the decoder (see :func:`gc_thresholds`)
STREAMING = frozenset({"decode", "export", "stats", "live"})


def gc_thresholds(command: str | None) -> AbstractContextManager[None]:
    """A block with fewer cyclic-GC collections for the streaming commands
    (:func:`kwsniff.gc_policy.streaming`; the previous thresholds come back after it,
    so ``main()`` called in-process leaves no trace). The TUI keeps Python's defaults in
    its own process (its decoder process sets the streaming ones itself)."""
    return gc_policy.streaming() if command in STREAMING else nullcontext()


def _batched_stdout(command: str | None) -> AbstractContextManager[None]:
    """Block-buffered standard output for the streaming commands even where Python's
    is unbuffered (:func:`kwsniff.stdout_policy.batched`)."""
    return stdout_policy.batched() if command in STREAMING else nullcontext()


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line, like kwsniff's own errors:
    ``kwsniff decode: argument -c/--count: not a number: 'x' (see kwsniff decode --help)``
    on standard error, exit status 2 (argparse's usage block is left out)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


_RST_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc):`~?([^`]+)`")


def plain_text(doc: str) -> str:
    """A module docstring as --help shows it: reStructuredText markup removed
    (````--json```` -> ``--json``, ``:func:`x``` -> ``x``)."""
    return _RST_ROLE.sub(r"\1", doc).replace("``", "")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``only`` (a subcommand name) only that subcommand's module
    is imported and given its arguments — the others keep their name and help text,
    which is all the top-level help shows (start-up of one command stays cheap)."""
    parser = OneLineErrorParser(
        prog="kwsniff",
        description="A Wireshark-style decoder for Apache Kafka wire traffic.",
    )
    parser.add_argument("--version", action="version", version=f"kwsniff {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text, description=help_text)
            continue
        module = importlib.import_module(f"kwsniff.commands.{module_name}")
        p = sub.add_parser(name, help=help_text,
                           description=plain_text((module.__doc__ or help_text).strip()))
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show tracebacks on errors")
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def requested_command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first non-option word), if it is a known one."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(requested_command(words))
    args, extra = parser.parse_known_args(words)
    if extra:
        prog = f"kwsniff {args.command}" if getattr(args, "command", None) else "kwsniff"
        parser.exit(2, f"{prog}: unrecognized arguments: {' '.join(extra)} "
                       f"(see {prog} --help)\n")
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    with gc_thresholds(args.command):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; errors become one line on stderr and an exit status."""
    debug = getattr(args, "debug", False)
    try:
        from kwsniff.plugin_api.cli import plugin_session

        with plugin_session(args) as plugins:   # loads --plugins etc. for this run
            if plugins.done:
                return 0
            with _batched_stdout(args.command):
                code = int(args._run(args) or 0)
            if sys.stdout is not None:
                sys.stdout.flush()      # a write error here, not in the flush at exit
            return code
    except UserError as err:
        if debug:
            traceback.print_exc()
        print(f"kwsniff {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error for the user.
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return 0
    except OSError as err:
        if not _stdout_failed(err):
            return _internal_error(args, err, debug)
        if debug:
            traceback.print_exc()
        print(f"kwsniff {args.command}: {output_error(None, err)}", file=sys.stderr)
        return output_error(None, err).exit_code
    except Exception as err:  # noqa: BLE001 - last line of defence, reported in one line
        return _internal_error(args, err, debug)


def _internal_error(args: argparse.Namespace, err: Exception, debug: bool) -> int:
    """Report an unexpected exception in one line (a traceback with --debug): exit 70."""
    if debug:
        traceback.print_exc()
    else:
        print(f"kwsniff {args.command}: internal error: {type(err).__name__}: {err} "
              "(run with --debug for the traceback and please report it)", file=sys.stderr)
    return 70


#: errors only a write gives (no file name: not from opening a file)
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _stdout_failed(err: OSError) -> bool:
    """Whether ``err`` comes from writing standard output: an error only writes give
    (disk full, quota, file too large) not tied to a named file — output files are
    reported by the commands themselves — or standard output still failing to flush.
    Standard output is then pointed at /dev/null so that the flush at exit does not
    report the error a second time."""
    out = sys.stdout
    if out is None:
        return False
    failed = err.errno in _WRITE_ERRNOS and err.filename is None
    try:
        out.flush()
    except (OSError, ValueError):
        failed = True
    if failed:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, out.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):
            pass
    return failed
