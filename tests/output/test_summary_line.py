"""The C summary line (``_speedups.summary_line``, kwsniff/_speedups_line.c) must be
exactly ``SummaryFormatter.format``'s line wherever it makes one, and make one for the
usual exchange. Compared on every exchange of every committed capture (through the
summary lane and with full facts) and on exchanges edited towards the edge cases
(latencies across the format's steps, no correlation id or client id, problems, error
codes, text to escape, times that are not finite)."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output import summary as summary_mod
from kwsniff.output.color import Palette
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.pipeline import Selection
from kwsniff.output.skim import SkimFacts, SummaryLane
from kwsniff.output.summary import SummaryFormatter

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))
C_LINE = summary_mod._SUMMARY_LINE

pytestmark = pytest.mark.skipif(C_LINE is None, reason="summary_line needs the C accelerator")


def python_line(fmt: SummaryFormatter, ex: Any, facts: Any) -> str:
    saved = summary_mod._SUMMARY_LINE
    summary_mod._SUMMARY_LINE = None
    try:
        return fmt.format(ex, facts)
    finally:
        summary_mod._SUMMARY_LINE = saved


def compare(fmt: SummaryFormatter, ex: Any, facts: Any) -> bool:
    """Whether C made the line (then it is the method's line)."""
    expected = python_line(fmt, ex, facts)       # (fills the formatter's caches first)
    line = C_LINE(fmt, ex, facts)
    if line is None:
        return False
    assert line == expected
    return True


def _pairs(pcap: Path, lane: bool) -> list[tuple[Any, Any, float | None]]:
    engine = Engine(EngineOptions(defer_bodies=lane))
    selection = Selection()
    if lane:
        selection.lane = SummaryLane(engine.ctx.annotate_ctx, selection.names)
    with open_capture(str(pcap)) as source:
        out = [(ex, facts) for ex, facts in selection(engine.run(source))]
    return [(ex, facts, engine.summary.first_ts) for ex, facts in out]


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "full"])
def test_every_capture(lane: bool) -> None:
    made = total = 0
    for pcap in PCAPS:
        fmt = SummaryFormatter()
        for ex, facts, first in _pairs(pcap, lane):
            fmt.start_ts = first
            total += 1
            made += compare(fmt, ex, facts)
    assert total > 500
    if lane:        # (full facts have no digest text yet: the method makes those lines)
        assert made >= 80, (made, total)


