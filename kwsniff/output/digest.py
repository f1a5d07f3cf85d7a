"""One-line digests of exchanges: what the request asked and what the response said.

Contract:

* :func:`digest` returns ``"<request part> → <response part>"`` for an exchange, e.g.
  ``orders[0..2] 3 batches 120 records 48.2 KiB acks=-1 → 3 ok`` for a Produce.
  The API name and version are *not* part of it (the summary line prints them).
* Every common API has its own digest; every other API gets a generic one (topics with
  partitions, groups, transactional ids, and the error summary of the response).
* Digests are cheap: record sets are summarised from batch headers only.
* A digest function that fails on an odd body falls back to the generic digest; this
  module never raises.
* Plugins add or replace digests with :func:`register_digest`; plugin exchange fields
  marked for the digest (:mod:`kwsniff.output.extra_fields`) are appended as
  ``name=value``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, UNANSWERED, Exchange, \
    KafkaMessage
from kwsniff.kafka.records import Records
from kwsniff.kafka.sasl import token_error, token_user
from kwsniff.output import extra_fields
from kwsniff.output.facts import ExchangeFacts, uuid_text
from kwsniff.output.names import LEGACY_PROTOCOL, SASL_PROTOCOL, api_label, error_label

Body = dict[str, Any]
RequestDigest = Callable[[Body, int, ExchangeFacts], str]
ResponseDigest = Callable[[Body, int, ExchangeFacts, Body | None], str]

ARROW = "→"
MAX_TOPICS = 3
MAX_ITEMS = 4
SHORT_ID = 12

_REQUEST: dict[int, RequestDigest] = {}
_RESPONSE: dict[int, ResponseDigest] = {}


def register_digest(api_key: int, request: RequestDigest | None = None,
                    response: ResponseDigest | None = None) -> None:
    """Install digest functions for an API key (plugins; replaces built-ins).

    ``request(body, version, facts) -> str`` and
    ``response(body, version, facts, request_body_or_None) -> str``.
    """
    if request is not None:
        _REQUEST[api_key] = request
    if response is not None:
        _RESPONSE[api_key] = response


# ----------------------------------------------------------------------------- helpers

def human_bytes(n: int) -> str:
    """``512 B``, ``48.2 KiB``, ``1.5 MiB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024.0
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    return f"{n} B"


def short(text: Any, limit: int = SHORT_ID) -> str:
    """Shorten long ids for one-line display: ``consumer-1-4…``."""
    if text is None:
        return "null"
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def ranges(numbers: Iterable[int]) -> str:
    """``0..2,5,7..8`` from partition numbers (sorted, unique)."""
    if type(numbers) is list and len(numbers) == 1 and type(numbers[0]) is int:
        return str(numbers[0])     # the usual case: one partition
    nums = sorted({n for n in numbers if type(n) is int})
    if len(nums) == 1:
        return str(nums[0])
    out: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else
                   f"{nums[i]},{nums[j]}" if j == i + 1 else f"{nums[i]}..{nums[j]}")
        i = j + 1
    return ",".join(out)


def topic_partitions(pairs: Iterable[tuple[str, Iterable[int]]]) -> str:
    """``orders[0..2] payments[1] +2 topics`` from (topic, partitions) pairs."""
    if type(pairs) is list and (len(pairs) == 1 or len(pairs) <= MAX_TOPICS
                                and len({topic for topic, _ in pairs}) == len(pairs)):
        shown = []                    # the usual case: a few topics, each named once
        for topic, parts in pairs:
            r = ranges(parts)
            shown.append(f"{topic}[{r}]" if r else topic)
        return " ".join(shown)
    merged: dict[str, list[int]] = {}
    for topic, parts in pairs:
        merged.setdefault(topic, []).extend(parts)
    shown = []
    for topic, parts in list(merged.items())[:MAX_TOPICS]:
        r = ranges(parts)
        shown.append(f"{topic}[{r}]" if r else topic)
    more = len(merged) - MAX_TOPICS
    if more > 0:
        shown.append(f"+{more} topics")
    return " ".join(shown)


def name_list(items: Iterable[Any], limit: int = MAX_ITEMS) -> str:
    items = [str(i) for i in items]
    head = ", ".join(items[:limit])
    if len(items) > limit:
        head += f", +{len(items) - limit}"
    return head


def _list(body: Body | None, key: str) -> list[Any]:
    if not body:
        return []
    value = body.get(key)
    return value if type(value) is list else []


def _dicts(body: Body | None, key: str) -> list[Body]:
    return [d for d in _list(body, key) if type(d) is dict]


def _partition_of(p: Body) -> int | None:
    v = p.get("PartitionIndex")
    if type(v) is int:
        return v
    v = p.get("Partition")
    if type(v) is int:
        return v
    v = p.get("Index")
    if type(v) is int:
        return v
    v = p.get("PartitionId")
    return v if type(v) is int else None


def _pairs(body: Body | None, topics_key: str, parts_key: str, facts: ExchangeFacts,
           structs: list[Body] | None = None) -> list[tuple[str, list[int]]]:
    """``(topic, partition numbers)`` per topic struct; the partition structs are also
    appended to ``structs`` when given."""
    out = []
    topics = body.get(topics_key) if body else None
    if type(topics) is not list:
        return out
    label = facts.topic_label
    for item in topics:
        if type(item) is not dict:
            continue
        t = item                # (a dict: typed where compiled)
        parts = t.get(parts_key)
        nums: list[int] = []
        if type(parts) is list:
            for p in parts:
                if type(p) is dict:
                    if structs is not None:
                        structs.append(p)
                    n = _partition_of(p)
                    if n is not None:
                        nums.append(n)
                elif type(p) is int:
                    nums.append(p)
        out.append((label(t), nums))
    return out


