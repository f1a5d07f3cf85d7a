"""Write decoded exchanges of a capture as JSON Lines (one object per exchange).

The format is documented in docs/export-schema.md and described by the JSON Schema
kwsniff/output/export_schema.json. With --records every record (key, value, headers,
offset, ...) becomes an extra "record" line after its exchange. The last line is a
"summary" object with the run counters (omit it with --no-summary); the same counts
go to standard error.
"""

from __future__ import annotations

import argparse

from kwsniff.commands.decode import (
    add_capture_arguments,
    add_jobs_argument,
    capture_run,
    compile_display_filter,
    open_output,
    report_end,
)
from kwsniff.errors import output_error
from kwsniff.output.jsonl import ExportEncoder, JsonlWriter


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_capture_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="FILE", required=True,
                     help='JSON Lines file to write, "-" for standard output; compressed '
                          'when the name ends in .gz, .bz2, .xz or .zst')
    out.add_argument("--records", action="store_true",
                     help='also write one "record" object per record')
    out.add_argument("--no-summary", action="store_true",
                     help='do not write the final "summary" object')
    add_jobs_argument(parser)


def run(args: argparse.Namespace) -> int:
    display_filter = compile_display_filter(args)
    from kwsniff.commands.parallel import decoding_jobs, export_in_parallel
    jobs = decoding_jobs(args)
    if jobs > 1:
        return export_in_parallel(args, jobs, display_filter)
    capture_name = args.capture
    with capture_run(args, display_filter) as run_:
        encoder = ExportEncoder(capture_name, records=args.records, names=run_.selection.names)
        with open_output(args.output) as stream:
            writer = JsonlWriter(stream, encoder)
            try:
                for ex, facts in run_.exchanges():
                    writer.write_exchange(ex, facts)
                counters = run_.counters()
                if not args.no_summary:
                    writer.write_summary(counters)
                stream.flush()
            except OSError as err:
                if isinstance(err, BrokenPipeError):
                    raise
                raise output_error(args.output, err) from None
        report_end(counters, encoder.exchanges, run_.capture_problems(), what="exported",
                   notes=run_.engine.summary.tls_notes, note=run_.no_kafka(args.capture))
    return 0
