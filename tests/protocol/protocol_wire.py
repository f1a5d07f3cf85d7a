"""Test-only Kafka message encoder driven by the raw definitions in ../shared/kafka-protocol.

Independent of kwsniff's generated table and decoder: it reads Kafka's message JSON and
franz-go's DSL itself (its own small reader), picks the definition of each version by
the shared README's rule, makes up non-default values for every field (plus known and
unknown tagged fields in flexible versions) and encodes them. The result is compared
with what kwsniff decodes.
"""

from __future__ import annotations

import json
import random
import re
import struct
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from shared_protocol import SHARED_PROTOCOL

SHARED = SHARED_PROTOCOL
K24 = SHARED / "apache-kafka-trunk-2024-10-25"
KPY = SHARED / "kafka-python-3.0.12-resources"
FRANZ = SHARED / "franz-go-definitions-2026-08-04"
TOP = 32767

PRIMS = {"int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "bool", "uuid",
         "string", "bytes", "records"}


@dataclass
class TField:
    name: str
    type: str                       # primitive name, or "struct"; arrays via is_array
    is_array: bool
    versions: tuple[int, int]
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    tagged: tuple[int, int] | None = None
    flex: tuple[int, int] | None = None
    default: str | None = None
    children: list[TField] | None = None


@dataclass
class TSchema:
    name: str
    valid: tuple[int, int]
    flexible: tuple[int, int] | None
    fields: list[TField]
    origin: str                     # "json" or "franz"
    unstable: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


def _vr(text: str | None) -> tuple[int, int] | None:
    if text is None or text in ("", "none"):
        return None
    if text.endswith("+"):
        return (int(text[:-1]), TOP)
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi or lo))


def within(v: int, r: tuple[int, int] | None) -> bool:
    return r is not None and r[0] <= v <= r[1]


# ----------------------------------------------------------------------------- JSON


def _read_json(path: Path) -> dict[str, Any]:
    text = "\n".join(x for x in path.read_text().splitlines() if not x.strip().startswith("//"))
    return json.loads(text)


def _json_fields(items: list[dict], common: dict[str, list[dict]]) -> list[TField]:
    out = []
    for d in items:
        t = d["type"]
        arr = t.startswith("[]")
        base = t[2:] if arr else t
        kids = d.get("fields")
        if base not in PRIMS:
            kids = kids if kids is not None else common[base]
        out.append(TField(
            name=d["name"], type="struct" if base not in PRIMS else base, is_array=arr,
            versions=_vr(d.get("versions") or d.get("taggedVersions")) or (0, -1),
            nullable=_vr(d.get("nullableVersions")),
            tag=None if d.get("tag") is None else int(d["tag"]),
            tagged=_vr(d.get("taggedVersions")),
            flex=_vr(d["flexibleVersions"]) or (0, -1) if "flexibleVersions" in d else None,
            default=None if d.get("default") is None else str(d["default"]).lower(),
            children=None if base in PRIMS else _json_fields(kids, common)))
    return out


def json_schema(path: Path) -> TSchema:
    d = _read_json(path)
    common = {c["name"]: c["fields"] for c in d.get("commonStructs", [])}
    return TSchema(d["name"], _vr(d["validVersions"]) or (0, -1),
                   _vr(d.get("flexibleVersions")), _json_fields(d["fields"], common), "json",
                   bool(d.get("latestVersionUnstable")),
                   {"apiKey": d.get("apiKey"), "type": d.get("type")})


@lru_cache(maxsize=None)
def json_by_api() -> dict[tuple[int, str], dict[str, TSchema]]:
    out: dict[tuple[int, str], dict[str, TSchema]] = {}
    for origin, folder in (("kpy", KPY), ("k24", K24 / "message")):
        for p in sorted(folder.glob("*.json")):
            s = json_schema(p)
            if s.meta["type"] in ("request", "response"):
                out.setdefault((s.meta["apiKey"], s.meta["type"]), {})[origin] = s
    return out


@lru_cache(maxsize=None)
def json_structs() -> dict[str, dict[str, TSchema]]:
    """Non-API schemas by name: {"kpy": ..., "k24": ...}."""
    out: dict[str, dict[str, TSchema]] = {}
    folders = [("kpy", KPY)] + [("k24", K24 / sub) for sub in (
        "message", "group-coordinator", "transaction-coordinator", "share-coordinator",
        "metadata")]
    for origin, folder in folders:
        for p in sorted(folder.glob("*.json")):
            s = json_schema(p)
            if s.meta["type"] not in ("request", "response"):
                out.setdefault(s.name, {})[origin] = s
    return out