def error_summary(codes: Iterable[int], ok_word: str = "ok") -> str:
    """``3 ok`` / ``2 ok, 1 NOT_LEADER_OR_FOLLOWER`` from per-item error codes."""
    codes = [c for c in codes if type(c) is int]
    if not codes:
        return ""
    if not any(codes):      # all ok: the usual case
        return f"{len(codes)} {ok_word}"
    counts = Counter(codes)
    ok = counts.pop(0, 0)
    parts = [f"{ok} {ok_word}"] if ok else []
    for code, n in counts.most_common():
        parts.append(f"{n} {error_label(code)}" if n > 1 or ok or len(counts) > 1
                     else error_label(code))
    return ", ".join(parts)


def _nested_errors(body: Body | None, outer: str, inner: str,
                   key: str = "ErrorCode") -> list[int]:
    codes = []
    for t in _dicts(body, outer):
        for p in _dicts(t, inner):
            c = p.get(key)
            if type(c) is int:
                codes.append(c)
    return codes


def _top_error(body: Body | None) -> str | None:
    """The name of a non-zero top-level ErrorCode, with ErrorMessage when present."""
    if not body:
        return None
    code = body.get("ErrorCode")
    if type(code) is int and code != 0:
        msg = body.get("ErrorMessage")
        return f"{error_label(code)} ({short(msg, 60)})" if msg else error_label(code)
    return None


def _ok_or_error(body: Body | None) -> str:
    return _top_error(body) or "ok"


def records_stats(records: Any) -> tuple[int, int, int]:
    """``(batches, records, bytes)`` of a record set, from batch headers only."""
    if records is None:
        return 0, 0, 0
    if type(records) is Records:     # parses batch headers on demand, never raises
        return records.batch_count, records.record_count, len(records.data)
    if type(records) is tuple:       # the summary lane's clean set (kwsniff.output.skim)
        return records
    try:
        size = len(records)
    except Exception:  # noqa: BLE001
        size = 0
    try:
        count = int(records.record_count)
    except Exception:  # noqa: BLE001
        count = 0
    try:
        batches = len(records.batches)
    except Exception:  # noqa: BLE001
        batches = 0
    return batches, count, size


def records_exact(records: Any) -> bool:
    """False while a legacy compressed wrapper in the set was counted as one record."""
    if type(records) is tuple:       # the summary lane's clean magic-2 set
        return True
    try:
        return bool(records.record_count_exact)
    except Exception:  # noqa: BLE001
        return True


def _records_phrase(batches: int, count: int, size: int, exact: bool = True) -> str:
    parts = []
    if batches:
        parts.append(f"{batches} batch{'es' if batches != 1 else ''}")
    parts.append(f"{'' if exact else '≥'}{count} record{'s' if count != 1 else ''}")
    parts.append(human_bytes(size))
    return " ".join(parts)


def _group(body: Body | None) -> str:
    g = (body or {}).get("GroupId")
    return f"group={g}" if g is not None else ""


def _member(value: Any) -> str:
    return "member=(new)" if value == "" else f"member={short(value)}"


def _join(*parts: str | None) -> str:
    return " ".join(p for p in parts if p)


# ----------------------------------------------------------------------------- Produce (0)

def _produce_req(b: Body, v: int, f: ExchangeFacts) -> str:
    batches = count = size = 0
    exact = True
    partitions: list[Body] = []
    pairs = _pairs(b, "TopicData", "PartitionData", f, partitions)
    for p in partitions:
        rec = p.get("Records")
        bb, cc, ss = records_stats(rec)
        batches += bb
        count += cc
        size += ss
        exact = exact and (rec is None or records_exact(rec))
    txn = b.get("TransactionalId")
    return _join(topic_partitions(pairs),
                 _records_phrase(batches, count, size, exact), f"acks={b.get('Acks')}",
                 f"txn={short(txn, 24)}" if txn else None)


def _produce_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    results = [p for t in _dicts(b, "Responses") for p in _dicts(t, "PartitionResponses")]
    codes = [p.get("ErrorCode") for p in results]
    codes = [c for c in codes if type(c) is int]
    parts = [error_summary(codes) or "no partitions"]
    if len(results) == 1 and results[0].get("ErrorCode") == 0 \
            and type(results[0].get("BaseOffset")) is int:
        parts.append(f"offset {results[0]['BaseOffset']}")
    throttle = b.get("ThrottleTimeMs")
    if type(throttle) is int and throttle > 0:
        parts.append(f"throttled {throttle} ms")
    return ", ".join(parts)


# ----------------------------------------------------------------------------- Fetch (1)

def _fetch_req(b: Body, v: int, f: ExchangeFacts) -> str:
    all_parts: list[Body] = []
    pairs = _pairs(b, "Topics", "Partitions", f, all_parts)
    parts = [topic_partitions(pairs) or "no partitions"]
    if len(all_parts) == 1:
        parts.append(f"offset {all_parts[0].get('FetchOffset')}")
    elif all_parts:
        parts.append(f"{len(all_parts)} partitions")
    sid, epoch = b.get("SessionId"), b.get("SessionEpoch")
    if type(sid) is int and sid > 0:
        parts.append(f"session {sid}/{epoch}")
    forgotten = _dicts(b, "ForgottenTopicsData")
    if forgotten:
        forgot = topic_partitions(_pairs(b, "ForgottenTopicsData", "Partitions", f))
        parts.append(f"forget {forgot}")
    wait = b.get("MaxWaitMs")
    if type(wait) is int:
        parts.append(f"wait {wait} ms")
    return " ".join(parts)


