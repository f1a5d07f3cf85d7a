"""Consumer lag over time, per group, topic and partition.

Contract:

* The *high watermark* of a partition is the latest one seen anywhere in the capture:
  Fetch responses (``HighWatermark``) and ListOffsets responses to a request for the
  latest offset (timestamp -1).
* The group's *committed offset* comes from OffsetCommit (and TxnOffsetCommit)
  requests whose response has no error for that partition, at the response's time.
* The group's *fetch position* is the ``FetchOffset`` of its Fetch requests
  (the group of a Fetch: :mod:`.membership`).
* A sample is taken at every successful commit and every Fetch of the group, and for
  every group tracking a partition whenever its high watermark changes (so lag keeps
  growing in the timeline while a group is not fetching, e.g. during a rebalance):
  ``(time, high watermark, committed, position)``, with ``lag = high watermark -
  committed`` and ``position lag = high watermark - position`` (None while either
  side is unknown). Samples are kept per partition in two bounded
  :class:`.series.Series`, one for commits and one for the others.
* Exchanges arrive in capture order of their requests; the high watermark used for a
  sample is the latest from exchanges processed before it.
"""

from __future__ import annotations

from typing import Any

from kwsniff.output.insights.bodies import integer, topic_partitions
from kwsniff.output.insights.series import Series

OFFSET_COMMIT = 8
TXN_OFFSET_COMMIT = 28
LIST_OFFSETS = 2
LATEST = -1


class PartitionLag:
    __slots__ = ("committed", "position", "commits", "commit_errors", "series",
                 "commit_series", "max_lag")

    def __init__(self, capacity: int) -> None:
        self.committed: int | None = None
        self.position: int | None = None
        self.commits = 0
        self.commit_errors: dict[str, int] = {}
        self.series = Series(capacity)          # fetch and high-watermark samples
        self.commit_series = Series(capacity)   # commit samples (kept apart: rarer)
        self.max_lag: int | None = None


class LagTracker:
    def __init__(self, limit: int = 10_000, capacity: int = 512) -> None:
        self.limit = limit
        self.capacity = capacity
        self.high: dict[tuple[str, int], int] = {}
        self.parts: dict[tuple[str, str, int], PartitionLag] = {}
        # (topic, partition) -> the groups' PartitionLag of it
        self.by_partition: dict[tuple[str, int], list[PartitionLag]] = {}
        self.dropped = 0

    def _part(self, group: str, topic: str, partition: int) -> PartitionLag | None:
        key = (group, topic, partition)
        p = self.parts.get(key)
        if p is None:
            if len(self.parts) >= self.limit:
                self.dropped += 1
                return None
            p = self.parts[key] = PartitionLag(self.capacity)
            self.by_partition.setdefault((topic, partition), []).append(p)
        return p

    def _sample(self, p: PartitionLag, ts: float, topic: str, partition: int,
                event: str) -> None:
        hw = self.high.get((topic, partition))
        lag = hw - p.committed if hw is not None and p.committed is not None else None
        pos_lag = hw - p.position if hw is not None and p.position is not None else None
        if lag is not None and (p.max_lag is None or lag > p.max_lag):
            p.max_lag = lag
        sample = (ts, event, hw, p.committed, p.position, lag, pos_lag)
        (p.commit_series if event == "commit" else p.series).add(sample)

    # -- feeding ---------------------------------------------------------------------
    def fetch(self, exchange: Any, group: str, names: Any) -> None:
        req, resp = exchange.request, exchange.response
        if resp is not None and isinstance(resp.body, dict):
            for topic, part, pd in topic_partitions(resp.body, "Responses", "Partitions",
                                                    names):
                hw = integer(pd, "HighWatermark")
                if hw is not None and hw >= 0 and (integer(pd, "ErrorCode") or 0) == 0:
                    self._high(topic, part, hw, resp.ts_last)
        if req is None or not isinstance(req.body, dict):
            return
        ts = resp.ts_last if resp is not None else req.ts_first
        for topic, part, pd in topic_partitions(req.body, "Topics", "Partitions", names):
            offset = integer(pd, "FetchOffset")
            p = self._part(group, topic, part)
            if p is None or offset is None:
                continue
            p.position = offset
            self._sample(p, ts, topic, part, "fetch")

    def list_offsets(self, exchange: Any, names: Any) -> None:
        req, resp = exchange.request, exchange.response
        if req is None or resp is None or not isinstance(resp.body, dict):
            return
        latest = {(t, p) for t, p, pd in topic_partitions(req.body, "Topics", "Partitions",
                                                          names)
                  if integer(pd, "Timestamp") == LATEST}
        for topic, part, pd in topic_partitions(resp.body, "Topics", "Partitions", names):
            off = integer(pd, "Offset")
            if (topic, part) in latest and off is not None and off >= 0 \
                    and (integer(pd, "ErrorCode") or 0) == 0:
                self._high(topic, part, off, resp.ts_last)

    def _high(self, topic: str, partition: int, hw: int, ts: float) -> None:
        key = (topic, partition)
        if self.high.get(key) == hw:
            return
        self.high[key] = hw
        for p in self.by_partition.get(key, ()):
            if p.committed is not None:
                self._sample(p, ts, topic, partition, "high_watermark")

    def commit(self, exchange: Any, group: str, names: Any) -> None:
        from kwsniff.output.names import error_label
        req, resp = exchange.request, exchange.response
        if req is None or resp is None or not isinstance(req.body, dict) \
                or not isinstance(resp.body, dict):
            return
        errors = {(t, p): integer(pd, "ErrorCode") or 0
                  for t, p, pd in topic_partitions(resp.body, "Topics", "Partitions", names)}
        for topic, part, pd in topic_partitions(req.body, "Topics", "Partitions", names):
            offset = integer(pd, "CommittedOffset")
            p = self._part(group, topic, part)
            if p is None or offset is None:
                continue
            code = errors.get((topic, part))
            if code is None:
                continue
            if code:
                name = error_label(code)
                p.commit_errors[name] = p.commit_errors.get(name, 0) + 1
                continue
            p.committed = offset
            p.commits += 1
            self._sample(p, resp.ts_last, topic, part, "commit")

    # -- report ----------------------------------------------------------------------
    def report(self) -> list[dict[str, Any]]:
        rows = []
        for (group, topic, part), p in sorted(self.parts.items()):
            samples = sorted(p.series.all() + p.commit_series.all(), key=lambda x: x[0])
            last = samples[-1] if samples else None
            hw = self.high.get((topic, part))
            rows.append({
                "group": group, "topic": topic, "partition": part,
                "high_watermark": hw, "committed": p.committed, "position": p.position,
                "lag": hw - p.committed if hw is not None and p.committed is not None
                else None,
                "position_lag": hw - p.position if hw is not None and p.position is not None
                else None,
                "max_lag": p.max_lag, "commits": p.commits,
                "commit_errors": dict(sorted(p.commit_errors.items())),
                "last_sample_ts": last[0] if last else None,
                "timeline_decimated": p.series.decimated or p.commit_series.decimated,
                "timeline": [{"ts": s[0], "event": s[1], "high_watermark": s[2],
                              "committed": s[3], "position": s[4], "lag": s[5],
                              "position_lag": s[6]} for s in samples],
            })
        return rows
