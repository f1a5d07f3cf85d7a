"""Interactive terminal UI over a capture file or a live interface.

`kwsniff tui CAPTURE` opens a capture (decoded in the background: the list is usable
at once); `kwsniff tui -i IFACE` captures live (root or CAP_NET_RAW/CAP_NET_ADMIN; -p
ports, default 9092, or -f a custom capture filter). Panes: connections, exchanges
(sortable, coloured by errors and unpaired), the detail tree of the selected exchange
with each field's description, and its bytes linked to the tree. Keys: f filter (the
-Y language, checked as you type), / search, s statistics, e export the view as JSON
Lines, p pause, ? help. See docs/tui.md.
"""

from __future__ import annotations

import argparse

from kwsniff.commands.live import DEFAULT_LIVE_TIMEOUT
from kwsniff.commands.live import DEFAULT_PORT as DEFAULT_LIVE_PORT
from kwsniff.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kwsniff.commands.decode import PORT_HELP, _ports, _positive_int
    from kwsniff.tui.store import DEFAULT_MAX_ROWS

    parser.add_argument("capture", metavar="CAPTURE", nargs="?",
                        help="pcap or pcapng file (optionally compressed)")
    parser.add_argument("-Y", "--display-filter", metavar="EXPR",
                        help="start with this display filter (see docs/display-filters.md)")
    live = parser.add_argument_group("live capture")
    live.add_argument("-i", "--interface", metavar="IFACE",
                      help='capture live on IFACE (lo, eth0, ... or "any") instead of a file')
    live.add_argument("-f", "--capture-filter", metavar="BPF",
                      help="custom capture filter replacing the port filter (tcpdump syntax)")
    live.add_argument("-B", "--buffer-size", metavar="MiB", type=_positive_int, default=None,
                      help="kernel capture buffer in MiB (default 64)")
    dec = parser.add_argument_group("decoding")
    dec.add_argument("-p", "--port", metavar="PORTS", type=_ports, action="extend",
                     help=PORT_HELP.format(default=DEFAULT_LIVE_PORT) + "; Kafka on other ports is still found by content unless --no-detect")
    dec.add_argument("--no-detect", action="store_true",
                     help="only decode connections on the --port ports")
    dec.add_argument("--timeout", metavar="SECONDS", type=float, default=None,
                     help="seconds after which a request without response is unanswered "
                          f"(default 300 for files, {DEFAULT_LIVE_TIMEOUT:g} live)")
    from kwsniff.commands.decode import add_tls_keylog_argument
    add_tls_keylog_argument(dec)
    ui = parser.add_argument_group("interface")
    ui.add_argument("--max-exchanges", metavar="N", type=_positive_int, default=DEFAULT_MAX_ROWS,
                    help=f"keep at most N exchanges (oldest dropped first; default "
                         f"{DEFAULT_MAX_ROWS}); about 170 bytes of memory each")
    ui.add_argument("-j", "--jobs", metavar="N", type=_jobs, default=None,
                    help="decoder processes for a capture file, 1 or 2: 2 (an engine "
                         "process and a row builder) give the same results with somewhat "
                         "more CPU in all, and load faster while a second core is free "
                         "(uncompressed files, no plugins); default auto: 2 for captures "
                         "of 64 MB or more when two CPUs are idle at the start, else 1")
    ui.add_argument("--spill-dir", metavar="DIR",
                    help="directory for the temporary file holding decoded exchanges "
                         "(default: the system temporary directory)")
    from kwsniff.plugin_api.cli import add_plugin_arguments

    add_plugin_arguments(parser)   # loaded by kwsniff.cli.main for the whole session


def _jobs(text: str) -> int | None:
    """``-j``: decode's ``-j`` values (a number or "auto"), at most 2."""
    from kwsniff.commands.decode import _jobs as decode_jobs

    jobs = decode_jobs(text)
    if jobs is not None and jobs > 2:
        raise argparse.ArgumentTypeError(f"must be 1, 2 or auto, not {text!r}")
    return jobs


