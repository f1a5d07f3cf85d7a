"""Schema-driven walkers for the facts of a body, generated on first use.

Contract:

* :func:`body_walker` returns ``fn(collector, body)`` for a ``kind`` ("request" or
  "response") body of one API version that the schema table defines, or None. ``fn``
  collects exactly what :meth:`kwsniff.output.facts._Collector.walk` collects from the
  same body, in the same order, but looks only at the fields that can matter.
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

# the code run on an int field, by its role (``v`` holds the value)
_INT_CODE = {
    ERROR: ["if v and col.is_response:", "    col.errors[v] = None"],
    PARTITION: ["col.partitions[v] = None"],
    INDEX: ["col.partitions[v] = None"],
    PRODUCER: ["if v >= 0:", "    col.producer_ids[v] = None"],
}


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


class _Generator:
    """Writes the source of one walker (one function, nested loops for arrays)."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {"_Records": Records}

    def w(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def plain(self, rows: tuple) -> list[tuple]:
        v = self.version
        return [r for r in rows if _schema.in_range(v, r[_schema.F_VERSIONS])
                and not (r[_schema.F_TAG] is not None
                         and _schema.in_range(v, r[_schema.F_TAGGED]))]

    def struct(self, rows: tuple, parent: str | None, depth: int, ind: int) -> None:
        """Code for the struct in ``d<depth>`` whose enclosing topic and partition are
        ``t<depth-1>``/``p<depth-1>``; it sets ``t<depth>``/``p<depth>`` for its fields."""
        fields = self.plain(rows)
        names = [r[_schema.F_NAME] for r in fields]
        d, g, t, p = f"d{depth}", f"g{depth}", f"t{depth}", f"p{depth}"
        keys = f"K{len(self.ns)}"
        # the topic name the run's topic id table adds next to a TopicId
        # (kwsniff.kafka.topic_ids) is the one key added after decoding handled here
        added = [TOPIC_NAME] if "TopicId" in names else []
        self.ns[keys] = frozenset(names + added)
        up_t, up_p = (f"t{depth - 1}", f"p{depth - 1}") if depth else ("None", "None")
        self.w(ind, f"if not {keys}.issuperset({d}):")
        self.w(ind + 1, f"col.walk({d}, {parent!r}, {up_t}, {up_p})")
        self.w(ind, "else:")
        ind += 1
        self.w(ind, f"{g} = {d}.get")
        self.w(ind, f"{t} = {up_t}")
        self.w(ind, f"{p} = {up_p}")
        # the struct's own topic: the first str of these keys (as the generic walk)
        topic_keys = ["Topic", "TopicName"] + (["Name"] if parent in TOPIC_NAME_PARENTS else [])
        topic_keys = [k for k in topic_keys if k in names] + added
        if topic_keys:
            self.first_of(topic_keys, "str", g, ind)
            if "TopicId" in names:
                self.w(ind, f"v = {g}('TopicId')")
                self.w(ind, "if v is not None:")
                self.w(ind + 1, "o = col.topic_id(v, o)")
            self.w(ind, "if o is not None:")
            self.w(ind + 1, "col.topics[o] = None")
            self.w(ind + 1, f"{t} = o")
        part_keys = ["PartitionIndex", "Partition"] + (["Index"] if parent in INDEX_PARENTS else [])
        part_keys = [k for k in part_keys if k in names]
        if part_keys:
            self.first_of(part_keys, "int", g, ind)
            self.w(ind, "if o is not None:")
            self.w(ind + 1, f"{p} = o")
        for row in fields:
            self.field(row, parent, depth, ind)

    def first_of(self, keys: list[str], type_name: str, g: str, ind: int) -> None:
        """``o`` = the first value of ``keys`` of type ``type_name``, else None."""
        self.w(ind, "o = None")
        for i, k in enumerate(keys):
            if i:
                self.w(ind, "if o is None:")
            inner = ind + 1 if i else ind
            self.w(inner, f"o = {g}({k!r})")
            self.w(inner, f"if type(o) is not {type_name}:")
            self.w(inner + 1, "o = None")

    def field(self, row: tuple, parent: str | None, depth: int, ind: int) -> None:
        name, kafka_type, children = row[_schema.F_NAME], row[_schema.F_TYPE], row[_schema.F_CHILDREN]
        d, g, t, p = f"d{depth}", f"g{depth}", f"t{depth}", f"p{depth}"
        other = f"col.item({d}, {name!r}, v, {parent!r}, {t}, {p})"
        if children is not None:
            inner = f"d{depth + 1}"
            self.w(ind, f"v = {g}({name!r})")
            if kafka_type.startswith("[]"):
                self.w(ind, "if type(v) is list:")
                self.w(ind + 1, "if v:")
                self.w(ind + 2, "if type(v[0]) is dict:")
                self.w(ind + 3, f"for {inner} in v:")
                self.w(ind + 4, f"if type({inner}) is dict:")
                self.struct(children, name, depth + 1, ind + 5)
                self.w(ind + 2, "else:")
                self.w(ind + 3, other)
            else:
                self.w(ind, "if type(v) is dict:")
                self.w(ind + 1, f"{inner} = v")
                self.struct(children, name, depth + 1, ind + 1)
            self.w(ind, "elif v is not None:")
            self.w(ind + 1, other)
        elif kafka_type in _INT_TYPES:
            role = _int_field_role(name, parent)
            if not role:
                return
            self.w(ind, f"v = {g}({name!r})")
            self.w(ind, "if type(v) is int:")
            for line in _INT_CODE[role]:
                self.w(ind + 1, line)
            self.w(ind, "elif v is not None:")
            self.w(ind + 1, other)
        elif kafka_type == "records":
            self.w(ind, f"v = {g}({name!r})")
            self.w(ind, "if type(v) is _Records:")
            self.w(ind + 1, f"col.records_set(v, {t}, {p})")
            self.w(ind, "elif v is not None:")
            self.w(ind + 1, other)
        elif _other_field_matters(name, kafka_type):
            self.w(ind, f"v = {g}({name!r})")
            self.w(ind, "if v is not None:")
            self.w(ind + 1, other)


@lru_cache(maxsize=1024)
def body_walker(api_key: int, kind: str, version: int) -> Walker | None:
    """The walker of a ``kind`` body of ``api_key`` at ``version`` (see the module
    contract), or None when the schema table does not define that body."""
    seg = _schema.message_schema(api_key, kind, version)
    if seg is None:
        return None
    gen = _Generator(version)
    gen.struct(seg[4], None, 0, 1)
    src = "def walk(col, d0):\n" + "\n".join(gen.lines) + "\n"
    code = compile(src, f"<kwsniff facts walker {api_key} {kind} v{version}>", "exec")
    exec(code, gen.ns)  # noqa: S102 - source generated above from the schema table only
    fn = gen.ns["walk"]
    fn.source = src  # type: ignore[attr-defined]
    return fn


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
