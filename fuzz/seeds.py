"""Seed inputs taken from the real captures in ``pcaps/``.

Contract: every function returns a list of bytes-like items (possibly empty when the
captures are missing) and caches its result; sizes are capped so that seeds stay small
enough for fast fuzzing (libFuzzer's ``-max_len`` of each target).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from fuzz import wire

ROOT = Path(__file__).resolve().parent.parent
PCAPS = ROOT / "pcaps"


def capture_paths() -> list[Path]:
    return sorted(PCAPS.glob("*.pcap"))


@lru_cache(maxsize=None)
def _decoded(path: Path) -> tuple:
    from kwsniff.capture import open_capture
    from kwsniff.engine import iter_exchanges
    with open_capture(str(path)) as src:
        return tuple(iter_exchanges(src))


@lru_cache(maxsize=None)
def capture_heads(limit: int = 6000) -> tuple[bytes, ...]:
    """The first ``limit`` bytes of every capture (a pcap header and its first packets)."""
    return tuple(p.read_bytes()[:limit] for p in capture_paths())


@lru_cache(maxsize=None)
def packets(limit: int = 40) -> tuple[tuple[int, bytes], ...]:
    """``(linktype, data)`` of the first ``limit`` packets of every capture."""
    from kwsniff.capture import open_capture
    out = []
    for p in capture_paths():
        with open_capture(str(p)) as src:
            for i, (_frame, _ts, linktype, data, _orig) in enumerate(src):
                if i >= limit:
                    break
                out.append((linktype, bytes(data)))
    return tuple(out)


@lru_cache(maxsize=None)
def frames() -> tuple[tuple[str, int, int, bytes], ...]:
    """``(kind, api_key, api_version, raw)`` of one request and one response per API key
    and version found in the captures (raw without the size prefix)."""
    seen: dict[tuple[str, int, int], bytes] = {}
    for p in capture_paths():
        for ex in _decoded(p):
            if ex.protocol != "kafka":
                continue
            for msg in (ex.request, ex.response):
                if msg is None or msg.api_key is None or msg.api_version is None or msg.missing:
                    continue
                key = (msg.kind, msg.api_key, msg.api_version)
                if key not in seen or len(msg.raw) < len(seen[key]):
                    seen[key] = bytes(msg.raw)
    return tuple((k, a, v, raw) for (k, a, v), raw in sorted(seen.items()))


@lru_cache(maxsize=None)
def record_sets(limit: int = 8192) -> tuple[bytes, ...]:
    """Distinct record sets (``records`` fields) of the captures, at most ``limit`` bytes."""
    from kwsniff.kafka.records import Records
    out: dict[bytes, None] = {}

    def walk(node: object, depth: int = 0) -> None:
        if depth > 12:
            return
        if isinstance(node, Records):
            if 0 < len(node.data) <= limit:
                out[node.data] = None
        elif isinstance(node, dict):
            for v in node.values():
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, depth + 1)

    for p in capture_paths():
        for ex in _decoded(p):
            for msg in (ex.request, ex.response):
                if msg is not None and msg.body:
                    walk(msg.body)
    return tuple(out)


@lru_cache(maxsize=None)
def streams(limit: int = 12000) -> tuple[bytes, ...]:
    """Stream scripts (see :mod:`fuzz.wire`) of every Kafka connection in the captures,
    cut after about ``limit`` payload bytes."""
    from kwsniff.capture import open_capture
    from kwsniff.tcp import ConnectionOpened, StreamData, iter_tcp_events
    out = []
    for p in capture_paths():
        conns: dict[int, list[tuple[int, bytes]]] = {}
        clients: dict[int, bool] = {}
        with open_capture(str(p)) as src:
            for ev in iter_tcp_events(src):
                if type(ev) is ConnectionOpened:
                    conns[ev.conn.index] = []
                    clients[ev.conn.index] = ev.conn.a_is_client is not False
                elif type(ev) is StreamData:
                    ops = conns.get(ev.conn.index)
                    if ops is None or sum(len(d) for _, d in ops) > limit:
                        continue
                    from_broker = (ev.direction == 1) == clients[ev.conn.index]
                    ops.append((wire.OP_BROKER if from_broker else 0, bytes(ev.data)))
        for ops in conns.values():
            if ops:
                out.append(wire.encode_script(wire.PLAIN, ops))
    return tuple(out)


def frames_of_kind(kind: str) -> list[tuple[int, int, bytes]]:
    return [(a, v, raw) for k, a, v, raw in frames() if k == kind]
