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
* Topic ids (``uuid``) are turned into names with a :class:`TopicNames` map learned from
  responses that carry both (Metadata v10+, CreateTopics v7+, DeleteTopics v6+, ...);
  an id never seen with a name is reported as its UUID text.
* Nothing here raises on odd bodies: unexpected shapes are skipped.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from kwsniff.kafka.model import Exchange, KafkaMessage
from kwsniff.kafka.records import Records

# Field-name rules derived from the entityType annotations of the message definitions.
_TOPIC_KEYS = frozenset({"Topic", "TopicName"})
_TOPIC_NAME_PARENTS = frozenset({"Topics", "TopicData", "Responses", "Results", "TopicResults",
                                 "ResultsByTopicV3AndBelow", "V3AndBelowTopics"})
_TOPIC_LIST_KEYS = frozenset({"Topics", "TopicNames", "SubscribedTopicNames"})
_GROUP_KEYS = frozenset({"GroupId"})
_GROUP_LIST_KEYS = frozenset({"Groups", "GroupIds", "GroupsNames"})
_TXN_KEYS = frozenset({"TransactionalId", "V3AndBelowTransactionalId"})
_TXN_LIST_KEYS = frozenset({"TransactionalIds"})
_PARTITION_KEYS = frozenset({"Partition", "PartitionIndex", "PartitionId"})
_INDEX_PARENTS = frozenset({"PartitionData", "PartitionResponses", "Partitions"})
_PARTITION_LIST_KEYS = frozenset({"PartitionIndexes", "Partitions"})
_PRODUCER_KEYS = frozenset({"ProducerId", "V3AndBelowProducerId"})
_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
_TOPIC_RESOURCE_TYPE = 2   # ConfigResource.Type.TOPIC and AclResourceType.TOPIC
_FIND_COORDINATOR = 10

# What an int or str field means to the walk, by its name (the rules above, looked up
# once per name: the walk sees the same few hundred names over and over).
_ERROR, _PARTITION, _INDEX, _PRODUCER = 1, 2, 3, 4           # int fields
_GROUP, _TXN, _MEMBER, _RESOURCE, _COORDINATOR_KEY = 1, 2, 3, 4, 5   # str fields
_STR_ROLES: dict[str, int] = {
    **dict.fromkeys(_GROUP_KEYS, _GROUP), **dict.fromkeys(_TXN_KEYS, _TXN),
    "MemberId": _MEMBER, "ResourceName": _RESOURCE, "Key": _COORDINATOR_KEY}
_INT_ROLES: dict[str, int] = {}
_INT_ROLES_LIMIT = 10_000     # field names are schema names; the bound is a safety net


def _int_role(key: str) -> int:
    """The role of an int field named ``key`` (remembered in :data:`_INT_ROLES`)."""
    if key.endswith("ErrorCode"):
        role = _ERROR
    elif key in _PARTITION_KEYS:
        role = _PARTITION
    elif key == "Index":
        role = _INDEX          # a partition index only under _INDEX_PARENTS
    elif key in _PRODUCER_KEYS:
        role = _PRODUCER
    else:
        role = 0
    if len(_INT_ROLES) < _INT_ROLES_LIMIT:
        _INT_ROLES[key] = role
    return role


