"""Schema-driven walkers for the facts of a body, generated on first use.

Contract:

* :func:`body_walker` returns ``fn(collector, body)`` for a ``kind`` ("request" or
  "response") body of one API version that the schema table defines, or None. ``fn``
  collects exactly what :meth:`kwsniff.output.facts._Collector.walk` collects from the
  same body, in the same order, but looks only at the fields that can matter: it
  follows a plan made once from the schema table (nested tuples, see
  :func:`_struct_plan`), which one compiled function walks.
* Why that is exact: the schema table's decoders fill each struct with the plain
  (untagged) fields of its schema, in schema order, each with the Python type of its
  Kafka type (:mod:`kwsniff.kafka.protocol.codegen`). The walker skips fields whose
  type and name give them no role (:mod:`kwsniff.output.entity_rules`): bools, floats,
  bytes, and ints, strings and scalar arrays without a role. A struct holding any other
  key (tagged fields, ``_unknown_tags``, ``_decoded_*`` added after decoding) is handed
  to the collector's generic ``walk``; a field whose value has an unexpected type to its
  generic ``item``. The one added key a walker handles itself is ``_topic_name`` next
  to a ``TopicId`` (the generic walk's last choice for the struct's topic name).
* The collector provides ``walk``, ``item``, ``topic_id``, ``records_set`` and the
  collections the generic walk fills.
* :func:`records_paths` gives the field-name paths of a body's ``records`` fields and
  :func:`find_records` follows them: the record sets a walk would find, without the
  rest of the walk. Exact for the same reason: only the decoders of ``records`` fields
  make :class:`~kwsniff.kafka.records.Records` values, and the walks find a value
  under a struct key, descending only into structs and into arrays whose first
  element is a struct; the paths cover every ``records`` field of every version.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from kwsniff.kafka.protocol import schema as _schema
from kwsniff.kafka.records import Records
from kwsniff.kafka.topic_ids import TOPIC_NAME
from kwsniff.output.entity_rules import (
    ERROR,
    INDEX,
    INDEX_PARENTS,
    PARTITION,
    PARTITION_LIST_KEYS,
    PRODUCER,
    STR_ROLES,
    TOPIC_LIST_KEYS,
    TOPIC_NAME_PARENTS,
    GROUP_LIST_KEYS,
    TXN_LIST_KEYS,
    int_role,
)

Walker = Callable[[Any, dict], None]

_INT_TYPES = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})
_TEXT_TYPES = frozenset({"string", "uuid"})
_INERT_TYPES = frozenset({"bool", "float64", "bytes"})
_TEXT_LIST_KEYS = TOPIC_LIST_KEYS | GROUP_LIST_KEYS | TXN_LIST_KEYS | {"CoordinatorKeys"}

def _int_field_role(name: str, parent: str | None) -> int:
    role = int_role(name)
    if role == INDEX and parent not in INDEX_PARENTS:
        return 0            # an Index names a partition only under INDEX_PARENTS
    return role


def _other_field_matters(name: str, kafka_type: str) -> bool:
    """Whether the generic walk can act on a string, records or array-of-scalars field."""
    if kafka_type.startswith("[]"):
        elem = kafka_type[2:]
        if elem in _TEXT_TYPES:
            return name in _TEXT_LIST_KEYS
        if elem in _INT_TYPES:
            return name in PARTITION_LIST_KEYS
        return elem not in _INERT_TYPES
    if kafka_type in _TEXT_TYPES:
        return name in STR_ROLES
    return kafka_type not in _INERT_TYPES   # records, and any type not known here


# what a field of a walk plan holds (see _struct_plan)
_ARRAY = 0          # an array of structs: its element plan
_STRUCT = 1         # a struct: its plan
_INT = 2            # an int with a role: the role
_RECORDS = 3        # a records field
_OTHER = 4          # a string or scalar array the generic walk may act on


def _plain_rows(rows: tuple, version: int) -> list[tuple]:
    """The fields of ``rows`` a ``version`` body holds untagged (what the decoders put
    in the struct, in schema order)."""
    return [r for r in rows if _schema.in_range(version, r[_schema.F_VERSIONS])
            and not (r[_schema.F_TAG] is not None
                     and _schema.in_range(version, r[_schema.F_TAGGED]))]


def _struct_plan(rows: tuple, parent: str | None, version: int) -> tuple:
    """The walk plan of a struct under the field ``parent`` (None: the body):
    ``(keys, parent, topic keys, has a TopicId, partition keys, field plans)``. ``keys``
    are the keys a struct may hold and still be walked by the plan (else the generic
    walk takes it); the struct's own topic is the first str of the topic keys (then a
    ``TopicId`` decides), its partition the first int of the partition keys; each field
    plan is ``(name, kind, arg)``, ``kind`` one of ``_ARRAY`` .. ``_OTHER`` (fields
    without a role have none)."""
    fields = _plain_rows(rows, version)
    names = [r[_schema.F_NAME] for r in fields]
    # the topic name the run's topic id table adds next to a TopicId
    # (kwsniff.kafka.topic_ids) is the one key added after decoding handled here
    added = [TOPIC_NAME] if "TopicId" in names else []
    topic_keys = ["Topic", "TopicName"] + (["Name"] if parent in TOPIC_NAME_PARENTS else [])
    topic_keys = [k for k in topic_keys if k in names] + added
    part_keys = ["PartitionIndex", "Partition"] + (["Index"] if parent in INDEX_PARENTS else [])
    part_keys = [k for k in part_keys if k in names]
    plans = []
    for row in fields:
        plan = _field_plan(row, parent, version)
        if plan is not None:
            plans.append(plan)
    return (frozenset(names + added), parent, tuple(topic_keys), "TopicId" in names,
            tuple(part_keys), tuple(plans))


def _field_plan(row: tuple, parent: str | None, version: int) -> tuple | None:
    """The plan of one field of a struct under ``parent`` (None when it has no role)."""
    name, kafka_type, children = row[_schema.F_NAME], row[_schema.F_TYPE], row[_schema.F_CHILDREN]
    if children is not None:
        kind = _ARRAY if kafka_type.startswith("[]") else _STRUCT
        return (name, kind, _struct_plan(children, name, version))
    if kafka_type in _INT_TYPES:
        role = _int_field_role(name, parent)
        return (name, _INT, role) if role else None
    if kafka_type == "records":
        return (name, _RECORDS, None)
    if _other_field_matters(name, kafka_type):
        return (name, _OTHER, None)
    return None


def _walk(col: Any, d: dict, plan: tuple, topic: str | None, partition: int | None) -> None:
    """Collect what the generic walk collects from struct ``d`` (of the struct ``plan``,
    whose enclosing topic and partition are ``topic``/``partition``), looking only at the
    fields the plan names."""
    parent = plan[1]
    if not plan[0].issuperset(d):
        col.walk(d, parent, topic, partition)
        return
    topic_keys = plan[2]
    if topic_keys:
        o = None
        for k in topic_keys:
            o = d.get(k)
            if type(o) is str:
                break
            o = None
        if plan[3]:
            v = d.get("TopicId")
            if v is not None:
                o = col.topic_id(v, o)
        if o is not None:
            col.topics[o] = None
            topic = o
    for k in plan[4]:
        o = d.get(k)
        if type(o) is int:
            partition = o
            break
    for field in plan[5]:
        name = field[0]
        kind = field[1]
        v = d.get(name)
        if v is None:
            continue
        if kind == _ARRAY:
            if type(v) is list:
                if v:
                    if type(v[0]) is dict:
                        sub = field[2]
                        for e in v:
                            if type(e) is dict:
                                _walk(col, e, sub, topic, partition)
                    else:
                        col.item(d, name, v, parent, topic, partition)
                continue
        elif kind == _STRUCT:
            if type(v) is dict:
                _walk(col, v, field[2], topic, partition)
                continue
        elif kind == _INT:
            if type(v) is int:
                role = field[2]
                if role == ERROR:
                    if v and col.is_response:
                        col.errors[v] = None
                elif role == PRODUCER:
                    if v >= 0:
                        col.producer_ids[v] = None
                else:               # PARTITION, INDEX
                    col.partitions[v] = None
                continue
        elif kind == _RECORDS:
            if type(v) is Records:
                col.records_set(v, topic, partition)
                continue
        col.item(d, name, v, parent, topic, partition)


class _PlanWalker:
    """A body walker: ``walker(collector, body)`` walks ``body`` by ``plan``."""

    __slots__ = ("plan",)

    def __init__(self, plan: tuple) -> None:
        self.plan = plan

    def __call__(self, col: Any, body: dict) -> None:
        _walk(col, body, self.plan, None, None)


@lru_cache(maxsize=1024)
def body_walker(api_key: int, kind: str, version: int) -> Walker | None:
    """The walker of a ``kind`` body of ``api_key`` at ``version`` (see the module
    contract), or None when the schema table does not define that body."""
    seg = _schema.message_schema(api_key, kind, version)
    if seg is None:
        return None
    return _PlanWalker(_struct_plan(seg[4], None, version))


@lru_cache(maxsize=1024)
def records_paths(api_key: int, kind: str, version: int) -> tuple[tuple[str, ...], ...] | None:
    """The paths (field names from the body down) of every ``records`` field the schema
    of this body defines, in any version or tagged; None when the schema table does not
    define that body."""
    seg = _schema.message_schema(api_key, kind, version)
    if seg is None:
        return None
    out: list[tuple[str, ...]] = []

    def visit(rows: tuple, path: tuple[str, ...]) -> None:
        for row in rows:
            name, children = row[_schema.F_NAME], row[_schema.F_CHILDREN]
            if children is not None:
                visit(children, (*path, name))
            elif row[_schema.F_TYPE] == "records":
                out.append((*path, name))

    visit(seg[4], ())
    return tuple(dict.fromkeys(out))


def find_records(body: dict, paths: tuple[tuple[str, ...], ...]) -> list[Records]:
    """The record sets at ``paths`` of ``body`` (see :func:`records_paths`)."""
    found: list[Records] = []
    for path in paths:
        _follow(body, path, 0, found)
    return found


def _follow(d: dict, path: tuple[str, ...], i: int, found: list[Records]) -> None:
    v = d.get(path[i])
    if i == len(path) - 1:
        if v is not None and isinstance(v, Records):
            found.append(v)
    elif type(v) is dict:
        _follow(v, path, i + 1, found)
    elif type(v) is list and v and type(v[0]) is dict:
        for element in v:
            if type(element) is dict:
                _follow(element, path, i + 1, found)
