"""Statistics over exchanges (``kwsniff stats``), the Kafka counterpart of tshark ``-z``.

Contract:

* :class:`StatsCollector` takes exchanges one at a time (``add(facts)``) and keeps
  memory bounded regardless of capture size:

  * latency percentiles per API/version: exact (nearest-rank over all samples) up to
    :data:`EXACT_SAMPLES` samples per series, then a log-bucketed histogram with 1 %
    relative error (the DDSketch idea; at most a few thousand buckets between 1 µs and
    days); ``max`` and ``min`` are always exact;
  * topics, clients and connections are counted exactly up to ``limit`` distinct keys
    each; past that the smallest half is dropped whenever the table overflows, and the
    report says the tables are approximate (the top entries stay right unless the
    traffic is spread very evenly over more keys than the limit);
  * APIs, versions, error codes and statuses are naturally bounded.

* :meth:`StatsCollector.report` returns a plain dict (also ``kwsniff stats --json``);
  :func:`render_report` turns it into the text tables.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from kwsniff.kafka.model import STATUSES
from kwsniff.output.color import PLAIN, Palette
from kwsniff.output.digest import human_bytes
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import format_address
from kwsniff.output.names import api_label, error_label
from kwsniff.output.sasl_auth import AuthTracker
from kwsniff.output.summary import printable

EXACT_SAMPLES = 4096
RELATIVE_ACCURACY = 0.01
DEFAULT_LIMIT = 10_000
PERCENTILES = (50, 90, 99)
_MIN_MS = 0.001   # latencies below 1 µs are counted in the lowest bucket


class LatencySketch:
    """Percentiles of a stream of non-negative values with bounded memory."""

    __slots__ = ("count", "total", "min", "max", "_exact", "_buckets", "_zero")

    _GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
    _LOG_GAMMA = math.log(_GAMMA)

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.min: float | None = None
        self.max: float | None = None
        self._exact: list[float] | None = []
        self._buckets: dict[int, int] = {}
        self._zero = 0

    def add(self, value: float) -> None:
        if value != value:  # NaN
            return
        self.count += 1
        self.total += value
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value
        exact = self._exact
        if exact is not None:
            exact.append(value)
            if len(exact) > EXACT_SAMPLES:
                for v in exact:
                    self._bucket(v)
                self._exact = None
        else:
            self._bucket(value)

    def _bucket(self, value: float) -> None:
        if value < _MIN_MS:
            self._zero += 1
            return
        i = math.ceil(math.log(value) / self._LOG_GAMMA)
        self._buckets[i] = self._buckets.get(i, 0) + 1

    @property
    def exact(self) -> bool:
        return self._exact is not None

    def merge(self, other: "LatencySketch") -> None:
        """Add ``other``'s values: exactly while ``other`` still holds them, else each
        of its buckets as its representative value (within the same 1 %); min and max
        stay exact."""
        if other._exact is not None:
            for v in other._exact:
                self.add(v)
            return
        gamma = self._GAMMA
        for i, n in other._buckets.items():
            rep = 2 * gamma ** i / (gamma + 1)
            for _ in range(n):
                self.add(rep)
        for _ in range(other._zero):
            self.add(0.0)
        for v in (other.min, other.max):
            if v is not None:
                self.min = v if self.min is None else min(self.min, v)
                self.max = v if self.max is None else max(self.max, v)

    def quantile(self, q: float) -> float | None:
        """Nearest-rank quantile, ``q`` in [0, 1]; None without samples."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        if self._exact is not None:
            return sorted(self._exact)[rank - 1]
        if rank <= self._zero:
            return 0.0
        seen = self._zero
        for i in sorted(self._buckets):
            seen += self._buckets[i]
            if seen >= rank:
                estimate = 2 * self._GAMMA ** i / (self._GAMMA + 1)
                return min(max(estimate, self.min or 0.0), self.max or estimate)
        return self.max

    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