def decoder_processes(jobs: int | None, capture: str) -> int:
    """Decoder processes for ``kwsniff tui CAPTURE -j jobs`` (None: auto, see the ``-j``
    help; the loader may still use one: compressed capture, plugins, one CPU)."""
    if jobs is not None:
        return jobs
    import os

    from kwsniff.commands.parallel import SUMMARY_MIN_BYTES, _idle_cpus, _usable_cpus
    try:
        if os.stat(capture).st_size < SUMMARY_MIN_BYTES:
            return 1
    except OSError:
        return 1
    # only when a second core is idle now: on a busy machine the row builder would share
    # a core with others and loading would take longer than with one process
    if _usable_cpus() < 2 or int(_idle_cpus() + 0.5) < 2:
        return 1
    return 2


def _options(args: argparse.Namespace, live: bool) -> object:
    from kwsniff.engine import EngineOptions

    opts = EngineOptions()
    if args.port:
        opts.ports = tuple(dict.fromkeys(args.port))
    elif live:
        opts.ports = (DEFAULT_LIVE_PORT,)
    if args.no_detect:
        opts.auto_detect = False
    if args.timeout is not None:
        if not args.timeout > 0:
            raise UserError("--timeout must be positive")
        opts.timeout = args.timeout
    elif live:
        opts.timeout = DEFAULT_LIVE_TIMEOUT
    from kwsniff.commands.decode import tls_keylog
    opts.tls_keylog = tls_keylog(args)
    opts.tls_live = live
    return opts


def run(args: argparse.Namespace) -> int:
    if args.capture is not None and args.interface:
        raise UserError("give either a CAPTURE file or -i IFACE, not both")
    if args.capture is None and not args.interface:
        raise UserError("a CAPTURE file or -i IFACE is required")
    if args.capture == "-":
        raise UserError("the TUI reads the keyboard from standard input, so it cannot read "
                        "a capture from it: save the capture to a file first")
    if args.display_filter:
        from kwsniff.output.filter import compile_filter
        compile_filter(args.display_filter)      # a bad -Y is reported before the UI starts
    if args.spill_dir is not None:
        import os
        if not os.path.isdir(args.spill_dir):
            raise UserError(f"--spill-dir {args.spill_dir}: not a directory")

    from kwsniff.tui.app import KwsniffApp

    plugin_args = _plugin_args(args)
    if args.capture is not None:
        from kwsniff.capture import open_capture
        with open_capture(args.capture):         # errors (missing, not a capture) now
            pass
        app = KwsniffApp(capture=args.capture, options=_options(args, live=False),
                         plugin_args=plugin_args, display_filter=args.display_filter,
                         max_exchanges=args.max_exchanges, spill_dir=args.spill_dir,
                         decoders=decoder_processes(args.jobs, args.capture))
        app.run()
        return _report(app)

    from kwsniff.capture.live import DEFAULT_BUFFER_MIB, open_live
    options = _options(args, live=True)
    ports = options.ports  # type: ignore[attr-defined]
    buffer_mib = args.buffer_size or DEFAULT_BUFFER_MIB
    # Open once here so that permission, interface and filter mistakes are reported on
    # the command line; the decoder process opens its own handle.
    with open_live(args.interface, ports=ports, bpf_filter=args.capture_filter,
                   buffer_mib=buffer_mib):
        pass
    app = KwsniffApp(interface=args.interface, options=options, ports=ports,
                     bpf_filter=args.capture_filter, buffer_mib=buffer_mib,
                     plugin_args=plugin_args, display_filter=args.display_filter,
                     max_exchanges=args.max_exchanges, spill_dir=args.spill_dir)
    app.run()
    return _report(app)


def _plugin_args(args: argparse.Namespace) -> argparse.Namespace | None:
    """The plugin options alone, for the decoder process to load the same plugins."""
    if not hasattr(args, "plugin_opt"):
        return None
    return argparse.Namespace(plugins=args.plugins, plugin_opt=args.plugin_opt,
                              plugin_config=args.plugin_config,
                              no_default_plugins=args.no_default_plugins, list_plugins=False)


def _report(app: object) -> int:
    """After the UI closed: the decoding error, if any, as the command's error."""
    loader = getattr(app, "loader", None)
    error = getattr(loader, "error", None)
    if error:
        raise UserError(error)
    return 0
