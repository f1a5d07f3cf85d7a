"""Facts about an exchange that output needs: topics, partitions, groups, errors, records.

Contract:

* :class:`ExchangeFacts` wraps one :class:`~kwsniff.kafka.model.Exchange` and computes,
  on first access and in one walk of each decoded body, the *entities* it touches:
  topic names, topic ids, partition indexes, group ids, transactional ids, member ids,
  producer ids, non-zero error codes of the response, and record counts/bytes per topic
  in the request (produced) and the response (fetched).
* The walk follows the entity annotations of Kafka's message definitions
  (``entityType: topicName/groupId/transactionalId/producerId``), expressed as rules on
  field names and their enclosing array, so it works for every API and version without
  a per-API table. Record sets are counted from batch headers only (no record decoding).
  Bodies the schema table decoded are walked by walkers generated from their schema
  (:mod:`kwsniff.output.facts_walk`) that look only at the fields that can matter; they
  find exactly what the generic walk finds.
* Topic ids (``uuid``) are turned into names with a :class:`TopicNames` map learned from
  responses that carry both (Metadata v10+, CreateTopics v7+, DeleteTopics v6+, ...);
  an id never seen with a name is reported as its UUID text.
* ``ExchangeFacts(..., lean=True)`` (output that reads no facts, e.g. the -V tree) counts
  :attr:`~ExchangeFacts.record_problems` from the record sets found along the schemas'
  ``records`` fields (:func:`~kwsniff.output.facts_walk.find_records`) instead of
  walking both bodies; bodies that can teach topic names (:func:`teaches`) or have no
  schema are still walked, so the count and the run's topic-id map are the same.
* Nothing here raises on odd bodies: unexpected shapes are skipped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from kwsniff.kafka.model import RESPONSE, Exchange, KafkaMessage
from kwsniff.kafka.records import Records

from kwsniff.output.entity_rules import (
    COORDINATOR_KEY,
    ERROR,
    GROUP,
    GROUP_LIST_KEYS,
    INDEX,
    INDEX_PARENTS,
    INT_ROLES,
    MEMBER,
    PARTITION,
    PARTITION_LIST_KEYS,
    PRODUCER,
    RESOURCE,
    STR_ROLES,
    TOPIC_LIST_KEYS,
    TOPIC_NAME_PARENTS,
    TOPIC_RESOURCE_TYPE,
    TXN,
    TXN_LIST_KEYS,
    ZERO_UUID,
    int_role,
)
from kwsniff.kafka.protocol.schema import message_schema
from kwsniff.kafka.topic_ids import has_topic_ids
from kwsniff.output.facts_walk import body_walker, find_records, records_paths

_FIND_COORDINATOR = 10
_API_VERSIONS = 18


def uuid_text(value: Any) -> str | None:
    """Canonical text of a Kafka uuid field (uuid.UUID, 16 bytes or text); None if unknown."""
    if isinstance(value, str):          # what the decoders give
        return value
    import uuid     # (here: ~3 ms of start-up that most runs never need)

    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return str(uuid.UUID(bytes=bytes(value)))
    return None


class TopicNames:
    """A bounded map of topic id -> topic name learned from the capture."""

    __slots__ = ("limit", "_names")

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._names: OrderedDict[str, str] = OrderedDict()

    def learn(self, topic_id: str, name: str) -> None:
        if topic_id == ZERO_UUID or not name:
            return
        names = self._names
        if topic_id in names:
            names.move_to_end(topic_id)
        names[topic_id] = name
        if len(names) > self.limit:
            names.popitem(last=False)

    def get(self, topic_id: str) -> str | None:
        return self._names.get(topic_id)

    def __len__(self) -> int:
        return len(self._names)


def topic_label(struct: dict[str, Any], names: TopicNames | None) -> str:
    """The topic a body struct is about: its name, else the name ``names`` learned for
    its ``TopicId``, else the id text; ``"?"`` when the struct names no topic."""
    for key in ("Name", "Topic", "TopicName", "_topic_name"):
        name = struct.get(key)
        if type(name) is str:
            return name
    text = uuid_text(struct.get("TopicId"))
    if text:
        learned = names.get(text) if names is not None else None
        return learned or text
    return "?"


def records_count(records: Any, exact: bool = False) -> int:
    """Records in a record set, from batch headers (never decodes magic-2 record bodies).

    A legacy (magic 0/1, 0.7) compressed wrapper counts as one record until its inner
    messages are decompressed; ``exact`` decompresses such wrappers (only those) first.
    """
    try:
        if exact and not records.record_count_exact:
            for batch in records.batches:
                if batch.record_count is None and not batch.truncated:
                    batch.records  # noqa: B018 - decompresses the wrapper (size-limited)
        return int(records.record_count)
    except Exception:  # noqa: BLE001 - counts as zero; records.py reports the problem
        return 0


def records_size(records: Any) -> int:
    try:
        return len(records)
    except Exception:  # noqa: BLE001
        return 0


class _Collector:
    """Accumulates entities during one body walk."""

    __slots__ = ("topics", "topic_ids", "partitions", "groups", "txn_ids", "members",
                 "producer_ids", "errors", "records", "sets", "per_topic",
                 "names", "is_response", "group_keys", "exact")

    def __init__(self, names: TopicNames | None, is_response: bool, exact: bool = False) -> None:
        self.topics: dict[str, None] = {}
        self.topic_ids: dict[str, None] = {}
        self.partitions: dict[int, None] = {}
        self.groups: dict[str, None] = {}
        self.txn_ids: dict[str, None] = {}
        self.members: dict[str, None] = {}
        self.producer_ids: dict[int, None] = {}
        self.errors: dict[int, None] = {}
        self.records = 0
        self.sets: list[tuple[str | None, int | None, Records]] = []  # (topic, partition, set)
        self.per_topic: dict[str, list[int]] = {}   # topic -> [records, bytes]
        self.names = names
        self.is_response = is_response
        self.group_keys = False
        self.exact = exact

    def walk(self, obj: dict[str, Any], parent: str | None, topic: str | None,
             partition: int | None = None) -> None:
        """Collect the entities of ``obj``, a struct under the field ``parent`` (None for
        a body), and of every struct below it, whatever keys they hold."""
        get = obj.get
        # Resolve this struct's topic and partition first so that records below it are
        # attributed to them.
        own_topic = get("Topic")
        if type(own_topic) is not str:
            own_topic = get("TopicName")
            if type(own_topic) is not str:
                own_topic = get("Name") if parent in TOPIC_NAME_PARENTS else None
                if type(own_topic) is not str:
                    own_topic = get("_topic_name")
                    if type(own_topic) is not str:
                        own_topic = None
        tid = get("TopicId")
        if tid is not None:
            own_topic = self.topic_id(tid, own_topic)
        if own_topic is not None:
            self.topics[own_topic] = None
            topic = own_topic
        p = get("PartitionIndex")
        if type(p) is not int:
            p = get("Partition")
            if type(p) is not int:
                p = get("Index") if parent in INDEX_PARENTS else None
        if type(p) is int:
            partition = p
        item = self.item
        for key, value in obj.items():
            item(obj, key, value, parent, topic, partition)

    def topic_id(self, tid: Any, own_topic: str | None) -> str | None:
        """Note the ``TopicId`` value of a struct whose own topic name is ``own_topic``;
        returns the struct's topic (the learned name or id text when it has no name)."""
        text = uuid_text(tid)
        if text and text != ZERO_UUID:
            if own_topic is not None:
                if self.names is not None:
                    self.names.learn(text, own_topic)
            else:
                learned = self.names.get(text) if self.names is not None else None
                own_topic = learned or text
            self.topic_ids[text] = None
        return own_topic

    def item(self, obj: dict[str, Any], key: str, value: Any, parent: str | None,
             topic: str | None, partition: int | None) -> None:
        """Collect what the field ``key`` = ``value`` of the struct ``obj`` names (the
        struct's topic and partition already resolved)."""
        kind = type(value)
        if kind is int:
            role = INT_ROLES.get(key)
            if role is None:
                role = int_role(key)
            if role:
                if role == ERROR:
                    if value and self.is_response:
                        self.errors[value] = None
                elif role == PARTITION or (role == INDEX and parent in INDEX_PARENTS):
                    self.partitions[value] = None
                elif role == PRODUCER:
                    if value >= 0:
                        self.producer_ids[value] = None
        elif kind is list:
            if not value:
                return
            first = value[0]
            if type(first) is dict:
                for element in value:
                    if type(element) is dict:
                        self.walk(element, key, topic, partition)
            elif type(first) is str:
                if key in TOPIC_LIST_KEYS:
                    for element in value:
                        if type(element) is str:
                            self.topics[element] = None
                elif key in GROUP_LIST_KEYS:
                    for element in value:
                        if type(element) is str:
                            self.groups[element] = None
                elif key in TXN_LIST_KEYS:
                    for element in value:
                        if type(element) is str:
                            self.txn_ids[element] = None
                elif key == "CoordinatorKeys" and self.group_keys:
                    for element in value:
                        if type(element) is str:
                            self.groups[element] = None
            elif type(first) is int and key in PARTITION_LIST_KEYS:
                for element in value:
                    if type(element) is int:
                        self.partitions[element] = None
        elif kind is str:
            role = STR_ROLES.get(key, 0)
            if role:
                if role == GROUP:
                    if value:
                        self.groups[value] = None
                elif role == TXN:
                    if value:
                        self.txn_ids[value] = None
                elif role == MEMBER:
                    if value:
                        self.members[value] = None
                elif role == RESOURCE:
                    if obj.get("ResourceType") == TOPIC_RESOURCE_TYPE:
                        self.topics[value] = None
                elif self.group_keys:   # COORDINATOR_KEY
                    self.groups[value] = None
        elif kind is dict:
            self.walk(value, key, topic, partition)
        elif value is not None and isinstance(value, Records):
            self.records_set(value, topic, partition)

    def records_set(self, records: Records, topic: str | None, partition: int | None) -> None:
        """Count a record set of ``topic``/``partition`` (from its batch headers)."""
        if type(records) is Records and not self.exact:
            try:                            # records_count() without its arguments
                n = records.record_count
            except Exception:  # noqa: BLE001 - counts as zero; records.py reports it
                n = 0
            size = len(records.data)
        else:
            n = records_count(records, self.exact)
            size = records_size(records)
        self.records += n
        self.sets.append((topic, partition, records))
        if topic is not None:
            acc = self.per_topic.get(topic)
            if acc is None:
                self.per_topic[topic] = [n, size]
            else:
                acc[0] += n
                acc[1] += size