def test_lines_of_the_capture_command_are_unchanged(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff.cli import main
    for pcap in PCAPS[:8]:
        for extra in ([], ["-t", "a"], ["--color", "always"]):
            main(["decode", "-j", "1", *extra, str(pcap)])
            with_c = capsys.readouterr()
            monkeypatch.setattr(summary_mod, "_SUMMARY_LINE", None)
            main(["decode", "-j", "1", *extra, str(pcap)])
            without = capsys.readouterr()
            monkeypatch.undo()
            assert with_c == without, (pcap.name, extra)


def _edited() -> list[tuple[Any, Any]]:
    """A sample exchange of a real capture with a response, and its facts."""
    for ex, facts, first in _pairs(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap", True):
        if type(facts) is SkimFacts and ex.response is not None and \
                not facts.response_side.errors:
            return [(ex, facts, first)]
    raise AssertionError("no sample exchange")


@pytest.mark.parametrize("latency", [0.0, 0.004, 0.00999, 0.01, 0.0999, 0.5, 0.999, 0.9999,
                                     1.0, 1.5, 123.456, -0.25, math.inf, math.nan])
def test_latencies(latency: float) -> None:
    ex, facts, first = _edited()[0]
    ex = copy.copy(ex)
    ex.response = dataclasses.replace(ex.response, ts_last=ex.request.ts_last + latency)
    fmt = SummaryFormatter(start_ts=first)
    made = compare(fmt, ex, facts)
    assert made == math.isfinite(latency)


def test_edges() -> None:
    ex0, facts, first = _edited()[0]

    def check(edit: Any, made: bool, facts_: Any = facts, fmt: Any = None) -> None:
        ex = copy.copy(ex0)
        ex.request = dataclasses.replace(ex0.request)
        ex.response = dataclasses.replace(ex0.response)
        edit(ex)
        fmt = fmt or SummaryFormatter(start_ts=first)
        assert compare(fmt, ex, facts_) == made

    check(lambda ex: None, True)
    check(lambda ex: setattr(ex.request, "correlation_id", None), True)
    check(lambda ex: setattr(ex.request, "client_id", None), True)
    check(lambda ex: setattr(ex.request, "client_id", "bad\nid"), True)
    check(lambda ex: setattr(ex, "index", 1234567), True)
    for value in (0, 7, 10, 99999, 100000, -1, -2147483648, 2147483647, (1 << 63) - 1,
                  -(1 << 63)):
        check(lambda ex, v=value: setattr(ex.request, "correlation_id", v), True)
        check(lambda ex, v=value: setattr(ex, "index", v), True)
    check(lambda ex: setattr(ex, "response", None), True)
    check(lambda ex: setattr(ex, "request", None), False)
    check(lambda ex: setattr(ex, "problems", ["a problem"]), False)
    check(lambda ex: setattr(ex.request, "problems", ["a problem"]), False)
    check(lambda ex: setattr(ex.response, "problems", ["a problem"]), False)
    check(lambda ex: setattr(ex.request, "ts_last", math.nan), False)
    check(lambda ex: setattr(ex.request, "correlation_id", 1 << 80), False)
    assert C_LINE(SummaryFormatter(start_ts=None), ex0, facts) is None    # no start yet
    assert C_LINE(SummaryFormatter(start_ts=first), ex0, facts) is None   # nothing cached

    class Edited(ExchangeFacts):
        __slots__ = ("_text", "_codes")

        def __init__(self, text: Any, codes: dict[int, None]) -> None:
            super().__init__(ex0)
            self._text = text
            self._codes = codes

        @property
        def digest_text(self) -> Any:      # type: ignore[override]
            return self._text

        @property
        def response_side(self) -> Any:
            return type("Side", (), {"errors": self._codes})()

        @property
        def record_problems(self) -> int:
            return 0

    check(lambda ex: None, True, Edited("orders[0] → 1 ok", {}))
    check(lambda ex: None, True, Edited("", {}))
    check(lambda ex: None, False, Edited("tab\there", {}))
    check(lambda ex: None, False, Edited("\x1b[31m", {}))
    check(lambda ex: None, False, Edited(None, {}))
    check(lambda ex: None, False, Edited("x", {6: None}))


def test_coloured_and_absolute_lines_are_unchanged() -> None:
    ex, facts, first = _edited()[0]
    for fmt in (SummaryFormatter(Palette(True), "r", first), SummaryFormatter(time_format="a",
                                                                              start_ts=first)):
        line = fmt.format(ex, facts)
        assert line == python_line(fmt, ex, facts)


def test_fixed_point_text_is_pythons() -> None:
    """The C lines' fixed-point numbers (times, latencies, sizes: ``put_fixed_exact``,
    seen through ``format_fixed``) are Python's f"{x:.{p}f}": random doubles of every
    magnitude, decimal fractions near rounding ties, and the edges."""
    import random
    import struct

    from kwsniff.accel import speedups
    fixed = speedups.format_fixed
    rnd = random.Random(12)
    values = [0.0, -0.0, 0.5, 1.5, 2.5, 0.125, 0.375, 1e-9, -1e-9, 9.9999995, 0.005,
              1023.95, 2.0 ** 52, 2.0 ** 53 - 1, 5e-324, -5e-324, 123456789.123456789]
    for _ in range(20000):
        k = rnd.random()
        if k < 0.3:
            v = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        elif k < 0.6:
            v = rnd.uniform(-1e4, 1e4)
        elif k < 0.8:       # (near ties once scaled)
            v = rnd.randint(-10 ** 7, 10 ** 7) / 10 ** rnd.randint(0, 9) \
                + rnd.choice([0, 5e-7, 5e-3, 0.05])
        else:
            v = rnd.randint(0, 2 ** 53) / 2 ** rnd.randint(0, 60)
        values.append(v)
    made = 0
    for v in values:
        for p in range(10):
            got = fixed(v, p)
            if got is None:     # (then PyOS_double_to_string formats it)
                assert not math.isfinite(v) or abs(v) >= 2 ** 53 or abs(v) * 10 ** p >= 1e18
                continue
            assert got == f"{v:.{p}f}", (v, p)
            made += 1
    assert made > len(values) * 7
    for v in (math.inf, -math.inf, math.nan, 2.0 ** 53, 1e300):
        assert fixed(v, 3) is None
