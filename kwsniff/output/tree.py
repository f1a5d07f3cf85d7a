"""The detail tree of an exchange (``kwsniff decode -V``, the TUI's detail pane).

Contract:

* :func:`build_tree` returns a :class:`TreeNode` for an exchange: a heading, then per
  message the frame length, the header fields, the body fields (named as in Kafka's
  message definitions, with values, error names, enum names), record sets fully
  decoded (batches, records, keys, values, headers, control records, internal-topic
  records), embedded protocols (consumer protocol, SASL) and problems.
* Byte ranges: with ``spans=True`` every node the protocol layer can locate gets
  ``start``/``length`` in *frame coordinates* (0 = first byte of the 4-byte size
  prefix, as in :func:`kwsniff.output.hexdump.frame_bytes`) and ``message`` saying
  which frame (``"request"``/``"response"``). Computing spans re-decodes the message,
  so it is opt-in.
* Nodes carry ``about`` (the field description from the definitions) for the TUI.
* Plugins: a record key/value/header decoded by a payload plugin shows the decoded
  object's fields as child nodes (and the decoders' problems); plugin exchange fields
  with a value are listed under a ``Plugin fields`` node of the exchange.
* ``lean=True`` builds a tree for plain text only (:func:`plain_text`, or
  :func:`render_tree` without colours and offsets): nodes get no ``about``, ``path``,
  ``message`` or ``style``, and most leaves are strings instead of nodes: the text of
  their line as the plain render shows it, without its indentation (:func:`_line`; the
  same lines, fewer objects). Other readers (the TUI, :func:`find_node`, plugins) need
  the full tree.
* :func:`render_tree` yields indented text lines (4 spaces per level), optionally with
  byte ranges. Nothing here raises on odd bodies: values it cannot interpret are shown
  with ``repr``.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from collections.abc import Callable, Iterator
from typing import Any

from kwsniff.kafka.model import Exchange, KafkaMessage
from kwsniff.kafka.nesting import MAX_NESTING
from kwsniff.kafka.payload import KIND_HEX, KIND_TEXT, builtin_view, has_decoders, render_payload
from kwsniff.kafka.protocol import (
    enum_label,
    error_description,
    error_name,
    field_info,
    field_spans,
    struct_field_info,
)
from kwsniff.kafka.protocol.error_codes import is_error_field
from kwsniff.kafka.records import Batch, Record, Records
from kwsniff.output import extra_fields
from kwsniff.output.color import PLAIN, Palette
from kwsniff.output.digest import human_bytes
from kwsniff.output.fields import format_address
from kwsniff.output.names import LEGACY_PROTOCOL, SASL_PROTOCOL, api_label, error_label
from kwsniff.output.summary import format_latency, printable
from kwsniff.text import counted

PREFIX = 4                 # bytes of the size prefix before ``raw``
INLINE_LIST_LIMIT = 32     # primitive list items shown inline
BYTES_PREVIEW = 32         # bytes shown in hex for a bytes field
DEFAULT_VALUE_CHARS = 256  # record key/value text shown per record


_NEW_LIST: Any = object()     # "no children given": a new empty list


class TreeNode:
    """One line of the detail tree and its children: ``label``, ``value``,
    ``children``, ``start``/``length`` (byte range in frame coordinates), ``message``,
    ``about``, ``path``, ``style`` (constructor arguments in this order; compared by
    identity). ``children`` is a sequence: the builder gives the leaves it makes in bulk
    (scalar fields, batch header rows, record parts) the empty tuple instead of a list
    of their own; :meth:`add` turns it into a list."""

    __slots__ = ("label", "value", "children", "start", "length", "message", "about",
                 "path", "style")

    def __init__(self, label: str, value: str = "", children: Any = _NEW_LIST,
                 start: int | None = None, length: int | None = None,
                 message: str | None = None, about: str | None = None,
                 path: tuple[Any, ...] = (), style: str | None = None) -> None:
        self.label = label
        self.value = value
        self.children = [] if children is _NEW_LIST else children
        self.start = start            # frame offset (size prefix = 0..3)
        self.length = length
        self.message = message        # "request" or "response": the frame start refers to
        self.about = about
        self.path = path              # ("body", "TopicData", 0, ...) within its message
        self.style = style            # "error" / "warn" for colouring

    def add(self, node: TreeNode) -> TreeNode:
        children = self.children
        if type(children) is not list:      # a leaf's shared empty tuple
            children = self.children = list(children)
        children.append(node)
        return node

    @property
    def end(self) -> int | None:
        return None if self.start is None or self.length is None else self.start + self.length

    def walk(self) -> Iterator[tuple[int, TreeNode]]:
        """Depth-first ``(depth, node)`` pairs, this node at depth 0."""
        stack: list[tuple[int, TreeNode]] = [(0, self)]
        while stack:
            depth, node = stack.pop()
            yield depth, node
            stack.extend((depth + 1, c) for c in reversed(node.children))

    def __repr__(self) -> str:
        return (f"TreeNode(label={self.label!r}, value={self.value!r}, "
                f"children={self.children!r}, start={self.start!r}, "
                f"length={self.length!r}, message={self.message!r}, about={self.about!r}, "
                f"path={self.path!r}, style={self.style!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (TreeNode, (self.label, self.value, self.children, self.start, self.length,
                           self.message, self.about, self.path, self.style))


def _new(label: str, value: str, children: Any, start: int | None, length: int | None,
         message: str | None, about: str | None, path: tuple[Any, ...],
         style: str | None) -> TreeNode:
    """``TreeNode(label, value, children, start, length, message, about, path, style)``
    without the constructor's argument handling (the hot paths make every node here)."""
    node = TreeNode.__new__(TreeNode)
    node.label = label
    node.value = value
    node.children = children
    node.start = start
    node.length = length
    node.message = message
    node.about = about
    node.path = path
    node.style = style
    return node


