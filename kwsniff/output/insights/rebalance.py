"""Rebalance timeline per consumer group (the classic JoinGroup/SyncGroup protocol).

Contract:

* A *round* starts with the first JoinGroup (or LeaveGroup) request for the group after
  its previous generation became stable (when every member left, the group is empty and
  the round starts with the next JoinGroup), and ends with the first successful SyncGroup
  response of the generation it forms; its duration is the time from that first
  request to the last member's successful SyncGroup response (all capture times).
* A *generation* holds: its number, protocol type (JoinGroup request) and protocol
  (JoinGroup response), leader, members (member id, client id, subscribed topics from
  the leader's JoinGroup response, assignment from SyncGroup decoded with the embedded
  consumer protocol: the member's own SyncGroup response, else the leader's request).
* Its *trigger* lists what happened since the previous generation: JoinGroup reasons
  (v8+), members that joined (a member id not in the previous generation), members that
  left with LeaveGroup, and members that disappeared without one (``session timeout
  inferred``, with their last heartbeat and how long they had been silent when the
  round started). The first generation of a group
  seen in the capture has no previous one to compare with (``first seen``).
* Memory: per group the last ``keep`` generations; at most ``limit`` groups; member
  ids remembered per group are bounded by the members of the kept generations.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kwsniff.output.insights.bodies import integer, items, text

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79


def _decoded(struct: dict[str, Any], field: str) -> dict[str, Any]:
    dec = struct.get(f"_decoded_{field}")
    if isinstance(dec, dict) and isinstance(dec.get("data"), dict):
        return dec["data"]
    return {}


def _assignment(data: dict[str, Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in items(data, "AssignedPartitions"):
        topic = text(tp, "Topic")
        parts = tp.get("Partitions")
        if topic is not None and isinstance(parts, list):
            out[topic] = sorted(p for p in parts if isinstance(p, int))
    return out


class Generation:
    __slots__ = ("number", "start_ts", "end_ts", "protocol_type", "protocol", "leader",
                 "members", "trigger", "first_sync_ts", "gone")

    def __init__(self, number: int) -> None:
        self.number = number
        self.start_ts: float | None = None
        self.end_ts: float | None = None
        self.first_sync_ts: float | None = None
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        # member id -> {"client_id", "topics", "assignment", "joined_ts", "synced_ts"}
        self.members: dict[str, dict[str, Any]] = {}
        self.trigger: list[str] = []
        # members of the previous generation gone without LeaveGroup:
        # {"member_id", "client_id", "last_heartbeat_ts", "silent_ms"}
        self.gone: list[dict[str, Any]] = []

    def member(self, member_id: str) -> dict[str, Any]:
        m = self.members.get(member_id)
        if m is None:
            m = self.members[member_id] = {"client_id": None, "topics": None,
                                           "assignment": None, "joined_ts": None,
                                           "synced_ts": None}
        return m


class GroupTimeline:
    __slots__ = ("group", "keep", "generations", "stable", "round_start", "round_events",
                 "clients", "heartbeats", "dropped", "errors", "left")

    def __init__(self, group: str, keep: int) -> None:
        self.group = group
        self.keep = keep
        self.generations: OrderedDict[int, Generation] = OrderedDict()
        self.stable: Generation | None = None        # the last generation that synced
        self.round_start: float | None = None
        self.round_events: list[str] = []
        self.left: set[str] = set()                    # member ids that left this round
        self.clients: dict[str, str | None] = {}      # member id -> client id
        # member id -> last heartbeat ts (oldest first: an OrderedDict drops it in O(1))
        self.heartbeats: OrderedDict[str, float] = OrderedDict()
        self.dropped = 0
        self.errors: dict[str, int] = {}

    def _start(self, ts: float) -> None:
        if self.round_start is None or ts < self.round_start:
            self.round_start = ts

    def generation(self, number: int) -> Generation:
        g = self.generations.get(number)
        if g is None:
            g = self.generations[number] = Generation(number)
            while len(self.generations) > self.keep:
                self.generations.popitem(last=False)
                self.dropped += 1
        return g

    def _error(self, api: str, code: int) -> None:
        from kwsniff.output.names import error_label
        name = f"{api} {error_label(code)}"
        self.errors[name] = self.errors.get(name, 0) + 1

    # -- feeding ---------------------------------------------------------------------
    def join(self, ex: Any) -> None:
        req, resp = ex.request, ex.response
        body = req.body if req is not None and isinstance(req.body, dict) else {}
        member = text(body, "MemberId") or ""
        if req is not None:
            self._start(req.ts_first)
            reason = text(body, "Reason")
            if reason:
                self.round_events.append(f"reason: {reason}")
            if not member:
                self.round_events.append(f"join: {ex.client_id}")
        if resp is None or not isinstance(resp.body, dict):
            return
        rb = resp.body
        code = integer(rb, "ErrorCode") or 0
        assigned = text(rb, "MemberId")
        if assigned:
            self.clients[assigned] = ex.client_id
        if code:
            if code != MEMBER_ID_REQUIRED:
                self._error("JoinGroup", code)
            return
        number = integer(rb, "GenerationId")
        if number is None or number < 0:
            return
        g = self.generation(number)
        if g.start_ts is None:
            g.start_ts = self.round_start if self.round_start is not None else req.ts_first \
                if req is not None else resp.ts_first
        g.protocol = text(rb, "ProtocolName") or g.protocol
        g.protocol_type = text(body, "ProtocolType") or text(rb, "ProtocolType") \
            or g.protocol_type
        g.leader = text(rb, "Leader") or g.leader
        if assigned:
            m = g.member(assigned)
            m["client_id"] = ex.client_id
            m["joined_ts"] = resp.ts_last
        for entry in items(rb, "Members"):
            mid = text(entry, "MemberId")
            if not mid:
                continue
            m = g.member(mid)
            topics = _decoded(entry, "Metadata").get("Topics")
            if isinstance(topics, list):
                m["topics"] = [t for t in topics if isinstance(t, str)]
            if m["client_id"] is None:
                m["client_id"] = self.clients.get(mid)

    def sync(self, ex: Any) -> None:
        req, resp = ex.request, ex.response
        if req is None or resp is None or not isinstance(req.body, dict) \
                or not isinstance(resp.body, dict):
            return
        body, rb = req.body, resp.body
        number = integer(body, "GenerationId")
        member = text(body, "MemberId")
        code = integer(rb, "ErrorCode") or 0
        if code:
            self._error("SyncGroup", code)
            return
        if number is None or number < 0 or member is None:
            return
        g = self.generation(number)
        for entry in items(body, "Assignments"):          # the leader's plan
            mid = text(entry, "MemberId")
            if mid:
                m = g.member(mid)
                if m["assignment"] is None:
                    m["assignment"] = _assignment(_decoded(entry, "Assignment"))
        m = g.member(member)
        if m["client_id"] is None:
            m["client_id"] = ex.client_id
        own = _decoded(rb, "Assignment")
        if own or m["assignment"] is None:
            m["assignment"] = _assignment(own)
        m["synced_ts"] = resp.ts_last
        if g.end_ts is None or resp.ts_last > g.end_ts:
            g.end_ts = resp.ts_last
        if g.first_sync_ts is None:
            g.first_sync_ts = resp.ts_last
            self._complete(g)

    def _complete(self, g: Generation) -> None:
        """The round that formed ``g`` is over: work out what triggered it."""
        prev = self.stable
        events = list(dict.fromkeys(self.round_events))
        trigger = [e for e in events if e.startswith("reason: ")]
        if prev is None or prev.number >= g.number:
            trigger.append("first seen")
        else:
            left = [e for e in events if e.startswith("leave: ")]
            joined = [f"joined: {g.members[mid]['client_id'] or mid}"
                      for mid in g.members if mid not in prev.members]
            if not joined:
                joined = [e.replace("join: ", "joined: ") for e in events
                          if e.startswith("join: ")]
            trigger += joined
            trigger += [e.replace("leave: ", "left: ") + " (LeaveGroup)" for e in left]
            if "empty: every member left" in events:
                trigger.append("after the group was empty")
            left_clients = {e[len("leave: "):] for e in left}
            for mid, m in prev.members.items():
                if mid in g.members:
                    continue
                who = m["client_id"] or mid
                if who in left_clients or mid in left_clients:
                    continue
                hb = self.heartbeats.get(mid)
                silent = (g.start_ts - hb) * 1000.0 \
                    if hb is not None and g.start_ts is not None else None
                g.gone.append({"member_id": mid, "client_id": m["client_id"],
                               "last_heartbeat_ts": hb,
                               "silent_ms": None if silent is None else round(silent, 3)})
                trigger.append(f"gone: {who} (no LeaveGroup: session timeout inferred"
                               + (f", silent {silent / 1000:.3f} s before the rebalance"
                                  if silent is not None else "") + ")")
            if not trigger:
                trigger.append("rejoin of the same members")
        g.trigger = trigger
        self.stable = g
        self.round_start = None
        self.round_events = []
        self.left = set()

    def leave(self, ex: Any) -> None:
        req = ex.request
        if req is None or not isinstance(req.body, dict):
            return
        body = req.body
        self._start(req.ts_first)
        members = [text(body, "MemberId")] + [text(m, "MemberId")
                                               for m in items(body, "Members")]
        for mid in members:
            if mid:
                who = self.clients.get(mid) or ex.client_id or mid
                self.round_events.append(f"leave: {who}")
                self.left.add(mid)
        stable = self.stable
        if stable is not None and stable.members and set(stable.members) <= self.left:
            # the group is empty: the next round starts with the next JoinGroup
            self.round_start = None
            self.round_events.append("empty: every member left")
        for m in items(body, "Members"):
            reason = text(m, "Reason")
            if reason:
                self.round_events.append(f"reason: {reason}")

    def heartbeat(self, ex: Any) -> None:
        req, resp = ex.request, ex.response
        if req is None or not isinstance(req.body, dict):
            return
        mid = text(req.body, "MemberId")
        if mid:
            self.heartbeats[mid] = req.ts_first
            if len(self.heartbeats) > 4 * self.keep + 1024:
                self.heartbeats.popitem(last=False)
        if resp is not None and isinstance(resp.body, dict):
            code = integer(resp.body, "ErrorCode") or 0
            if code and code != REBALANCE_IN_PROGRESS:
                self._error("Heartbeat", code)

    # -- report ----------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        gens = []
        for g in self.generations.values():
            duration = (g.end_ts - g.start_ts) * 1000.0 \
                if g.end_ts is not None and g.start_ts is not None else None
            gens.append({
                "generation": g.number, "start_ts": g.start_ts, "end_ts": g.end_ts,
                "duration_ms": None if duration is None else round(duration, 3),
                "protocol_type": g.protocol_type, "protocol": g.protocol,
                "leader": g.leader,
                "leader_client_id": g.members.get(g.leader, {}).get("client_id")
                if g.leader else None,
                "members": [{"member_id": mid, **m} for mid, m in g.members.items()],
                "trigger": g.trigger, "gone_without_leaving": g.gone,
            })
        return {"group": self.group, "generations": gens,
                "generations_dropped": self.dropped,
                "errors": dict(sorted(self.errors.items())),
                "rebalance_in_progress": self.round_start is not None,
                "since_last_generation": list(dict.fromkeys(self.round_events))}


class Rebalances:
    def __init__(self, limit: int = 10_000, keep: int = 256) -> None:
        self.limit = limit
        self.keep = keep
        self.groups: dict[str, GroupTimeline] = {}
        self.dropped_groups = 0

    def timeline(self, group: str) -> GroupTimeline | None:
        t = self.groups.get(group)
        if t is None:
            if len(self.groups) >= self.limit:
                self.dropped_groups += 1
                return None
            t = self.groups[group] = GroupTimeline(group, self.keep)
        return t

    def feed(self, ex: Any, group: str) -> None:
        t = self.timeline(group)
        if t is None:
            return
        key = ex.api_key
        if key == JOIN_GROUP:
            t.join(ex)
        elif key == SYNC_GROUP:
            t.sync(ex)
        elif key == LEAVE_GROUP:
            t.leave(ex)
        elif key == HEARTBEAT:
            t.heartbeat(ex)

    def generation_of(self, group: str) -> int | None:
        t = self.groups.get(group)
        return t.stable.number if t is not None and t.stable is not None else None

    def report(self) -> list[dict[str, Any]]:
        return [t.report() for _, t in sorted(self.groups.items())]
