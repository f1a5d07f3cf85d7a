"""What the TUI tests share: sample captures and decoding helpers (a module with its own
name: test modules importing ``conftest`` got another directory's conftest when several
test directories ran in one pytest invocation)."""

from __future__ import annotations

from pathlib import Path

from kwsniff.capture import open_capture
from kwsniff.engine import Engine
from kwsniff.output.facts import ExchangeFacts, TopicNames
from kwsniff.tui.decoder import decode
from kwsniff.tui.loader import Loader

ROOT = Path(__file__).resolve().parent.parent.parent
PCAPS = ROOT / "pcaps"
SAMPLE = PCAPS / "rdkafka-consumer-group.pcap"
ALL_PCAPS = sorted(PCAPS.glob("*.pcap"))


def load_in_process(path: Path, **kwargs: object) -> Loader:
    """A Loader filled by running the decoder in this process (no child process)."""
    loader = Loader(path=str(path), **kwargs)  # type: ignore[arg-type]
    decode(loader.job, loader.apply, lambda: False)
    return loader


def reference(path: Path) -> list[tuple[object, ExchangeFacts]]:
    """``(exchange, facts)`` as ``kwsniff decode`` computes them (one shared name map)."""
    names = TopicNames()
    out = []
    with open_capture(str(path)) as source:
        for ex in Engine().run(source):
            facts = ExchangeFacts(ex, names)
            facts.topics  # noqa: B018 - learn ids in capture order, as decode does
            out.append((ex, facts))
    return out