def uuid_text(value: Any) -> str | None:
    """Canonical text of a Kafka uuid field (uuid.UUID, 16 bytes or text); None if unknown."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return str(uuid.UUID(bytes=bytes(value)))
    if isinstance(value, str):
        return value
    return None


class TopicNames:
    """A bounded map of topic id -> topic name learned from the capture."""

    __slots__ = ("limit", "_names")

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._names: OrderedDict[str, str] = OrderedDict()

    def learn(self, topic_id: str, name: str) -> None:
        if topic_id == _ZERO_UUID or not name:
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
        get = obj.get
        # Resolve this struct's topic and partition first so that records below it are
        # attributed to them.
        own_topic = get("Topic")
        if type(own_topic) is not str:
            own_topic = get("TopicName")
            if type(own_topic) is not str:
                own_topic = get("Name") if parent in _TOPIC_NAME_PARENTS else None
                if type(own_topic) is not str:
                    own_topic = get("_topic_name")
                    if type(own_topic) is not str:
                        own_topic = None
        tid = get("TopicId")
        if tid is not None:
            text = uuid_text(tid)
            if text and text != _ZERO_UUID:
                if own_topic is not None:
                    if self.names is not None:
                        self.names.learn(text, own_topic)
                else:
                    learned = self.names.get(text) if self.names is not None else None
                    own_topic = learned or text
                self.topic_ids[text] = None
        if own_topic is not None:
            self.topics[own_topic] = None
            topic = own_topic
        p = get("PartitionIndex")
        if type(p) is not int:
            p = get("Partition")
            if type(p) is not int:
                p = get("Index") if parent in _INDEX_PARENTS else None
        if type(p) is int:
            partition = p
        int_roles = _INT_ROLES
        str_roles = _STR_ROLES
        for key, value in obj.items():
            kind = type(value)
            if kind is int:
                role = int_roles.get(key)
                if role is None:
                    role = _int_role(key)
                if role:
                    if role == _ERROR:
                        if value and self.is_response:
                            self.errors[value] = None
                    elif role == _PARTITION or (role == _INDEX and parent in _INDEX_PARENTS):
                        self.partitions[value] = None
                    elif role == _PRODUCER:
                        if value >= 0:
                            self.producer_ids[value] = None
            elif kind is list:
                if not value:
                    continue
                first = value[0]
                if type(first) is dict:
                    for item in value:
                        if type(item) is dict:
                            self.walk(item, key, topic, partition)
                elif type(first) is str:
                    if key in _TOPIC_LIST_KEYS:
                        for item in value:
                            if type(item) is str:
                                self.topics[item] = None
                    elif key in _GROUP_LIST_KEYS:
                        for item in value:
                            if type(item) is str:
                                self.groups[item] = None
                    elif key in _TXN_LIST_KEYS:
                        for item in value:
                            if type(item) is str:
                                self.txn_ids[item] = None
                    elif key == "CoordinatorKeys" and self.group_keys:
                        for item in value:
                            if type(item) is str:
                                self.groups[item] = None
                elif type(first) is int and key in _PARTITION_LIST_KEYS:
                    for item in value:
                        if type(item) is int:
                            self.partitions[item] = None
            elif kind is str:
                role = str_roles.get(key, 0)
                if role:
                    if role == _GROUP:
                        if value:
                            self.groups[value] = None
                    elif role == _TXN:
                        if value:
                            self.txn_ids[value] = None
                    elif role == _MEMBER:
                        if value:
                            self.members[value] = None
                    elif role == _RESOURCE:
                        if get("ResourceType") == _TOPIC_RESOURCE_TYPE:
                            self.topics[value] = None
                    elif self.group_keys:   # _COORDINATOR_KEY
                        self.groups[value] = None
            elif kind is dict:
                self.walk(value, key, topic, partition)
            elif value is not None and isinstance(value, Records):
                n = records_count(value, self.exact)
                size = records_size(value)
                self.records += n
                self.sets.append((topic, partition, value))
                if topic is not None:
                    acc = self.per_topic.get(topic)
                    if acc is None:
                        self.per_topic[topic] = [n, size]
                    else:
                        acc[0] += n
                        acc[1] += size


class ExchangeFacts:
    """Lazily computed entities of one exchange (see the module contract)."""

    __slots__ = ("exchange", "_names", "_req", "_resp", "exact")

    def __init__(self, exchange: Exchange, names: TopicNames | None = None,
                 exact: bool = False) -> None:
        self.exchange = exchange
        self._names = names
        self.exact = exact          # decompress legacy wrappers for exact record counts
        self._req: _Collector | None = None
        self._resp: _Collector | None = None

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
            try:
                col.walk(body, None, None)
            except RecursionError:
                pass
        return col

    @property
    def names(self) -> TopicNames | None:
        return self._names

    def require_exact(self) -> None:
        """Switch to exact record counts (recomputing facts already computed)."""
        if not self.exact:
            self.exact = True
            self._req = self._resp = None

    def topic_label(self, struct: dict[str, Any]) -> str:
        """The topic a body struct is about: its name, else the learned name of its
        ``TopicId``, else the id text; ``"?"`` when the struct names no topic."""
        for key in ("Name", "Topic", "TopicName", "_topic_name"):
            name = struct.get(key)
            if type(name) is str:
                return name
        text = uuid_text(struct.get("TopicId"))
        if text:
            learned = self._names.get(text) if self._names is not None else None
            return learned or text
        return "?"

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
        record-level ones of batches already decoded): the sum of their ``problems``."""
        n = 0
        for side in (self.request_side, self.response_side):
            for _topic, _partition, records in side.sets:
                n += records.problem_count
        return n

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
            if type(name) is str and (key != "Name" or parent in _TOPIC_NAME_PARENTS):
                topic = name
                break
        else:
            text = uuid_text(obj.get("TopicId"))
            if text and text != _ZERO_UUID:
                topic = (names.get(text) if names is not None else None) or text
        for key in ("PartitionIndex", "Partition", "PartitionId"):
            p = obj.get(key)
            if type(p) is int:
                partition = p
                break
        else:
            p = obj.get("Index")
            if type(p) is int and parent in _INDEX_PARENTS:
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
