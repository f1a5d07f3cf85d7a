"""Where in a response each non-zero error code sits: ``(code, topic, partition)``.

Contract: :func:`error_sites` walks one decoded response body given as its export JSON
text and returns one ``(code, topic, partition)`` per non-zero integer field whose name
ends in ``ErrorCode`` (``ErrorCode``, ``PartitionErrorCode``, ...), with the topic and
partition of the innermost enclosing structs that name them:

* topic: ``Topic``/``TopicName``, ``Name`` inside a topic array (``Topics``,
  ``Responses``, ``TopicData``, ``Results``, ...), kwsniff's ``_topic_name``, else the
  ``TopicId`` text (Kafka's ``entityType: topicName`` fields);
* partition: ``PartitionIndex``/``Partition``/``PartitionId``, or ``Index`` inside
  ``PartitionData``/``PartitionResponses``/``Partitions``.

A top-level error (e.g. JoinGroup's) has topic and partition None. Bad JSON, non-object
bodies and nesting deeper than :data:`MAX_DEPTH` yield what was found so far; it never
raises. Only the standard library is used, so Spark executors need nothing extra.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 32

TOPIC_KEYS = ("Topic", "TopicName", "_topic_name")
TOPIC_ARRAYS = frozenset({"Topics", "TopicData", "Responses", "Results", "TopicResults",
                          "ResultsByTopicV3AndBelow", "V3AndBelowTopics"})
PARTITION_KEYS = ("PartitionIndex", "Partition", "PartitionId")
INDEX_ARRAYS = frozenset({"PartitionData", "PartitionResponses", "Partitions"})

Site = tuple[int, "str | None", "int | None"]


def _walk(node: dict[str, Any], parent: str | None, topic: str | None,
          partition: int | None, depth: int, out: list[Site]) -> None:
    if depth > MAX_DEPTH:
        return
    own = None
    for key in TOPIC_KEYS:
        value = node.get(key)
        if isinstance(value, str):
            own = value
            break
    if own is None and parent in TOPIC_ARRAYS and isinstance(node.get("Name"), str):
        own = node["Name"]
    if own is None and isinstance(node.get("TopicId"), str):
        own = node["TopicId"]
    if own is not None:
        topic = own
    for key in PARTITION_KEYS:
        value = node.get(key)
        if type(value) is int:
            partition = value
            break
    else:
        value = node.get("Index")
        if type(value) is int and parent in INDEX_ARRAYS:
            partition = value
    for key, value in node.items():
        if type(value) is int:
            if value and key.endswith("ErrorCode"):
                out.append((value, topic, partition))
        elif isinstance(value, dict):
            _walk(value, key, topic, partition, depth + 1, out)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _walk(item, key, topic, partition, depth + 1, out)


def error_sites(response_json: str | None) -> list[Site]:
    """The error sites of one response body (see the module contract)."""
    if not response_json:
        return []
    try:
        body = json.loads(response_json)
    except (ValueError, RecursionError):
        return []
    out: list[Site] = []
    if isinstance(body, dict):
        try:
            _walk(body, None, None, None, 0, out)
        except RecursionError:
            pass
    return out
