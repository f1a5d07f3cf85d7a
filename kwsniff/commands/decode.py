"""Decode a capture file and print one summary line per Kafka exchange.

With -V the full decoded tree of request and response, with -x a hex dump of each
Kafka frame, with -Y only the exchanges matching a display filter
(see docs/display-filters.md). The run summary (exchanges, problems, skipped bytes)
goes to standard error at the end.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from kwsniff.errors import UserError, output_error
from kwsniff.kafka.model import Exchange
from kwsniff.output.color import COLOR_CHOICES, palette_for
from kwsniff.output.fields import alias_help, field_help
from kwsniff.output.filter import DisplayFilter, compile_filter
from kwsniff.output.hexdump import frame_bytes, hexdump_lines
from kwsniff.output.pipeline import Selection, run_counters, run_summary_line
from kwsniff.output.summary import TIME_FORMATS, SummaryFormatter
from kwsniff.output.tree import DEFAULT_VALUE_CHARS, build_tree, plain_text, render_tree
from kwsniff.plugin_api.cli import add_plugin_arguments

# ----------------------------------------------------------------------------- shared
# export and stats use these helpers too.


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


#: ``--hex-limit`` default: 256 lines of 16 bytes per frame
DEFAULT_HEX_LIMIT = 4096


def _byte_limit(text: str) -> int | None:
    """``--hex-limit``: a number of bytes, 0 for no limit (None)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value or None


def _jobs(text: str) -> int | None:
    """``-j``: a positive number of processes, or "auto" (None)."""
    return None if text == "auto" else _positive_int(text)


def _ports(text: str) -> list[int]:
    """``-p``: one port, a comma list and/or ranges as tcpdump users write them
    (``9092``, ``9092,9093``, ``9092-9094``); every port 1-65535."""
    ports: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a port, port list or port range: {text!r} "
                "(e.g. 9092, 9092,9093 or 9092-9094)") from None
        for port in (low, high):
            if not 0 < port < 65536:
                raise argparse.ArgumentTypeError(f"port out of range 1-65535: {port}")
        if high < low:
            raise argparse.ArgumentTypeError(f"empty port range: {part.strip()!r}")
        ports.extend(range(low, high + 1))
    return ports


PORT_HELP = "Kafka broker ports: PORT, PORT,PORT or FIRST-LAST (repeatable; default {default})"


def add_capture_arguments(parser: argparse.ArgumentParser, *, capture_required: bool = True
                          ) -> None:
    """CAPTURE, -Y, -c, the engine options and the plugin options (loaded by
    ``kwsniff.cli.main``) every capture-reading command takes."""
    parser.add_argument("capture", metavar="CAPTURE", nargs=None if capture_required else "?",
                        help='pcap or pcapng file (optionally compressed), "-" for stdin')
    parser.add_argument("-Y", "--display-filter", metavar="EXPR",
                        help="only exchanges matching EXPR (see docs/display-filters.md)")
    parser.add_argument("-c", "--count", metavar="N", type=_positive_int,
                        help="stop after N matching exchanges")
    add_decoding_arguments(parser)
    add_plugin_arguments(parser)


def add_jobs_argument(parser: argparse.ArgumentParser) -> None:
    """``-j/--jobs N|auto`` of ``decode`` and ``export`` (see kwsniff/commands/parallel.py)."""
    parser.add_argument("-j", "--jobs", metavar="N", type=_jobs, default=None,
                        help="decode on N processes, output identical to one (-c and "
                             "standard input use one); default auto: up to 4 for -V, -x "
                             "and export on uncompressed captures of 4 MB or more, 2 for "
                             "summary lines on uncompressed captures of 64 MB or more; never "
                             "more than the CPUs idle at the start")


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """The "decoding" options of commands that read capture files: -p, --no-detect,
    --timeout (see :func:`engine_options`)."""
    group = parser.add_argument_group("decoding")
    group.add_argument("-p", "--port", metavar="PORTS", type=_ports, action="extend",
                       help=PORT_HELP.format(default=9092) + "; Kafka on other "
                            "ports is still found by content unless --no-detect")
    group.add_argument("--no-detect", action="store_true",
                       help="only decode connections on the --port ports")
    group.add_argument("--timeout", metavar="SECONDS", type=float, default=None,
                       help="capture seconds after which a request without response is "
                            "reported unanswered (default 300)")
    add_tls_keylog_argument(group)


def add_tls_keylog_argument(group: Any) -> None:
    """``--tls-keylog FILE`` (repeatable), shared by every command that decodes."""
    group.add_argument("--tls-keylog", metavar="FILE", action="append", default=None,
                       help="NSS key log of TLS secrets (SSLKEYLOGFILE format) to decrypt "
                            "Kafka over TLS (repeatable; $SSLKEYLOGFILE is read too)")


