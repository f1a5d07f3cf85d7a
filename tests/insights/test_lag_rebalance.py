"""Consumer lag and the rebalance timeline on pcaps/insights-groups against the
clients' own logs (commit results, cached high watermarks, assign/revoke callbacks)."""

from __future__ import annotations

from typing import Any

PCAP_RESOLUTION = 1e-6
# librdkafka calls the rebalance callback from poll(): the consumer threads poll every
# 50 ms (tools/pcapgen/scenarios/insights.py), so the callback comes at most one poll
# interval (plus scheduling) after the SyncGroup response.
CALLBACK_DELAY = 0.100


def _lag(insights: dict[str, Any], group: str, partition: int) -> dict[str, Any]:
    rows = [r for r in insights["lag"] if (r["group"], r["partition"]) == (group, partition)]
    assert len(rows) == 1
    return rows[0]


def _client_commits(doc: dict[str, Any], group: str, partition: int,
                    ok: bool = True) -> list[dict[str, Any]]:
    out = []
    for c in doc["insights"]["commits"]:
        if c["group"] != group or (c["error"] is None) != ok:
            continue
        for o in c["offsets"]:
            if o["partition"] == partition:
                out.append({"ts": c["ts"], "offset": o["offset"],
                            "cached_high_watermark": c["cached_high_watermark"]})
    return out


def test_committed_offsets_are_the_clients_commits(groups_capture):
    insights, doc = groups_capture
    for group in ("insights-fast", "insights-slow"):
        for partition in (0, 1):
            row = _lag(insights, group, partition)
            wire = [s["committed"] for s in row["timeline"] if s["event"] == "commit"]
            client = [c["offset"] for c in _client_commits(doc, group, partition)]
            assert wire == client
            assert row["commits"] == len(client)
            failed = _client_commits(doc, group, partition, ok=False)
            assert sum(row["commit_errors"].values()) == len(failed)
            if failed:
                assert set(row["commit_errors"]) == {"REBALANCE_IN_PROGRESS"}


def test_lag_at_each_commit_is_bounded_by_the_clients_view(groups_capture):
    """At a commit, the high watermark kwsniff uses is at least the one the committing
    consumer had cached from its own last Fetch (sent before the commit), and at most
    the number of messages the producer had been asked to write to the partition by
    the time the commit returned."""
    insights, doc = groups_capture
    produced = doc["insights"]["produced"]
    for group in ("insights-fast", "insights-slow"):
        for partition in (0, 1):
            row = _lag(insights, group, partition)
            commits = [s for s in row["timeline"] if s["event"] == "commit"]
            client = _client_commits(doc, group, partition)
            assert len(commits) == len(client)
            for wire, mine in zip(commits, client):
                assert wire["ts"] <= mine["ts"] + PCAP_RESOLUTION
                called = sum(1 for p in produced
                             if p["partition"] == partition and p["ts"] < mine["ts"])
                assert mine["cached_high_watermark"] <= wire["high_watermark"] <= called
                assert wire["lag"] == wire["high_watermark"] - mine["offset"]


def test_the_slow_group_lags_by_what_it_did_not_commit(groups_capture):
    insights, doc = groups_capture
    produced = doc["insights"]["produced"]
    for partition in (0, 1):
        row = _lag(insights, "insights-slow", partition)
        last = _client_commits(doc, "insights-slow", partition)[-1]["offset"]
        written = sum(1 for p in produced if p["partition"] == partition)
        assert row["high_watermark"] == written
        assert row["committed"] == last
        assert row["lag"] == written - last > 0
        assert _lag(insights, "insights-fast", partition)["lag"] == 0
    slow = [s["lag"] for s in _lag(insights, "insights-slow", 0)["timeline"]
            if s["event"] == "commit"]
    assert slow == sorted(slow) and slow[-1] > slow[0]     # it falls further behind


def _rounds(doc: dict[str, Any], group: str) -> list[dict[str, list[int]]]:
    """The client callbacks grouped into assignment rounds (a revoke after assignments
    ends a round): client id -> partitions."""
    rounds: list[dict[str, list[int]]] = []
    current: dict[str, list[int]] = {}
    for e in doc["insights"]["rebalances"]:
        if e["group"] != group:
            continue
        if e["event"] == "revoke":
            if current:
                rounds.append(current)
                current = {}
            continue
        current[e["client_id"]] = sorted(e["partitions"])
    if current:
        rounds.append(current)
    return rounds


