"""Summary lines: an error name shows once, latency has one unit style, and on a
terminal the columns are aligned to widths learned from the first lines."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.color import palette_for
from kwsniff.output.summary import ALIGN_LEARN_LINES, SummaryFormatter, format_latency

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
GROUP = ROOT / "pcaps" / "rdkafka-consumer-group.pcap"
ANSI = re.compile("\x1b\\[[0-9;]*m")


def _lines(formatter: SummaryFormatter, capture: Path = GROUP) -> list[str]:
    out = []
    with open_capture(str(capture)) as source:
        engine = Engine(EngineOptions())
        for ex in engine.run(source):
            if formatter.start_ts is None:
                formatter.start_ts = engine.summary.first_ts
            out.append(formatter.format(ex))
    return out


def test_error_name_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-j", "1", "-Y", "error", str(GROUP)])
    lines = out.splitlines()
    assert lines
    for line in lines:
        names = re.findall(r"\b[A-Z][A-Z_]{4,}\b", line)
        assert len(names) == len(set(names)), line
        assert names, line                      # and it is shown
    assert "ms UNSUPPORTED_VERSION client" not in out
    assert "→ UNSUPPORTED_VERSION, 0 APIs" in out


def test_latency_one_unit_style() -> None:
    assert [format_latency(v) for v in (0.0612, 12.34, 300.72, 4995.072, None)] == \
        ["0.06 ms", "12.34 ms", "300.72 ms", "4995.07 ms", "-"]


def test_latencies_of_a_run_share_their_style(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-j", "1", str(GROUP)])
    latencies = [line.split(" #", 1)[1].split(" ", 1)[1] for line in out.splitlines()]
    latencies = [lat if lat.startswith("- ") else " ".join(lat.split()[:2])
                 for lat in latencies]
    assert len(latencies) == 109
    assert all(re.fullmatch(r"\d+\.\d\d ms", lat) or lat.startswith("- ")
               for lat in latencies), latencies


def _columns(line: str) -> list[int]:
    """Where the API label, the '#' of the correlation id and the latency's end are."""
    plain = ANSI.sub("", line)
    corr = plain.index(" #") + 1
    end = plain.index(" ms", corr) + 3 if " ms" in plain[corr:corr + 40] else -1
    return [corr, end]


@pytest.mark.parametrize("color", ["never", "always"])
def test_aligned_on_a_wide_terminal(color: str) -> None:
    palette = palette_for(None, color)     # type: ignore[arg-type]
    lines = _lines(SummaryFormatter(palette, align=200))
    plain_lines = _lines(SummaryFormatter(palette))
    # the same text, padded only
    assert [" ".join(ANSI.sub("", a).split()) for a in lines] == \
        [" ".join(ANSI.sub("", b).split()) for b in plain_lines]
    assert lines != plain_lines
    later = [_columns(line) for line in lines[ALIGN_LEARN_LINES:]]
    # after the learning lines every '#' and every latency end is in one column, but
    # for values wider than the learned width (they overflow: GetTelemetrySubscriptions
    # v0 and a 4995.07 ms JoinGroup here)
    hashes = Counter(c for c, _ in later)
    ends = Counter(e for _, e in later if e != -1)
    assert hashes.most_common(1)[0][1] == len(later) - 1, hashes
    assert ends.most_common(1)[0][1] >= len(ends) and \
        ends.most_common(1)[0][1] >= sum(ends.values()) - 3, ends
    unpadded = [_columns(line) for line in plain_lines[ALIGN_LEARN_LINES:]]
    assert len(Counter(c for c, _ in unpadded)) > 3


def test_narrow_terminal_and_pipes_are_not_padded() -> None:
    plain = _lines(SummaryFormatter())
    assert _lines(SummaryFormatter(align=80)) == plain
    assert all("  " not in line[17:].split(" → ", 1)[1][:40] for line in plain[:5])


def test_decode_pads_only_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, ["decode", "-j", "1", str(GROUP)])
    assert out.splitlines() == _lines(SummaryFormatter())