def tls_keylog(args: argparse.Namespace) -> Any:
    """The run's :class:`kwsniff.tls.KeyLog` from ``--tls-keylog`` and $SSLKEYLOGFILE,
    or None; an unreadable --tls-keylog file is a one-line UserError."""
    paths = tuple(getattr(args, "tls_keylog", None) or ())
    from kwsniff.tls.keylog import from_paths
    try:
        return from_paths(paths)
    except OSError as err:
        raise UserError(f"cannot read the TLS key log {err.filename}: "
                        f"{err.strerror or err}") from None


def add_view_arguments(group: argparse._ArgumentGroup, *, time_default: str,
                       time_help: str) -> None:
    """How exchanges are printed: -V, -x, --offsets, --full-values, -t, --color
    (``decode`` and ``live``; they differ only in the default time format)."""
    group.add_argument("-V", "--verbose", action="store_true",
                       help="print the full decoded tree of every request and response")
    group.add_argument("-x", "--hex", action="store_true",
                       help="print a hex dump of every Kafka frame (its first --hex-limit "
                            "bytes)")
    group.add_argument("--hex-limit", metavar="BYTES", type=_byte_limit,
                       default=DEFAULT_HEX_LIMIT,
                       help=f"with -x: bytes dumped per frame, then a '... N more bytes' "
                            f"line (default {DEFAULT_HEX_LIMIT}; 0: the whole frame)")
    group.add_argument("--offsets", action="store_true",
                       help="with -V: show each field's byte range [start-end) in its frame")
    group.add_argument("--full-values", action="store_true",
                       help=f"with -V: do not cut record keys/values after "
                            f"{DEFAULT_VALUE_CHARS} characters")
    group.add_argument("-t", "--time-format", choices=TIME_FORMATS, default=time_default,
                       help=time_help)
    group.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                       help="colour the output (auto: only on a terminal)")


def compile_display_filter(args: argparse.Namespace) -> DisplayFilter | None:
    """The -Y filter, compiled before anything else is read (errors are UserErrors)."""
    expr = getattr(args, "display_filter", None)
    return compile_filter(expr) if expr is not None else None


def engine_options(args: argparse.Namespace) -> Any:
    from kwsniff.engine import EngineOptions
    opts = EngineOptions()
    if getattr(args, "port", None):
        opts.ports = tuple(dict.fromkeys(args.port))
    if getattr(args, "no_detect", False):
        opts.auto_detect = False
    if getattr(args, "timeout", None) is not None:
        if args.timeout <= 0:
            raise UserError("--timeout must be positive")
        opts.timeout = args.timeout
    opts.tls_keylog = tls_keylog(args)
    # no output of these commands lists connections (stats counts its own): no finished
    # connection's summary is kept (about 4 KB each, 100,000 kept by default)
    opts.max_connection_summaries = 0
    return opts


class CaptureRun:
    """One decoding run: the opened capture, the engine and the selection."""

    def __init__(self, source: Any, engine: Any, selection: Selection) -> None:
        self.source = source
        self.engine = engine
        self.selection = selection

    def exchanges(self) -> Iterator[tuple[Exchange, Any]]:
        """``(exchange, facts)`` of the selected exchanges, in capture order."""
        return self.selection(self.engine.run(self.source))

    def counters(self) -> dict[str, int]:
        return run_counters(self.engine.summary, self.capture_problems(),
                            self.selection.problems)

    def capture_problems(self) -> list[str]:
        """The capture file's problems, then the TCP layer's (unsupported link types,
        malformed packets: why nothing may have been decoded), once the run ended."""
        out = list(getattr(self.source, "problems", ()))
        tcp = getattr(self.engine.summary, "tcp", None)
        if tcp is not None:
            out.extend(tcp.problems)
        return out

    def no_kafka(self, capture: str | None) -> str | None:
        """After the run: the note for a capture without any Kafka connection
        (:func:`kwsniff.output.no_kafka.no_kafka_note`), else None."""
        summary = self.engine.summary
        if summary.kafka_connections or summary.tls_undecrypted:
            return None         # (TLS on a Kafka port without its key: the TLS hint says it)
        from kwsniff.output.no_kafka import no_kafka_note, tcp_server_ports
        ports = tcp_server_ports(capture) if capture and summary.tcp_connections else {}
        return no_kafka_note(summary.kafka_connections, summary.tcp_connections, ports)