def _body_version(msg: KafkaMessage, version: int) -> int:
    """The version the body of ``msg`` (API version ``version``) was decoded at: the
    body of an ApiVersions response may be decoded at a lower version."""
    if msg.api_key == _API_VERSIONS and msg.kind == RESPONSE:
        return msg.header.get("_body_version", version)
    return version


_TEACHES: dict[tuple[int, str, int], bool] = {}


def teaches(msg: KafkaMessage | None) -> bool:
    """Whether the facts walk of ``msg`` can teach topic names: its schema has a
    ``TopicId`` somewhere, or its schema is unknown (the body is walked to be sure)."""
    if msg is None or type(msg.body) is not dict:
        return False
    key, version = msg.api_key, msg.api_version
    if key is None or version is None:
        return True
    k = (key, msg.kind, version)
    known = _TEACHES.get(k)
    if known is None:
        known = message_schema(key, msg.kind, version) is None or \
            has_topic_ids(key, msg.kind, version)
        _TEACHES[k] = known
    return known


def learn_names(exchange: Exchange, names: TopicNames | None) -> None:
    """Let ``names`` learn the topic names ``exchange`` can teach (:func:`teaches`) by
    walking its facts, for an exchange whose output another process makes: the run's
    topic-id -> name map then learns as it does where every exchange is rendered."""
    if teaches(exchange.request) or teaches(exchange.response):
        ExchangeFacts(exchange, names).response_side   # noqa: B018 - walks both sides