def _fetch_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    total = 0
    size = 0
    parts_n = 0
    nonempty = 0
    hw = None
    errors: list[int] = []
    for item in _list(b, "Responses"):
        if type(item) is not dict:
            continue
        t = item                # (dicts: typed where compiled)
        partitions = t.get("Partitions")
        if type(partitions) is not list:
            continue
        for item in partitions:
            if type(item) is not dict:
                continue
            p = item
            parts_n += 1
            _, cc, ss = records_stats(p.get("Records"))
            total += cc
            size += ss
            if cc:
                nonempty += 1
            hw = p.get("HighWatermark")
            c = p.get("ErrorCode")
            if c and type(c) is int:
                errors.append(c)
    out = f"{total} record{'s' if total != 1 else ''}"
    if size:
        out += f" {human_bytes(size)}"
    if parts_n == 1:
        if hw is not None:
            out += f", hw {hw}"
    elif parts_n > 1:
        out += f", from {nonempty}/{parts_n} partitions"
    if errors:
        out += ", " + error_summary(errors)
    return out


# ----------------------------------------------------------------------------- ListOffsets (2)

_SPECIAL_TS = {-1: "latest", -2: "earliest", -3: "max-timestamp", -4: "earliest-local",
               -5: "latest-tiered"}


def _list_offsets_req(b: Body, v: int, f: ExchangeFacts) -> str:
    pairs = _pairs(b, "Topics", "Partitions", f)
    stamps = {p.get("Timestamp") for t in _dicts(b, "Topics") for p in _dicts(t, "Partitions")}
    ts = ""
    if len(stamps) == 1:
        (stamp,) = stamps
        ts = _SPECIAL_TS.get(stamp, f"ts={stamp}") if type(stamp) is int else ""
    return _join(topic_partitions(pairs), ts)


def _list_offsets_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    parts = [p for t in _dicts(b, "Topics") for p in _dicts(t, "Partitions")]
    codes = [p.get("ErrorCode") for p in parts]
    if len(parts) == 1:
        p = parts[0]
        if p.get("ErrorCode"):
            return error_label(p["ErrorCode"])
        off = p.get("Offset")
        if off is None:
            olds = p.get("OldStyleOffsets") or []
            return f"offsets {name_list(olds)}" if olds else "no offsets"
        return f"offset {off}"
    if parts and len(parts) <= MAX_ITEMS and not any(codes) \
            and all(type(p.get("Offset")) is int for p in parts):
        return "offsets " + ", ".join(f"[{p.get('PartitionIndex')}] {p['Offset']}" for p in parts)
    return error_summary(codes) or "no partitions"


# ----------------------------------------------------------------------------- Metadata (3)

def _metadata_req(b: Body, v: int, f: ExchangeFacts) -> str:
    topics = b.get("Topics")
    if topics is None or (v == 0 and topics == []):
        what = "all topics"
    elif not topics:
        what = "no topics"
    else:
        names = [f.topic_label(t) if type(t) is dict else str(t) for t in topics]
        what = f"topics {name_list(names)}"
    if b.get("AllowAutoTopicCreation"):
        what += " (auto-create)"
    return what


def _metadata_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    brokers = _dicts(b, "Brokers")
    topics = _dicts(b, "Topics")
    partitions = sum(len(_dicts(t, "Partitions")) for t in topics)
    out = [f"{len(brokers)} broker{'s' if len(brokers) != 1 else ''}",
           f"{len(topics)} topic{'s' if len(topics) != 1 else ''}",
           f"{partitions} partition{'s' if partitions != 1 else ''}"]
    ctrl = b.get("ControllerId")
    if type(ctrl) is int and ctrl >= 0:
        out.append(f"controller {ctrl}")
    codes = [t.get("ErrorCode") for t in topics if t.get("ErrorCode")]
    codes += [p.get("ErrorCode") for t in topics for p in _dicts(t, "Partitions")
              if p.get("ErrorCode")]
    if codes:
        out.append("errors: " + error_summary(codes))
    return ", ".join(out)


# ----------------------------------------------------------------------------- groups

def _offset_commit_req(b: Body, v: int, f: ExchangeFacts) -> str:
    gen = b.get("GenerationIdOrMemberEpoch", b.get("GenerationId"))
    pairs = _pairs(b, "Topics", "Partitions", f)
    offs = [p.get("CommittedOffset") for t in _dicts(b, "Topics") for p in _dicts(t, "Partitions")]
    return _join(_group(b), f"gen {gen}" if type(gen) is int and gen >= 0 else None,
                 topic_partitions(pairs),
                 f"offset {offs[0]}" if len(offs) == 1 else None)


def _offset_commit_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return error_summary(_nested_errors(b, "Topics", "Partitions")) or _ok_or_error(b)


