"""A member killed without LeaveGroup (pcaps/insights-session-timeout): the rebalance
after its session timeout, against the clients' logs (the kill time, the callbacks)."""

from __future__ import annotations


def test_the_killed_member_is_inferred_gone_by_session_timeout(timeout_capture):
    insights, doc = timeout_capture
    (group,) = insights["rebalances"]
    gens = group["generations"]
    killed = doc["insights"]["killed"][0]
    assert [g["trigger"][0].split(" (")[0] for g in gens] == \
        ["first seen", "joined: victim", "gone: victim"]
    last = gens[-1]
    (gone,) = last["gone_without_leaving"]
    assert gone["client_id"] == "victim"
    victim_ids = {e["member_id"] for e in doc["insights"]["rebalances"]
                  if e["client_id"] == "victim"}
    assert gone["member_id"] in victim_ids
    # its last heartbeat is before the kill; the group noticed only after the session
    # timeout had run out, counted from that heartbeat
    assert gone["last_heartbeat_ts"] <= killed["ts"] < last["start_ts"]
    assert gone["silent_ms"] >= killed["session_timeout_ms"]
    assert {m["client_id"]: m["assignment"]["beats"] for m in last["members"]} == \
        {"survivor": [0, 1]}
    survivor_assigns = [e for e in doc["insights"]["rebalances"]
                        if e["client_id"] == "survivor" and e["event"] == "assign"]
    assert survivor_assigns[-1]["partitions"] == [0, 1]
    assert last["members"][0]["synced_ts"] <= survivor_assigns[-1]["ts"]
    assert not any(t.startswith("left: ") for g in gens for t in g["trigger"])