class ExchangeFacts:
    """Lazily computed entities of one exchange (see the module contract)."""

    __slots__ = ("exchange", "_names", "_req", "_resp", "exact", "_record_problems", "lean")

    #: the summary lane's digest (:class:`kwsniff.output.skim.SkimFacts`); None here
    digest_text: str | None = None

    def __init__(self, exchange: Exchange, names: TopicNames | None = None,
                 exact: bool = False, lean: bool = False) -> None:
        self.exchange = exchange
        self._names = names
        self.exact = exact          # decompress legacy wrappers for exact record counts
        # record_problems without walking bodies that cannot teach topic names (when
        # nothing else will need their facts, e.g. the -V tree)
        self.lean = lean
        self._req: _Collector | None = None
        self._resp: _Collector | None = None
        self._record_problems: int | None = None

    def _collect(self, msg: KafkaMessage | None, is_response: bool) -> _Collector:
        col = _Collector(self._names, is_response, self.exact)
        if msg is not None and isinstance(msg.body, dict):
            body = msg.body
            if msg.api_key == _FIND_COORDINATOR:
                key_type = body.get("KeyType", 0)
                if not is_response:
                    col.group_keys = key_type == 0
                else:
                    req = self.exchange.request
                    req_type = (req.body or {}).get("KeyType", 0) if req is not None else 0
                    col.group_keys = req_type == 0
            walker = self._walker(msg)
            try:
                if walker is not None:
                    walker(col, body)
                else:
                    col.walk(body, None, None)
            except RecursionError:
                pass
        return col

    def _walker(self, msg: KafkaMessage) -> Any:
        """The schema-driven walker of a body the schema table decoded, or None."""
        key, version = msg.api_key, msg.api_version
        if self.exchange.protocol != "kafka" or key is None or version is None:
            return None
        return body_walker(key, msg.kind, _body_version(msg, version))

    @property
    def names(self) -> TopicNames | None:
        return self._names

    def require_exact(self) -> None:
        """Switch to exact record counts (recomputing facts already computed)."""
        if not self.exact:
            self.exact = True
            self._req = self._resp = None

    def topic_label(self, struct: dict[str, Any]) -> str:
        """The topic a body struct is about: :func:`topic_label` with the run's names."""
        return topic_label(struct, self._names)

    @property
    def request_side(self) -> _Collector:
        if self._req is None:
            self._req = self._collect(self.exchange.request, False)
        return self._req

    @property
    def response_side(self) -> _Collector:
        if self._resp is None:
            # Walk the request first so ids learned there are known to the response.
            self.request_side  # noqa: B018
            self._resp = self._collect(self.exchange.response, True)
        return self._resp

    def _union(self, attr: str) -> list[Any]:
        a = getattr(self.request_side, attr)
        b = getattr(self.response_side, attr)
        if not b:
            return list(a)
        if not a:
            return list(b)
        merged = dict(a)
        merged.update(b)
        return list(merged)

    @property
    def topics(self) -> list[str]:
        """Topic names touched (request then response order, unique)."""
        return self._union("topics")

    @property
    def topic_ids(self) -> list[str]:
        return self._union("topic_ids")

    @property
    def partitions(self) -> list[int]:
        return self._union("partitions")

    @property
    def groups(self) -> list[str]:
        return self._union("groups")

    @property
    def transactional_ids(self) -> list[str]:
        return self._union("txn_ids")

    @property
    def members(self) -> list[str]:
        return self._union("members")

    @property
    def producer_ids(self) -> list[int]:
        return self._union("producer_ids")

    @property
    def error_codes(self) -> list[int]:
        """Non-zero error codes found anywhere in the response, sorted, unique."""
        return sorted(self.response_side.errors)

    @property
    def record_count(self) -> int:
        """Records carried by request and response record sets (from batch headers)."""
        return self.request_side.records + self.response_side.records

    @property
    def has_records(self) -> bool:
        return bool(self.request_side.sets or self.response_side.sets)

    def record_sets(self) -> list[tuple[str, str | None, int | None, Records]]:
        """``(side, topic, partition, records)`` of every record set, request first
        (the topic/partition of the enclosing body structs; ``Records.topic`` and
        ``.partition`` are set by the conversation layer when it knows better)."""
        return [("request", *s) for s in self.request_side.sets] + \
            [("response", *s) for s in self.response_side.sets]

    @property
    def record_problems(self) -> int:
        """How many problems the record sets have (batch header and CRC checks, and
        record-level ones of batches already decoded): the sum of their ``problems``,
        counted on first use (a display filter that decodes records afterwards does not
        change it, so the run's problem count and the summary line agree)."""
        n = self._record_problems
        if n is None:
            sets = self._lean_record_sets() if self.lean and self._req is None else None
            if sets is None:
                sets = [s[2] for side in (self.request_side, self.response_side)
                        for s in side.sets]
            n = 0
            for records in sets:
                n += records.problem_count
            self._record_problems = n
        return n

    def _lean_record_sets(self) -> list[Records] | None:
        """The record sets of both bodies found along their schemas' ``records`` paths
        (:func:`~kwsniff.output.facts_walk.find_records`: the same sets the walks find),
        or None when a walk is needed: a body that can teach topic names (the walks
        learn them into the run's map) or one the schema table does not define."""
        ex = self.exchange
        if ex.protocol != "kafka":
            return None
        found: list[Records] = []
        for msg in (ex.request, ex.response):
            if msg is None or not isinstance(msg.body, dict):
                continue                    # (not walked either)
            if type(msg.body) is not dict or teaches(msg):
                return None
            key, version = msg.api_key, msg.api_version     # (not None: teaches() said so)
            paths = records_paths(key, msg.kind, _body_version(msg, version))
            if paths is None:
                return None
            if paths:
                found += find_records(msg.body, paths)
        return found

    @property
    def produced(self) -> dict[str, list[int]]:
        """Per topic ``[records, bytes]`` carried by the request."""
        return self.request_side.per_topic

    @property
    def fetched(self) -> dict[str, list[int]]:
        """Per topic ``[records, bytes]`` carried by the response."""
        return self.response_side.per_topic

    @property
    def request_bytes(self) -> int | None:
        req = self.exchange.request
        return req.size if req is not None else None

    @property
    def response_bytes(self) -> int | None:
        resp = self.exchange.response
        return resp.size if resp is not None else None

    @property
    def total_bytes(self) -> int:
        return (self.request_bytes or 0) + (self.response_bytes or 0)


