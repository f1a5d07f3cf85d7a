"""Helpers of the nasty-input tests: decode packets or capture bytes the way the CLI
does and check every invariant of :mod:`fuzz.checks` on the result."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzz import checks
from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import Exchange

FRAME_REF = checks.FRAME_REF


@dataclass
class Run:
    engine: Engine
    exchanges: list[Exchange]
    delivered: dict[int, int] = field(default_factory=dict)
    tcp_problems: tuple[str, ...] = ()
    capture_problems: list[str] = field(default_factory=list)

    @property
    def summary(self) -> Any:
        return self.engine.summary

    def statuses(self) -> list[str]:
        return [ex.status for ex in self.exchanges]

    def all_problems(self) -> list[str]:
        out = list(self.summary.problems)
        for ex in self.exchanges:
            out.extend(ex.all_problems())
        return out


def decode(packets: Sequence[tuple], options: EngineOptions | None = None) -> Run:
    """Decode packet tuples with the engine, counting the stream bytes delivered."""
    eng = Engine(options or EngineOptions())
    out, events, taken, stream = checks.feed_engine(eng, packets)
    return Run(eng, out, checks.delivered_bytes(events, taken), stream.stats.problems)


def decode_capture(data: bytes, options: EngineOptions | None = None) -> Run | None:
    """Decode capture file bytes; None when they are not a capture (CaptureError)."""
    from kwsniff.errors import CaptureError
    try:
        src = open_capture(io.BytesIO(data))
    except CaptureError:
        return None
    with src:
        run = decode(list(src), options)
        run.capture_problems = list(src.problems)
    return run


def check(run: Run, *, render: bool = True) -> Run:
    """Every invariant: well-formed exchanges, byte accounting, located problems, views."""
    checks.check_exchanges(run.exchanges)
    s = run.summary
    checks.require(s.exchanges_total == len(run.exchanges), "exchange counter differs")
    checks.check_problems(s.problems, "run")
    checks.check_located(list(s.problems) + list(run.tcp_problems) + run.capture_problems,
                         "run")
    checks.check_byte_accounting(run.exchanges, run.engine.connection_summaries(),
                                 run.delivered)
    if render:
        checks.render_all(run.exchanges)
    return run