# ----------------------------------------------------------------------------- franz-go DSL


def _franz_lines(text: str) -> list[tuple[int, str]]:
    out = []
    for raw in text.splitlines():
        s = raw.strip()
        if not s or s.startswith("//"):
            continue
        out.append((len(raw) - len(raw.lstrip()), s))
    return out


def _franz_block(lines: list[tuple[int, str]], i: int, depth: int,
                 named: dict[str, list]) -> tuple[list[TField], int]:
    fields: list[TField] = []
    while i < len(lines) and lines[i][0] == depth:
        text = lines[i][1]
        i += 1
        body, _, note = text.partition(" // ")
        versions: tuple[int, int] = (0, TOP)
        tag = None
        if note.startswith("tag "):
            tag = int(note[4:])
        elif note:
            m = re.fullmatch(r"v(\d+)(?:\+|-v(\d+))", note)
            assert m, note
            versions = (int(m.group(1)), int(m.group(2)) if m.group(2) else TOP)
        if ":" not in body:          # TimeoutMillis / ThrottleMillis macros
            fields.append(TField(body.split("(")[0], "int32", False, versions, tag=tag))
            continue
        name, typ = [x.strip() for x in body.split(":", 1)]
        f = TField(name, "", False, versions, tag=tag)
        nullable_from = None
        m = re.match(r"nullable-v(\d+)\+(.*)", typ)
        if m:
            nullable_from, typ = int(m.group(1)), m.group(2)
        elif typ.startswith("nullable-"):
            typ, nullable_from = typ[9:], 0
            m = re.match(r"(\w+)-v(\d+)\+$", typ)
            if m:
                typ, nullable_from = m.group(1), int(m.group(2))
        elif typ.startswith("nullable"):
            typ, nullable_from = typ[8:], 0
        if nullable_from is not None:
            f.nullable = (nullable_from, TOP)
        typ = re.sub(r"\((.*)\)$", "", typ) if not typ.startswith("[") else typ
        if typ.startswith("["):
            f.is_array = True
            typ = typ[1:-1]
        if typ.startswith("=>"):
            f.type = "struct"
            f.children, i = _franz_block(lines, i, depth + 2, named)
        elif typ in named:
            f.type = "struct"
            f.children = named[typ]
        elif typ.startswith("enum-"):
            f.type = named["__enums__"][typ[5:]]
        else:
            assert typ in PRIMS, typ
            f.type = typ
        fields.append(f)
    return fields, i


@lru_cache(maxsize=None)
def franz_schemas() -> dict[tuple[int, str], TSchema]:
    named: dict[str, Any] = {"__enums__": dict(re.findall(r"^(\w+) (int\d+)", (FRANZ / "enums")
                                                          .read_text(), re.M))}
    files = sorted(p for p in FRANZ.iterdir() if re.match(r"\d\d_", p.name))
    tops: list[tuple[str, str, list]] = []
    for p in files:   # named ("not top level") structs are defined before use
        lines = _franz_lines(p.read_text())
        i = 0
        while i < len(lines):
            head = lines[i][1]
            name, _, rest = head.partition(" =>")
            body, i = _franz_block(lines, i + 1, 2, named)
            if "not top level" in rest:
                named[name] = body
            else:
                tops.append((name, rest, body))
    out: dict[tuple[int, str], TSchema] = {}
    key, valid, flex = -1, (0, 0), None
    for name, rest, body in tops:
        m = re.search(r"key (\d+), max version (\d+)", rest)
        kind = "response"
        if m:
            key, valid, kind = int(m.group(1)), (0, int(m.group(2))), "request"
            fm = re.search(r"flexible v(\d+)\+", rest)
            flex = (int(fm.group(1)), TOP) if fm else None
        _franz_tags(body, flex)
        out[(key, kind)] = TSchema(name, valid, flex, body, "franz")
    return out


def _franz_tags(fields: list[TField], flex: tuple[int, int] | None) -> None:
    for f in fields:
        if f.tag is not None:
            f.tagged = flex
            f.versions = flex or (0, -1)
        if f.children:
            _franz_tags(f.children, flex)


# ----------------------------------------------------------------------------- selection


def schema_for(key: int, kind: str, version: int) -> TSchema | None:
    """The README rule: Kafka 4.3 JSON, else 2024-10 JSON (unless that version was its
    unstable latest and franz-go defines it), else franz-go."""
    js = json_by_api().get((key, kind), {})
    fz = franz_schemas().get((key, kind))
    kpy, k24 = js.get("kpy"), js.get("k24")
    if kpy and within(version, kpy.valid):
        return kpy
    if k24 and within(version, k24.valid):
        req24 = json_by_api().get((key, "request"), {}).get("k24")
        unstable = bool(req24 and req24.unstable and version == k24.valid[1])
        if not (unstable and fz and within(version, fz.valid)):
            return k24
    if fz and within(version, fz.valid):
        return fz
    return None