class BoundedCounter:
    """``key -> list of numbers`` with at most ``limit`` keys (see module contract)."""

    __slots__ = ("limit", "width", "rank", "data", "dropped")

    def __init__(self, width: int, limit: int = DEFAULT_LIMIT, rank: int = 0) -> None:
        self.limit = limit
        self.width = width
        self.rank = rank          # which column decides what is dropped
        self.data: dict[Any, list[float]] = {}
        self.dropped = 0

    def row(self, key: Any) -> list[float]:
        row = self.data.get(key)
        if row is None:
            if len(self.data) >= self.limit:
                self._shrink()
            row = self.data[key] = [0] * self.width
        return row

    def _shrink(self) -> None:
        keep = sorted(self.data.items(), key=lambda kv: kv[1][self.rank], reverse=True)
        half = max(1, self.limit // 2)
        self.dropped += len(keep) - half
        self.data = dict(keep[:half])

    def top(self, n: int, column: int | None = None) -> list[tuple[Any, list[float]]]:
        col = self.rank if column is None else column
        return sorted(self.data.items(), key=lambda kv: (-kv[1][col], str(kv[0])))[:n]

    @property
    def approximate(self) -> bool:
        return self.dropped > 0


class _ApiStats:
    __slots__ = ("count", "errors", "req_bytes", "resp_bytes", "latency", "statuses")

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.req_bytes = 0
        self.resp_bytes = 0
        self.latency = LatencySketch()
        self.statuses: dict[str, int] = {}


# topic columns
T_PROD_REC, T_PROD_BYTES, T_FETCH_REC, T_FETCH_BYTES, T_TOTAL_REC = range(5)
# client columns
C_EXCHANGES, C_ERRORS, C_BYTES, C_PROD_REC, C_FETCH_REC = range(5)
# connection columns
K_EXCHANGES, K_BYTES, K_FIRST, K_LAST, K_ERRORS = range(5)


class StatsCollector:
    """Accumulates statistics over exchanges; see the module contract."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.exchanges = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.statuses: dict[str, int] = {s: 0 for s in STATUSES}
        self.apis: dict[tuple[str, int, int | None], _ApiStats] = {}
        self.errors: dict[tuple[str, int, int], int] = {}   # (protocol, api, code) -> count
        self.topics = BoundedCounter(5, limit, rank=T_TOTAL_REC)
        self.clients = BoundedCounter(5, limit, rank=C_EXCHANGES)
        self.connections = BoundedCounter(5, limit, rank=K_EXCHANGES)
        self.connection_info: dict[int, tuple[str, str, str]] = {}
        self.auth = AuthTracker(limit)
        self.problems = 0

    def add(self, facts: ExchangeFacts) -> None:
        ex = facts.exchange
        self.exchanges += 1
        ts = ex.ts
        if self.first_ts is None or ts < self.first_ts:
            self.first_ts = ts
        end = ex.response_ts if ex.response_ts is not None else ts
        if self.last_ts is None or end > self.last_ts:
            self.last_ts = end
        self.statuses[ex.status] = self.statuses.get(ex.status, 0) + 1
        api_key = ex.api_key if ex.api_key is not None else -1
        key = (ex.protocol, api_key, ex.api_version)
        api = self.apis.get(key)
        if api is None:
            api = self.apis[key] = _ApiStats()
        api.count += 1
        api.statuses[ex.status] = api.statuses.get(ex.status, 0) + 1
        req_bytes = facts.request_bytes or 0
        resp_bytes = facts.response_bytes or 0
        api.req_bytes += req_bytes
        api.resp_bytes += resp_bytes
        latency = ex.latency_ms
        if latency is not None:
            api.latency.add(latency)
        codes = facts.error_codes
        if codes:
            api.errors += 1
            errors = self.errors
            for code in codes:
                ekey = (ex.protocol, api_key, code)
                errors[ekey] = errors.get(ekey, 0) + 1
        problems = len(ex.problems) + sum(
            len(m.problems) for m in (ex.request, ex.response) if m is not None)
        self.problems += problems

        produced, fetched = facts.produced, facts.fetched
        for topic, (records, size) in produced.items():
            row = self.topics.row(topic)
            row[T_PROD_REC] += records
            row[T_PROD_BYTES] += size
            row[T_TOTAL_REC] += records
        for topic, (records, size) in fetched.items():
            row = self.topics.row(topic)
            row[T_FETCH_REC] += records
            row[T_FETCH_BYTES] += size
            row[T_TOTAL_REC] += records

        client_key = (ex.client_id, ex.client[0] if ex.client else "")
        row = self.clients.row(client_key)
        row[C_EXCHANGES] += 1
        row[C_ERRORS] += 1 if codes else 0
        row[C_BYTES] += req_bytes + resp_bytes
        row[C_PROD_REC] += sum(r for r, _ in produced.values())
        row[C_FETCH_REC] += sum(r for r, _ in fetched.values())

        conn = self.connections.row(ex.stream)
        if conn[K_EXCHANGES] == 0:
            conn[K_FIRST] = ts
            info = (format_address(ex.client), format_address(ex.broker), ex.client_id or "")
            self.connection_info[ex.stream] = info
        elif ex.client_id and not self.connection_info.get(ex.stream, ("", "", ""))[2]:
            c, b, _ = self.connection_info[ex.stream]
            self.connection_info[ex.stream] = (c, b, ex.client_id)
        conn[K_EXCHANGES] += 1
        conn[K_BYTES] += req_bytes + resp_bytes
        conn[K_LAST] = max(conn[K_LAST], end)
        conn[K_ERRORS] += 1 if codes else 0
        self.auth.add(facts)
        if len(self.connection_info) > 2 * self.connections.limit:
            live = self.connections.data
            self.connection_info = {k: v for k, v in self.connection_info.items() if k in live}

    # ------------------------------------------------------------------------- report
    def report(self, top: int = 10) -> dict[str, Any]:
        """Everything as plain data (sorted, ``top`` entries per top-N table)."""
        apis = []
        for (protocol, key, version), s in sorted(
                self.apis.items(), key=lambda kv: (kv[0][0] != "kafka", kv[0][1],
                                                   -1 if kv[0][2] is None else kv[0][2])):
            lat = s.latency
            apis.append({
                "api_key": key if key >= 0 else None,
                "api_name": api_label(key if key >= 0 else None, protocol),
                "api_version": version,
                "protocol": protocol,
                "count": s.count,
                "errors": s.errors,
                "statuses": dict(s.statuses),
                "request_bytes": s.req_bytes,
                "response_bytes": s.resp_bytes,
                "latency_ms": {
                    "samples": lat.count,
                    "min": lat.min,
                    "mean": lat.mean(),
                    **{f"p{p}": lat.quantile(p / 100) for p in PERCENTILES},
                    "max": lat.max,
                    "exact": lat.exact,
                },
            })
        errors = [{"api_key": key if key >= 0 else None,
                   "api_name": api_label(key if key >= 0 else None, protocol),
                   "error_code": code, "error_name": error_label(code, protocol),
                   "count": n}
                  for (protocol, key, code), n in sorted(
                      self.errors.items(), key=lambda kv: (-kv[1], kv[0][1], kv[0][2]))]
        topics = [{"topic": t, "produced_records": int(r[T_PROD_REC]),
                   "produced_bytes": int(r[T_PROD_BYTES]), "fetched_records": int(r[T_FETCH_REC]),
                   "fetched_bytes": int(r[T_FETCH_BYTES])}
                  for t, r in self.topics.top(top)]
        topics_by_bytes = [
            {"topic": t, "produced_bytes": int(r[T_PROD_BYTES]),
             "fetched_bytes": int(r[T_FETCH_BYTES])}
            for t, r in sorted(self.topics.data.items(),
                               key=lambda kv: (-(kv[1][T_PROD_BYTES] + kv[1][T_FETCH_BYTES]),
                                               str(kv[0])))[:top]]
        clients = [{"client_id": cid, "address": ip, "exchanges": int(r[C_EXCHANGES]),
                    "errors": int(r[C_ERRORS]), "bytes": int(r[C_BYTES]),
                    "produced_records": int(r[C_PROD_REC]),
                    "fetched_records": int(r[C_FETCH_REC])}
                   for (cid, ip), r in self.clients.top(top)]
        connections = []
        for stream, r in self.connections.top(top):
            client, broker, cid = self.connection_info.get(stream, ("", "", ""))
            connections.append({"stream": stream, "client": client, "broker": broker,
                                 "client_id": cid or None, "exchanges": int(r[K_EXCHANGES]),
                                 "bytes": int(r[K_BYTES]), "errors": int(r[K_ERRORS]),
                                 "first_ts": r[K_FIRST], "last_ts": r[K_LAST],
                                 "duration_s": max(0.0, r[K_LAST] - r[K_FIRST])})
        return {
            "exchanges": self.exchanges,
            "statuses": dict(self.statuses),
            "problems": self.problems,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "duration_s": (self.last_ts - self.first_ts)
            if self.first_ts is not None and self.last_ts is not None else None,
            "apis": apis,
            "errors": errors,
            "topics": topics,
            "topics_by_bytes": topics_by_bytes,
            "topics_seen": len(self.topics.data) + self.topics.dropped,
            "clients": clients,
            "clients_seen": len(self.clients.data) + self.clients.dropped,
            "connections": connections,
            "connections_seen": len(self.connections.data) + self.connections.dropped,
            "authentication": self.auth.report(top),
            "approximate": {"topics": self.topics.approximate,
                            "clients": self.clients.approximate,
                            "connections": self.connections.approximate},
        }


# ----------------------------------------------------------------------------- text

def _ms(v: float | None) -> str:
    """Milliseconds as ``decode`` prints them: 2 decimals whatever the size."""
    if v is None:
        return "-"
    return f"{v:.2f}"


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> Iterator[str]:
    rows = [[printable(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i])
                         for i, c in enumerate(cells)).rstrip()
    yield fmt(headers)
    yield "  ".join("-" * w for w in widths)
    for row in rows:
        yield fmt(row)


def render_report(report: dict[str, Any], *, title: str = "",
                  palette: Palette = PLAIN) -> Iterator[str]:
    """The text form of :meth:`StatsCollector.report`."""
    h = palette.heading
    yield h(f"Kafka statistics{': ' + title if title else ''}")
    statuses = ", ".join(f"{k} {v}" for k, v in report["statuses"].items() if v)
    yield f"Exchanges: {report['exchanges']}" + (f" ({statuses})" if statuses else "")
    if report["duration_s"] is not None:
        yield f"Duration: {report['duration_s']:.3f} s"
    if report["problems"]:
        yield palette.warn(f"Decode problems: {report['problems']}")

    yield ""
    yield h("Requests and latency (ms) by API and version")
    rows = []
    for a in report["apis"]:
        lat = a["latency_ms"]
        name = a["api_name"] + (f" v{a['api_version']}" if a["api_version"] is not None else "")
        rows.append([name, str(a["count"]), str(a["errors"]), str(lat["samples"]),
                     _ms(lat["p50"]), _ms(lat["p90"]), _ms(lat["p99"]), _ms(lat["max"]),
                     human_bytes(a["request_bytes"]), human_bytes(a["response_bytes"])])
    yield from _table(["API", "Count", "Errors", "Timed", "p50", "p90", "p99", "max",
                       "Requests", "Responses"], rows, {1, 2, 3, 4, 5, 6, 7, 8, 9})
    if report["apis"]:
        yield palette.dim("(Timed: exchanges with a request and its response, the ones "
                          "whose latency the percentiles count)")
    if any(not a["latency_ms"]["exact"] for a in report["apis"]):
        yield palette.dim("(percentiles of large series are estimated within 1 %)")

    yield ""
    yield h("Errors by API and code")
    if report["errors"]:
        rows = [[e["api_name"], e["error_name"], str(e["error_code"]), str(e["count"])]
                for e in report["errors"]]
        yield from _table(["API", "Error", "Code", "Exchanges"], rows, {2, 3})
    else:
        yield "no errors"

    yield ""
    yield h("Top topics by records")
    if report["topics"]:
        rows = [[t["topic"], str(t["produced_records"]), human_bytes(t["produced_bytes"]),
                 str(t["fetched_records"]), human_bytes(t["fetched_bytes"])]
                for t in report["topics"]]
        yield from _table(["Topic", "Produced", "Produced bytes", "Fetched", "Fetched bytes"],
                          rows, {1, 2, 3, 4})
        yield ""
        yield h("Top topics by bytes")
        rows = [[t["topic"], human_bytes(t["produced_bytes"]), human_bytes(t["fetched_bytes"])]
                for t in report["topics_by_bytes"]]
        yield from _table(["Topic", "Produced bytes", "Fetched bytes"], rows, {1, 2})
    else:
        yield "no records"
    if report["approximate"]["topics"]:
        yield palette.dim(f"(approximate: {report['topics_seen']} topics seen)")

    yield ""
    yield h("Top clients by exchanges")
    rows = [[c["client_id"] if c["client_id"] is not None else "-", c["address"],
             str(c["exchanges"]), str(c["errors"]), human_bytes(c["bytes"]),
             str(c["produced_records"]), str(c["fetched_records"])] for c in report["clients"]]
    yield from _table(["Client id", "Address", "Exchanges", "Errors", "Bytes", "Produced",
                       "Fetched"], rows, {2, 3, 4, 5, 6})

    yield ""
    shown, seen = len(report["connections"]), report["connections_seen"]
    yield h(f"Top {shown} of {seen} connections by exchanges" if shown < seen
            else f"Connections ({seen}) by exchanges")
    rows = [[str(c["stream"]), f"{c['client']} → {c['broker']}", c["client_id"] or "-",
             str(c["exchanges"]), str(c["errors"]), human_bytes(c["bytes"]),
             f"{c['duration_s']:.3f}"] for c in report["connections"]]
    yield from _table(["Stream", "Client → Broker", "Client id", "Exchanges", "Errors", "Bytes",
                       "Duration s"], rows, {0, 3, 4, 5, 6})
    yield from _render_auth(report.get("authentication"), h, palette)


def auth_heading(auth: dict[str, Any] | None) -> str | None:
    """``SASL authentication: N attempts (failed F, ...)`` for the report's
    ``authentication`` part; None when it holds no attempt (no SASL section)."""
    if not auth or not auth["attempts"]:
        return None
    n = auth["attempts"]
    counts = ", ".join(f"{o} {c}" for o, c in auth["outcomes"].items() if c)
    return f"SASL authentication: {n} attempt{'s' if n != 1 else ''} ({counts})"


def _render_auth(auth: dict[str, Any] | None, h: Any, palette: Palette) -> Iterator[str]:
    """The SASL section: only when the exchanges held authentication attempts."""
    heading = auth_heading(auth)
    if auth is None or heading is None:
        return
    yield ""
    yield h(heading)
    rows = [[r["mechanism"] or "-", r["user"] or "-", r["client_id"] or "-", r["outcome"],
             r["reason"] or "-", str(r["attempts"]), str(r["first_stream"])]
            for r in auth["rows"]]
    yield from _table(["Mechanism", "User", "Client id", "Outcome", "Reason", "Attempts",
                       "First stream"], rows, {5, 6})
    more = auth["rows_seen"] - len(auth["rows"])
    if more > 0:
        yield palette.dim(f"({more} more row{'s' if more != 1 else ''}; --top shows more)")
    if auth["approximate"]:
        yield palette.dim("(approximate: rare rows were dropped to bound memory)")
