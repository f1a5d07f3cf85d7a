#!/usr/bin/env python3
"""Generate kwsniff's Kafka schema table from ``../shared/kafka-protocol``.

Usage::

    python tools/gen_schemas.py [--source DIR] [--out FILE] [--check]

Sources (see the shared folder's README): for every (api key, version) the definition
comes from the newest source that defines that version -- kafka-python's Kafka 4.3 JSON
when its ``validVersions`` cover it, else the apache/kafka 2024-10 JSON (every version
from v0), else franz-go's DSL (keys 88-92 and the newest versions of some keys).

Consecutive versions taken from the same source form one *segment*; a segment keeps
the source's field tree with per-field version ranges, pruned to fields that exist in
at least one of its versions.

franz-go field names are mapped to Kafka's JSON names so that a field keeps one name
across the versions of an API:

* where a Kafka JSON exists for the API, the franz-go fields of the newest JSON
  version are aligned with the JSON fields position by position (untagged fields, with
  matching wire types) and by tag number (tagged fields), recursively; aligned fields
  take the JSON name, about text, default and entity type;
* for keys 88-92 (no JSON here) the names come from ``FRANZ_RENAMES`` below (facts taken
  from the upstream apache/kafka message JSON of those APIs);
* any remaining franz-go name is normalised to Kafka's spelling (``ID`` -> ``Id``,
  ``Millis`` -> ``Ms``; the ``ThrottleMillis``/``TimeoutMillis`` macros become
  ``ThrottleTimeMs``/``TimeoutMs``).

The output is deterministic: re-running the generator reproduces the committed file
byte for byte (``--check`` verifies that).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "kafka-protocol"
DEFAULT_OUT = ROOT / "kwsniff" / "kafka" / "protocol" / "schema_table.py"

KAFKA_2024 = "apache-kafka-trunk-2024-10-25"
KAFKA_PY = "kafka-python-3.0.12-resources"
FRANZ = "franz-go-definitions-2026-08-04"
SOURCE_IDS = {KAFKA_PY: "kafka-4.3", KAFKA_2024: "kafka-2024-10", FRANZ: "franz-go"}

MAX_V = 32767
NONE_RANGE = (0, -1)
PRIMITIVES = frozenset({
    "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "bool",
    "uuid", "string", "bytes", "records",
})

# Field-name based enum hints (api key or None for any, field name) -> enum name, for
# enum-like fields neither source types as an enum. Names refer to kwsniff.kafka.protocol.enums.
ENUM_RULES: dict[tuple[int | None, str], str] = {
    (None, "IsolationLevel"): "IsolationLevel",
    (10, "KeyType"): "CoordinatorType",
    (None, "CoordinatorType"): "CoordinatorType",
    (None, "LeaderRecoveryState"): "LeaderRecoveryState",
    (27, "TransactionResult"): "TransactionResult",
    (43, "ElectionType"): "ElectionType",
    (50, "Mechanism"): "ScramMechanism",
    (51, "Mechanism"): "ScramMechanism",
    (57, "UpgradeType"): "FeatureUpgradeType",
    (2, "Timestamp"): "ListOffsetsTimestamp",
    (4, "Type"): "LeaderAndIsrType",
    (None, "TimestampType"): "TimestampType",
    (None, "TransactionStatus"): "TransactionState",
    (60, "EndpointType"): "DescribeClusterEndpointType",
    (74, "ResourceTypes"): "ConfigResourceType",
}
# franz-go enum type names -> kwsniff enum names.
FRANZ_ENUMS = {
    "ConfigResourceType": "ConfigResourceType",
    "ConfigSource": "ConfigSource",
    "ConfigType": "ConfigType",
    "IncrementalAlterConfigOp": "IncrementalAlterConfigOp",
    "ACLResourceType": "AclResourceType",
    "ACLResourcePatternType": "AclPatternType",
    "ACLPermissionType": "AclPermissionType",
    "ACLOperation": "AclOperation",
    "TransactionState": "TransactionState",
    "QuotasMatchType": "QuotaMatchType",
    "ControlRecordKeyType": "ControlRecordType",
}

# Kafka JSON names for franz-go fields of APIs that have no Kafka JSON in the shared
# folder (keys 88-92). Keys are dotted franz-go paths within the message; values are the
# names apache/kafka's message JSON uses for the field at that position.
_TASK_IDS = {"SubtopologyID": "SubtopologyId"}
_TOPIC_INFO = {"Topic": "Name", "NumPartitions": "Partitions", "Configs": "TopicConfigs"}
_TASK_OFFSET = {"SubtopologyID": "SubtopologyId"}


def _under(prefix: str, names: dict[str, str]) -> dict[str, str]:
    return {f"{prefix}.{k}": v for k, v in names.items()}


FRANZ_RENAMES: dict[str, dict[str, str]] = {
    "StreamsGroupHeartbeatRequest": {
        "Group": "GroupId",
        "Topology.Subtopologies.SubtopologyID": "SubtopologyId",
        **_under("Topology.Subtopologies.StateChangelogTopics", _TOPIC_INFO),
        **_under("Topology.Subtopologies.RepartitionSourceTopics", _TOPIC_INFO),
        **_under("ActiveTasks", _TASK_IDS),
        **_under("StandbyTasks", _TASK_IDS),
        **_under("WarmupTasks", _TASK_IDS),
        **_under("TaskOffsets", _TASK_OFFSET),
        **_under("TaskEndOffsets", _TASK_OFFSET),
    },
    "StreamsGroupHeartbeatResponse": {
        "Status.StatusCode": "StatusCode",
        **_under("ActiveTasks", _TASK_IDS),
        **_under("StandbyTasks", _TASK_IDS),
        **_under("WarmupTasks", _TASK_IDS),
        "PartitionsByUserEndpoint.ActivePartitions.Partitions": "Partitions",
        "PartitionsByUserEndpoint.StandbyPartitions.Partitions": "Partitions",
    },
    "StreamsGroupDescribeRequest": {
        "Groups": "GroupIds",
    },
    "StreamsGroupDescribeResponse": {
        "Groups.Group": "GroupId",
        "Groups.State": "GroupState",
        "Groups.Epoch": "GroupEpoch",
        "Groups.Topology.Subtopologies.SubtopologyID": "SubtopologyId",
        **_under("Groups.Topology.Subtopologies.StateChangelogTopics", _TOPIC_INFO),
        **_under("Groups.Topology.Subtopologies.RepartitionSourceTopics", _TOPIC_INFO),
    },
    "DescribeShareGroupOffsetsRequest": {
        "Groups.Group": "GroupId",
        "Groups.Topics.Topic": "TopicName",
    },
    "DescribeShareGroupOffsetsResponse": {
        "Groups.Group": "GroupId",
        "Groups.Topics.Topic": "TopicName",
        "Groups.Topics.Partitions.Partition": "PartitionIndex",
    },
    "AlterShareGroupOffsetsRequest": {
        "Topics.Topic": "TopicName",
        "Topics.Partitions.Partition": "PartitionIndex",
    },
    "AlterShareGroupOffsetsResponse": {
        "Topics": "Responses",
        "Topics.Topic": "TopicName",
        "Topics.Partitions.Partition": "PartitionIndex",
    },
    "DeleteShareGroupOffsetsRequest": {
        "Topics.Topic": "TopicName",
    },
    "DeleteShareGroupOffsetsResponse": {
        "Topics": "Responses",
        "Topics.Topic": "TopicName",
    },
}


# --------------------------------------------------------------------------- model


@dataclass
class Field:
    """One field in source-neutral form (Kafka JSON vocabulary)."""

    name: str
    type: str                      # Kafka type string: int32, []int32, []Topic, Topic, ...
    versions: tuple[int, int]
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    tagged: tuple[int, int] | None = None
    flex: tuple[int, int] | None = None   # field-level flexibleVersions override
    default: str | None = None
    entity: str | None = None
    enum: str | None = None
    about: str = ""
    fields: list[Field] | None = None     # struct / array-of-struct children
    franz_type: str = ""                  # the franz-go base type (for alignment checks)
    franz_enum: str | None = None

    @property
    def wire(self) -> str:
        """Wire-level kind used when aligning sources."""
        t = self.type
        if self.fields is not None:
            return "[]struct" if t.startswith("[]") else "struct"
        if t.startswith("[]"):
            return "[]" + _wire_prim(t[2:])
        return _wire_prim(t)


def _wire_prim(t: str) -> str:
    return "bytes" if t == "records" else t


@dataclass
class Schema:
    """One message definition from one source."""

    name: str
    kind: str                      # request, response, header, data, metadata
    api_key: int | None
    valid: tuple[int, int]
    flexible: tuple[int, int]
    fields: list[Field]
    source: str
    extra: dict[str, Any] = field(default_factory=dict)


def parse_versions(text: str | None) -> tuple[int, int]:
    """Kafka version-range syntax: "none", "3", "3+", "1-4"."""
    if text is None or text == "none" or text == "":
        return NONE_RANGE
    text = text.strip()
    if text.endswith("+"):
        return (int(text[:-1]), MAX_V)
    if "-" in text:
        lo, hi = text.split("-", 1)
        return (int(lo), int(hi))
    return (int(text), int(text))


def intersects(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return max(a[0], b[0]) <= min(a[1], b[1])


def in_range(v: int, r: tuple[int, int] | None) -> bool:
    return r is not None and r[0] <= v <= r[1]


# --------------------------------------------------------------------------- Kafka JSON


def load_kafka_json(path: Path) -> dict[str, Any]:
    """Kafka's message JSON allows whole-line // comments."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines()
             if not ln.lstrip().startswith("//")]
    return json.loads("\n".join(lines))