def _leaf(lean: bool, label: str, value: str, message: str | None,
          style: str | None = None) -> Any:
    """A leaf the builder makes in bulk: its line (:func:`_line`) in a lean tree, else a
    node with the shared empty tuple as children and no byte range, about or path."""
    if lean:
        return _line(label, value)
    return _new(label, value, (), None, None, message, None, (), style)


def _plain_leaf(lean: bool, label: str, value: str, message: str | None,
                style: str | None = None) -> Any:
    """:func:`_leaf` of a non-empty ``value`` made here from numbers and fixed words
    (nothing from the wire to escape: see :func:`_plain_line`)."""
    if lean:
        return _plain_line(label, value)
    return _new(label, value, (), None, None, message, None, (), style)


# ----------------------------------------------------------------------------- values

def _quote(text: str) -> str:
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text, ensure_ascii=False)


@lru_cache(maxsize=4096)
def _is_error(name: str) -> bool:
    return is_error_field(name)


def _hex_preview(data: bytes) -> str:
    head = data[:BYTES_PREVIEW].hex()
    return head + ("…" if len(data) > BYTES_PREVIEW else "")


@lru_cache(maxsize=4096)
def _utc_second(seconds: int) -> str | None:
    """``YYYY-MM-DDTHH:MM:SS`` of an epoch second (cached: records of a batch share
    their seconds), None when the platform cannot represent it."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return None


@lru_cache(maxsize=4096)
def _format_ms(ms: int | None) -> str:
    """``1700000000123 (2023-11-14T22:13:20.123Z)`` (cached: records share times)."""
    if ms is None:
        return "null"
    if ms < 0:
        return str(ms)
    try:
        day = _utc_second(ms // 1000)
    except OverflowError:
        day = None
    if day is None:
        return str(ms)
    return f"{ms} ({day}.{ms % 1000:03d}Z)"


def _scalar(name: str, value: Any, enum: str | None, protocol: str) -> tuple[str, str | None]:
    """Text of a scalar field value and an optional style."""
    if value is None:
        return "null", None
    if value is True:
        return "true", None
    if value is False:
        return "false", None
    if isinstance(value, int):
        if _is_error(name):
            if value == 0:
                return "0 (NONE)", None
            return f"{value} ({error_label(value, protocol)})", "error"
        label = enum_label(enum, value) if enum is not None else None
        return (f"{value} ({label})" if label else str(value)), None
    if isinstance(value, str):
        return _quote(value), None
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return (f"{len(data)} bytes: {_hex_preview(data)}" if data else "0 bytes"), None
    if isinstance(value, float):
        return repr(value), None
    return repr(value), None


#: node values of payloads up to ``_VIEWS_MAX_BYTES`` (record keys and header values recur
#: from record to record, and a produced value comes back in the fetch responses), per
#: ``value_chars``; cleared when it reaches ``_VIEWS_LIMIT`` entries
_VIEWS: dict[tuple[bytes, int | None], str] = {}
_VIEWS_LIMIT = 4096
_VIEWS_MAX_BYTES = 1024


#: ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`` without making an
#: encoder per call
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _builtin_text(data: bytes, limit: int | None) -> str:
    """The node value of non-empty ``data`` shown by the built-in view (no payload
    decoders registered): :meth:`_Builder._shown` of :func:`builtin_view`, in one call."""
    kind, obj, text, _ = builtin_view(data, limit)
    if kind == KIND_HEX:
        text = "hex " + text  # type: ignore[operator]
    elif kind == KIND_TEXT:
        text = _quote(text)  # type: ignore[arg-type]
    else:                   # json: obj is the parsed object or array
        text = _COMPACT_JSON.encode(obj)
    if limit and len(text) > limit:
        text = text[:limit] + "…"
    return f"{text} ({len(data)} bytes)"


def _view(data: bytes | None, limit: int | None) -> str:
    """The node value of a record key, value or header value when no payload decoder is
    registered (``null``, ``0 bytes``, or :func:`_builtin_text`, remembered for short
    payloads)."""
    if data is None:
        return "null"
    if not data:
        return "0 bytes"
    if type(data) is not bytes:
        data = bytes(data)
    if len(data) > _VIEWS_MAX_BYTES:
        return _builtin_text(data, limit)
    key = (data, limit)
    views = _VIEWS                  # (a local: C dict calls when compiled)
    text = views.get(key)
    if text is None:
        text = _builtin_text(data, limit)
        if len(views) >= _VIEWS_LIMIT:
            views.clear()
        views[key] = text
    return text


# ----------------------------------------------------------------------------- metadata

@lru_cache(maxsize=65536)
def _field_info(api_key: int, kind: str, version: int, names: tuple[str, ...]) -> Any:
    """Cached ``field_info`` (the table walk per field is the tree's hot spot)."""
    try:
        return field_info(api_key, kind, version, names)
    except Exception:  # noqa: BLE001 - metadata is decoration
        return None


@lru_cache(maxsize=16384)
def _struct_info(name: str, version: int, names: tuple[str, ...]) -> Any:
    try:
        return struct_field_info(name, version, names)
    except Exception:  # noqa: BLE001
        return None


# ----------------------------------------------------------------------------- builder

#: (schema, section, field names, struct info) -> {field: (about, enum)}, shared by all
#: builders (see ``_Builder._known``); cleared when it reaches ``_KNOWN_LIMIT`` structs
_KNOWN: dict[tuple[Any, ...], dict[str, tuple[str | None, str | None, bool]]] = {}
_KNOWN_LIMIT = 16384

class _Builder:
    """Builds the nodes of one message; knows its schema and byte ranges."""

    def __init__(self, msg: KafkaMessage, protocol: str, spans: bool,
                 value_chars: int | None, lean: bool = False) -> None:
        self.msg = msg
        self.lean = lean and not spans     # (see the module contract)
        self.protocol = protocol
        self.value_chars = value_chars
        self.kind = msg.kind
        self.version = msg.header.get("_body_version", msg.api_version) \
            if isinstance(msg.header, dict) else msg.api_version
        self.modern = protocol != LEGACY_PROTOCOL and msg.api_key is not None \
            and self.version is not None
        # what info() depends on: the key of this message's tables in _KNOWN
        self._schema = (self.modern, msg.api_key, self.kind, self.version, msg.header_version)
        self.spans: dict[tuple[str, tuple[Any, ...]], tuple[int, int]] = {}
        if spans and protocol != LEGACY_PROTOCOL:
            for s in field_spans(msg):
                self.spans[(s.section, tuple(s.path))] = (s.offset + PREFIX, s.length)

    def node(self, label: str, value: str, section: str, path: tuple[Any, ...],
             about: str | None = None, style: str | None = None) -> TreeNode:
        if self.lean:
            return _new(label, value, [], None, None, None, None, (), None)
        span = self.spans.get((section, path)) if self.spans else None
        if span is None:
            # positional (label, value, children, start, length, message, about, path,
            # style): this runs for every field of every message
            return _new(label, value, [], None, None, self.kind, about, (section,) + path, style)
        return TreeNode(label, value, start=span[0], length=span[1], message=self.kind,
                        about=about, path=(section,) + path, style=style)

    def info(self, section: str, names: tuple[str, ...]) -> Any:
        """Field metadata at ``names`` (the path without array indexes)."""
        if not self.modern:
            return None
        if section == "header":
            name = "RequestHeader" if self.kind == "request" else "ResponseHeader"
            return _struct_info(name, self.msg.header_version or 0, names)
        return _field_info(self.msg.api_key, self.kind, self.version, names)

    # -- dict bodies ----------------------------------------------------------------
    def fields(self, parent: TreeNode, obj: dict[str, Any], section: str,
               path: tuple[Any, ...], struct_info: Any = None,
               names: tuple[str, ...] = ()) -> None:
        """Nodes for the fields of ``obj``; ``path`` is its field path with array
        indexes, ``names`` the same without them (for the schema metadata). A struct more than :data:`MAX_TREE_NESTING`
        levels below the body gets a problem node instead of its fields (the same in
        every build: compiled modules do not count against the recursion limit)."""
        if len(names) > MAX_TREE_NESTING:
            parent.add(TreeNode("Problem", f"nested more than {MAX_TREE_NESTING} levels "
                                           "deep: not shown", style="warn"))
            return
        self._fields(parent, obj, section, path, struct_info, names)

    def _fields(self, parent: TreeNode, obj: dict[str, Any], section: str,
                path: tuple[Any, ...], struct_info: Any = None,
                names: tuple[str, ...] = ()) -> None:
        """:meth:`fields` past its nesting check."""
        meta = False           # does obj carry _redacted_/_decoded_ notes for its fields?
        for key in obj:
            # (key[0], not startswith: compiled, a character compared in C)
            if key and key[0] == "_" and key != "_unknown_tags" and key != "_problems":
                meta = True
                break
        known = self._known(section, names, struct_info)
        # ints and strings without notes or byte spans (most fields): their node is made
        # here, as value() would make it, without the call
        fast = not meta and not self.spans
        lean = self.lean
        children = parent.children
        kind = self.kind
        prefix = (section,) + path      # of the node paths: (section, *path, key)
        for key, value in obj.items():
            if key and key[0] == "_":
                if key == "_unknown_tags":
                    self.unknown_tags(parent, value, section, path)
                elif key == "_problems" and isinstance(value, list):
                    for p in value:
                        parent.add(TreeNode("Problem", str(p), style="warn"))
                continue
            about_enum = known.get(key)
            if about_enum is None:
                about_enum = self._learn(known, key, section, names, struct_info)
            if fast:
                t = type(value)
                if t is str:
                    text = _quote(value)
                    if key == "TopicId" and isinstance(obj.get("_topic_name"), str):
                        text += f" ({obj['_topic_name']})"
                    if lean:
                        children.append(_line(key, text))
                    else:
                        children.append(_new(key, text, (), None, None, kind, about_enum[0],
                                             prefix + (key,), None))
                    continue
                if t is int and not about_enum[2]:
                    enum = about_enum[1]
                    label = enum_label(enum, value) if enum is not None else None
                    text = f"{value} ({label})" if label else str(value)
                    if lean:
                        # (a number and a name from the schema: nothing to escape)
                        children.append(_plain_line(key, text))
                    else:
                        children.append(_new(key, text, (), None, None, kind, about_enum[0],
                                             prefix + (key,), None))
                    continue
            self.value(parent, key, value, section, path + (key,), about_enum[0],
                       about_enum[1], obj, struct_info, names + (key,), meta)

    def _learn(self, known: dict, key: str, section: str, names: tuple[str, ...],
               struct_info: Any) -> tuple[str | None, str | None, bool]:
        """``known[key]``: ``(about, enum, is an error code)`` of field ``key`` of the
        struct at ``names``, looked up in the schema and remembered."""
        fnames = (*names, key)
        info = self.info(section, fnames) if struct_info is None else \
            self._struct_info(struct_info, fnames)
        about_enum = (None, None, _is_error(key)) if info is None else \
            (info.about, info.enum, _is_error(key))
        known[key] = about_enum
        return about_enum

    def _known(self, section: str, names: tuple[str, ...], struct_info: Any) -> dict:
        """``key -> (about, enum, is an error code)`` of the fields of the struct at
        ``names`` (filled as they are met: one lookup per struct and field instead of one
        per value)."""
        ck = (self._schema, section, names, struct_info)
        tables = _KNOWN             # (a local: C dict calls when compiled)
        table = tables.get(ck)
        if table is None:
            if len(tables) >= _KNOWN_LIMIT:
                tables.clear()
            table = tables[ck] = {}
        return table

    def _struct_info(self, schema: tuple[str, int | None], names: tuple[Any, ...]) -> Any:
        name, version = schema
        if version is None:
            return None
        return _struct_info(name, version, tuple(p for p in names if not isinstance(p, int)))

    def value(self, parent: TreeNode, key: str, value: Any, section: str,
              path: tuple[Any, ...], about: str | None, enum: str | None,
              holder: dict[str, Any], struct_info: Any = None,
              names: tuple[str, ...] | None = None, meta: bool = True) -> None:
        """The node(s) of one field; ``meta``: ``holder`` may carry ``_redacted_<key>`` /
        ``_decoded_<key>`` notes (False skips looking them up)."""
        t = type(value)
        if t is not int and t is not str:       # (ints and strings: most values)
            if names is None:
                names = tuple([p for p in path if not isinstance(p, int)])
            if isinstance(value, dict):
                node = parent.add(self.node(key, "", section, path, about))
                self.fields(node, value, section, path, struct_info, names)
                return
            if isinstance(value, list):
                self.array(parent, key, value, section, path, about, enum, struct_info, names)
                return
            if isinstance(value, Records):
                self.records(parent, key, value, section, path, about)
                return
        text, style = _scalar(key, value, enum, self.protocol)
        if key == "TopicId" and isinstance(holder.get("_topic_name"), str):
            text += f" ({holder['_topic_name']})"
        if meta and holder.get(f"_redacted_{key}"):
            text += " (secrets masked)"
        if self.lean and not (meta and isinstance(holder.get(f"_decoded_{key}"), dict)):
            parent.children.append(_line(key, text))
            return
        node = self.node(key, text, section, path, about, style)
        parent.children.append(node)
        if style == "error" and isinstance(value, int):
            node.about = f"{error_name(value)}: {error_description(value)}"
        if meta:
            decoded = holder.get(f"_decoded_{key}")
            if isinstance(decoded, dict):
                self.embedded(node, decoded)

    def array(self, parent: TreeNode, key: str, value: list[Any], section: str,
              path: tuple[Any, ...], about: str | None, enum: str | None,
              struct_info: Any, names: tuple[str, ...]) -> None:
        """An array field: one node per struct element, or scalars inline."""
        if value and _all_dicts(value):
            count = f"{len(value)} item{'s' if len(value) != 1 else ''}"
            node = parent.add(self.node(key, count, section, path, about))
            for i, item in enumerate(value):
                ipath = path + (i,)
                child = node.add(self.node(f"{key}[{i}]", _item_hint(item), section, ipath))
                self.fields(child, item, section, ipath, struct_info, names)
            return
        shown = value[:INLINE_LIST_LIMIT]
        parts = []
        for v in shown:
            text, _ = _scalar(key, v, enum, self.protocol)
            parts.append(text)
        more = f", … (+{len(value) - INLINE_LIST_LIMIT})" \
            if len(value) > INLINE_LIST_LIMIT else ""
        text = f"[{', '.join(parts)}{more}]"
        if self.lean:
            parent.add(_line(key, text))
        else:
            parent.add(self.node(key, text, section, path, about))

    def unknown_tags(self, parent: TreeNode, tags: Any, section: str,
                     path: tuple[Any, ...]) -> None:
        if not isinstance(tags, list):
            return
        for i, item in enumerate(tags):
            try:
                tag, data = item
            except (TypeError, ValueError):
                continue
            text, _ = _scalar("", data, None, self.protocol)
            parent.add(self.node(f"Unknown tagged field {tag}", text, section,
                                 (*path, "_unknown_tags", i), style="warn"))

    def embedded(self, parent: TreeNode, decoded: dict[str, Any]) -> None:
        """A protocol embedded in a bytes field (``_decoded_<Field>``)."""
        schema = decoded.get("schema") or "embedded"
        version = decoded.get("version")
        label = f"{schema} v{version}" if version is not None else str(schema)
        if decoded.get("decoded_as") is not None:
            label += f" (decoded as v{decoded['decoded_as']})"
        node = parent.add(TreeNode(label, "", message=self.kind))
        data = decoded.get("data")
        if isinstance(data, dict):
            sinfo = (schema, decoded.get("decoded_as", version)) \
                if isinstance(version, int) else (schema, None)
            for key, value in data.items():
                if key.startswith("_") or key in ("secret_spans", "problems"):
                    continue
                info = self._struct_info(sinfo, (key,))
                self.value(node, key, value, "embedded", (key,), getattr(info, "about", None),
                           getattr(info, "enum", None), data, sinfo)
        elif data is None:
            node.value = "not decodable"
        for p in decoded.get("problems") or ():
            node.add(TreeNode("Problem", str(p), style="warn"))
        if decoded.get("note"):
            node.add(TreeNode("Note", str(decoded["note"])))

    # -- records --------------------------------------------------------------------
    def records(self, parent: TreeNode, key: str, records: Records, section: str,
                path: tuple[Any, ...], about: str | None) -> None:
        node = parent.add(self.node(key, f"{records.summary()} ({human_bytes(len(records))})",
                                    section, path, about))
        # The span of a records field covers its length prefix; the data ends it.
        base = None
        if node.start is not None and node.length is not None:
            base = node.start + node.length - len(records)
        for bi, batch in enumerate(records.batches):
            self.batch(node, bi, batch, records, base, path)
        # Problems of the set itself (those of batches are shown under each batch).
        for p in records.problems:
            if not p.startswith("batch "):
                node.add(TreeNode("Problem", str(p), style="warn"))

    def batch(self, parent: TreeNode, index: int, b: Batch, records: Records,
                  base: int | None, path: tuple[Any, ...]) -> None:
        first, last = b.base_offset, b.last_offset
        offsets = f"offsets {first}-{last}" if last is not None and last != first \
            else f"offset {first}"
        count = b.record_count
        desc = [offsets, f"{count if count is not None else '?'} record{'' if count == 1 else 's'}",
                f"magic {b.magic}"]
        if b.attributes is not None:
            desc.append(b.codec_name)
        if b.transactional:
            desc.append("transactional")
        if b.control:
            desc.append("control")
        if b.truncated:
            desc.append("truncated")
        kind = self.kind
        # positional (label, value, children, start, length, message, about, path, style)
        # here and below: this runs for every batch of every record set
        node = _new(f"Batch {index}", ", ".join(desc), [],
                    base + b.start if base is not None else None,
                    b.available if base is not None else None, kind, None,
                    ("records", *path, index), None)
        parent.children.append(node)
        rows: list[tuple[str, Any]] = [("BaseOffset", b.base_offset), ("BatchLength", b.length)]
        if b.kind == "v2":
            rows += [("PartitionLeaderEpoch", b.partition_leader_epoch), ("Magic", b.magic)]
        else:
            rows += [("Magic", b.magic)]
        crc_ok = b.crc_ok
        crc_text = "null" if b.crc is None else f"0x{b.crc:08x}" + (
            " (ok)" if crc_ok else " (MISMATCH)" if crc_ok is False
            else " (not checked: truncated)")
        lean = self.lean
        children = node.children
        children.append(_plain_leaf(lean, "CRC", crc_text, kind,
                                    "error" if crc_ok is False else None))
        for label, value in rows:
            children.append(_plain_leaf(lean, label, "null" if value is None else str(value),
                                        kind))
        if b.attributes is not None:
            attrs = [f"compression {b.codec_name}"]
            if b.timestamp_type:
                attrs.append(b.timestamp_type)
            if b.transactional:
                attrs.append("transactional")
            if b.control:
                attrs.append("control")
            children.append(_plain_leaf(lean, "Attributes",
                                  f"0x{b.attributes:04x} ({', '.join(attrs)})", kind))
        if b.kind == "v2":
            for label, value in (("LastOffsetDelta", b.last_offset_delta),
                                 ("BaseTimestamp", b.base_timestamp),
                                 ("MaxTimestamp", b.max_timestamp),
                                 ("ProducerId", b.producer_id),
                                 ("ProducerEpoch", b.producer_epoch),
                                 ("BaseSequence", b.base_sequence),
                                 ("RecordCount", b.declared_count)):
                text = _format_ms(value) if "Timestamp" in label and value is not None \
                    else ("null" if value is None else str(value))
                children.append(_plain_leaf(lean, label, text, kind))
        recs = b.records    # decodes (and decompresses) the batch
        if b.compressed_size is not None:
            node.add(TreeNode("Compressed", f"{b.compressed_size} bytes -> {b.decompressed_size} "
                                            f"bytes ({b.framing or b.codec_name})"))
        for ri, rec in enumerate(recs):
            self.record(node, ri, rec, records, base)
        for p in b.problems:
            node.add(TreeNode("Problem", str(p), style="warn"))

    def record(self, parent: TreeNode, index: int, r: Record, records: Records,
               base: int | None) -> None:
        in_place = base is not None and r.start >= 0
        # positional arguments (label, value, children, start, length, message): this
        # runs for every record of every batch
        offset = str(r.offset)
        lean = self.lean
        kids = [_plain_leaf(lean, "Offset", offset, None)]
        node = _new(f"Record {index}", "offset " + offset, kids,
                    base + r.start if in_place else None, r.size if in_place else None,
                    self.kind, None, (), None)
        parent.children.append(node)
        add = node.add
        if r.timestamp is not None:
            kids.append(_plain_leaf(lean, "Timestamp", _format_ms(r.timestamp), None))
        if r.control is not None:
            ctl = node.add(TreeNode("Control", str(r.control.get("type"))))
            for k, v in r.control.items():
                if k == "data" and isinstance(v, dict):
                    data = ctl.add(TreeNode("Data", ""))
                    _plain_dict(data, v)
                elif k != "type":
                    ctl.add(TreeNode(k, _plain_value(v)))
        if not has_decoders():
            # the built-in view only (the common case): values made directly
            limit = self.value_chars
            kids.append(_leaf(lean, "Key", _view(r.key, limit), None))
            kids.append(_leaf(lean, "Value", _view(r.value, limit), None))
            if r.headers:
                kids.append(_new("Headers", f"{len(r.headers)}",
                                 [_leaf(lean, _quote(hk), _view(hv, limit), None)
                                  for hk, hv in r.headers], None, None, None, None, (), None))
        else:
            topic, partition = records.topic, records.partition
            self.payload_node(node, "Key", r.key, topic, partition, "key")
            self.payload_node(node, "Value", r.value, topic, partition, "value")
            if r.headers:
                headers = add(TreeNode("Headers", f"{len(r.headers)}"))
                for hk, hv in r.headers:
                    self.payload_node(headers, _quote(hk), hv, topic, partition, "header", hk)
        if r.key_decoded is not None or r.value_decoded is not None:
            for label, decoded in (("Key decoded", r.key_decoded),
                                   ("Value decoded", r.value_decoded)):
                if isinstance(decoded, dict):
                    _plain_dict(add(TreeNode(label, str(decoded.get("schema", "")))), decoded)
                elif decoded is not None:
                    add(TreeNode(label, _plain_value(decoded)))
        if r.crc is not None:
            add(TreeNode("CRC", f"0x{r.crc:08x}" + (" (ok)" if r.crc_ok else " (MISMATCH)"),
                         style=None if r.crc_ok else "error"))
        for p in r.problems or ():
            add(TreeNode("Problem", str(p), style="warn"))

    def payload_node(self, parent: TreeNode, label: str, data: bytes | None,
                     topic: str | None, partition: int | None, part: str,
                     header_key: str | None = None) -> TreeNode:
        """A key/value/header node; an object decoded by a payload plugin gets its fields
        as children, and the decoders' problems are shown under it."""
        if data is None or not has_decoders():
            # the common case, without a Rendered object: the built-in view's text
            node = TreeNode(label, _view(data, self.value_chars))
            parent.children.append(node)
            return node
        # max_chars: only the shown part of a long value is rendered (a 40 KB binary
        # value is not turned into 80 KB of hex to show 256 characters of it)
        rendered = render_payload(
            data, topic=topic, partition=partition, part=part, header_key=header_key,
            max_chars=self.value_chars)
        node = TreeNode(label, self._payload_text(data, rendered))
        parent.children.append(node)
        if rendered.kind == "decoded" or rendered.problems:
            obj = rendered.obj
            if rendered.kind == "decoded" and isinstance(obj, dict):
                _plain_dict(node, obj)
            elif rendered.kind == "decoded" and isinstance(obj, list) and obj \
                    and all(isinstance(x, dict) for x in obj):
                _plain_dict(node, {f"[{i}]": x for i, x in enumerate(obj)})
            for p in rendered.problems:
                node.add(TreeNode("Problem", str(p), style="warn"))
        return node

    def _payload_text(self, data: bytes, rendered: Any) -> str:
        """The node value of ``data`` as ``render_payload`` rendered it."""
        kind = rendered.kind
        if kind == "empty":
            return "0 bytes"
        obj = rendered.obj
        return self._shown(len(data), kind, obj,
                           None if kind == "json" and obj is not None else rendered.text,
                           rendered.decoder)

    def _shown(self, size: int, kind: str, obj: Any, text: str | None,
               decoder: str | None) -> str:
        """The node value of a payload of ``size`` bytes seen as ``kind``."""
        if kind == "json" and obj is not None:
            text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        elif kind in ("text", "decoded") and isinstance(obj, (dict, list)):
            text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=repr)
        elif kind == "text":
            text = _quote(text)  # type: ignore[arg-type]
        elif kind != "decoded":
            text = "hex " + text  # type: ignore[operator]
        limit = self.value_chars
        if limit and len(text) > limit:  # type: ignore[arg-type]
            text = text[:limit] + "…"  # type: ignore[index]
        if decoder:
            return f"{text} ({size} bytes) [{decoder}]"
        return f"{text} ({size} bytes)"


