"""Is this TCP connection Kafka, and which side is the client?

Contract: :func:`classify` looks at the first bytes of both directions (as buffered by
the framers, with the stream offsets where TCP segments began) and returns a
:class:`Verdict`, or None when it needs more bytes.  It never raises.

Policy (documented in ``docs/conversations.md``):

* The client side comes from the TCP handshake when it was captured, else from the
  configured/learned Kafka port, else from content: the direction whose frames parse as
  requests and whose correlation ids come back at the start of the other direction's
  frames.
* On a Kafka port (configured with ``--port`` or learned) little evidence is needed:
  TLS records -> ``tls``; a complete 0.7 request and no modern one -> ``kafka-0.7``;
  otherwise ``kafka`` as soon as one request decodes exactly or a plausible one has its
  correlation id echoed by the other side, or (client side known) a plausible chain of
  responses; when the detection budget runs out or the connection ends, ``kafka`` if
  (client side known) a plausible request starts the client's bytes (decoding reports
  its problems), or
  if plausible requests or responses were seen anywhere (framing
  resynchronises and reports what it skips), or when the client's bytes start with a
  well-formed request of an unknown API key whose framing is confirmed (its id answered,
  a plausible request after it, or every byte there), else ``other`` (reported as a
  problem).
* On any other port the bar is high, to keep false positives low: at least one request
  that is plausible *and* decodes exactly (every byte consumed, no problem) with its
  response's correlation id echoed; a one-way capture needs three chained requests that
  decode exactly, or, when the connection or the capture ends, one or two requests that
  decode exactly and are every byte it carried.  A 0.7 connection
  needs a request that parses exactly plus a response with a known error code.
  Everything else is ``other`` once the budget is spent or the connection ends.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

from kwsniff.kafka import decoding, legacy07
from kwsniff.kafka.plausible import (
    MIN_REQUEST_SIZE,
    client_id_ok,
    looks_like_tls,
    max_version,
    request_header_at,
    response_size_at,
)

KAFKA = "kafka"
KAFKA07 = "kafka-0.7"
TLS = "tls"
OTHER = "other"

#: segment starts examined per direction when the stream may start mid-message
MAX_STARTS = 24


@dataclass(slots=True)
class Verdict:
    kind: str                 # KAFKA, KAFKA07, TLS, OTHER
    client_dir: int | None    # 0: conn.a is the client, 1: conn.b is
    reason: str               # how it was decided (for the connection summary)


@dataclass(slots=True)
class _Chain:
    count: int = 0
    corrs: tuple[int, ...] = ()
    start: int = -1
    exact: int = 0            # requests that decoded exactly
    end: int = -1             # where the chain's last whole frame ends


def _starts(seg_starts: Sequence[int]) -> list[int]:
    out = [0]
    for s in seg_starts:
        if s > 0 and s not in out:
            out.append(s)
            if len(out) >= MAX_STARTS:
                break
    return out


def _request_chain(buf: memoryview, starts: Sequence[int], max_frame: int) -> _Chain:
    end = len(buf)
    best = _Chain()
    for p in _starts(starts):
        q = p
        corrs: list[int] = []
        exact = 0
        while True:
            h = request_header_at(buf, q, end, max_frame)
            if h is None or q + 4 + h[0] > end:
                break
            corrs.append(h[3])
            if exact == len(corrs) - 1 and exact < 3 and \
                    _decodes_exactly(bytes(buf[q + 4:q + 4 + h[0]])):
                exact += 1
            q += 4 + h[0]
            if len(corrs) >= 8:
                break
        if len(corrs) > best.count or (len(corrs) == best.count and exact > best.exact):
            best = _Chain(len(corrs), tuple(corrs), p, exact, q)
        if best.count >= 2 and best.start == 0:
            break
    return best


def _decodes_exactly(raw: bytes) -> bool:
    return decoding.decodes_exactly(decoding.decode_request(raw))


def _response_matches(buf: memoryview, starts: Sequence[int], corrs: Sequence[int],
                      max_frame: int) -> int:
    if not corrs:
        return 0
    wanted = set(corrs)
    end = len(buf)
    best = 0
    for p in _starts(starts):
        q = p
        seen: set[int] = set()
        while True:
            h = response_size_at(buf, q, end, max_frame)
            if h is None:
                break
            if h[1] in wanted:
                seen.add(h[1])
            q += 4 + h[0]
            if q >= end:
                break
        best = max(best, len(seen))
    return best


def _response_chain(buf: memoryview, starts: Sequence[int], max_frame: int) -> bool:
    """Plausible response frames from a segment start: two in a row, or one that ends
    exactly where the buffered bytes or a TCP segment end."""
    end = len(buf)
    bounds = set(starts)
    for p in _starts(starts):
        q = p
        n = 0
        while True:
            h = response_size_at(buf, q, end, max_frame)
            if h is None or q + 4 + h[0] > end:
                break
            n += 1
            q += 4 + h[0]
            if n >= 2 or q == end or q in bounds:
                return True
    return False


def _chain07(buf: memoryview, starts: Sequence[int], max_frame: int) -> int:
    end = len(buf)
    best = 0
    for p in _starts(starts):
        q = p
        n = 0
        while True:
            size = legacy07.plausible_request_at(buf, q, end, max_frame)
            if size is None:
                break
            n += 1
            q += 4 + size
        best = max(best, n)
    return best


def _unknown_first_request(buf: memoryview, other: memoryview, final: bool,
                           max_frame: int) -> bool:
    """A request of an API key the schema table does not know starts ``buf`` (a
    well-formed header: version up to 127, correlation id >= 0, printable client id) and
    its framing is confirmed: the other side's first frame answers its correlation id, a
    plausible request follows it, or (at the end) it is every byte there."""
    n = len(buf)
    if n < 14:
        return False
    size, key, version, corr, cid = struct.unpack_from(">ihhih", buf, 0)
    if max_version(key) >= 0 or key < 0 or not 0 <= version <= 127 or corr < 0 or \
            size < MIN_REQUEST_SIZE or size > max_frame or not -1 <= cid <= size - 10:
        return False
    if cid > 0 and (14 + cid > n or not client_id_ok(buf, 14, cid)):
        return False
    h = response_size_at(other, 0, len(other), max_frame)
    if h is not None and h[1] == corr:
        return True
    q = 4 + size
    if q == n:
        return final
    return q < n and request_header_at(buf, q, n, max_frame) is not None


def classify(bufs: tuple[memoryview, memoryview], seg_starts: tuple[Sequence[int], Sequence[int]],
             client_dir: int | None, kafka_port: bool, final: bool, budget: int,
             max_frame: int, client_by: str = "content") -> Verdict | None:
    """Decide what the connection carries; None while more bytes could change the answer."""
    exhausted = final or max(len(bufs[0]), len(bufs[1])) >= budget
    dirs = (client_dir,) if client_dir is not None else (0, 1)

    # TLS: a client speaks first, with a handshake record
    for d in dirs:
        if looks_like_tls(bufs[d]):
            return Verdict(TLS, d, "TLS handshake record")

    best: tuple[int, int, int, int] | None = None   # (matches, exact, count, dir)
    chains: dict[int, _Chain] = {}
    for d in dirs:
        chain = _request_chain(bufs[d], seg_starts[d], max_frame)
        chains[d] = chain
        if chain.count == 0:
            continue
        matches = _response_matches(bufs[1 - d], seg_starts[1 - d], chain.corrs, max_frame)
        score = (matches, chain.exact, chain.count, d)
        if best is None or score[:3] > best[:3]:
            best = score

    if kafka_port:
        if best is None or best[1] == 0:
            for d in dirs:
                if _chain07(bufs[d], seg_starts[d], max_frame) > 0:
                    return Verdict(KAFKA07, d, client_by if client_dir is not None else
                                   "content: Kafka 0.7 request")
        if best is not None and (best[0] > 0 or (client_dir is not None and best[1] > 0)):
            d = best[3]
            return Verdict(KAFKA, d, client_by if client_dir is not None else
                           "content: requests and echoed correlation ids")
        if best is not None and exhausted and best[1] > 0:
            return Verdict(KAFKA, best[3], "content: requests")
        if best is not None and exhausted and client_dir is not None and \
                chains[best[3]].start == 0:
            # a plausible request whose body does not decode (odd strings, unknown
            # fields) or a lone request with trailing bytes: one exchange with its
            # problem, not a connection that disappears
            return Verdict(KAFKA, best[3], client_by + ": plausible request")
        for d in dirs:
            if _unknown_first_request(bufs[d], bufs[1 - d], final, max_frame):
                return Verdict(KAFKA, d, client_by if client_dir is not None else
                               "content: request of an unknown API key")
        if client_dir is not None or exhausted:
            for d in dirs:
                # (the client must have spoken too: a 0.7 response looks like a modern one)
                if (len(bufs[d]) or exhausted) and \
                        _response_chain(bufs[1 - d], seg_starts[1 - d], max_frame):
                    return Verdict(KAFKA, client_dir if client_dir is not None else d,
                                   "port: responses only")
        if exhausted:
            return Verdict(OTHER, client_dir, "no plausible Kafka frame")
        return None

    # not a Kafka port: strong evidence only
    if best is not None:
        matches, exact, count, d = best
        if matches >= 1 and exact >= 1:
            return Verdict(KAFKA, d, "content: request decodes exactly, correlation id echoed")
        if exhausted and not len(bufs[1 - d]) and exact >= 3:
            return Verdict(KAFKA, d, "content: chained requests decode exactly (one-way)")
        chain = chains[d]
        if final and not len(bufs[1 - d]) and exact >= 1 and exact == count and \
                chain.start == 0 and chain.end == len(bufs[d]):
            # a lone request (or two) at the end of a capture: every byte the connection
            # carried is whole requests that decode exactly
            return Verdict(KAFKA, d, "content: whole requests that decode exactly (one-way)")
    for d in dirs:
        if _chain07(bufs[d], seg_starts[d], max_frame) > 0 and \
                legacy07.plausible_response_at(bufs[1 - d], 0, len(bufs[1 - d]), max_frame) is not None:
            return Verdict(KAFKA07, d, "content: Kafka 0.7 request and response")
    if exhausted:
        return Verdict(OTHER, client_dir, "no Kafka frames")
    return None