def _default_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json_field(d: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> Field:
    t = d["type"]
    children = d.get("fields")
    base = t[2:] if t.startswith("[]") else t
    if children is None and base not in PRIMITIVES:
        children = common.get(base)
        if children is None:
            raise ValueError(f"unknown type {t!r} for field {d['name']!r}")
    nullable = parse_versions(d.get("nullableVersions"))
    tagged = parse_versions(d.get("taggedVersions"))
    # a tagged field may omit "versions": it then exists in its tagged versions
    versions = parse_versions(d["versions"]) if "versions" in d else tagged
    return Field(
        name=d["name"],
        type=t,
        versions=versions,
        nullable=None if nullable == NONE_RANGE else nullable,
        tag=None if d.get("tag") is None else int(d["tag"]),
        tagged=None if tagged == NONE_RANGE else tagged,
        flex=parse_versions(d["flexibleVersions"]) if "flexibleVersions" in d else None,
        default=_default_text(d.get("default")),
        entity=d.get("entityType"),
        about=" ".join(str(d.get("about", "")).split()),
        fields=None if children is None else [_json_field(c, common) for c in children],
    )


def json_schema(path: Path, source: str) -> Schema:
    d = load_kafka_json(path)
    common = {c["name"]: c["fields"] for c in d.get("commonStructs", [])}
    extra: dict[str, Any] = {}
    if d.get("latestVersionUnstable"):
        extra["latestVersionUnstable"] = True
    return Schema(
        name=d["name"],
        kind=d["type"],
        api_key=d.get("apiKey"),
        valid=parse_versions(d["validVersions"]),
        flexible=parse_versions(d.get("flexibleVersions")),
        fields=[_json_field(f, common) for f in d["fields"]],
        source=source,
        extra=extra,
    )


# --------------------------------------------------------------------------- franz-go DSL

_HEAD = re.compile(r"^(\w+) =>(.*)$")
_FIELD = re.compile(r"^(\w+): (\S+?)(?:\s*//\s*(.*))?$")
_MACRO = re.compile(r"^(TimeoutMillis|ThrottleMillis)(?:\((\d+)\))?(?:\s*//\s*(.*))?$")
_TYPE_DEFAULT = re.compile(r"^(.*?)\((.*)\)$")


@dataclass
class FranzStruct:
    name: str
    header: str
    fields: list[Field]
    doc: str


def _franz_annot(text: str | None) -> tuple[tuple[int, int], int | None]:
    """Parse a trailing comment: "v3+", "v0-v12" or "tag 2"."""
    if not text:
        return (0, MAX_V), None
    text = text.strip()
    m = re.fullmatch(r"tag (\d+)", text)
    if m:
        return (0, MAX_V), int(m.group(1))
    m = re.fullmatch(r"v(\d+)\+", text)
    if m:
        return (int(m.group(1)), MAX_V), None
    m = re.fullmatch(r"v(\d+)-v(\d+)", text)
    if m:
        return (int(m.group(1)), int(m.group(2))), None
    raise ValueError(f"unknown franz-go annotation {text!r}")


_MACRO_NAMES = {"ThrottleMillis": "ThrottleTimeMs", "TimeoutMillis": "TimeoutMs"}


def _normalise_name(name: str) -> str:
    if name in _MACRO_NAMES:
        return _MACRO_NAMES[name]
    name = re.sub(r"ID(?=s?(?:[A-Z]|$))", "Id", name)
    return name.replace("Millis", "Ms")


class FranzParser:
    """Reads franz-go's generate/definitions DSL into :class:`Field` trees."""

    def __init__(self, enum_types: dict[str, str]) -> None:
        self.enum_types = enum_types          # enum name -> underlying int type
        self.named: dict[str, FranzStruct] = {}

    def parse_file(self, text: str) -> list[FranzStruct]:
        lines = text.splitlines()
        out: list[FranzStruct] = []
        i = 0
        doc: list[str] = []
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                doc = []
                i += 1
                continue
            if stripped.startswith("//"):
                doc.append(stripped[2:].strip())
                i += 1
                continue
            m = _HEAD.match(line)
            if not m:
                raise ValueError(f"unexpected line {line!r}")
            body, i = self._block(lines, i + 1, 2)
            st = FranzStruct(m.group(1), m.group(2).strip(), body, _doc(doc))
            doc = []
            if "not top level" in st.header:
                self.named[st.name] = st
            out.append(st)
        return out

    def _block(self, lines: list[str], i: int, indent: int) -> tuple[list[Field], int]:
        fields: list[Field] = []
        doc: list[str] = []
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                if i + 1 < len(lines) and _indent(lines[i + 1]) >= indent and lines[i + 1].strip():
                    i += 1
                    continue
                break
            ind = _indent(line)
            if ind < indent:
                break
            if ind > indent:
                raise ValueError(f"unexpected indentation: {line!r}")
            if stripped.startswith("//"):
                doc.append(stripped[2:].strip())
                i += 1
                continue
            f, i = self._field(lines, i, stripped, indent, _doc(doc))
            doc = []
            fields.append(f)
        return fields, i

    def _field(self, lines: list[str], i: int, text: str, indent: int,
               about: str) -> tuple[Field, int]:
        m = _MACRO.match(text)
        if m:
            versions, tag = _franz_annot(m.group(3))
            if m.group(1) == "TimeoutMillis":
                default = m.group(2) or "15000"
                f = Field("TimeoutMillis", "int32", versions, tag=tag, default=default,
                          about=about or "How long the broker may take to answer, in milliseconds.")
            else:
                f = Field("ThrottleMillis", "int32", versions, tag=tag,
                          about=about or "How long the response was throttled, in milliseconds.")
            f.franz_type = "int32"
            return f, i + 1
        m = _FIELD.match(text)
        if not m:
            raise ValueError(f"cannot parse franz-go field {text!r}")
        name, typ, annot = m.group(1), m.group(2), m.group(3)
        versions, tag = _franz_annot(annot)
        f = Field(name, "", versions, tag=tag, about=about)
        if tag is not None:
            f.tagged = (0, MAX_V)
        i += 1
        self._apply_type(f, typ)
        if f.fields == []:   # inline struct: children follow, indented
            f.fields, i = self._block(lines, i, indent + 2)
        return f, i

    def _apply_type(self, f: Field, typ: str) -> None:
        default = None
        m = _TYPE_DEFAULT.match(typ)
        if m and not typ.startswith("[") and not typ.startswith("nullable["):
            typ, default = m.group(1), m.group(2)
        f.default = default
        nullable_from: int | None = None
        m = re.match(r"^nullable-v(\d+)\+(.*)$", typ)
        if m:
            nullable_from, typ = int(m.group(1)), m.group(2)
        elif typ.startswith("nullable-"):
            rest = typ[len("nullable-"):]
            m = re.match(r"^(\w+)-v(\d+)\+$", rest)
            if m:
                typ, nullable_from = m.group(1), int(m.group(2))
            else:
                typ, nullable_from = rest, 0
        elif typ.startswith("nullable"):
            typ, nullable_from = typ[len("nullable"):], 0
        if nullable_from is not None:
            f.nullable = (nullable_from, MAX_V)
        if typ.startswith("[") and typ.endswith("]"):
            inner = typ[1:-1]
            if inner.startswith("=>"):
                f.type = "[]" + (inner[2:] or f.name)
                f.fields = []
            elif inner in self.named:
                f.type = "[]" + inner
                f.fields = self._copy(self.named[inner].fields)
            else:
                prim, enum = self._prim(inner)
                f.type, f.franz_enum = "[]" + prim, enum
            f.franz_type = f.type if f.fields is None else "[]struct"
            return
        if typ == "=>":
            f.type = f.name
            f.fields = []
            f.franz_type = "struct"
            return
        if typ in self.named:
            f.type = typ
            f.fields = self._copy(self.named[typ].fields)
            f.franz_type = "struct"
            return
        f.type, f.franz_enum = self._prim(typ)
        f.franz_type = f.type

    def _prim(self, typ: str) -> tuple[str, str | None]:
        if typ.startswith("enum-"):
            enum = typ[len("enum-"):]
            return self.enum_types[enum], enum
        if typ not in PRIMITIVES:
            raise ValueError(f"unknown franz-go type {typ!r}")
        return typ, None

    def _copy(self, fields: list[Field]) -> list[Field]:
        return [_clone(f) for f in fields]


def _clone(f: Field) -> Field:
    g = Field(**{k: getattr(f, k) for k in f.__dataclass_fields__})
    if f.fields is not None:
        g.fields = [_clone(c) for c in f.fields]
    return g


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _doc(lines: list[str]) -> str:
    """First paragraph of a franz-go doc comment, on one line."""
    para: list[str] = []
    for ln in lines:
        if not ln:
            if para:
                break
            continue
        para.append(ln)
    return " ".join(" ".join(para).split())


def parse_franz_enums(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"^(\w+) (int8|int16|int32)\b", text, re.M):
        out[m.group(1)] = m.group(2)
    return out


def franz_schemas(folder: Path) -> dict[tuple[int, str], Schema]:
    """(api key, "request"/"response") -> Schema from franz-go's numbered files."""
    parser = FranzParser(parse_franz_enums((folder / "enums").read_text(encoding="utf-8")))
    out: dict[tuple[int, str], Schema] = {}
    for path in sorted(folder.iterdir()):
        if not re.match(r"^\d\d_", path.name):
            continue
        key = None
        max_v = 0
        flex = NONE_RANGE
        for st in parser.parse_file(path.read_text(encoding="utf-8")):
            if "not top level" in st.header:
                continue
            m = re.search(r"key (\d+), max version (\d+)", st.header)
            if m:
                key, max_v = int(m.group(1)), int(m.group(2))
                fm = re.search(r"flexible v(\d+)\+", st.header)
                flex = (int(fm.group(1)), MAX_V) if fm else NONE_RANGE
                kind = "request"
            elif st.name.endswith("Response") and key is not None:
                kind = "response"
            else:
                raise ValueError(f"{path.name}: unexpected struct {st.name}")
            _fix_franz_tags(st.fields, flex)
            out[(key, kind)] = Schema(st.name, kind, key, (0, max_v), flex, st.fields,
                                      FRANZ, {"franz_doc": st.doc})
    return out


def _fix_franz_tags(fields: list[Field], flex: tuple[int, int]) -> None:
    """franz-go tagged fields exist in every flexible version."""
    for f in fields:
        if f.tag is not None:
            f.tagged = flex
            f.versions = flex
        if f.fields:
            _fix_franz_tags(f.fields, flex)


# --------------------------------------------------------------------------- alignment


def _present(fields: list[Field], v: int) -> tuple[list[Field], dict[int, Field]]:
    plain, tagged = [], {}
    for f in fields:
        if not in_range(v, f.versions):
            continue
        if f.tag is not None and in_range(v, f.tagged):
            tagged[f.tag] = f
        else:
            plain.append(f)
    return plain, tagged


def align(kfields: list[Field], ffields: list[Field], v: int,
          pairs: list[tuple[Field, Field]], issues: list[str], where: str) -> None:
    """Pair franz-go fields with Kafka JSON fields present at version ``v``."""
    kplain, ktag = _present(kfields, v)
    fplain, ftag = _present(ffields, v)
    matched: list[tuple[Field, Field]] = []
    if len(kplain) != len(fplain):
        # Different layouts (a source changed the version): pair fields by name only.
        issues.append(f"{where} v{v}: {len(kplain)} JSON fields vs {len(fplain)} franz-go "
                      "fields; pairing by name")
        by_name = {k.name.lower(): k for k in kplain}
        for f in fplain:
            k = by_name.get(_normalise_name(f.name).lower())
            if k is not None and k.wire == f.wire:
                matched.append((k, f))
    else:
        for k, f in zip(kplain, fplain):
            if k.wire != f.wire:
                issues.append(f"{where} v{v}: {k.name} {k.wire} vs {f.name} {f.wire}")
                matched = []
                break
            matched.append((k, f))
    for tag, f in ftag.items():
        k = ktag.get(tag)
        if k is not None and k.wire == f.wire:
            matched.append((k, f))
    for k, f in matched:
        pairs.append((k, f))
        if k.fields is not None and f.fields is not None:
            align(k.fields, f.fields, v, pairs, issues, f"{where}.{k.name}")


def apply_kafka_names(kschema: Schema, fschema: Schema, issues: list[str]) -> None:
    """Rename franz-go fields after the JSON field they correspond to (see module doc)."""
    pairs: list[tuple[Field, Field]] = []
    top = min(kschema.valid[1], fschema.valid[1])
    align(kschema.fields, fschema.fields, top, pairs, issues, kschema.name)
    done = set()
    for k, f in pairs:
        if id(f) in done:
            continue
        done.add(id(f))
        f.name = k.name
        f.about = k.about or f.about
        f.entity = k.entity
        if k.default is not None:
            f.default = k.default
        if k.type == "records" and f.type == "bytes":
            f.type = "records"
        if k.fields is not None and f.fields is not None:
            f.type = k.type
    _normalise_rest(fschema.fields, {id(f) for _, f in pairs})


def _normalise_rest(fields: list[Field], keep: set[int]) -> None:
    for f in fields:
        if id(f) not in keep:
            old = f.name
            f.name = _normalise_name(f.name)
            if f.fields is not None and f.type.endswith(old):
                f.type = f.type[: -len(old)] + f.name
        if f.fields:
            _normalise_rest(f.fields, keep)


def apply_renames(fschema: Schema, renames: dict[str, str]) -> None:
    def walk(fields: list[Field], prefix: str) -> None:
        for f in fields:
            path = f"{prefix}{f.name}"
            if f.fields:
                walk(f.fields, path + ".")
            new = renames.get(path)
            f.name = new if new else _normalise_name(f.name)
            if f.fields is not None:
                f.type = ("[]" if f.type.startswith("[]") else "") + f.name
    walk(fschema.fields, "")


def franz_enum_hints(kschema: Schema, fschema: Schema) -> None:
    """Copy franz-go enum typing onto the JSON fields it corresponds to."""
    lo = max(kschema.valid[0], fschema.valid[0])
    hi = min(kschema.valid[1], fschema.valid[1])
    for v in range(lo, hi + 1):
        pairs: list[tuple[Field, Field]] = []
        align(kschema.fields, fschema.fields, v, pairs, [], kschema.name)
        for k, f in pairs:
            if f.franz_enum and not k.enum:
                k.enum = FRANZ_ENUMS[f.franz_enum]


def franz_own_enums(fields: list[Field]) -> None:
    for f in fields:
        if f.franz_enum:
            f.enum = FRANZ_ENUMS[f.franz_enum]
        if f.fields:
            franz_own_enums(f.fields)


def rule_enums(fields: list[Field], api_key: int | None) -> None:
    for f in fields:
        if not f.enum:
            hint = ENUM_RULES.get((api_key, f.name), ENUM_RULES.get((None, f.name)))
            if hint:
                f.enum = hint
        if f.fields:
            rule_enums(f.fields, api_key)


# --------------------------------------------------------------------------- selection


def prune(fields: list[Field], rng: tuple[int, int]) -> list[Field]:
    out = []
    for f in fields:
        if not intersects(f.versions, rng):
            continue
        g = _clone(f)
        if g.fields is not None:
            g.fields = prune(g.fields, rng)
        out.append(g)
    return out


def segments_for(schemas: list[Schema]) -> list[tuple[int, int, Schema]]:
    """Split the union of versions by the preferred source (list order = preference)."""
    versions = sorted({v for s in schemas for v in range(s.valid[0], s.valid[1] + 1)})
    segs: list[tuple[int, int, Schema]] = []
    for v in versions:
        src = next(s for s in schemas if s.valid[0] <= v <= s.valid[1])
        if segs and segs[-1][2] is src and segs[-1][1] == v - 1:
            segs[-1] = (segs[-1][0], v, src)
        else:
            segs.append((v, v, src))
    return segs


# --------------------------------------------------------------------------- emit


def _r(r: tuple[int, int] | None) -> str:
    return "None" if r is None else f"({r[0]}, {r[1]})"


def emit_fields(fields: list[Field], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for f in fields:
        head = (f"{pad}({f.name!r}, {f.type!r}, {_r(f.versions)}, {_r(f.nullable)}, "
                f"{f.tag!r}, {_r(f.tagged)}, {_r(f.flex)}, {f.default!r}, {f.entity!r}, "
                f"{f.enum!r}, {f.about!r}, ")
        if f.fields is None:
            out.append(head + "None),")
        elif not f.fields:
            out.append(head + "()),")
        else:
            out.append(head + "(")
            emit_fields(f.fields, indent + 4, out)
            out.append(f"{pad}    )),")


def emit_segments(segs: list[tuple[int, int, Schema]], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for lo, hi, s in segs:
        fields = prune(s.fields, (lo, hi))
        out.append(f"{pad}({lo}, {hi}, {_r(s.flexible)}, {SOURCE_IDS[s.source]!r}, (")
        emit_fields(fields, indent + 4, out)
        out.append(f"{pad})),")


HEADER_DOC = '''"""Kafka message schemas: GENERATED by tools/gen_schemas.py -- do not edit.

Facts (names, types, version ranges, tags, defaults, descriptions) compiled from
``../shared/kafka-protocol``: apache/kafka message JSON (Apache-2.0), franz-go's
definitions DSL (BSD-3-Clause) and kafka-python's Kafka 4.3 JSON (Apache-2.0).

Layout:

* ``MESSAGES[(api_key, kind)] = (name, segments)`` with kind "request" or "response".
* ``STRUCTS[name] = (kind, segments)`` for headers and non-API schemas.
* segment: ``(min_version, max_version, flexible_range, source, fields)``.
* field: ``(name, type, versions, nullable, tag, tagged_versions, flexible_override,
  default, entity_type, enum, about, children)``; ranges are ``(lo, hi)`` with
  hi=32767 meaning "and later", ``(0, -1)`` meaning "none" and None meaning "not set";
  children is None for scalars and primitive arrays, else a tuple of fields.
* ``METADATA_RECORDS[api_key] = name`` (KRaft ``__cluster_metadata`` record types).
* ``COORDINATOR_RECORDS[coordinator][key_version] = (key_schema, value_schema)``.
* ``API_NAMES[api_key] = name``.
"""
'''


def build(source: Path) -> tuple[str, list[str]]:
    issues: list[str] = []
    k24 = source / KAFKA_2024
    kpy = source / KAFKA_PY
    json24: dict[str, Schema] = {}
    for sub in ("message", "group-coordinator", "transaction-coordinator",
                "share-coordinator", "metadata"):
        for p in sorted((k24 / sub).glob("*.json")):
            s = json_schema(p, KAFKA_2024)
            json24[s.name] = s
    jsonpy = {s.name: s for s in (json_schema(p, KAFKA_PY) for p in sorted(kpy.glob("*.json")))}
    franz = franz_schemas(source / FRANZ)

    by_api: dict[tuple[int, str], list[Schema]] = {}
    for group in (jsonpy, json24):
        for s in group.values():
            if s.api_key is not None and s.kind in ("request", "response"):
                by_api.setdefault((s.api_key, s.kind), []).append(s)
    # enums from franz-go typing and field-name rules
    for (key, kind), fs in sorted(franz.items()):
        for ks in by_api.get((key, kind), []):
            franz_enum_hints(ks, fs)
    for (key, kind), group in by_api.items():
        for ks in group:
            rule_enums(ks.fields, key)

    lines: list[str] = [HEADER_DOC, "# fmt: off", "# flake8: noqa", "", "MESSAGES = {"]
    api_names: dict[int, str] = {}
    for key in sorted({k for k, _ in franz} | {k for k, _ in by_api}):
        for kind in ("request", "response"):
            candidates = list(by_api.get((key, kind), []))
            fs = franz.get((key, kind))
            if fs is not None:
                original = candidates
                unstable = any(s.extra.get("latestVersionUnstable")
                               for s in by_api.get((key, "request"), []) if s.source == KAFKA_2024)
                candidates = [_without_unstable(s, fs, unstable) for s in candidates]
                if candidates:
                    newest = max(original, key=lambda s: s.valid[1])
                    if fs.valid[1] > max(s.valid[1] for s in candidates):
                        apply_kafka_names(newest, fs, issues)
                else:
                    apply_renames(fs, FRANZ_RENAMES.get(fs.name, {}))
                franz_own_enums(fs.fields)
                rule_enums(fs.fields, key)
                candidates.append(fs)
            segs = segments_for(candidates)
            suffix = "Request" if kind == "request" else "Response"
            json_names = [s.name for s in candidates if s.source != FRANZ]
            name = json_names[0] if json_names else _kafka_api_name(fs.name) if fs else ""
            if kind == "request":
                api_names[key] = name[: -len(suffix)]
            lines.append(f"    ({key}, {kind!r}): ({name!r}, (")
            emit_segments(segs, 8, lines)
            lines.append("    )),")
    lines.append("}")
    lines.append("")

    # headers and non-API schemas
    lines.append("STRUCTS = {")
    struct_names = sorted(n for n, s in json24.items() if s.api_key is None or s.kind == "metadata")
    for name in struct_names:
        candidates = [s for s in (jsonpy.get(name), json24[name]) if s is not None]
        for s in candidates:
            rule_enums(s.fields, None)
        lines.append(f"    {name!r}: ({candidates[0].kind!r}, (")
        emit_segments(segments_for(candidates), 8, lines)
        lines.append("    )),")
    lines.append("}")
    lines.append("")

    lines.append("METADATA_RECORDS = {")
    meta = sorted((s.api_key, n) for n, s in json24.items() if s.kind == "metadata")
    for key, name in meta:
        lines.append(f"    {key}: {name!r},")
    lines.append("}")
    lines.append("")

    lines.append("COORDINATOR_RECORDS = {")
    for coord, folder in (("group", "group-coordinator"), ("transaction", "transaction-coordinator"),
                          ("share", "share-coordinator")):
        lines.append(f"    {coord!r}: {{")
        rows = []
        for p in sorted((k24 / folder).glob("*Key.json")):
            ks = json24[p.stem]
            value = p.stem[: -len("Key")] + "Value"
            if value not in json24:
                raise ValueError(f"no value schema for {p.stem}")
            for v in range(ks.valid[0], ks.valid[1] + 1):
                rows.append((v, p.stem, value))
        for v, kname, vname in sorted(rows):
            lines.append(f"        {v}: ({kname!r}, {vname!r}),")
        lines.append("    },")
    lines.append("}")
    lines.append("")

    lines.append("API_NAMES = {")
    for key in sorted(api_names):
        lines.append(f"    {key}: {api_names[key]!r},")
    lines.append("}")
    return "\n".join(lines) + "\n", issues


def _without_unstable(s: Schema, franz: Schema, unstable: bool) -> Schema:
    """A 2024-10 snapshot's unstable latest version yields to the newer franz-go definition.

    Unstable versions were still changing when the snapshot was taken (e.g. the share-group
    APIs before their release); franz-go's definitions are newer. The flag sits on the
    request JSON and applies to the response too. kafka-python's 4.3 JSON is newer than
    franz-go's, so it keeps priority even for its unstable versions.
    """
    if s.source != KAFKA_2024 or not unstable:
        return s
    if not in_range(s.valid[1], franz.valid):
        return s
    trimmed = Schema(**{k: getattr(s, k) for k in s.__dataclass_fields__})
    trimmed.valid = (s.valid[0], s.valid[1] - 1)
    return trimmed


def _kafka_api_name(franz_name: str) -> str:
    return franz_name  # keys 88-92: franz-go and Kafka spell these names the same way


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the committed table differs from a fresh generation")
    ap.add_argument("--verbose", action="store_true", help="print alignment notes")
    args = ap.parse_args(argv)
    text, issues = build(args.source)
    if args.verbose:
        for line in issues:
            print("note:", line, file=sys.stderr)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date; run tools/gen_schemas.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