def iter_record_sets(msg: KafkaMessage | None, names: TopicNames | None = None
                     ) -> Iterator[tuple[str | None, int | None, Records]]:
    """``(topic, partition, records)`` for every record set in a message body, in order.

    The topic is the enclosing topic struct's name (or learned name / id text of its
    ``TopicId``); the partition is the enclosing partition struct's index.
    """
    if msg is None or not isinstance(msg.body, dict):
        return
    stack: list[tuple[dict[str, Any], str | None, str | None, int | None]] = [
        (msg.body, None, None, None)]
    out: list[tuple[str | None, int | None, Records]] = []
    while stack:
        obj, parent, topic, partition = stack.pop()
        for key in ("Topic", "TopicName", "Name", "_topic_name"):
            name = obj.get(key)
            if type(name) is str and (key != "Name" or parent in TOPIC_NAME_PARENTS):
                topic = name
                break
        else:
            text = uuid_text(obj.get("TopicId"))
            if text and text != ZERO_UUID:
                topic = (names.get(text) if names is not None else None) or text
        for key in ("PartitionIndex", "Partition", "PartitionId"):
            p = obj.get(key)
            if type(p) is int:
                partition = p
                break
        else:
            p = obj.get("Index")
            if type(p) is int and parent in INDEX_PARENTS:
                partition = p
        children = []
        for key, value in obj.items():
            if isinstance(value, Records):
                out.append((topic, partition, value))
            elif type(value) is dict:
                children.append((value, key, topic, partition))
            elif type(value) is list and value and type(value[0]) is dict:
                children.extend((item, key, topic, partition) for item in value
                                if type(item) is dict)
        stack.extend(reversed(children))
    yield from out   # depth-first, in body order
