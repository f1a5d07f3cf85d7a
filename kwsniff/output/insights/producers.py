"""Producer health: idempotent/transactional sequences, retries and their errors.

Contract:

* A producer is a producer id (with its epoch), learned from the record batches of its
  Produce requests; InitProducerId responses name its client id and transactional id.
* Per producer id, epoch, topic and partition the base sequences sent are remembered
  (the last ``window`` of them). A batch whose (epoch, base sequence) was sent before
  is a *retry* (the same batch sent again); one whose base sequence is not the next
  expected one (last sequence + 1, wrapping at 2^31) is *out of order* (a gap or a
  step back that is not a retry).
* A retry whose response assigns another base offset than the first send's response,
  or a (producer id, epoch, sequence) fetched back at two different offsets, was
  *written twice* (the broker did not deduplicate): listed with both offsets.
* Produce requests without a response (connection cut, capture end) are counted per
  producer (``unanswered``), and per producer the error codes of its Produce
  responses, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
  TxnOffsetCommit responses.
* Batches without a producer id (non-idempotent producers) are not tracked here.
* Memory: at most ``limit`` producer/partition keys and ``window`` sequences each.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kwsniff.output.insights.bodies import (
    batch_span,
    batches,
    integer,
    items,
    text,
    topic_partitions,
)

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22
TXN_APIS = {22: "InitProducerId", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn",
            26: "EndTxn", 28: "TxnOffsetCommit"}
SEQ_MOD = 1 << 31



def _idempotent(batch: Any) -> tuple[int, int, int, tuple[int, int, int]] | None:
    """``(producer id, epoch, base sequence, span)`` of a batch an idempotent producer
    wrote (see :func:`batch_span`), or None when it carries no such ids."""
    pid = getattr(batch, "producer_id", None)
    seq = getattr(batch, "base_sequence", None)
    epoch = getattr(batch, "producer_epoch", None)
    span = batch_span(batch)
    if pid is None or pid < 0 or seq is None or seq < 0 or epoch is None or span is None:
        return None
    return pid, epoch, seq, span

class ProducerStats:
    __slots__ = ("producer_id", "epochs", "client_id", "transactional_id", "batches",
                 "records", "retries", "out_of_order", "unanswered", "errors",
                 "written_twice", "retry_list")

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.epochs: set[int] = set()
        self.client_id: str | None = None
        self.transactional_id: str | None = None
        self.batches = 0
        self.records = 0
        self.retries = 0
        self.out_of_order = 0
        self.unanswered = 0
        self.errors: dict[str, int] = {}
        self.written_twice: list[dict[str, Any]] = []
        self.retry_list: list[dict[str, Any]] = []


class _Seqs:
    """Sequences of one producer id/epoch/topic/partition."""
    __slots__ = ("next_seq", "sent", "acked")

    def __init__(self) -> None:
        self.next_seq: int | None = None
        self.sent: OrderedDict[int, float] = OrderedDict()    # base seq -> first send ts
        self.acked: dict[int, int] = {}                        # base seq -> base offset


class ProducerHealth:
    def __init__(self, limit: int = 100_000, window: int = 1024, keep_list: int = 64) -> None:
        self.limit = limit
        self.window = window
        self.keep_list = keep_list
        self.producers: dict[int, ProducerStats] = {}
        self.seqs: OrderedDict[tuple[int, int, str, int], _Seqs] = OrderedDict()
        self.fetched: OrderedDict[tuple[int, int, str, int, int], int] = OrderedDict()
        self.dropped = 0

    def _producer(self, pid: int) -> ProducerStats | None:
        p = self.producers.get(pid)
        if p is None:
            if len(self.producers) >= self.limit:
                self.dropped += 1
                return None
            p = self.producers[pid] = ProducerStats(pid)
        return p

    def _error(self, p: ProducerStats, api: str, code: int) -> None:
        from kwsniff.output.names import error_label
        name = f"{api} {error_label(code)}"
        p.errors[name] = p.errors.get(name, 0) + 1

    # -- feeding ---------------------------------------------------------------------
    def produce(self, ex: Any, names: Any) -> None:
        req, resp = ex.request, ex.response
        if req is None or not isinstance(req.body, dict):
            return
        results: dict[tuple[str, int], tuple[int, int | None]] = {}
        if resp is not None and isinstance(resp.body, dict):
            for t, part, pr in topic_partitions(resp.body, "Responses", "PartitionResponses",
                                                names):
                results[(t, part)] = (integer(pr, "ErrorCode") or 0, integer(pr, "BaseOffset"))
        counted: set[int] = set()
        for topic, part, pd in topic_partitions(req.body, "TopicData", "PartitionData", names):
            code, base_offset = results.get((topic, part), (None, None))
            offset = base_offset
            for batch in batches(pd.get("Records")):
                ids = _idempotent(batch)
                if ids is None:
                    continue
                pid, epoch, seq, span = ids
                p = self._producer(pid)
                if p is None:
                    continue
                if p.client_id is None:
                    p.client_id = ex.client_id
                tid = text(req.body, "TransactionalId")
                if tid and p.transactional_id is None:
                    p.transactional_id = tid
                p.epochs.add(epoch)
                if resp is None and pid not in counted:
                    p.unanswered += 1
                    counted.add(pid)
                if code:
                    self._error(p, "Produce", code)
                self._sequence(p, ex, (pid, epoch, topic, part), seq, span,
                               None if code or offset is None or offset < 0 else offset,
                               req.ts_first)
                if offset is not None and offset >= 0:
                    offset += span[1] - span[0]

    def _sequence(self, p: ProducerStats, ex: Any, key: tuple[int, int, str, int], seq: int,
                  span: tuple[int, int, int], offset: int | None, ts: float) -> None:
        s = self.seqs.get(key)
        if s is None:
            s = self.seqs[key] = _Seqs()
            while len(self.seqs) > self.limit:
                self.seqs.popitem(last=False)
        count = span[2]
        if seq in s.sent:
            p.retries += 1
            if len(p.retry_list) < self.keep_list:
                p.retry_list.append({"topic": key[2], "partition": key[3], "epoch": key[1],
                                     "base_sequence": seq, "records": count,
                                     "first_sent_ts": s.sent[seq], "resent_ts": ts,
                                     "exchange": ex.index})
        else:
            p.batches += 1
            p.records += count
            if s.next_seq is not None and seq != s.next_seq:
                p.out_of_order += 1
            s.sent[seq] = ts
            if len(s.sent) > self.window:
                old, _ = s.sent.popitem(last=False)
                s.acked.pop(old, None)
            s.next_seq = (seq + count) % SEQ_MOD
        if offset is not None:
            first = s.acked.get(seq)
            if first is None:
                s.acked[seq] = offset
            elif first != offset:
                self._twice(p, key, seq, first, offset)

    def _twice(self, p: ProducerStats, key: tuple[int, int, str, int], seq: int,
               first: int, second: int) -> None:
        for w in p.written_twice:
            if (w["topic"], w["partition"], w["epoch"], w["base_sequence"]) == \
                    (key[2], key[3], key[1], seq):
                if second not in w["offsets"]:
                    w["offsets"].append(second)
                return
        if len(p.written_twice) < self.keep_list:
            p.written_twice.append({"topic": key[2], "partition": key[3], "epoch": key[1],
                                    "base_sequence": seq, "offsets": sorted({first, second})})

    def fetch(self, ex: Any, names: Any) -> None:
        """Batches read back: the same producer sequence at two offsets was written twice."""
        resp = ex.response
        if resp is None or not isinstance(resp.body, dict):
            return
        for topic, part, pd in topic_partitions(resp.body, "Responses", "Partitions", names):
            for batch in batches(pd.get("Records")):
                ids = _idempotent(batch)
                if ids is None or getattr(batch, "control", False):
                    continue
                pid, epoch, seq, span = ids
                key = (pid, epoch, topic, part, seq)
                first = self.fetched.get(key)
                if first is None:
                    self.fetched[key] = span[0]
                    while len(self.fetched) > self.limit:
                        self.fetched.popitem(last=False)
                elif first != span[0]:
                    p = self._producer(pid)
                    if p is not None:
                        self._twice(p, (pid, epoch, topic, part), seq, first, span[0])

    def txn(self, ex: Any) -> None:
        """InitProducerId and the transaction APIs: identities and errors."""
        req, resp = ex.request, ex.response
        if resp is None or not isinstance(resp.body, dict):
            return
        rb = resp.body
        body = req.body if req is not None and isinstance(req.body, dict) else {}
        if ex.api_key == INIT_PRODUCER_ID:
            pid = integer(rb, "ProducerId")
            code = integer(rb, "ErrorCode") or 0
            if pid is None or pid < 0:
                pid = integer(body, "ProducerId")
            if pid is None or pid < 0:
                return
            p = self._producer(pid)
            if p is None:
                return
            p.client_id = ex.client_id or p.client_id
            p.transactional_id = text(body, "TransactionalId") or p.transactional_id
            epoch = integer(rb, "ProducerEpoch")
            if epoch is not None and epoch >= 0:
                p.epochs.add(epoch)
            if code:
                self._error(p, "InitProducerId", code)
            return
        pid = integer(body, "ProducerId")
        if pid is None or pid < 0:
            return
        p = self._producer(pid)
        if p is None:
            return
        codes = []
        top = integer(rb, "ErrorCode")
        if top:
            codes.append(top)
        for key in ("Results", "ResultsByTopicV3AndBelow", "Topics"):
            for t in items(rb, key):
                for part in items(t, "Results") + items(t, "ResultsByPartition") \
                        + items(t, "Partitions"):
                    c = integer(part, "PartitionErrorCode", "ErrorCode")
                    if c:
                        codes.append(c)
        for c in codes:
            self._error(p, TXN_APIS.get(ex.api_key, str(ex.api_key)), c)

    # -- report ----------------------------------------------------------------------
    def report(self) -> list[dict[str, Any]]:
        return [{"producer_id": p.producer_id, "epochs": sorted(p.epochs),
                 "client_id": p.client_id, "transactional_id": p.transactional_id,
                 "batches": p.batches, "records": p.records, "retries": p.retries,
                 "out_of_order": p.out_of_order, "unanswered_requests": p.unanswered,
                 "written_twice": p.written_twice, "errors": dict(sorted(p.errors.items())),
                 "retried_batches": p.retry_list}
                for _, p in sorted(self.producers.items())]

