"""Statistics of a capture: per-API counts and latencies, errors, top topics, clients.

Per API and version: exchanges, errors, latency percentiles (p50/p90/p99/max) and bytes;
errors by API and code; top topics by records and bytes, produced and fetched; top
clients; connections; SASL login attempts and their outcomes (also refusals inside a
SASL token that no error code shows). -Y restricts the statistics to matching
exchanges. --json prints the same data as one JSON object. The run summary ends the
report.

Memory stays bounded: latency percentiles are exact (nearest rank) up to 4096 samples
per API version, then estimated from a log-bucketed histogram within 1 % (max is always
exact); topics, clients and connections are counted exactly up to --limit distinct keys
each, beyond which the smallest half is dropped whenever the table fills up and the
report says the tables are approximate.

--insights adds the cross-exchange sections (:mod:`kwsniff.output.insights`):
end-to-end record latency (Produce joined with Fetch, per consumer group), consumer
lag over time, the rebalance timeline per group and producer health (retries,
out-of-order sequences, batches written twice, idempotence/transaction errors). They
are computed from every exchange of the capture (-Y does not restrict them: the joins
need both sides) with bounded memory; in --json they are the ``insights`` object.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from kwsniff.commands.decode import (
    _positive_int,
    add_capture_arguments,
    capture_run,
    compile_display_filter,
)
from kwsniff.output.color import COLOR_CHOICES, palette_for
from kwsniff.output.pipeline import run_summary_line
from kwsniff.output.stats import DEFAULT_LIMIT, StatsCollector, render_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_capture_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--top", metavar="N", type=_positive_int, default=10,
                     help="entries in the top topics/clients/connections tables (default 10)")
    out.add_argument("--json", action="store_true", help="print the statistics as JSON")
    out.add_argument("--limit", metavar="N", type=_positive_int, default=DEFAULT_LIMIT,
                     help="distinct topics/clients/connections counted exactly "
                          f"(default {DEFAULT_LIMIT}; beyond it the tables are approximate)")
    out.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                     help="colour the output (auto: only on a terminal)")
    out.add_argument("--insights", action="store_true",
                     help="add end-to-end latency, consumer lag, rebalance and producer "
                          "health sections (joined across exchanges)")


def _tap(exchanges: Iterator[Any], insights: Any) -> Iterator[Any]:
    """Feed every exchange to ``insights`` before the display filter sees it."""
    add = insights.add
    for ex in exchanges:
        add(ex)
        yield ex


def run(args: argparse.Namespace) -> int:
    display_filter = compile_display_filter(args)
    collector = StatsCollector(limit=args.limit)
    out = sys.stdout
    insights = None
    with capture_run(args, display_filter) as run_:
        add = collector.add
        if getattr(args, "insights", False):
            from kwsniff.output.insights import InsightsCollector
            insights = InsightsCollector(run_.selection.names, run_.engine.ctx.annotate_ctx,
                                         limit=max(args.limit, 100_000))
            selected = run_.selection(_tap(run_.engine.run(run_.source), insights))
        else:
            selected = run_.exchanges()
        for _, facts in selected:
            add(facts)
        counters = run_.counters()
        report = collector.report(top=args.top)
        if insights is not None:
            report["insights"] = insights.report()
        report["run"] = counters
        report["capture"] = args.capture
        report["display_filter"] = args.display_filter
        problems = run_.capture_problems()
        note = run_.no_kafka(args.capture)
        if args.json:
            report["capture_problems"] = problems
            report["tls_not_decrypted"] = list(run_.engine.summary.tls_notes)
            report["no_kafka"] = note
            json.dump(report, out, indent=2, sort_keys=False)
            out.write("\n")
            print(run_summary_line(counters, run_.selection.shown, "counted"), file=sys.stderr)
            if note and not counters.get("not_kafka_connections"):
                print(note, file=sys.stderr)
        else:
            palette = palette_for(out, args.color)
            if note:        # no Kafka at all: the note, not empty tables
                out.write(f"Kafka statistics: {args.capture}\n{note}\n")
            else:
                for line in render_report(report, title=args.capture, palette=palette):
                    out.write(line + "\n")
                if insights is not None:
                    from kwsniff.output.insights.render import render_insights
                    for line in render_insights(report["insights"], t0=report["first_ts"],
                                                palette=palette):
                        out.write(line + "\n")
            out.write("\n")
            for problem in problems:
                out.write(f"capture: {problem}\n")
            for note in run_.engine.summary.tls_notes:
                out.write(note + "\n")
            out.write("Run: " + run_summary_line(counters, run_.selection.shown, "counted")
                      + "\n")
    return 0
