"""List every Kafka API key and the versions kwsniff decodes.

Columns: API key, name, versions decoded (requests and responses), first flexible
version, and which definition each version range comes from. ``--json`` prints one
JSON document (``{"apis": [...], "totals": {...}}``) for machines.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kwsniff.kafka.protocol.schema import (
    REQUEST,
    RESPONSE,
    api_keys,
    flexible_from,
    segment_sources,
    version_range,
)
from kwsniff.kafka.protocol.api_keys import api_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the coverage as JSON")


def coverage() -> list[dict[str, Any]]:
    """One dict per API key: key, name, min/max version, flexible_from, sources."""
    rows = []
    for key in api_keys():
        rng = version_range(key, REQUEST)
        resp = version_range(key, RESPONSE)
        if rng is None:
            continue
        rows.append({
            "api_key": key,
            "name": api_name(key),
            "min_version": rng[0],
            "max_version": rng[1],
            "response_versions": None if resp is None else [resp[0], resp[1]],
            "flexible_from": flexible_from(key, REQUEST),
            "sources": [{"versions": [lo, hi], "source": src}
                        for lo, hi, src in segment_sources(key, REQUEST)],
        })
    return rows


def _totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    versions = sum(r["max_version"] - r["min_version"] + 1 for r in rows)
    return {"api_keys": len(rows), "api_versions": versions,
            "request_and_response_schemas": versions * 2}


def _range(lo: int, hi: int) -> str:
    return f"v{lo}" if lo == hi else f"v{lo}-v{hi}"


def run(args: argparse.Namespace) -> int:
    rows = coverage()
    out = sys.stdout
    if args.json:
        json.dump({"apis": rows, "totals": _totals(rows)}, out, indent=2)
        out.write("\n")
        return 0
    out.write(f"{'key':>3}  {'name':<30} {'versions':<10} {'flexible':<9} sources\n")
    for r in rows:
        flex = "-" if r["flexible_from"] is None else f"v{r['flexible_from']}+"
        sources = ", ".join(f"{_range(*s['versions'])} {s['source']}" for s in r["sources"])
        out.write(f"{r['api_key']:>3}  {r['name']:<30} "
                  f"{_range(r['min_version'], r['max_version']):<10} {flex:<9} {sources}\n")
    t = _totals(rows)
    out.write(f"\n{t['api_keys']} API keys, {t['api_versions']} versions "
              f"({t['request_and_response_schemas']} request/response schemas)\n")
    return 0