def _offset_fetch_req(b: Body, v: int, f: ExchangeFacts) -> str:
    groups = _dicts(b, "Groups")
    if groups:
        parts = []
        for g in groups[:MAX_ITEMS]:
            topics = g.get("Topics")
            tp = "all topics" if topics is None else topic_partitions(
                _pairs(g, "Topics", "PartitionIndexes", f))
            parts.append(_join(f"group={g.get('GroupId')}", tp))
        if len(groups) > MAX_ITEMS:
            parts.append(f"+{len(groups) - MAX_ITEMS} groups")
        return "; ".join(parts)
    topics = b.get("Topics")
    tp = "all topics" if topics is None else topic_partitions(
        _pairs(b, "Topics", "PartitionIndexes", f))
    return _join(_group(b), tp)


def _offset_fetch_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    groups = _dicts(b, "Groups")
    scopes = groups if groups else [b]
    offsets: list[Any] = []
    codes: list[int] = []
    top: list[str] = []
    for g in scopes:
        e = _top_error(g)
        if e:
            top.append(e)
        for t in _dicts(g, "Topics"):
            for p in _dicts(t, "Partitions"):
                offsets.append(p.get("CommittedOffset"))
                c = p.get("ErrorCode")
                if type(c) is int and c:
                    codes.append(c)
    if top:
        return ", ".join(top)
    out = [f"offset {offsets[0]}" if len(offsets) == 1 else f"{len(offsets)} offsets"]
    if codes:
        out.append(error_summary(codes))
    return ", ".join(out)


_COORD_TYPES = {0: "group", 1: "transaction", 2: "share"}


def _find_coordinator_req(b: Body, v: int, f: ExchangeFacts) -> str:
    kind = _COORD_TYPES.get(b.get("KeyType", 0), f"type {b.get('KeyType')}")
    keys = b.get("CoordinatorKeys")
    if type(keys) is list:
        return f"{kind} {name_list(keys)}"
    return f"{kind} {b.get('Key')}"


def _coordinator(d: Body) -> str:
    if d.get("ErrorCode"):
        return _top_error(d) or ""
    return f"node {d.get('NodeId')} {d.get('Host')}:{d.get('Port')}"


def _find_coordinator_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    coords = _dicts(b, "Coordinators")
    if coords:
        shown = [_coordinator(c) if len(coords) == 1 else f"{c.get('Key')}: {_coordinator(c)}"
                 for c in coords[:MAX_ITEMS]]
        if len(coords) > MAX_ITEMS:
            shown.append(f"+{len(coords) - MAX_ITEMS}")
        return "; ".join(shown)
    return _coordinator(b)


def _join_group_req(b: Body, v: int, f: ExchangeFacts) -> str:
    protos = [p.get("Name") for p in _dicts(b, "Protocols")]
    return _join(_group(b), _member(b.get("MemberId")),
                 f"{b.get('ProtocolType')} [{name_list(protos)}]" if protos else None)


def _join_group_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    member, leader = b.get("MemberId"), b.get("Leader")
    role = "leader" if member and member == leader else "follower"
    out = [role, f"generation {b.get('GenerationId')}"]
    if b.get("ProtocolName"):
        out.append(f"protocol {b.get('ProtocolName')}")
    members = _dicts(b, "Members")
    if members:
        out.append(f"{len(members)} member{'s' if len(members) != 1 else ''}")
    return ", ".join(out)


def _sync_group_req(b: Body, v: int, f: ExchangeFacts) -> str:
    assigns = _dicts(b, "Assignments")
    return _join(_group(b), f"gen {b.get('GenerationId')}", _member(b.get("MemberId")),
                 f"{len(assigns)} assignment{'s' if len(assigns) != 1 else ''}"
                 if assigns else None)


def _sync_group_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    assignment = b.get("Assignment")
    size = len(assignment) if isinstance(assignment, (bytes, bytearray, memoryview)) else 0
    pairs = _consumer_assignment(b) if size else None
    if pairs is not None:
        return f"assigned {topic_partitions(pairs)}" if pairs else "assigned nothing"
    return f"assignment {human_bytes(size)}"


def _consumer_assignment(body: Body) -> list[tuple[str, list[int]]] | None:
    """Topic partitions of the decoded consumer-protocol assignment next to the
    ``Assignment`` bytes (``_decoded_Assignment``), or None when there is none."""
    decoded = body.get("_decoded_Assignment")
    if type(decoded) is not dict or type(decoded.get("data")) is not dict:
        return None
    return [(str(t.get("Topic")), [p for p in (t.get("Partitions") or []) if type(p) is int])
            for t in _dicts(decoded["data"], "AssignedPartitions")]


def _heartbeat_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return _join(_group(b), f"gen {b.get('GenerationId')}", _member(b.get("MemberId")))


def _leave_group_req(b: Body, v: int, f: ExchangeFacts) -> str:
    members = _dicts(b, "Members")
    if members:
        ids = [short(m.get("MemberId") or m.get("GroupInstanceId")) for m in members]
        return _join(_group(b), f"members {name_list(ids)}")
    return _join(_group(b), _member(b.get("MemberId")))


def _leave_group_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    codes = [m.get("ErrorCode") for m in _dicts(b, "Members")]
    return error_summary(codes) if codes and any(codes) else "ok"


def _describe_groups_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return f"groups {name_list(_list(b, 'Groups'))}"


def _groups_digest(b: Body, epoch: bool) -> str:
    """``"<group> <state> [epoch E] N members; ..."`` of a describe-groups response."""
    out = []
    groups = _dicts(b, "Groups")
    for g in groups[:MAX_ITEMS]:
        if g.get("ErrorCode"):
            out.append(f"{g.get('GroupId')} {error_label(g['ErrorCode'])}")
        else:
            n = len(_dicts(g, "Members"))
            state = f"{g.get('GroupState')} epoch {g.get('GroupEpoch')}" if epoch \
                else f"{g.get('GroupState')}"
            out.append(f"{g.get('GroupId')} {state} {n} member{'s' if n != 1 else ''}")
    if len(groups) > MAX_ITEMS:
        out.append(f"+{len(groups) - MAX_ITEMS} groups")
    return "; ".join(out) or "no groups"


