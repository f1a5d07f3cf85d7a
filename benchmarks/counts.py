"""What a benchmark capture holds, for the throughput columns: packets, Kafka exchanges
and records (produced in requests + fetched in responses, counted from batch headers).

Counted once per capture with kwsniff's own engine (not timed) and cached beside the
capture in ``<name>.counts.json``, keyed by the capture's size and modification time
and by a digest of kwsniff's Python sources (a change to the decoding, e.g. how
exchanges are paired, counts again).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import kwsniff
from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.facts import ExchangeFacts, TopicNames


def count(path: Path, ports: tuple[int, ...]) -> dict[str, Any]:
    """Packets, exchanges (by status) and records of ``path`` (decoded by kwsniff)."""
    engine = Engine(EngineOptions(ports=ports))
    names = TopicNames()
    produced = fetched = 0
    with open_capture(str(path)) as source:
        for ex in engine.run(source):
            facts = ExchangeFacts(ex, names)
            produced += facts.request_side.records
            fetched += facts.response_side.records
    s = engine.summary
    return {"packets": s.packets, "exchanges": s.exchanges_total,
            "statuses": dict(s.exchanges), "records_produced": produced,
            "records_fetched": fetched, "records": produced + fetched}


def sources_digest() -> str:
    """SHA-256 over kwsniff's Python sources (paths and contents, in path order)."""
    root = Path(kwsniff.__file__).parent
    h = hashlib.sha256()
    for src in sorted(root.rglob("*.py")):
        h.update(str(src.relative_to(root)).encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()


def cached_counts(path: Path, ports: tuple[int, ...]) -> dict[str, Any]:
    st = path.stat()
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ports": list(ports),
           "kwsniff": sources_digest()}
    cache = path.with_suffix(".counts.json")
    try:
        doc = json.loads(cache.read_text())
        if doc.get("key") == key:
            return doc["counts"]
    except (OSError, ValueError, KeyError):
        pass
    counts = count(path, ports)
    tmp = cache.with_suffix(".part")
    tmp.write_text(json.dumps({"key": key, "counts": counts}, indent=1) + "\n")
    tmp.replace(cache)
    return counts
