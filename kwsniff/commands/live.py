"""Decode Kafka traffic live from a network interface, printing exchanges as they complete.

Captures through libpcap with a kernel filter on the Kafka ports (-p, default 9092) or
a custom capture filter (-f), on lo, an Ethernet interface or "any". Output options are
those of decode (-V tree, -x hex, -Y display filter, -t time format); -o writes the
JSON Lines of export (flushed per exchange) and -w the raw packets as pcapng. Stops
after -c exchanges, --duration seconds, or Ctrl-C, then prints a summary (packets seen,
dropped by the kernel, exchanges, unpaired) to standard error. Capturing needs root or
the CAP_NET_RAW and CAP_NET_ADMIN capabilities. See docs/live.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from types import FrameType
from typing import IO, Any

from kwsniff.errors import CaptureError, UserError, output_error

DEFAULT_PORT = 9092
DEFAULT_LIVE_TIMEOUT = 60.0
WRITER_FLUSH_SECONDS = 0.5
DROP_CHECK_SECONDS = 5.0
LIVE_TLS_INFOS = 10_000


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kwsniff.capture.live import DEFAULT_BUFFER_MIB, DEFAULT_SNAPLEN
    from kwsniff.commands.decode import PORT_HELP, _ports, _positive_int, add_view_arguments

    cap = parser.add_argument_group("capture")
    cap.add_argument("-i", "--interface", metavar="IFACE",
                     help='interface to capture on: lo, eth0, ... or "any" (all interfaces)')
    cap.add_argument("-D", "--list-interfaces", action="store_true",
                     help="list the interfaces available for capture and exit")
    cap.add_argument("-p", "--port", metavar="PORTS", type=_ports, action="extend",
                     help=PORT_HELP.format(default=DEFAULT_PORT) + ": captured with a kernel filter and decoded as Kafka")
    cap.add_argument("-f", "--capture-filter", metavar="BPF",
                     help='custom capture filter replacing the port filter (tcpdump syntax, '
                          'e.g. "host 10.1.2.3 and tcp port 9093"); Kafka is still found '
                          "by content on other ports")
    cap.add_argument("-s", "--snaplen", metavar="BYTES", type=_positive_int,
                     default=DEFAULT_SNAPLEN, help=f"bytes kept per packet (default {DEFAULT_SNAPLEN})")
    cap.add_argument("-B", "--buffer-size", metavar="MiB", type=_positive_int,
                     default=DEFAULT_BUFFER_MIB,
                     help=f"kernel capture buffer in MiB (default {DEFAULT_BUFFER_MIB}); "
                          "raise it if the summary reports kernel drops")
    cap.add_argument("--immediate", action="store_true",
                     help="deliver every packet at once instead of in batches of up to "
                          "50 ms (more drops at high packet rates)")
    cap.add_argument("--promisc", action="store_true",
                     help="put the interface into promiscuous mode")
    cap.add_argument("--cooked-v1", action="store_true",
                     help='on "any": Linux cooked capture v1 instead of v2 (the default, '
                          "as tcpdump; v2 also records the interface)")
    stop = parser.add_argument_group("stopping")
    stop.add_argument("-c", "--count", metavar="N", type=_positive_int,
                      help="stop after N (matching) exchanges")
    stop.add_argument("--duration", metavar="SECONDS", type=_positive_float,
                      help="stop after SECONDS")
    dec = parser.add_argument_group("decoding")
    dec.add_argument("--no-detect", action="store_true",
                     help="only decode connections on the --port ports")
    dec.add_argument("--timeout", metavar="SECONDS", type=_positive_float,
                     default=DEFAULT_LIVE_TIMEOUT,
                     help="seconds after which a request without response is reported "
                          f"unanswered (default {DEFAULT_LIVE_TIMEOUT:g})")
    from kwsniff.commands.decode import add_tls_keylog_argument
    add_tls_keylog_argument(dec)
    out = parser.add_argument_group("output")
    out.add_argument("-Y", "--display-filter", metavar="EXPR",
                     help="only exchanges matching EXPR (see docs/display-filters.md)")
    add_view_arguments(out, time_default="a",
                       time_help="a: absolute time (default), ad: with date, ud: UTC date "
                                 "and time, e: epoch, r: relative to the first packet")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="print no exchanges (only the summary); with -o/-w")
    out.add_argument("-o", "--output", metavar="FILE.jsonl",
                     help='also write the JSON Lines of "kwsniff export" ("-" for standard '
                          "output), flushed as each exchange completes")
    out.add_argument("--records", action="store_true",
                     help='with -o: also write one "record" object per record')
    out.add_argument("-w", "--write", metavar="FILE.pcapng",
                     help="also write every captured packet to a pcapng file")
    from kwsniff.plugin_api.cli import add_plugin_arguments

    add_plugin_arguments(parser)   # loaded by kwsniff.cli.main, as for decode


def _list_interfaces(out: IO[str]) -> int:
    from kwsniff.capture.live import list_interfaces

    for n, dev in enumerate(list_interfaces(), 1):
        flags = [f for f, on in (("loopback", dev.loopback), ("up", dev.up),
                                 ("running", dev.running)) if on]
        desc = f" ({dev.description})" if dev.description else ""
        out.write(f"{n}. {dev.name}{desc}" + (f" [{', '.join(flags)}]" if flags else "") + "\n")
    return 0


class ExchangePrinter:
    """Summary line, -V tree and -x hex of one exchange, as ``kwsniff decode`` prints
    them (its :func:`~kwsniff.commands.decode.exchange_printer`), flushed after each."""

    def __init__(self, out: IO[str], args: argparse.Namespace) -> None:
        from kwsniff.commands.decode import exchange_printer, terminal_width
        from kwsniff.output.color import palette_for
        from kwsniff.output.summary import SummaryFormatter

        self.out = out
        self.palette = palette_for(out, args.color)
        self.formatter = SummaryFormatter(self.palette, args.time_format,
                                          align=terminal_width(out))
        self._print = exchange_printer(args, self.palette, self.formatter, out.write)

    def emit(self, ex: Any, facts: Any) -> None:
        self._print(ex, facts)
        self.out.flush()


class PacketWriter:
    """``-w``: every captured packet into a pcapng file, flushed twice a second."""

    def __init__(self, path: str, linktype: int, snaplen: int, interface: str) -> None:
        from kwsniff.capture.writer import PcapngWriter

        try:
            self._writer = PcapngWriter(path)
        except OSError as err:
            raise output_error(path, err) from None
        self.path = path
        self._writer.add_interface(linktype, snaplen=snaplen, name=interface)
        self._next_flush = time.monotonic() + WRITER_FLUSH_SECONDS

    def write_batch(self, batch: Sequence[tuple[int, float, int, bytes, int]]) -> None:
        write = self._writer.write
        try:
            for _frame, ts, _linktype, data, orig_len in batch:
                write(ts, data, orig_len)
            now = time.monotonic()
            if now >= self._next_flush:
                self._next_flush = now + WRITER_FLUSH_SECONDS
                self._writer.flush()
        except OSError as err:
            raise output_error(self.path, err) from None

    def close(self) -> None:
        try:
            self._writer.close()
        except OSError as err:
            raise output_error(self.path, err) from None


class _StopOnSignals:
    """SIGINT/SIGTERM stop the source cleanly; a second SIGINT interrupts at once."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.received: str | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopOnSignals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        self.source.stop()

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _watch_drops(source: Any, batches: Iterator[Any], err: IO[str]) -> Iterator[Any]:
    """Pass batches through; warn on standard error when the kernel starts dropping."""
    next_check = time.monotonic() + DROP_CHECK_SECONDS
    reported = 0
    for batch in batches:
        yield batch
        now = time.monotonic()
        if now >= next_check:
            next_check = now + DROP_CHECK_SECONDS
            dropped = source.stats().dropped
            if dropped > reported:
                print(f"kwsniff live: the kernel dropped {dropped - reported} packets in the "
                      f"last {DROP_CHECK_SECONDS:g} s ({dropped} in all): decoding falls "
                      "behind; a bigger -B buffer absorbs bursts, a narrower filter or -q "
                      "lowers the load", file=err, flush=True)
                reported = dropped