def summary_lane(args: argparse.Namespace, display_filter: DisplayFilter | None) -> bool:
    """Whether ``decode`` shows summary lines through the summary lane
    (:mod:`kwsniff.output.skim`): summary lines, no display filter and a build with
    it (the same lines either way)."""
    if getattr(args, "verbose", False) or getattr(args, "hex", False) \
            or display_filter is not None:
        return False
    from kwsniff.output.skim import SummaryLane
    return SummaryLane.available()


def use_lane(engine: Any, selection: Selection) -> None:
    """Let ``selection`` give summary-lane facts (``engine`` defers bodies)."""
    from kwsniff.output.skim import SummaryLane
    selection.lane = SummaryLane(engine.ctx.annotate_ctx, selection.names)


def complete_deferred(engine: Any, selection: Selection, lane: bool) -> None:
    """Let ``selection`` decode the bodies ``engine`` defers: through the summary lane
    (``lane``), else in full as it selects each exchange (``Selection.deferred``)."""
    if lane:
        use_lane(engine, selection)
    else:
        selection.deferred = engine.ctx.annotate_ctx


@contextmanager
def capture_run(args: argparse.Namespace, display_filter: DisplayFilter | None,
                lane: bool = False) -> Iterator[CaptureRun]:
    """Open the capture and set up the engine; the capture is closed afterwards.
    ``lane``: summary lines through the summary lane (see :func:`summary_lane`). The
    engine defers the bodies only output reads either way: the selection (or its lane)
    decodes them as each exchange leaves the engine, so the exchanges the reorder buffer
    holds back for capture order keep their raw frames only."""
    from kwsniff.capture import open_capture
    from kwsniff.engine import Engine
    options = engine_options(args)
    options.defer_bodies = True
    engine = Engine(options)
    selection = Selection(display_filter, getattr(args, "count", None))
    complete_deferred(engine, selection, lane)
    with open_capture(args.capture) as source:
        yield CaptureRun(source, engine, selection)


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    """Standard output for None or "-", else the file (created/truncated), UTF-8,
    compressed when its name ends in .gz, .bz2, .xz or .zst
    (:mod:`kwsniff.output.compressed`)."""
    if path is None or path == "-":
        yield sys.stdout
        return
    from kwsniff.output.compressed import open_text_output
    try:
        fh = open_text_output(path)
    except OSError as err:
        raise output_error(path, err) from None
    try:
        yield fh
    finally:
        try:
            fh.close()
        except OSError as err:
            raise output_error(path, err) from None


def terminal_width(out: IO[str]) -> int | None:
    """The width of the terminal ``out`` writes to (summary columns are aligned
    there), None when it is not a terminal (pipes and files get unpadded lines)."""
    try:
        if not out.isatty():
            return None
    except (AttributeError, ValueError, OSError):
        return None
    import shutil
    return shutil.get_terminal_size().columns


def report_end(counters: dict[str, int], shown: int | None, problems: list[str],
               what: str = "shown", stream: IO[str] | None = None,
               notes: list[str] | tuple[str, ...] = (), note: str | None = None) -> None:
    """Print the run summary (and the capture's own problems, and ``notes``: TLS
    connections not decrypted) to standard error; ``note`` (such as
    :meth:`CaptureRun.no_kafka`) is a last line after it."""
    err = stream or sys.stderr
    for problem in problems:
        print(f"capture: {problem}", file=err)
    for line in notes:
        print(line, file=err)
    print(run_summary_line(counters, shown, what), file=err)
    if note and not counters.get("not_kafka_connections"):
        # (with connections not recognised as Kafka the summary line names them and
        # the port to try: the note would say it twice)
        print(note, file=err)


# ----------------------------------------------------------------------------- decode

def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_capture_arguments(parser, capture_required=False)
    view = parser.add_argument_group("output")
    add_view_arguments(view, time_default="r",
                       time_help="r: relative to the first exchange (default), a: absolute "
                                 "time, ad: absolute date and time, ud: UTC date and time, "
                                 "e: epoch")
    view.add_argument("--list-fields", action="store_true",
                      help="list the display-filter fields and exit")
    add_jobs_argument(parser)


def _print_fields(out: IO[str]) -> None:
    """``--list-fields``: the fields, then the Wireshark names accepted as aliases."""
    rows = field_help()
    aliases = alias_help()
    width = max(len(n) for n, _, _ in rows + aliases)
    twidth = max(len(t) for _, t, _ in rows + aliases)
    for name, typ, desc in rows:
        out.write(f"{name:<{width}}  {typ:<{twidth}}  {desc}\n")
    out.write("\nWireshark names accepted as aliases:\n")
    for name, typ, desc in aliases:
        out.write(f"{name:<{width}}  {typ:<{twidth}}  {desc}\n")


HEX_MORE = " (--hex-limit 0 shows all)"