def _describe_groups_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _groups_digest(b, epoch=False)


def _cg_describe_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return f"groups {name_list(_list(b, 'GroupIds'))}"


def _cg_describe_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _groups_digest(b, epoch=True)


def _list_groups_req(b: Body, v: int, f: ExchangeFacts) -> str:
    states = _list(b, "StatesFilter")
    types = _list(b, "TypesFilter")
    return _join(f"states {name_list(states)}" if states else None,
                 f"types {name_list(types)}" if types else None) or "all groups"


def _list_groups_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    groups = [g.get("GroupId") for g in _dicts(b, "Groups")]
    n = len(groups)
    return f"{n} group{'s' if n != 1 else ''}" + (f": {name_list(groups)}" if groups else "")


# ----------------------------------------------------------------------------- SASL, versions

def _sasl_handshake_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return f"mechanism {b.get('Mechanism')}"


def _sasl_handshake_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    mechs = name_list(_list(b, "Mechanisms"), 6)
    top = _top_error(b)
    return _join(top or "ok", f"[{mechs}]" if mechs else None)


def _bytes_len(value: Any) -> int:
    return len(value) if isinstance(value, (bytes, bytearray, memoryview)) else 0


def _sasl_auth_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return _join(_sasl_message(b.get("_decoded_AuthBytes")),
                 f"{human_bytes(_bytes_len(b.get('AuthBytes')))} token")


def _sasl_auth_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    decoded = b.get("_decoded_AuthBytes")
    sasl = _sasl_message(decoded, mechanism=False)
    top = _top_error(b)
    if top:
        return _join(top, sasl)
    # error code 0, but the broker may still refuse inside its token (SCRAM e=...)
    data = decoded.get("data") if isinstance(decoded, dict) else None
    refused = isinstance(data, dict) and token_error(data) is not None
    life = b.get("SessionLifetimeMs")
    return _join("refused" if refused else "ok", sasl, f"session {life} ms" if type(life) is int and life > 0 else None,
                 f"{human_bytes(_bytes_len(b.get('AuthBytes')))} token"
                 if _bytes_len(b.get("AuthBytes")) else None)


def _api_versions_req(b: Body, v: int, f: ExchangeFacts) -> str:
    name = b.get("ClientSoftwareName")
    if name:
        return f"client {name} {b.get('ClientSoftwareVersion') or ''}".rstrip()
    return ""


def _api_versions_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    keys = _dicts(b, "ApiKeys")
    n = f"{len(keys)} API{'s' if len(keys) != 1 else ''}"
    top = _top_error(b)
    if top:
        return f"{top}, {n}"
    return n


# ----------------------------------------------------------------------------- admin

def _create_topics_req(b: Body, v: int, f: ExchangeFacts) -> str:
    out = []
    topics = _dicts(b, "Topics")
    for t in topics[:MAX_TOPICS]:
        n = t.get("NumPartitions")
        out.append(f"{t.get('Name')} ({n} partition{'' if n == 1 else 's'}, "
                   f"rf {t.get('ReplicationFactor')})")
    if len(topics) > MAX_TOPICS:
        out.append(f"+{len(topics) - MAX_TOPICS} topics")
    if b.get("validateOnly") or b.get("ValidateOnly"):
        out.append("validate only")
    return ", ".join(out)


def _item_name(t: Body) -> Any:
    return t.get("Name") or t.get("TopicName") or t.get("ResourceName") or t.get("GroupId")


def _per_topic_errors(items: list[Body]) -> str:
    codes = [t.get("ErrorCode") for t in items]
    failed = [f"{_item_name(t)}: {error_label(t['ErrorCode'])}" for t in items
              if type(t.get("ErrorCode")) is int and t.get("ErrorCode")]
    if not failed:
        return error_summary(codes) or "ok"
    ok = sum(1 for c in codes if c == 0)
    return ", ".join(([f"{ok} ok"] if ok else []) + failed[:MAX_ITEMS]
                     + ([f"+{len(failed) - MAX_ITEMS} errors"] if len(failed) > MAX_ITEMS else []))


def _create_topics_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _per_topic_errors(_dicts(b, "Topics"))


def _delete_topics_req(b: Body, v: int, f: ExchangeFacts) -> str:
    names = _list(b, "TopicNames")
    if not names:
        names = [f.topic_label(t) for t in _dicts(b, "Topics")]
    return f"topics {name_list(names)}"


def _delete_topics_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _per_topic_errors(_dicts(b, "Responses"))


def _delete_records_req(b: Body, v: int, f: ExchangeFacts) -> str:
    offs = [p.get("Offset") for t in _dicts(b, "Topics") for p in _dicts(t, "Partitions")]
    return _join(topic_partitions(_pairs(b, "Topics", "Partitions", f)),
                 f"before {offs[0]}" if len(offs) == 1 else None)


def _delete_records_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    parts = [p for t in _dicts(b, "Topics") for p in _dicts(t, "Partitions")]
    if len(parts) == 1 and not parts[0].get("ErrorCode"):
        return f"low watermark {parts[0].get('LowWatermark')}"
    return error_summary(p.get("ErrorCode") for p in parts) or "no partitions"


