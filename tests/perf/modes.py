"""Run kwsniff's three output modes on one capture and reduce each to comparable facts.

The summary (``decode``), the detail tree (``decode -V``) and the export (``export
--records``) must agree on what the capture holds: the same exchanges (number, route,
API, version, correlation id), statuses, problem counts, record counts and run
counters, whatever each mode decodes lazily or in full. :func:`mode_facts` runs the
command line in-process and parses each output into :class:`ModeFacts`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from kwsniff.cli import main as cli_main

# "  12   0.003215 10.0.0.1:5123 → 10.0.0.2:9092 <client id> <API vN> #7 3.20 ms ..."
# (a raw SASL token has no correlation id: "(raw token)" stands where "#N" does)
_SUMMARY = re.compile(r"^\s*(\d+)\s+\S+ (\S+) → (\S+) (.*?) (?:#(\d+|-)|\(raw token\)) "
                      r"(-|[\d.]+ m?s)(?: |$)(.*)$")
_PROBLEMS = re.compile(r" \[(\d+) problems?\]$")
# "Exchange 12: Produce v9, paired, stream 3, 10.0.0.1:5123 → 10.0.0.2:9092, latency ..."
_TREE_HEAD = re.compile(r"^Exchange (\d+): (.*), ([a-z_]+), stream (\d+), (\S+) → (\S+)(?:, |$)")
_TREE_RECORD = re.compile(r"^\s+Record \d+: offset ")
_TREE_PROBLEM = re.compile(r"^ {4}Problem: ")


@dataclass
class Exchange:
    index: int
    client: str
    broker: str
    api: str                      # "Produce v9" (as the summary and tree print it)
    correlation_id: int | None = None
    status: str | None = None     # from the tree and the export (the summary shows none)
    paired: bool | None = None    # the summary: a latency is shown
    problems: int | None = None
    records: int | None = None    # decoded records (tree, export --records)
    header_records: int | None = None   # counted from batch headers (export)


@dataclass
class ModeFacts:
    exchanges: dict[int, Exchange] = field(default_factory=dict)
    run_line: str = ""            # the run summary on standard error


def run_cli(argv: list[str]) -> tuple[str, str, int]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as exc:   # argparse
            code = int(exc.code or 0)
    return out.getvalue(), err.getvalue(), code


def _run_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if " exchange" in ln and " packets" in ln]
    assert lines, f"no run summary on standard error: {stderr[-500:]!r}"
    # "N exchanges (N shown) in ..." / "(N exported)": the counters after the parenthesis
    return re.sub(r" \(\d+ \w+\)", "", lines[-1])


def summary_facts(capture: Path, extra: list[str]) -> ModeFacts:
    out, err, code = run_cli(["decode", *extra, str(capture)])
    assert code == 0, err
    facts = ModeFacts(run_line=_run_line(err))
    for line in out.splitlines():
        m = _SUMMARY.match(line)
        assert m, f"unparsable summary line: {line!r}"
        index, client, broker, who_api, corr, latency, rest = m.groups()
        pm = _PROBLEMS.search(line)
        facts.exchanges[int(index)] = Exchange(
            int(index), client, broker, who_api,
            None if corr in (None, "-") else int(corr), paired=latency != "-",
            problems=int(pm.group(1)) if pm else 0)
    return facts


def tree_facts(capture: Path, extra: list[str]) -> ModeFacts:
    out, err, code = run_cli(["decode", "-V", *extra, str(capture)])
    assert code == 0, err
    facts = ModeFacts(run_line=_run_line(err))
    current: Exchange | None = None
    for line in out.splitlines():
        m = _TREE_HEAD.match(line)
        if m:
            index, api, status, _stream, client, broker = m.groups()
            current = Exchange(int(index), client, broker, api, status=status, records=0)
            facts.exchanges[current.index] = current
            continue
        if current is None:
            continue
        if _TREE_RECORD.match(line):
            current.records = (current.records or 0) + 1
        elif line.startswith("    Correlation id: "):
            current.correlation_id = int(line.split(": ", 1)[1])
    return facts


def export_facts(capture: Path, extra: list[str]) -> ModeFacts:
    out, err, code = run_cli(["export", "--records", "-o", "-", *extra, str(capture)])
    assert code == 0, err
    facts = ModeFacts(run_line=_run_line(err))
    current: Exchange | None = None
    for line in out.splitlines():
        obj = json.loads(line)
        if obj["kind"] == "exchange":
            version = obj["api_version"]
            api = obj["api_name"] if version is None else f"{obj['api_name']} v{version}"
            current = Exchange(obj["index"], obj["client"], obj["broker"], api,
                               obj["correlation_id"], status=obj["status"],
                               problems=len(obj["problems"]), records=0,
                               header_records=obj["record_count"])
            facts.exchanges[current.index] = current
        elif obj["kind"] == "record":
            assert current is not None
            current.records = (current.records or 0) + 1
    return facts


def mode_facts(capture: Path, extra: list[str] | None = None) -> dict[str, ModeFacts]:
    extra = extra or []
    return {"summary": summary_facts(capture, extra), "tree": tree_facts(capture, extra),
            "export": export_facts(capture, extra)}