def all_versions(key: int, kind: str) -> list[int]:
    vs: set[int] = set()
    for s in list(json_by_api().get((key, kind), {}).values()) + [franz_schemas().get((key, kind))]:
        if s is not None:
            vs.update(range(s.valid[0], s.valid[1] + 1))
    return sorted(vs)


def all_api_keys() -> list[int]:
    return sorted({k for k, _ in json_by_api()} | {k for k, _ in franz_schemas()})


def struct_schema_for(name: str, version: int) -> TSchema | None:
    cands = json_structs().get(name, {})
    for origin in ("kpy", "k24"):
        s = cands.get(origin)
        if s and within(version, s.valid):
            return s
    return None


# ----------------------------------------------------------------------------- values


class Records:
    """Expected value of a records field (compared by bytes)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __eq__(self, other: object) -> bool:
        return getattr(other, "data", None) == self.data

    def __repr__(self) -> str:
        return f"Records({self.data!r})"


def _uuid(b: bytes) -> str:
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class ValueMaker:
    """Non-default values for every field; ``nulls=True`` makes nullable fields null
    and non-nullable arrays empty instead."""

    def __init__(self, seed: str, nulls: bool = False, tags: bool = True,
                 unknown_tags: bool = True) -> None:
        self.rng = random.Random(zlib.crc32(seed.encode()))
        self.nulls = nulls
        self.tags = tags
        self.unknown_tags = unknown_tags

    def prim(self, t: str, default: str | None) -> Any:
        r = self.rng
        if t == "bool":
            return default != "true"
        if t == "uuid":
            return _uuid(bytes(r.randrange(256) for _ in range(16)))
        if t == "string":
            return f"s{r.randrange(10**6)}-\u00e4\u20ac"
        if t == "bytes":
            return bytes(r.randrange(256) for _ in range(r.randint(1, 9)))
        if t == "records":
            return Records(bytes(r.randrange(256) for _ in range(r.randint(12, 40))))
        if t == "float64":
            return r.uniform(-1e6, 1e6)
        lo, hi = {"int8": (-128, 127), "int16": (-32768, 32767), "uint16": (0, 65535),
                  "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
                  "int64": (-2**63, 2**63 - 1)}[t]
        v = r.randint(lo, hi)
        if default is not None and default.lstrip("-").isdigit() and v == int(default):
            v = v + 1 if v < hi else v - 1
        return v

    def value(self, f: TField, v: int, depth: int) -> Any:
        nullable = within(v, f.nullable)
        if self.nulls and nullable:
            return None
        if f.is_array:
            if self.nulls:
                return []
            n = 2 if f.type == "struct" else 3
            if f.type == "struct":
                return [self.struct(f.children or [], v, depth + 1) for _ in range(n)]
            return [self.prim(f.type, None) for _ in range(n)]
        if f.type == "struct":
            return self.struct(f.children or [], v, depth + 1)
        return self.prim(f.type, f.default)

    def struct(self, fields: list[TField], v: int, depth: int = 0) -> dict[str, Any]:
        out: dict[str, Any] = {}
        tagged: list[TField] = []
        for f in fields:
            if not within(v, f.versions):
                continue
            if f.tag is not None and within(v, f.tagged):
                tagged.append(f)
                continue
            out[f.name] = self.value(f, v, depth)
        if self.tags:
            for f in sorted(tagged, key=lambda x: x.tag or 0):
                out[f.name] = self.value(f, v, depth)
        return out


# ----------------------------------------------------------------------------- encoding


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_FMT = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I",
        "int64": ">q", "float64": ">d", "bool": ">?"}


class Encoder:
    def __init__(self, version: int, flexible: bool, rng: random.Random | None = None,
                 unknown_tags: bool = False) -> None:
        self.v = version
        self.flex = flexible
        self.rng = rng or random.Random(0)
        self.unknown = unknown_tags

    def compact(self, f: TField) -> bool:
        return self.flex and (f.flex is None or within(self.v, f.flex))

    def length(self, n: int | None, compact: bool, wide: bool) -> bytes:
        if compact:
            return uvarint(0 if n is None else n + 1)
        return struct.pack(">i" if wide else ">h", -1 if n is None else n)

    def prim(self, t: str, value: Any, compact: bool) -> bytes:
        if t in _FMT:
            return struct.pack(_FMT[t], value)
        if t == "uuid":
            return bytes.fromhex(value.replace("-", ""))
        if t == "string":
            raw = None if value is None else value.encode()
            return self.length(None if raw is None else len(raw), compact, False) + (raw or b"")
        data = None if value is None else (value.data if isinstance(value, Records) else value)
        return self.length(None if data is None else len(data), compact, True) + (data or b"")

    def field(self, f: TField, value: Any) -> bytes:
        compact = self.compact(f)
        if f.is_array:
            if value is None:
                return self.length(None, compact, True)
            head = self.length(len(value), compact, True)
            if f.type == "struct":
                return head + b"".join(self.struct(f.children or [], e) for e in value)
            return head + b"".join(self.prim(f.type, e, compact) for e in value)
        if f.type == "struct":
            if within(self.v, f.nullable):
                if value is None:
                    return b"\xff"
                return b"\x01" + self.struct(f.children or [], value)
            return self.struct(f.children or [], value)
        return self.prim(f.type, value, compact)

    def struct(self, fields: list[TField], values: dict[str, Any]) -> bytes:
        out = bytearray()
        tagged: list[tuple[int, bytes]] = []
        for f in fields:
            if not within(self.v, f.versions):
                continue
            if f.tag is not None and within(self.v, f.tagged):
                if f.name in values:
                    tagged.append((f.tag, self.field(f, values[f.name])))
                continue
            out += self.field(f, values[f.name])
        if self.flex:
            unknown = values.get("_unknown_tags")
            if unknown is None and self.unknown:
                top = max([f.tag for f in fields if f.tag is not None] + [0])
                unknown = [(top + 50 + self.rng.randrange(20),
                            bytes(self.rng.randrange(256) for _ in range(self.rng.randint(0, 5))))]
                values["_unknown_tags"] = unknown
            tagged.sort()
            allt = tagged + list(unknown or [])
            out += uvarint(len(allt))
            for tag, data in allt:
                out += uvarint(tag) + uvarint(len(data)) + data
        return bytes(out)


# ----------------------------------------------------------------------------- messages


def request_header_version(key: int, version: int, flexible: bool) -> int:
    if key == 7 and version == 0:
        return 0
    return 2 if flexible else 1


def response_header_version(key: int, flexible: bool) -> int:
    if key == 18:
        return 0
    return 1 if flexible else 0


def header_bytes(kind: str, key: int, version: int, correlation_id: int, client_id: str | None,
                 hv: int, header_tags: list[tuple[int, bytes]] | None = None) -> bytes:
    if kind == "request":
        out = struct.pack(">hhi", key, version, correlation_id)
        if hv >= 1:
            raw = None if client_id is None else client_id.encode()
            out += struct.pack(">h", -1 if raw is None else len(raw)) + (raw or b"")
        tag_version = 2
    else:
        out = struct.pack(">i", correlation_id)
        tag_version = 1
    if hv >= tag_version:
        tags = header_tags or []
        out += uvarint(len(tags)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in tags)
    return out


@dataclass
class Sample:
    key: int
    kind: str
    version: int
    schema: TSchema
    flexible: bool
    values: dict[str, Any]
    body: bytes
    frame: bytes                    # header + body, without the size prefix
    header_version: int


def make_sample(key: int, kind: str, version: int, variant: str = "full") -> Sample:
    s = schema_for(key, kind, version)
    assert s is not None, (key, kind, version)
    flexible = within(version, s.flexible)
    seed = f"{key}/{kind}/{version}/{variant}"
    maker = ValueMaker(seed, nulls=variant == "nulls", tags=variant != "notags")
    values = maker.struct(s.fields, version)
    if key == 18 and kind == "response" and values.get("ErrorCode") == 35:
        values["ErrorCode"] = 36
    enc = Encoder(version, flexible, maker.rng, unknown_tags=variant == "full")
    body = enc.struct(s.fields, values)
    if kind == "request":
        hv = request_header_version(key, version, flexible)
    else:
        hv = response_header_version(key, flexible)
    tags = [(9, b"\x01\x02")] if variant == "full" else []
    head = header_bytes(kind, key, version, 0x1234567 + version, "kwsniff-test", hv, tags)
    return Sample(key, kind, version, s, flexible, values, body, head + body, hv)


def positional(obj: Any) -> Any:
    """Field values in wire order, names dropped (for franz-go defined versions)."""
    if isinstance(obj, dict):
        return [positional(v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [positional(v) for v in obj]
    if hasattr(obj, "data") and not isinstance(obj, (bytes, str)):
        return bytes(obj.data)   # franz-go types record sets as plain bytes
    return obj