def test_generations_and_assignments_are_the_clients_callbacks(groups_capture):
    insights, doc = groups_capture
    groups = {g["group"]: g for g in insights["rebalances"]}
    member_ids = {(e["client_id"], e["member_id"]) for e in doc["insights"]["rebalances"]
                  if e["event"] == "assign"}
    for group in ("insights-fast", "insights-slow"):
        gens = groups[group]["generations"]
        wire = [{m["client_id"]: m["assignment"]["clicks"] for m in g["members"]}
                for g in gens]
        assert wire == _rounds(doc, group)
        numbers = [g["generation"] for g in gens]
        assert numbers == sorted(set(numbers))
        for g in gens:
            assert g["protocol_type"] == "consumer" and g["protocol"] == "range"
            assert g["leader"] in {m["member_id"] for m in g["members"]}
            for m in g["members"]:
                assert (m["client_id"], m["member_id"]) in member_ids
                assert m["topics"] == ["clicks"]


def test_rebalance_triggers_and_times_match_the_clients(groups_capture):
    """fast-2 joining makes the second generation of insights-fast, fast-1 leaving the
    third. A round starts no later than the first revoke callback of a member that
    stays, and each member's SyncGroup response comes before its assign callback, by
    at most one poll interval."""
    insights, doc = groups_capture
    fast = {g["group"]: g for g in insights["rebalances"]}["insights-fast"]["generations"]
    assert [g["trigger"] for g in fast] == [["first seen"], ["joined: fast-2"],
                                           ["left: fast-1 (LeaveGroup)"]]
    events = [e for e in doc["insights"]["rebalances"] if e["group"] == "insights-fast"]
    for prev, gen in zip(fast, fast[1:]):
        stays = {m["client_id"] for m in gen["members"]} & \
            {m["client_id"] for m in prev["members"]}
        revokes = [e["ts"] for e in events if e["event"] == "revoke"
                   and e["client_id"] in stays and prev["end_ts"] < e["ts"] < gen["end_ts"]]
        assert revokes and gen["start_ts"] <= min(revokes)
        assert gen["duration_ms"] > 1000     # the mock holds JoinGroup for its rebalance
    for gen in fast:
        for m in gen["members"]:
            assigns = [e["ts"] for e in events if e["event"] == "assign"
                       and e["member_id"] == m["member_id"] and e["ts"] >= m["synced_ts"]]
            assert assigns and assigns[0] - m["synced_ts"] <= CALLBACK_DELAY
    leaves = [e for e in events if e["event"] == "revoke" and e["client_id"] == "fast-1"]
    assert leaves[-1]["ts"] <= fast[-1]["start_ts"]   # revoked on close, then LeaveGroup


def test_a_group_emptied_then_joined_again():
    """pcaps/rdkafka-consumer-group: cg-consumer-1 commits and leaves (the group is
    empty), then cg-consumer-2 joins and resumes. The second round starts at
    cg-consumer-2's JoinGroup (not at the LeaveGroup) and the committed offsets are the
    ones each member's commit returned."""
    from insights_run import insights_of, manifest
    insights, doc = insights_of("rdkafka-consumer-group"), manifest("rdkafka-consumer-group")
    (group,) = insights["rebalances"]
    first, second = group["generations"]
    assert [m["client_id"] for m in first["members"]] == ["cg-consumer-1"]
    assert [m["client_id"] for m in second["members"]] == ["cg-consumer-2"]
    assert second["trigger"] == ["joined: cg-consumer-2", "left: cg-consumer-1 (LeaveGroup)",
                                 "after the group was empty"]
    sent = {(r["client_id"], r["api_name"]): r["ts"] for r in doc["requests"]}
    join = sent[("cg-consumer-2", "JoinGroup")]
    # the "Sent" line is stamped (truncated to ms) just after the request left
    assert abs(second["start_ts"] - join) <= 0.001
    assert second["start_ts"] > sent[("cg-consumer-1", "LeaveGroup")]
    committed = {(c["partition"]): c["offset"] for c in doc["groups"][0]["committed"]}
    by_member = doc["groups"][0]["committed_by_member"]
    for row in insights["lag"]:
        if row["group"] != "kwsniff-orders":
            continue
        commits = [s["committed"] for s in row["timeline"] if s["event"] == "commit"]
        first_commit = {c["partition"]: c["offset"] for c in by_member["cg-consumer-1"]}
        assert commits == [first_commit[row["partition"]], committed[row["partition"]]]
        assert row["committed"] == committed[row["partition"]]