def _engine_options(args: argparse.Namespace, ports: tuple[int, ...]) -> Any:
    from kwsniff.engine import EngineOptions

    opts = EngineOptions()
    opts.ports = ports
    opts.auto_detect = not args.no_detect
    opts.timeout = args.timeout
    # live output never lists connections: no finished connection's summary is kept, and
    # fewer decrypted connections' TLS details (memory over hours)
    opts.max_connection_summaries = 0
    opts.max_tls_infos = LIVE_TLS_INFOS
    from kwsniff.commands.decode import tls_keylog
    opts.tls_keylog = tls_keylog(args)
    opts.tls_live = True                 # clients write their secrets as they connect
    return opts


def summary_lines(stats: Any, interface: str, counters: dict[str, int],
                  exchanges: dict[str, int], shown: int, stop_reason: str | None) -> list[str]:
    """The end-of-capture summary (standard error)."""
    from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, PAIRED, UNANSWERED

    unanswered = exchanges.get(UNANSWERED, 0)
    orphans = exchanges.get(ORPHAN_RESPONSE, 0)
    why = {"duration": "duration reached", "count": "exchange count reached",
           "error": "capture error"}.get(stop_reason or "", "stopped")
    total = counters["exchanges"]
    from kwsniff.output.pipeline import one_direction_text
    hint = one_direction_text(counters)
    return [
        f"live capture on {interface} ended ({why}): {stats.packets} packets seen, "
        f"{stats.dropped} dropped by the kernel, {stats.if_dropped} dropped by the interface",
        f"{total} exchange{'s' if total != 1 else ''} ({shown} shown) in "
        f"{counters['connections']} Kafka connection{'s' if counters['connections'] != 1 else ''}"
        f": {exchanges.get(PAIRED, 0)} paired, {unanswered + orphans} unpaired "
        f"({unanswered} unanswered, {orphans} orphan responses), "
        f"{exchanges.get(NO_RESPONSE_EXPECTED, 0)} without response expected; "
        f"{counters['problems']} problems, {counters['skipped_bytes']} bytes skipped, "
        f"{counters['gap_bytes']} bytes lost in gaps",
    ] + ([hint] if hint is not None else [])