_CONFIG_RESOURCES = {2: "topic", 4: "broker", 8: "broker-logger", 16: "client-metrics",
                     32: "group"}


def _resources(items: list[Body]) -> str:
    shown = []
    for r in items[:MAX_ITEMS]:
        kind = _CONFIG_RESOURCES.get(r.get("ResourceType"), f"type {r.get('ResourceType')}")
        name = r.get("ResourceName")
        n = len(_list(r, "Configs"))
        shown.append(_join(kind, str(name) if name else "(default)",
                           f"{n} config{'s' if n != 1 else ''}" if n else None))
    if len(items) > MAX_ITEMS:
        shown.append(f"+{len(items) - MAX_ITEMS}")
    return ", ".join(shown)


def _describe_configs_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return _resources(_dicts(b, "Resources"))


def _describe_configs_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    results = _dicts(b, "Results")
    errors = [r for r in results if r.get("ErrorCode")]
    if errors:
        return _per_topic_errors(results)
    n = sum(len(_list(r, "Configs")) for r in results)
    return f"{n} config{'s' if n != 1 else ''}"


def _alter_configs_req(b: Body, v: int, f: ExchangeFacts) -> str:
    out = _resources(_dicts(b, "Resources"))
    return out + (" validate only" if b.get("ValidateOnly") else "")


def _alter_configs_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _per_topic_errors(_dicts(b, "Responses"))


def _create_partitions_req(b: Body, v: int, f: ExchangeFacts) -> str:
    topics = _dicts(b, "Topics")
    return ", ".join(f"{t.get('Name')} to {t.get('Count')}" for t in topics[:MAX_TOPICS]) + (
        f", +{len(topics) - MAX_TOPICS} topics" if len(topics) > MAX_TOPICS else "")


def _create_partitions_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _per_topic_errors(_dicts(b, "Results"))


def _delete_groups_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return f"groups {name_list(_list(b, 'GroupsNames'))}"


def _delete_groups_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _per_topic_errors(_dicts(b, "Results"))


def _describe_cluster_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    n = len(_dicts(b, "Brokers"))
    return f"cluster {b.get('ClusterId')}, {n} broker{'s' if n != 1 else ''}, " \
           f"controller {b.get('ControllerId')}"


# ----------------------------------------------------------------------------- transactions

def _txn(b: Body) -> str:
    t = b.get("TransactionalId", b.get("V3AndBelowTransactionalId"))
    return f"txn={short(t, 24)}" if t is not None else ""


def _pid(b: Body) -> str:
    pid = b.get("ProducerId", b.get("V3AndBelowProducerId"))
    epoch = b.get("ProducerEpoch", b.get("V3AndBelowProducerEpoch"))
    return f"pid {pid}/{epoch}" if type(pid) is int and pid >= 0 else ""


def _init_producer_id_req(b: Body, v: int, f: ExchangeFacts) -> str:
    t = b.get("TransactionalId")
    return _join(_txn(b) if t is not None else "idempotent",
                 f"timeout {b.get('TransactionTimeoutMs')} ms" if t is not None else None, _pid(b))


def _init_producer_id_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _top_error(b) or f"producer id {b.get('ProducerId')} epoch {b.get('ProducerEpoch')}"


def _add_partitions_req(b: Body, v: int, f: ExchangeFacts) -> str:
    txns = _dicts(b, "Transactions")
    if txns:
        out = [_join(_txn(t), topic_partitions(_pairs(t, "Topics", "Partitions", f)))
               for t in txns[:MAX_ITEMS]]
        if len(txns) > MAX_ITEMS:
            out.append(f"+{len(txns) - MAX_ITEMS} transactions")
        return "; ".join(out)
    return _join(_txn(b), _pid(b), topic_partitions(_pairs(b, "V3AndBelowTopics", "Partitions", f)))


def _add_partitions_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    codes = _nested_errors(b, "ResultsByTopicV3AndBelow", "ResultsByPartition",
                           "PartitionErrorCode")
    for t in _dicts(b, "ResultsByTransaction"):
        codes += _nested_errors(t, "TopicResults", "ResultsByPartition", "PartitionErrorCode")
    return error_summary(codes) or "ok"


def _add_offsets_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return _join(_txn(b), _pid(b), _group(b))


def _end_txn_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return _join(_txn(b), _pid(b), "commit" if b.get("Committed") else "abort")


def _txn_offset_commit_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return _join(_txn(b), _group(b), topic_partitions(_pairs(b, "Topics", "Partitions", f)))


def _txn_offset_commit_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return error_summary(_nested_errors(b, "Topics", "Partitions")) or "ok"


# ----------------------------------------------------------------------------- KIP-848

def _cg_heartbeat_req(b: Body, v: int, f: ExchangeFacts) -> str:
    subscribed = b.get("SubscribedTopicNames")
    regex = b.get("SubscribedTopicRegex")
    return _join(_group(b), _member(b.get("MemberId")), f"epoch {b.get('MemberEpoch')}",
                 f"subscribe [{name_list(subscribed)}]" if type(subscribed) is list else None,
                 f"subscribe /{regex}/" if regex else None,
                 f"owns {topic_partitions(_pairs(b, 'TopicPartitions', 'Partitions', f))}"
                 if _dicts(b, "TopicPartitions") else None)


