"""Statistics of a capture: per-API counts and latencies, errors, top topics, clients."""

from __future__ import annotations

import argparse

from kwsniff.errors import NotAvailable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise NotAvailable("this subcommand is not available yet in this build (tracked in issue #7)")