def run(args: argparse.Namespace) -> int:
    if args.list_interfaces:
        return _list_interfaces(sys.stdout)
    if not args.interface:
        raise UserError("an interface is required: -i IFACE (list them with -D)")
    if (args.offsets or args.full_values) and not args.verbose:
        raise UserError("--offsets and --full-values need -V")
    if args.records and not args.output:
        raise UserError("--records needs -o FILE.jsonl")
    if args.output and args.output == "-" and not args.quiet:
        raise UserError("-o - writes JSON Lines to standard output: add -q")

    from kwsniff.capture.live import LINKTYPE_LINUX_SLL, open_live
    from kwsniff.commands.decode import compile_display_filter, open_output, summary_lane, \
        complete_deferred
    from kwsniff.live_engine import LiveDecoder
    from kwsniff.output.jsonl import ExportEncoder, JsonlWriter
    from kwsniff.output.pipeline import Selection, run_counters

    display_filter = compile_display_filter(args)
    ports = tuple(dict.fromkeys(args.port or [DEFAULT_PORT]))
    out = sys.stdout
    err = sys.stderr
    with ExitStack() as stack:
        source = stack.enter_context(open_live(
            args.interface, ports=ports, bpf_filter=args.capture_filter,
            snaplen=args.snaplen, buffer_mib=args.buffer_size, promisc=args.promisc,
            immediate=args.immediate, duration=args.duration,
            datalink=LINKTYPE_LINUX_SLL if args.cooked_v1 else None))
        packets_out = None
        if args.write:
            packets_out = PacketWriter(args.write, source.linktype, source.snaplen,
                                       args.interface)
            stack.callback(packets_out.close)
        # summary lines or nothing printed (-q), no -o export (which reads every body):
        # the summary lane, which gives the same lines and counters
        lane = not args.output and summary_lane(args, display_filter)
        options = _engine_options(args, ports)
        # (bodies only output reads are decoded as each exchange is selected: what
        # waits for capture order keeps its raw frames only)
        options.defer_bodies = True
        decoder = LiveDecoder(options,
                              on_batch=packets_out.write_batch if packets_out else None)
        selection = Selection(display_filter, args.count)
        complete_deferred(decoder.engine, selection, lane)
        printer = None if args.quiet else ExchangePrinter(out, args)
        jsonl = None
        encoder = None
        if args.output:
            encoder = ExportEncoder(f"live:{args.interface}", records=args.records,
                                    names=selection.names)
            stream = stack.enter_context(open_output(args.output))
            jsonl = JsonlWriter(stream, encoder)
        print(f"kwsniff live: capturing on {args.interface} ({source.linktype_name}), "
              f"filter: {source.filter or '(none)'}; Ctrl-C to stop", file=err, flush=True)
        for problem in source.problems:
            print(f"kwsniff live: {problem}", file=err)
        signals = stack.enter_context(_StopOnSignals(source))
        first = True
        batches = _watch_drops(source, source.batches(), err)
        for ex, facts in selection(decoder.run(batches)):
            if printer is not None:
                if first and args.time_format == "r":
                    printer.formatter.start_ts = decoder.engine.summary.first_ts
                first = False
                printer.emit(ex, facts)
            if jsonl is not None:
                try:
                    jsonl.write_exchange(ex, facts)
                    jsonl.stream.flush()
                except OSError as exc:
                    if isinstance(exc, BrokenPipeError):
                        raise
                    raise output_error(args.output, exc) from None
            if args.count is not None and selection.shown >= args.count:
                source.stop()
                source.stop_reason = "count"
                break
        # Exchanges still open when stopping by count are not waited for.
        stats = source.stats()
        engine = decoder.engine
        counters = run_counters(engine.summary, source.problems, selection.problems)
        if jsonl is not None:
            jsonl.write_summary(counters)
            jsonl.stream.flush()
        if printer is not None:
            out.flush()
        stop_reason = source.stop_reason
        if signals.received and stop_reason in (None, "stopped"):
            stop_reason = "stopped"
        for line in summary_lines(stats, args.interface, counters, engine.summary.exchanges,
                                  selection.shown, stop_reason):
            print(line, file=err)
        if source.error:
            raise CaptureError(source.error)
    return 0
