"""Topic ids resolved across connections after a per-connection decode.

``spark-decode`` decodes each TCP connection on its own, so a Fetch v13+ on one
connection cannot see the Metadata response (on another connection) that named its
topic ids, while a whole-capture decode can. This module closes that gap the way the
engine does it (``kwsniff.kafka.topic_ids``):

* :class:`RecordingTopicIds` is the engine's id table that also records each mapping
  with the global frame where it was learned (:attr:`origins`).
* :func:`unresolved_ids` lists the ``TopicId`` texts of a decoded body that got no
  name (no ``Name``/``Topic``/``TopicName``, no ``_topic_name``).
* :func:`resolve_row` takes an exchange row's body JSON and ``topics`` and a run-wide
  map ``id -> (name, learned_frame)``: every struct whose id was learned **before** the
  message was complete (frame ``< frame_last``, as a single run over the whole capture
  would have known it) gets ``"_topic_name"`` right after ``TopicId`` (bodies are
  re-serialised exactly like the export does) and the id text in ``topics`` becomes
  the name (first occurrence kept), as in record-set problems
  (``"response: records <topic>[<partition>]: ..."``).
"""

from __future__ import annotations

import json
from typing import Any

from kwsniff.kafka.topic_ids import NAME_KEYS, TOPIC_NAME, TopicIds
from kwsniff.output.facts import uuid_text
from kwsniff.output.jsonl import dumps

MAX_DEPTH = 6        # as kwsniff.kafka.topic_ids walks
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


class RecordingTopicIds(TopicIds):
    """A :class:`TopicIds` remembering where each mapping was first learned."""

    __slots__ = ("frame", "origins")

    def __init__(self, limit: int = 100_000) -> None:
        super().__init__(limit)
        self.frame = 0                                  # set by the feeder per packet
        self.origins: dict[str, tuple[str, int]] = {}   # id text -> (name, frame)

    def add(self, topic_id: Any, name: str) -> None:
        super().add(topic_id, name)
        text = uuid_text(topic_id)
        if text and text != ZERO_UUID and isinstance(name, str) and name \
                and text not in self.origins and len(self.origins) < self.limit:
            self.origins[text] = (name, self.frame)


def _has_name(node: dict[str, Any]) -> bool:
    if TOPIC_NAME in node:
        return True
    return any(isinstance(node.get(k), str) and node.get(k) for k in NAME_KEYS)


def unresolved_ids(body: Any, depth: int = 0) -> list[str]:
    """TopicId texts in ``body`` (a decoded body dict) that carry no name."""
    out: list[str] = []
    if not isinstance(body, dict) or depth > MAX_DEPTH:
        return out
    tid = body.get("TopicId")
    if tid is not None:
        text = uuid_text(tid)
        if text and text != ZERO_UUID and not _has_name(body):
            out.append(text)
    for value in body.values():
        if isinstance(value, dict):
            out.extend(unresolved_ids(value, depth + 1))
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    out.extend(unresolved_ids(item, depth + 1))
    return out


def _annotate(node: dict[str, Any], known: dict[str, str], found: dict[str, str],
              depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    tid = node.get("TopicId")
    if isinstance(tid, str) and tid in known and not _has_name(node):
        items = list(node.items())
        node.clear()
        for k, v in items:
            node[k] = v
            if k == "TopicId":
                node[TOPIC_NAME] = known[tid]
        found[tid] = known[tid]
    for value in list(node.values()):
        if isinstance(value, dict):
            _annotate(value, known, found, depth + 1)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _annotate(item, known, found, depth + 1)


def resolve_body(body_json: str, ids: list[str], frame_last: int,
                 names: dict[str, tuple[str, int]]) -> tuple[str, dict[str, str]]:
    """``(new JSON, {id: name})`` for the ids of ``ids`` learned before ``frame_last``."""
    known = {i: names[i][0] for i in ids if i in names and names[i][1] < frame_last}
    if not known:
        return body_json, {}
    try:
        body = json.loads(body_json)
    except ValueError:
        return body_json, {}
    found: dict[str, str] = {}
    if isinstance(body, dict):
        _annotate(body, known, found, 0)
    if not found:
        return body_json, {}
    return dumps(body), found


def resolve_topics(topics: list[str], found: dict[str, str]) -> list[str]:
    out: dict[str, None] = {}
    for t in topics:
        out[found.get(t, t)] = None
    return list(out)


def resolve_problems(problems: list[str], side: str, found: dict[str, str]) -> list[str]:
    """Record-set problems name their topic (``"<side>: records <topic>[<p>]: ..."``)."""
    out = []
    for text in problems:
        for tid, name in found.items():
            prefix = f"{side}: records {tid}["
            if text.startswith(prefix):
                text = f"{side}: records {name}[" + text[len(prefix):]
                break
        out.append(text)
    return out


def resolve_row(values: list[Any], fix: list[tuple[int, list[str], int]],
                positions: dict[str, int], names: dict[str, tuple[str, int]]) -> list[Any]:
    """Apply :func:`resolve_body` to the body columns named by ``fix`` (``(column,
    ids, frame_last)``) of a row (columns by ``positions``: ``request``, ``response``,
    ``topics``, ``problems``) and update its ``topics`` and ``problems``."""
    found_all: dict[str, str] = {}
    sides = {positions["request"]: "request", positions["response"]: "response"}
    problems_at = positions["problems"]
    for column, ids, frame_last in fix:
        text = values[column]
        if not isinstance(text, str):
            continue
        new, found = resolve_body(text, ids, frame_last, names)
        if found:
            values[column] = new
            found_all.update(found)
            if isinstance(values[problems_at], list) and column in sides:
                values[problems_at] = resolve_problems(values[problems_at], sides[column],
                                                       found)
    topics_at = positions["topics"]
    if found_all and isinstance(values[topics_at], list):
        values[topics_at] = resolve_topics(values[topics_at], found_all)
    return values
