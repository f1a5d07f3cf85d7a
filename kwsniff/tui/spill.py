"""The TUI's spill: every decoded exchange on disk, compact, rebuilt on demand.

Contract:

* :class:`SpillWriter` (decoder side) appends exchanges to one file per store segment.
  :meth:`SpillWriter.add` returns ``(block, item)``: the file offset of the block the
  exchange goes into and its position there (what a store row keeps). Blocks are
  written whole by :meth:`SpillWriter.flush` (or when full); a reader must not look at
  a row before the flush that follows its ``add``. :func:`pack` makes the pickled
  record of an exchange on its own (in the engine process of a two-process run, which
  hands it to the row builder); :meth:`SpillWriter.add_packed` queues such a record,
  giving the same blocks as :meth:`~SpillWriter.add` of the exchange.
* A block on disk is a 4-byte big-endian length and then an LZ4 block (with its size)
  of the pickled list of the pickled *lean records* (each pickled on its own, when
  added: every read back makes objects of its own) of up to :data:`BLOCK_ITEMS`
  exchanges. A lean
  record holds every field of the exchange and its messages, except the decoded body of
  a message that :func:`rebuild` can decode again exactly from its raw bytes: a body of
  :data:`~kwsniff.kafka.decoding.DEFERRABLE_APIS` (APIs whose bodies the conversation
  layer only annotates), of the ``kafka`` protocol, not inferred and not cut by a
  capture gap (plugins: the UI process runs in the same plugin session as the decoder
  process, so it decodes the same way). In a version without topic ids the annotation
  needs nothing of the run (the engine's own notion of "decodable later exactly as
  now"); in a version with topic ids the record also keeps what the annotation took
  from the run: the topic names added next to topic ids, and the topic/partition tags
  of the record sets. The other bodies are kept as decoded.
* :func:`read_block` reads the (pickled) lean records of a block; :func:`rebuild` turns
  a lean record (pickled or not) into an :class:`~kwsniff.kafka.model.Exchange` equal to the one spilled (the
  same tree, facts and output; ``tests/tui/test_tui_spill.py`` compares them on every
  committed capture): a stripped body is decoded from the raw frame and annotated as the
  conversation layer annotates it, keeping the message's recorded problems as they were.
* Nothing here raises on damaged input: a record that cannot be pickled is spilled
  empty, a block or record that cannot be read reads as None (the exchange is then
  unavailable).
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

import lz4.block

from kwsniff.kafka.decoding import (
    DEFERRABLE_APIS,
    annotate,
    decode_request,
    decode_response,
    deferrable,
    new_annotate_context,
)
from kwsniff.kafka.model import _MESSAGE_FIELDS, REQUEST, Exchange, KafkaMessage
from kwsniff.kafka.records import Records
from kwsniff.kafka.topic_ids import TOPIC_NAME, Plan, TopicIds, has_topic_ids, id_plan

BLOCK_ITEMS = 64
BLOCK_BYTES = 256 * 1024            # raw frame bytes that close a block early
_LENGTH = struct.Struct(">I")
_BODY = _MESSAGE_FIELDS.index("body")
_PROBLEMS = _MESSAGE_FIELDS.index("problems")


def _strippable(msg: KafkaMessage) -> bool:
    return (msg.body is not None and msg.api_key in DEFERRABLE_APIS
            and msg.api_version is not None and msg.inferred is None and not msg.missing
            and msg.deferred is None)


def _names(node: dict[str, Any], plan: Plan, out: dict[Any, Any]) -> dict[Any, Any]:
    """The topic names the run's topic-id table added to ``node`` (along ``plan``)."""
    has_id, subs = plan
    if has_id and TOPIC_NAME in node:
        out[node.get("TopicId")] = node[TOPIC_NAME]
    for name, sub in subs:
        v = node.get(name)
        for item in (v if isinstance(v, list) else (v,)):
            if isinstance(item, dict):
                _names(item, sub, out)
    return out


def _record_sets(value: Any, out: list[Records]) -> list[Records]:
    """The record sets of a body, in order."""
    if isinstance(value, Records):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            if isinstance(v, (dict, list, Records)):
                _record_sets(v, out)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (dict, list, Records)):
                _record_sets(v, out)
    return out


def _run_state(msg: KafkaMessage) -> tuple[Any, Any] | None:
    """What annotating a body with topic ids took from the run (None without ids)."""
    key, kind, version = msg.api_key, msg.kind, msg.api_version
    if deferrable(key, kind, version) or not has_topic_ids(key, kind, version):  # type: ignore[arg-type]
        return None
    plan = id_plan(key, kind, version)  # type: ignore[arg-type]
    names = _names(msg.body, plan, {}) if plan is not None else {}  # type: ignore[arg-type]
    tags = [(r.topic, r.partition) for r in _record_sets(msg.body, [])]
    return names, tags


def _lean_message(msg: KafkaMessage | None, strip: bool) -> Any:
    if msg is None:
        return None
    state = msg.state()
    state[_PROBLEMS] = list(msg.problems)   # as now (the flush comes later)
    if strip and _strippable(msg):
        state[_BODY] = None
        return (state, True, _run_state(msg))
    return (state, False, None)


