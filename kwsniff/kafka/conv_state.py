"""Shared state of the conversation layer: options, the run-wide context, waiting items.

Contract: :class:`Options` are the knobs (built by the engine from its options);
:class:`Context` is shared by every conversation of one run (reorder buffer, topic ids,
API histories per client, learned broker endpoints, run counters); :class:`Pending` is a
request waiting for its response (or an orphan waiting for inference);
:class:`UnorderedRequests` bounds the requests that stopped holding back the capture
order (see :meth:`kwsniff.kafka.conv_release.ReleaseControl._force`).  Nothing here
does I/O.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict, deque
from functools import lru_cache
from typing import Any, Iterable

from kwsniff.kafka import decoding, detect
from kwsniff.kafka.inference import ApiHistory
from kwsniff.kafka.model import KafkaMessage
from kwsniff.kafka.ordering import BYTE_LIMIT, Reorderer
from kwsniff.kafka.topic_ids import TopicIds

UNDECIDED = "undecided"
KAFKA = detect.KAFKA
KAFKA07 = detect.KAFKA07
TLS = detect.TLS
OTHER = detect.OTHER

PROTO_SASL = "kafka-sasl"
#: seconds of capture time an undecided connection on a non-Kafka port may hold back
#: the release of other connections' exchanges
UNDECIDED_HOLD = 2.0


class Options:
    """Knobs of the conversation layer (the engine builds it from its options)."""

    __slots__ = ("ports", "auto_detect", "max_frame", "window", "detect_budget", "timeout",
                 "overtake_limit", "orphan_delay", "orphan_requests", "bodies", "recent_limit",
                 "show_secrets", "acks0_grace", "defer_bodies")

    def __init__(self, ports: Iterable[int] = (9092,), auto_detect: bool = True,
                 max_frame: int = 100 << 20, window: int = 4 << 20, detect_budget: int = 64 << 10,
                 timeout: float = 300.0, overtake_limit: int = 8, orphan_delay: float = 10.0,
                 orphan_requests: int = 32, bodies: bool = True, recent_limit: int = 256,
                 show_secrets: bool = False, acks0_grace: float = 1.0,
                 defer_bodies: bool = False) -> None:
        self.ports = frozenset(ports)
        self.auto_detect = auto_detect
        self.max_frame = max_frame
        self.window = window
        self.detect_budget = detect_budget
        self.timeout = timeout
        self.overtake_limit = overtake_limit
        self.orphan_delay = orphan_delay
        self.orphan_requests = orphan_requests
        self.bodies = bodies
        self.recent_limit = recent_limit
        self.show_secrets = show_secrets
        self.acks0_grace = acks0_grace
        # leave the bodies the layer does not need for later (kwsniff.kafka.decoding.complete)
        self.defer_bodies = defer_bodies


class Context:
    """State shared by all conversations of one run."""

    __slots__ = ("options", "reorder", "topic_ids", "histories", "learned", "stats", "now",
                 "annotate_ctx", "unordered", "on_learn", "on_other", "version_ranges")

    def __init__(self, options: Options, stats: Any, reorder_limit: int = 10_000,
                 reorder_bytes: int = BYTE_LIMIT) -> None:
        self.options = options
        self.reorder = Reorderer(reorder_limit, reorder_bytes)
        self.topic_ids = TopicIds()
        self.histories: OrderedDict[Any, ApiHistory] = OrderedDict()
        self.learned: set[tuple[str, int]] = set()       # broker endpoints seen in Metadata
        self.stats = stats                                # engine's RunSummary (duck-typed)
        self.now = 0.0
        self.annotate_ctx = decoding.new_annotate_context(options.show_secrets)
        self.unordered = UnorderedRequests(reorder_limit)
        self.on_learn: Any = None          # called with each newly learned endpoint
        # called with a conversation not on a Kafka port judged not Kafka, before its
        # framers drop what detection buffered (the engine keeps the start)
        self.on_other: Any = None
        # one dict per distinct ApiVersions answer (see shared_ranges)
        self.version_ranges: dict[tuple, dict[int, tuple[int, int]]] = {}

    def shared_ranges(self, ranges: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """The run's dict equal to ``ranges`` (the API version ranges of an ApiVersions
        answer), ``ranges`` itself the first time: connections to the same brokers get
        the same answer, and each connection's summary keeps one (about 4 KB for 60
        APIs; the TUI keeps 100,000 summaries). Readers never change these dicts (the
        :class:`~kwsniff.kafka.conn_summary.ConnectionSummary` contract). Bounded: past
        1,024 distinct answers the table starts again."""
        key = tuple(ranges.items())
        known = self.version_ranges.get(key)
        if known is not None:
            return known
        if len(self.version_ranges) >= 1024:
            self.version_ranges.clear()
        self.version_ranges[key] = ranges
        return ranges

    def learn(self, endpoint: tuple[str, int]) -> None:
        """Remember a broker endpoint (bounded: a port scan must not grow memory); a new
        one is passed to ``on_learn`` (the engine decodes other connections to it)."""
        if len(self.learned) < 10_000 and endpoint not in self.learned:
            self.learned.add(endpoint)
            if self.on_learn is not None:
                self.on_learn(endpoint)

    def history(self, key: Any) -> ApiHistory:
        h = self.histories.get(key)
        if h is None:
            h = self.histories[key] = ApiHistory()
            if len(self.histories) > 10_000:
                self.histories.popitem(last=False)
        return h


class Pending:
    """A request waiting for its response (or an orphan waiting for inference)."""

    __slots__ = ("key", "msg", "corr", "done", "overtaken", "conv", "kind", "unordered")

    def __init__(self, key: tuple, msg: KafkaMessage, conv: Any, kind: str) -> None:
        self.key = key
        self.msg = msg
        self.corr = msg.correlation_id
        self.done = False
        self.overtaken = 0
        self.conv = conv
        self.kind = kind            # "kafka", "acks0", "sasl", "0.7", "orphan"
        self.unordered = False      # no longer holds back the capture order (see _force)


class UnorderedRequests:
    """The run's requests that still wait for a response but no longer hold back the
    capture order (the reorder buffer overflowed behind them), oldest first.

    Contract: :meth:`add` takes a waiting request (``Pending`` of kind "kafka") and
    returns the oldest ones to give up (report unanswered) so that at most ``limit``
    wait (memory stays bounded as when the reorder buffer alone held them back);
    :meth:`finished` is called when such a request is paired or reported (``done``)."""

    __slots__ = ("items", "live", "limit")

    def __init__(self, limit: int) -> None:
        self.items: deque[Pending] = deque()
        self.live = 0
        self.limit = limit

    def add(self, p: Pending) -> list[Pending]:
        p.unordered = True
        items = self.items
        items.append(p)
        self.live += 1
        out = []
        while self.live > self.limit and items:
            q = items.popleft()
            if q.done:
                continue
            if q.conv.conn.ignored:        # its connection was abandoned (internal error)
                self.live -= 1
                continue
            out.append(q)
            self.live -= 1
            q.unordered = False            # (given up now: finished() must not count it)
        while items and items[0].done:
            items.popleft()
        if len(items) > 2 * self.live + 64:    # done items behind a long-waiting one
            self.items = deque(q for q in items if not q.done)
        return out

    def finished(self, p: Pending) -> None:
        if p.unordered:
            p.unordered = False
            self.live -= 1


#: how far apart consecutive correlation ids of one connection may plausibly be (clients
#: that share one counter over many connections leave gaps)
CORR_SPREAD = 1_000_000
_WRAP = (1 << 31) - CORR_SPREAD


def corr_after(corr: int, last: int | None) -> bool:
    """Whether ``corr`` can follow ``last`` on one connection (ids grow; int32 wraps)."""
    if last is None:
        return True
    if last < corr <= last + CORR_SPREAD:
        return True
    return last >= _WRAP and corr < CORR_SPREAD


@lru_cache(maxsize=4096)
def is_ip(host: str) -> bool:
    """Whether ``host`` is an IPv4 or IPv6 address (Metadata answers name brokers by
    host; the same few recur in every answer: remembered)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