#: the deepest struct the tree shows (levels below the body)
MAX_TREE_NESTING = MAX_NESTING


def _all_dicts(items: list[Any]) -> bool:
    """Whether every item is a dict."""
    for v in items:
        if not isinstance(v, dict):
            return False
    return True


def _item_hint(item: dict[str, Any]) -> str:
    """A short identity for an array element: its name/topic/id field, if any."""
    d = item if type(item) is dict else dict(item)     # (a plain dict: C look-ups)
    for key in ("Name", "Topic", "TopicName", "_topic_name", "GroupId", "MemberId", "Key",
                "ResourceName"):
        v = d.get(key)
        if isinstance(v, str) and v:
            return _quote(v)
    for key in ("PartitionIndex", "Partition", "Index", "ApiKey", "NodeId", "BrokerId"):
        v = d.get(key)
        if type(v) is int:
            if key == "ApiKey":
                return api_label(v)
            return f"{key} {v}"
    return ""


def _plain_value(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        return _scalar("", bytes(v), None, "kafka")[0]
    if isinstance(v, str):
        return _quote(v)
    try:
        return json.dumps(v, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(v)


def _plain_dict(parent: TreeNode, d: dict[str, Any], depth: int = 0) -> None:
    for k, v in d.items():
        if isinstance(v, dict) and depth < 8:
            _plain_dict(parent.add(TreeNode(str(k), "")), v, depth + 1)
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and depth < 8:
            node = parent.add(TreeNode(str(k), counted(len(v), "item")))
            for i, x in enumerate(v):
                _plain_dict(node.add(TreeNode(f"{k}[{i}]", _item_hint(x))), x, depth + 1)
        else:
            parent.add(TreeNode(str(k), _plain_value(v)))


# ----------------------------------------------------------------------------- messages

def _message_node(msg: KafkaMessage, exchange: Exchange, spans: bool,
                  value_chars: int | None, lean: bool = False) -> TreeNode:
    b = _Builder(msg, exchange.protocol, spans, value_chars, lean)
    what = "request" if msg.kind == "request" else "response"
    frames = f"frame {msg.frame_first}" if msg.frame_first == msg.frame_last \
        else f"frames {msg.frame_first}-{msg.frame_last}"
    top = TreeNode(f"Kafka {what}", f"{frames}, {msg.size} bytes", message=msg.kind,
                   start=0, length=msg.size, path=())
    lean = b.lean
    if lean:
        top.add(_plain_line("Length", str(msg.size - PREFIX)))
    else:
        top.add(TreeNode("Length", str(msg.size - PREFIX), start=0, length=PREFIX,
                         message=msg.kind, about="Size of the frame after this field"))
    if msg.missing:
        top.add(TreeNode("Missing", f"{counted(msg.missing, 'byte')} lost in a capture gap",
                         style="warn"))
    if msg.inferred:
        top.add(TreeNode("Inferred", str(msg.inferred), style="warn",
                         about="How the API of this unpaired response was guessed"))
    if exchange.protocol == SASL_PROTOCOL:
        # Raw SASL tokens have no Kafka header; the mechanism comes from the handshake.
        mech = msg.header.get("SaslMechanism") if isinstance(msg.header, dict) else None
        top.add(TreeNode("Mechanism", _quote(mech) if mech else "unknown",
                         about="SASL mechanism agreed in the SaslHandshake"))
    elif msg.header:
        hv = msg.header_version
        hdr_end = msg.body_offset if msg.body_offset else None
        header = top.add(TreeNode(
            f"{'Request' if msg.kind == 'request' else 'Response'} header"
            + (f" v{hv}" if hv is not None else ""), "", message=msg.kind,
            start=PREFIX if hdr_end else None, length=hdr_end, path=("header",)))
        if exchange.protocol == LEGACY_PROTOCOL:
            for key, value in msg.header.items():
                header.add(TreeNode(key, _plain_value(value), message=msg.kind))
        else:
            # the header's field metadata, looked up once per header layout
            known = b._known("header", (), None)
            for key, value in msg.header.items():
                if key.startswith("_"):
                    if key == "_unknown_tags":
                        b.unknown_tags(header, value, "header", ())
                    continue
                about_enum = known.get(key)     # (about, enum, is an error code)
                if about_enum is None:
                    about_enum = b._learn(known, key, "header", (), None)
                text, style = _scalar(key, value, about_enum[1], exchange.protocol)
                if key == "RequestApiKey" and isinstance(value, int):
                    text = f"{value} ({api_label(value)})"
                if lean:
                    header.add(_line(key, text))
                else:
                    header.add(b.node(key, text, "header", (key,), about_enum[0], style))
    name = api_label(msg.api_key, exchange.protocol)
    version = b.version
    if exchange.protocol == SASL_PROTOCOL:
        title = f"SASL token from the {'client' if msg.kind == 'request' else 'broker'}"
    else:
        title = f"{name} {what}" + (f" v{version}" if version is not None else "")
    body = top.add(TreeNode(title, "", message=msg.kind,
                            start=msg.body_offset + PREFIX if msg.body is not None else None,
                            length=(msg.body_end - msg.body_offset)
                            if msg.body is not None and msg.body_end >= msg.body_offset else None,
                            path=("body",)))
    if msg.body is None:
        body.value = "not decoded"
        rest = len(msg.raw) - msg.body_offset
        if rest > 0:
            preview = _hex_preview(bytes(msg.raw[msg.body_offset:]))
            body.add(TreeNode("Raw", f"{rest} bytes: {preview}",
                              start=msg.body_offset + PREFIX, length=rest, message=msg.kind))
    elif exchange.protocol == SASL_PROTOCOL:    # {"schema", "version", "data"}: as embedded
        # (its problems are the message's own too, shown below)
        b.embedded(body, {k: v for k, v in msg.body.items() if k != "problems"})
    else:
        try:
            b.fields(body, msg.body, "body", ())
        except RecursionError:
            body.add(TreeNode("Problem", "body nested too deeply to show", style="warn"))
    for p in msg.problems:
        top.add(TreeNode("Problem", p, style="warn"))
    return top


def build_tree(exchange: Exchange, *, spans: bool = False,
               value_chars: int | None = DEFAULT_VALUE_CHARS, lean: bool = False) -> TreeNode:
    """The detail tree of ``exchange`` (see module contract).

    ``value_chars`` limits the text shown per record key/value/header (None: no limit);
    ``lean``: a tree for plain text only (see the module contract).
    """
    lean = lean and not spans
    api = api_label(exchange.api_key, exchange.protocol)
    version = exchange.api_version
    head = (f"{api} v{version}" if version is not None else api) + \
        f", {exchange.status}, stream {exchange.stream}, " \
        f"{format_address(exchange.client)} → {format_address(exchange.broker)}"
    if exchange.latency_ms is not None:
        head += f", latency {format_latency(exchange.latency_ms)}"
    root = TreeNode(f"Exchange {exchange.index}", head)
    if exchange.correlation_id is not None:
        text = str(exchange.correlation_id)
        root.add(_plain_line("Correlation id", text) if lean
                 else TreeNode("Correlation id", text))
    if exchange.client_id is not None:
        text = _quote(exchange.client_id)
        root.add(_line("Client id", text) if lean else TreeNode("Client id", text))
    if exchange.tls is not None:
        root.add(TreeNode("TLS", "decrypted, " + exchange.tls.describe()))
    if extra_fields._extra:
        items = extra_fields.tree_items(exchange)
        if items:
            node = root.add(TreeNode("Plugin fields", str(len(items))))
            for name, text in items:
                node.add(TreeNode(name, text))
    for msg in (exchange.request, exchange.response):
        if msg is not None:
            try:
                root.add(_message_node(msg, exchange, spans, value_chars, lean))
            except Exception as exc:  # noqa: BLE001 - never break the output on one message
                root.add(TreeNode("Problem", f"{msg.kind} could not be shown: "
                                             f"{type(exc).__name__}: {exc}", style="warn"))
    for p in exchange.problems:
        root.add(TreeNode("Problem", p, style="warn"))
    return root


def render_tree(root: TreeNode, *, palette: Palette = PLAIN, offsets: bool = False,
                indent: str = "    ") -> Iterator[str]:
    """Indented text lines of a tree; ``offsets`` appends ``[start-end)`` byte ranges."""
    if not palette.enabled and not offsets:
        try:
            return iter(_plain_lines(root, indent))
        except RecursionError:
            pass                    # a very deep tree: the explicit stack copes
    return _render_walk(root, palette, offsets, indent)


def plain_text(root: TreeNode, indent: str = "    ") -> tuple[str, str] | None:
    """:func:`render_tree` of ``root`` without colours and offsets, joined: its first
    line and the rest (empty, or each further line after a ``"\\n"``), so that
    ``"\\n".join(render_tree(root)) == head + rest``; None for a tree too deep to recurse
    (the caller then uses :func:`render_tree`). The first line (an exchange's heading,
    with its arrow) is apart: the other lines are most often ASCII, which one non-ASCII
    character would make a wider text, slower to join and to encode."""
    try:
        pieces = _plain_pieces(root, indent)
    except RecursionError:
        return None
    return pieces[0], "".join(pieces[1:])


def _render_walk(root: TreeNode, palette: Palette, offsets: bool, indent: str
                 ) -> Iterator[str]:
    """:func:`render_tree` by a depth-first walk with an explicit stack (any depth,
    colours, offsets)."""
    plain_palette = not palette.enabled     # every style is the identity
    name, heading = palette.name, palette.heading
    pads: list[str] = []
    # depth-first with an explicit stack of child iterators (no per-node tuples)
    stack: list[Iterator[TreeNode]] = [iter((root,))]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            continue
        depth = len(stack) - 1
        while len(pads) <= depth:
            pads.append(indent * len(pads))
        if type(node) is str:               # a lean tree's leaf: its line (plain only)
            yield pads[depth] + node
            continue
        if node.children:
            stack.append(iter(node.children))
        if plain_palette:
            text = _line(node.label, node.value)
        else:
            label_text, value = node.label, node.value
            plain = label_text if label_text.isprintable() else printable(label_text)
            if value and not value.isprintable():
                value = printable(value)
            label = name(plain) if depth else heading(plain)
            text = f"{label}: {value}" if value else label
            style = node.style
            if style == "error":
                text = f"{label}: {palette.error(value)}" if value else palette.error(label)
            elif style == "warn":
                text = f"{palette.warn(plain)}: {value}" if value else palette.warn(plain)
        if offsets and node.start is not None and node.length is not None:
            text += palette.dim(f"  [{node.message or ''} {node.start}-{node.start + node.length})")
        yield pads[depth] + text


def _plain_lines(root: TreeNode, indent: str) -> list[str]:
    """The lines :func:`render_tree` yields without colours and offsets, by recursion
    over the nodes that have children (raises RecursionError on trees deeper than the
    interpreter allows; the caller then uses the general walk)."""
    pieces = _plain_pieces(root, indent)
    if len(pieces) == 1:
        return pieces
    return [pieces[0], *"".join(pieces[1:])[1:].split("\n")]


def _plain_pieces(root: TreeNode, indent: str) -> list[str]:
    """The text of :func:`_plain_lines` in pieces to join: the root's line, then per
    line ``"\\n"`` with its indentation, and the line (no line holds a ``"\\n"``: the
    plain render escapes it)."""
    out: list[str] = [_line(root.label, root.value)]
    if root.children:
        _emit_plain(root.children, 1, ["", "\n" + indent], indent, out)
    return out


#: text -> the text as the plain render shows it (escaped where not printable), for
#: labels and short values (field names, numbers, enum names recur from node to node and
#: exchange to exchange: one dictionary look-up instead of a printability check);
#: cleared when it reaches ``_SHOWN_LIMIT`` entries
_SHOWN: dict[str, str] = {}
_SHOWN_LIMIT = 16384
_SHOWN_MAX_CHARS = 48


def _as_shown(text: str) -> str:
    """``text`` as shown (:func:`printable`), remembered in :data:`_SHOWN`."""
    shown = text if text.isprintable() else printable(text)
    if len(_SHOWN) >= _SHOWN_LIMIT:
        _SHOWN.clear()
    _SHOWN[text] = shown
    return shown


def _escaped(text: str) -> str:
    """``text`` as the plain render shows it (:func:`printable`), looked up in
    :data:`_SHOWN` first (labels and short values recur)."""
    table = _SHOWN                  # (a local: a C dict call when compiled)
    shown = table.get(text)
    return _as_shown(text) if shown is None else shown


def _line(label: str, value: str) -> str:
    """The line of a node ``label``/``value`` as the plain render shows it (escaped where
    not printable), without its indentation: a lean tree's leaf, and every plain line."""
    if not value:
        return _escaped(label)
    if len(value) <= _SHOWN_MAX_CHARS:
        value = _escaped(value)
    elif not value.isprintable():
        value = printable(value)
    return f"{_escaped(label)}: {value}"


def _plain_line(label: str, value: str) -> str:
    """:func:`_line` of a non-empty ``value`` that needs no escaping: made from numbers,
    names from the schema (``"3 (ANY)"``) and fixed words, nothing from the wire."""
    return f"{_escaped(label)}: {value}"


def _emit_plain(nodes: list[TreeNode], depth: int, pads: list[str], indent: str,
                out: list[str]) -> None:
    """:func:`_plain_pieces` of ``nodes`` at ``depth``: ``pads[depth]`` (``"\\n"`` and the
    indentation, ``pads`` grown here as deeper levels are met) and the line of each,
    appended to ``out`` (a module function, not a closure: a recursive closure is a
    reference cycle left to the cyclic GC, one per exchange)."""
    pad = pads[depth]
    for item in nodes:
        out.append(pad)
        if type(item) is str:               # a lean tree's leaf: its line
            out.append(item)
            continue
        node = item
        out.append(_line(node.label, node.value))
        if node.children:
            if len(pads) == depth + 1:
                pads.append(pad + indent)
            _emit_plain(node.children, depth + 1, pads, indent, out)


def find_node(root: TreeNode, path: tuple[Any, ...], message: str) -> TreeNode | None:
    """The node of ``message`` ("request"/"response") at ``path`` (as in ``node.path``)."""
    for _, node in root.walk():
        if node.message == message and node.path == path:
            return node
    return None