def lean(ex: Exchange, strip: bool = True) -> tuple[Any, ...]:
    """The lean record of ``ex`` (see the module contract)."""
    strip = strip and ex.protocol == "kafka"
    return (ex.index, ex.stream, ex.client, ex.broker, ex.status, ex.protocol, list(ex.problems),
            ex.tls, _lean_message(ex.request, strip), _lean_message(ex.response, strip))


def _message(record: Any) -> tuple[KafkaMessage | None, bool, Any]:
    if record is None:
        return None, False, None
    state, stripped, run = record
    return KafkaMessage(*state), stripped, run


def _redecode(msg: KafkaMessage, request: KafkaMessage | None, stream: int, run: Any) -> None:
    """Put the body back: decoded from ``raw`` and annotated as the conversation layer
    does (with what it took from the run, ``run``); the recorded problems (the body's
    among them) stay as they were."""
    if msg.kind == REQUEST:
        fresh = decode_request(msg.raw)
    else:
        fresh = decode_response(msg.raw, msg.api_key, msg.api_version)  # type: ignore[arg-type]
    problems = msg.problems
    msg.body = fresh.body
    msg.problems = []
    if run is None:
        annotate(msg, request, new_annotate_context(), stream)
    else:
        names, tags = run
        if names:
            table = TopicIds()
            table.names.update(names)
            table.annotate(msg.api_key, msg.body, msg.kind, msg.api_version)
        for records, (topic, partition) in zip(_record_sets(msg.body, []), tags):
            records.topic = topic
            records.partition = partition
    msg.problems = problems


def rebuild(record: Any) -> Exchange | None:
    """The exchange of a lean record, pickled or not (None for a record that could not
    be spilled or read)."""
    if isinstance(record, bytes):
        try:
            record = pickle.loads(record) if record else None
        except Exception:  # noqa: BLE001 - a damaged record reads as "not available"
            return None
    if record is None:
        return None
    index, stream, client, broker, status, protocol, problems, tls, req_rec, resp_rec = record
    req, req_stripped, req_run = _message(req_rec)
    resp, resp_stripped, resp_run = _message(resp_rec)
    if req is not None and req_stripped:
        _redecode(req, None, stream, req_run)
    if resp is not None and resp_stripped:
        _redecode(resp, req, stream, resp_run)
    return Exchange(index, stream, client, broker, status, req, resp, protocol, problems, tls)


def pack(ex: Exchange, strip: bool = True) -> tuple[bytes, int]:
    """The pickled lean record of ``ex`` (``b""`` when it cannot be pickled) and the
    bytes of its raw frames (what closes a block early)."""
    try:
        record = pickle.dumps(lean(ex, strip), pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an odd exchange must not stop decoding
        record = b""
    req, resp = ex.request, ex.response
    return record, (len(req.raw) if req is not None else 0) + \
        (len(resp.raw) if resp is not None else 0)


class SpillWriter:
    """See the module contract. ``strip``: False keeps every body (plugins loaded)."""

    def __init__(self, strip: bool = True) -> None:
        self.strip = strip
        self.bytes = 0              # written to every file so far
        self._fd = -1
        self._size = 0              # of the current file, blocks written
        self._items: list[Any] = []
        self._raw = 0

    def open(self, path: str) -> None:
        """Start the next segment's file (the previous one is flushed and closed)."""
        self.close()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._size = 0

    def add(self, ex: Exchange) -> tuple[int, int]:
        """Queue ``ex``; returns ``(block offset, item)``."""
        return self.add_packed(*pack(ex, self.strip))

    def add_packed(self, record: bytes, raw: int) -> tuple[int, int]:
        """Queue a record made by :func:`pack` (``raw``: its frame bytes); returns
        ``(block offset, item)``."""
        item = len(self._items)
        self._items.append(record)
        self._raw += raw
        offset = self._size
        if item + 1 >= BLOCK_ITEMS or self._raw >= BLOCK_BYTES:
            self.flush()
        return offset, item

    def flush(self) -> None:
        """Write the pending block."""
        items = self._items
        if not items:
            return
        self._items = []
        self._raw = 0
        data = pickle.dumps(items, pickle.HIGHEST_PROTOCOL)
        packed = lz4.block.compress(data)
        block = _LENGTH.pack(len(packed)) + packed
        if self._fd >= 0:
            view = memoryview(block)
            while view:
                view = view[os.write(self._fd, view):]
        self._size += len(block)
        self.bytes += len(block)

    def close(self) -> None:
        self.flush()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_block(fd: int, offset: int) -> list[bytes] | None:
    """The pickled lean records of the block at ``offset`` of a spill file, or None."""
    try:
        head = os.pread(fd, 4, offset)
        if len(head) != 4:
            return None
        size = _LENGTH.unpack(head)[0]
        data = os.pread(fd, size, offset + 4)
        if len(data) != size:
            return None
        records = pickle.loads(lz4.block.decompress(data))
    except Exception:  # noqa: BLE001 - a damaged spill reads as "not available"
        return None
    return records if isinstance(records, list) else None
