"""Topic id -> topic name resolution across a capture.

Contract:

* :meth:`TopicIds.learn` reads decoded responses that pair ids with names (Metadata v10+,
  CreateTopics v7+, DescribeTopicPartitions) and remembers them for the whole run (topic
  ids are UUIDs, unique across clusters).  The all-zero id means "no id" and is ignored.
* :meth:`TopicIds.annotate` walks a decoded body of an API that names topics by id
  (Fetch v13+, Produce v13+, ShareFetch, ...) and, for every struct whose ``TopicId`` is
  known, adds ``"_topic_name": name`` next to it (the output layer shows it like a
  field).  Structs that carry both a name and an id teach the table too.
* Memory: at most ``limit`` ids are kept (oldest forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from typing import Any

from kwsniff.kafka.protocol import schema as _schema

METADATA, CREATE_TOPICS, DESCRIBE_TOPIC_PARTITIONS = 3, 19, 75
NAME_KEYS = ("Name", "Topic", "TopicName")
TOPIC_NAME = "_topic_name"


_ZERO_TEXTS = ("AAAAAAAAAAAAAAAAAAAAAA", "00000000-0000-0000-0000-000000000000")


def _zero(v: Any) -> bool:
    if type(v) is str:          # what the decoders produce (canonical uuid text)
        return v in _ZERO_TEXTS
    if v is None:
        return True
    if isinstance(v, (bytes, bytearray)):
        return not any(v)
    return str(v) in _ZERO_TEXTS or getattr(v, "int", 1) == 0


def _key(v: Any) -> Any:
    if type(v) is str:
        return v
    if isinstance(v, bytearray):
        return bytes(v)
    try:
        hash(v)
    except TypeError:
        return str(v)
    return v


class TopicIds:
    """The run-wide topic id table."""

    __slots__ = ("names", "limit", "learned", "resolved")

    def __init__(self, limit: int = 100_000) -> None:
        self.names: OrderedDict[Any, str] = OrderedDict()
        self.limit = limit
        self.learned = 0
        self.resolved = 0

    def name_of(self, topic_id: Any) -> str | None:
        return self.names.get(_key(topic_id))

    def add(self, topic_id: Any, name: str) -> None:
        if _zero(topic_id) or not isinstance(name, str) or not name:
            return
        k = _key(topic_id)
        if self.names.get(k) != name:
            self.names[k] = name
            self.names.move_to_end(k)
            self.learned += 1
            if len(self.names) > self.limit:
                self.names.popitem(last=False)

    def learn(self, api_key: int | None, body: dict[str, Any] | None) -> None:
        """Learn id/name pairs from a decoded response body."""
        if body is None or api_key not in (METADATA, CREATE_TOPICS, DESCRIBE_TOPIC_PARTITIONS):
            return
        topics = body.get("Topics")
        if not isinstance(topics, list):
            return
        for t in topics:
            if isinstance(t, dict):
                tid = t.get("TopicId")
                name = t.get("Name")
                if tid is not None and isinstance(name, str):
                    self.add(tid, name)

    def annotate(self, api_key: int | None, body: dict[str, Any] | None, kind: str = "request",
                 version: int | None = None) -> None:
        """Add ``_topic_name`` next to every known ``TopicId`` in ``body`` (a ``kind``
        message of ``api_key`` at ``version``; only versions with topic ids are walked)."""
        if body is None or api_key is None or version is None or not self.names:
            return
        plan = id_plan(api_key, kind, version)
        if plan is not None:
            self._visit(body, plan)

    def _visit(self, node: dict[str, Any], plan: Plan) -> None:
        """:meth:`_walk` along the plan: only the structs that can hold a TopicId."""
        has_id, subs = plan
        if has_id:
            tid = node.get("TopicId")
            if tid is not None:
                self._topic(node, tid)
        for name, sub in subs:
            v = node.get(name)
            if isinstance(v, list):
                if v and isinstance(v[0], dict):
                    for item in v:
                        if isinstance(item, dict):
                            self._visit(item, sub)
            elif isinstance(v, dict):
                self._visit(v, sub)

    def _walk(self, node: dict[str, Any], depth: int) -> None:
        """Every struct of a decoded body down to :data:`MAX_DEPTH`, whatever its schema
        (the reference :meth:`_visit` is tested against)."""
        if depth > MAX_DEPTH:
            return
        tid = node.get("TopicId")
        if tid is not None:
            self._topic(node, tid)
        for v in node.values():
            if isinstance(v, list) and v and isinstance(v[0], dict):
                for item in v:
                    if isinstance(item, dict):
                        self._walk(item, depth + 1)
            elif isinstance(v, dict):
                self._walk(v, depth + 1)

    def _topic(self, node: dict[str, Any], tid: Any) -> None:
        """A struct with a TopicId: learn its name, or add the known name after the id."""
        if not _zero(tid):
            name = None
            for k in NAME_KEYS:
                v = node.get(k)
                if isinstance(v, str) and v:
                    name = v
                    break
            if name is not None:
                self.add(tid, name)
            else:
                known = self.names.get(_key(tid))
                if known is not None:
                    items = list(node.items())
                    node.clear()
                    for k, v in items:       # keep the name right after the id
                        node[k] = v
                        if k == "TopicId":
                            node[TOPIC_NAME] = known
                    self.resolved += 1


#: (the struct has a TopicId field, ((field name, plan of that struct field), ...))
Plan = tuple[bool, tuple[tuple[str, Any], ...]]
#: the deepest struct nesting where ids are looked for (the body is depth 0)
MAX_DEPTH = 6


@lru_cache(maxsize=4096)
def id_plan(api_key: int, kind: str, version: int) -> Plan | None:
    """Which structs of this message version can hold a ``TopicId`` (schema table), and
    the struct fields leading to them; None when none can."""
    seg = _schema.message_schema(api_key, kind, version)
    return None if seg is None else _plan(seg[4], version, 0)


def _plan(fields: Any, version: int, depth: int) -> Plan | None:
    if depth > MAX_DEPTH:
        return None
    has_id = False
    subs = []
    for row in fields or ():
        if not _schema.in_range(version, row[_schema.F_VERSIONS]):
            continue
        if row[_schema.F_NAME] == "TopicId":
            has_id = True
        if row[_schema.F_CHILDREN]:
            sub = _plan(row[_schema.F_CHILDREN], version, depth + 1)
            if sub is not None:
                subs.append((row[_schema.F_NAME], sub))
    if not has_id and not subs:
        return None
    return has_id, tuple(subs)


@lru_cache(maxsize=4096)
def has_topic_ids(api_key: int, kind: str, version: int) -> bool:
    """Whether this message version has a ``TopicId`` field anywhere (schema table)."""
    seg = _schema.message_schema(api_key, kind, version)
    return seg is not None and _fields_have_id(seg[4], version)


def _fields_have_id(fields: Any, version: int) -> bool:
    for row in fields or ():
        if not _schema.in_range(version, row[_schema.F_VERSIONS]):
            continue
        if row[_schema.F_NAME] == "TopicId":
            return True
        if row[_schema.F_CHILDREN] and _fields_have_id(row[_schema.F_CHILDREN], version):
            return True
    return False