def hex_dump(ex: Any, write: Callable[[str], Any], palette: Any,
             limit: int | None = DEFAULT_HEX_LIMIT) -> None:
    """The -x hex dump of ``ex``'s frames, at most ``limit`` bytes each (None: all)."""
    for msg in (ex.request, ex.response):
        if msg is None:
            continue
        write(palette.dim(f"{msg.kind} frame, {msg.size} bytes"
                          + (f" ({msg.missing} lost in a gap)" if msg.missing else "")
                          + ":") + "\n")
        for line in hexdump_lines(frame_bytes(msg.raw, msg.size), limit=limit,
                                  more=HEX_MORE):
            write(line)
            write("\n")


#: summary lines written to the output in one call (a write per line costs more than
#: joining them: ~0.3 us of ~20 per exchange)
LINE_BATCH = 256


class LineBatch:
    """``write`` collects text; every :data:`LINE_BATCH` pieces, and at :meth:`flush`,
    it goes to the output in one write (the same text, in the same order)."""

    __slots__ = ("parts", "_write")

    def __init__(self, write: Callable[[str], Any]) -> None:
        self.parts: list[str] = []
        self._write = write

    def write(self, text: str) -> None:
        parts = self.parts
        parts.append(text)
        if len(parts) >= LINE_BATCH:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            text = "".join(self.parts)
            self.parts = []
            self._write(text)


def exchange_printer(args: argparse.Namespace, palette: Any, formatter: SummaryFormatter,
                     write: Callable[[str], Any]) -> Callable[[Exchange, Any], None]:
    """``emit(exchange, facts)``: write one exchange as ``decode`` shows it (summary line,
    or -V tree, then -x hex dump) through ``write``."""
    verbose, hexdump = args.verbose, args.hex
    hex_limit = getattr(args, "hex_limit", DEFAULT_HEX_LIMIT)
    value_chars = None if args.full_values else DEFAULT_VALUE_CHARS
    lean = not palette.enabled and not args.offsets     # plain text: a lean tree

    # (one closure, calling module functions: a compiled build keeps every closure
    # variable of a function in one scope object, so a closure calling a sibling
    # closure would be a reference cycle holding the formatter and its caches)
    def emit(ex: Exchange, facts: Any) -> None:
        if verbose:
            root = build_tree(ex, spans=args.offsets, value_chars=value_chars, lean=lean)
            # few writes per exchange (a write call per line costs more than the join),
            # the heading (with its arrow) apart (see plain_text)
            text = plain_text(root) if lean else None
            if text is not None:
                write(text[0])
                if text[1]:
                    write(text[1])
            else:
                lines = list(render_tree(root, palette=palette, offsets=args.offsets))
                write(lines[0])
                if len(lines) > 1:
                    write("\n")
                    write("\n".join(lines[1:]))
            write("\n")
        else:
            write(formatter.format(ex, facts) + "\n")
        if hexdump:
            hex_dump(ex, write, palette, hex_limit)
        if verbose or hexdump:
            write("\n")

    return emit


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    if args.list_fields:
        _print_fields(out)
        return 0
    if args.capture is None:
        raise UserError("a CAPTURE file is required (or --list-fields)")
    if (args.offsets or args.full_values) and not args.verbose:
        raise UserError("--offsets and --full-values need -V")
    display_filter = compile_display_filter(args)
    palette = palette_for(out, args.color)
    from kwsniff.commands.parallel import decode_in_parallel, decoding_jobs
    jobs = decoding_jobs(args, heavy=args.verbose or args.hex)
    if jobs > 1:
        return decode_in_parallel(args, jobs, display_filter, palette, out)
    formatter = SummaryFormatter(palette, args.time_format, align=terminal_width(out))
    # summary lines are written in batches (-V and -x write one piece per exchange)
    batch = LineBatch(out.write) if not (args.verbose or args.hex) else None
    emit = exchange_printer(args, palette, formatter,
                            batch.write if batch is not None else out.write)

    with capture_run(args, display_filter, summary_lane(args, display_filter)) as run_:
        run_.selection.lean = bool(args.verbose)    # the tree does not read the facts
        try:
            for ex, facts in run_.exchanges():
                if formatter.start_ts is None:
                    # relative times count from the first packet, like tshark
                    formatter.start_ts = run_.engine.summary.first_ts
                emit(ex, facts)
        finally:
            if batch is not None:
                batch.flush()       # (also when stopped: the lines made so far)
        out.flush()
        report_end(run_.counters(), run_.selection.shown, run_.capture_problems(),
                   notes=run_.engine.summary.tls_notes, note=run_.no_kafka(args.capture))
    return 0