def _cg_heartbeat_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    top = _top_error(b)
    if top:
        return top
    out = [f"epoch {b.get('MemberEpoch')}"]
    assignment = b.get("Assignment")
    if type(assignment) is dict:
        pairs = _pairs(assignment, "TopicPartitions", "Partitions", f)
        out.append(f"assigned {topic_partitions(pairs)}" if pairs else "assigned nothing")
    interval = b.get("HeartbeatIntervalMs")
    if type(interval) is int:
        out.append(f"next in {interval} ms")
    return ", ".join(out)


def _offset_for_leader_req(b: Body, v: int, f: ExchangeFacts) -> str:
    return topic_partitions(_pairs(b, "Topics", "Partitions", f))


def _offset_for_leader_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    parts = [p for t in _dicts(b, "Topics") for p in _dicts(t, "Partitions")]
    if len(parts) == 1 and not parts[0].get("ErrorCode"):
        p = parts[0]
        return f"end offset {p.get('EndOffset')} epoch {p.get('LeaderEpoch')}"
    return error_summary(p.get("ErrorCode") for p in parts) or "no partitions"


# ----------------------------------------------------------------------------- generic

def generic_request(b: Body, v: int, f: ExchangeFacts) -> str:
    """Topics with partitions, groups and transactional ids named by a request."""
    side = f.request_side
    parts = []
    if side.topics:
        parts.append(name_list(side.topics) if not side.partitions
                     else f"{name_list(side.topics)} [{ranges(side.partitions)}]")
    if side.groups:
        parts.append(f"group={name_list(side.groups)}")
    if side.txn_ids:
        parts.append(f"txn={name_list(side.txn_ids)}")
    if side.records:
        parts.append(f"{side.records} records")
    return " ".join(parts)


def generic_response(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    """The error summary of a response (all ErrorCode fields) or ``ok``."""
    top = _top_error(b)
    if top:
        return top
    codes = f.response_side.errors
    if codes:
        return "errors: " + ", ".join(error_label(c) for c in codes)
    side = f.response_side
    extra = f", {side.records} records" if side.records else ""
    return "ok" + extra


_REQUEST.update({
    0: _produce_req, 1: _fetch_req, 2: _list_offsets_req, 3: _metadata_req,
    8: _offset_commit_req, 9: _offset_fetch_req, 10: _find_coordinator_req,
    11: _join_group_req, 12: _heartbeat_req, 13: _leave_group_req, 14: _sync_group_req,
    15: _describe_groups_req, 16: _list_groups_req, 17: _sasl_handshake_req,
    18: _api_versions_req, 19: _create_topics_req, 20: _delete_topics_req,
    21: _delete_records_req, 22: _init_producer_id_req, 23: _offset_for_leader_req,
    24: _add_partitions_req, 25: _add_offsets_req, 26: _end_txn_req,
    28: _txn_offset_commit_req, 32: _describe_configs_req, 33: _alter_configs_req,
    36: _sasl_auth_req, 37: _create_partitions_req, 42: _delete_groups_req,
    44: _alter_configs_req, 68: _cg_heartbeat_req, 69: _cg_describe_req,
})
_RESPONSE.update({
    0: _produce_resp, 1: _fetch_resp, 2: _list_offsets_resp, 3: _metadata_resp,
    8: _offset_commit_resp, 9: _offset_fetch_resp, 10: _find_coordinator_resp,
    11: _join_group_resp, 13: _leave_group_resp, 14: _sync_group_resp,
    15: _describe_groups_resp, 16: _list_groups_resp, 17: _sasl_handshake_resp,
    18: _api_versions_resp, 19: _create_topics_resp, 20: _delete_topics_resp,
    21: _delete_records_resp, 22: _init_producer_id_resp, 23: _offset_for_leader_resp,
    24: _add_partitions_resp, 28: _txn_offset_commit_resp, 32: _describe_configs_resp,
    33: _alter_configs_resp, 36: _sasl_auth_resp, 37: _create_partitions_resp,
    42: _delete_groups_resp, 44: _alter_configs_resp, 60: _describe_cluster_resp,
    68: _cg_heartbeat_resp, 69: _cg_describe_resp,
})


# ----------------------------------------------------------------------------- Kafka 0.7

def _legacy_part(part: Body) -> str:
    tp = f"{part.get('Topic')}[{part.get('Partition')}]"
    msgs = part.get("Messages")
    if msgs is not None and not isinstance(msgs, (bytes, bytearray)):
        batches, count, size = records_stats(msgs)
        return f"{tp} {_records_phrase(0, count, size)}"
    if part.get("Offset") is not None:
        return f"{tp} offset {part.get('Offset')}"
    return tp


def _legacy_req(b: Body, v: int, f: ExchangeFacts) -> str:
    parts = _dicts(b, "Produces") or _dicts(b, "Fetches")
    if parts:
        shown = [_legacy_part(p) for p in parts[:MAX_ITEMS]]
        if len(parts) > MAX_ITEMS:
            shown.append(f"+{len(parts) - MAX_ITEMS}")
        return ", ".join(shown)
    if "Time" in b:
        ts = _SPECIAL_TS.get(b.get("Time"), f"time {b.get('Time')}")
        return f"{b.get('Topic')}[{b.get('Partition')}] {ts} max {b.get('MaxNumber')}"
    return _legacy_part(b)


def _legacy_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    code = b.get("ErrorCode")
    if type(code) is int and code:
        return error_label(code, LEGACY_PROTOCOL)
    if "Offsets" in b:
        return f"offsets {name_list(_list(b, 'Offsets'))}"
    parts = _dicts(b, "Responses")
    if parts:
        total = sum(records_stats(p.get("Messages"))[1] for p in parts)
        errs = [p.get("ErrorCode") for p in parts if p.get("ErrorCode")]
        out = f"{total} message{'s' if total != 1 else ''} from {len(parts)} partitions"
        if errs:
            out += ", " + ", ".join(error_label(c, LEGACY_PROTOCOL) for c in errs[:MAX_ITEMS])
        return out
    _, count, size = records_stats(b.get("Messages"))
    return f"{count} message{'s' if count != 1 else ''} {human_bytes(size)}"


# ----------------------------------------------------------------------------- raw SASL

def _sasl_message(decoded: Any, mechanism: bool = True) -> str | None:
    """What a decoded SASL token (``{"schema", "version", "data"}``) says: mechanism,
    message, user and the mechanism's own error (a broker may refuse inside a token
    while the Kafka error code says none), e.g. ``SCRAM-SHA-512 server-final SASL error
    unknown-user``. None when nothing was decoded."""
    data = decoded.get("data") if isinstance(decoded, dict) else None
    if not isinstance(data, dict):
        return None
    parts = [str(data["mechanism"]) if mechanism and data.get("mechanism") else None,
             str(data["message"]) if data.get("message") else None]
    user, error = token_user(data), token_error(data)
    if user:
        parts.append(f"user {short(user, 32)}")
    if error is not None:
        parts.append(_join("SASL error", short(error, 40) if error else None))
    return _join(*parts) or None


def _sasl_token(b: Body, v: int, f: ExchangeFacts) -> str:
    """A raw SASL token (protocol kafka-sasl, after a SaslHandshake v0)."""
    return _sasl_message(b) or "token"


def _sasl_token_resp(b: Body, v: int, f: ExchangeFacts, req: Body | None) -> str:
    return _sasl_message(b, mechanism=False) or "token"


# ----------------------------------------------------------------------------- entry points

def _undecoded(msg: KafkaMessage) -> str:
    reason = msg.problems[0] if msg.problems else "body not decoded"
    return f"[{short(reason, 60)}]"


def request_digest(msg: KafkaMessage, facts: ExchangeFacts) -> str:
    """The request half of a digest."""
    if msg.body is None:
        return _undecoded(msg)
    version = msg.api_version if msg.api_version is not None else -1
    if facts.exchange.protocol == LEGACY_PROTOCOL:
        fn: RequestDigest | None = _legacy_req
    elif facts.exchange.protocol == SASL_PROTOCOL:
        fn = _sasl_token
    else:
        fn = _REQUEST.get(msg.api_key) if msg.api_key is not None else None
    if fn is not None:
        try:
            return fn(msg.body, version, facts)
        except Exception:  # noqa: BLE001 - odd body: fall back to the generic digest
            pass
    try:
        return generic_request(msg.body, version, facts)
    except Exception:  # noqa: BLE001
        return ""


def response_digest(msg: KafkaMessage, facts: ExchangeFacts) -> str:
    """The response half of a digest."""
    if msg.body is None:
        return _undecoded(msg)
    version = msg.api_version if msg.api_version is not None else -1
    req = facts.exchange.request
    req_body = req.body if req is not None else None
    if facts.exchange.protocol == LEGACY_PROTOCOL:
        fn: ResponseDigest | None = _legacy_resp
    elif facts.exchange.protocol == SASL_PROTOCOL:
        fn = _sasl_token_resp
    else:
        fn = _RESPONSE.get(msg.api_key) if msg.api_key is not None else None
    if fn is not None:
        try:
            return fn(msg.body, version, facts, req_body)
        except Exception:  # noqa: BLE001
            pass
    try:
        return generic_response(msg.body, version, facts, req_body)
    except Exception:  # noqa: BLE001
        return ""


def digest(exchange: Exchange, facts: ExchangeFacts | None = None) -> str:
    """``"<request part> → <response part>"`` for an exchange (see module contract)."""
    text = _digest(exchange, facts)
    if extra_fields._extra:
        extra = extra_fields.digest_suffix(exchange)
        if extra:
            return f"{text} {extra}" if text else extra
    return text


def _digest(exchange: Exchange, facts: ExchangeFacts | None) -> str:
    if facts is None:
        facts = ExchangeFacts(exchange)
    req, resp = exchange.request, exchange.response
    left = request_digest(req, facts) if req is not None else "(request not captured)"
    return compose(exchange, left, response_digest(resp, facts) if resp is not None else None)


def compose(exchange: Exchange, left: str, right: str | None) -> str:
    """The digest of ``exchange`` from its request half and its response half (None
    when the exchange has no response), without plugin fields."""
    if right is not None:
        return f"{left} {ARROW} {right}" if left else f"{ARROW} {right}"
    if exchange.status == NO_RESPONSE_EXPECTED:
        return f"{left} (no response expected)".lstrip()
    if exchange.status == UNANSWERED:
        return f"{left} {ARROW} no response".lstrip()
    if exchange.status == ORPHAN_RESPONSE:
        return left
    return left


def describe_api(exchange: Exchange) -> str:
    """``"Produce v9"`` for an exchange (``"?"`` parts when unknown)."""
    name = api_label(exchange.api_key, exchange.protocol)
    version = exchange.api_version
    return f"{name} v{version}" if version is not None else name


__all__ = ["digest", "compose", "request_digest", "response_digest", "register_digest", "describe_api",
           "human_bytes", "ranges", "topic_partitions", "error_summary", "records_stats",
           "uuid_text"]
