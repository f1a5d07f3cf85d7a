"""Plain-Python reference figures over JSON Lines exports (no Spark, no kwsniff code).

Each function recomputes one analysis straight from the exported lines, following the
meaning documented for the tables (docs/spark.md), so the Spark jobs are checked
against an independent implementation.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Lines:
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)


def load_lines(paths: list[str]) -> Lines:
    out = Lines()
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                obj = json.loads(line)
                if obj["kind"] == "exchange":
                    out.exchanges.append(obj)
                elif obj["kind"] == "record":
                    out.records.append(obj)
    return out


def first_not_none(*values: Any) -> Any:
    for v in values:
        if v is not None:
            return v
    return None


def topic_name(struct: dict[str, Any], name_key: str) -> Any:
    return first_not_none(struct.get(name_key), struct.get("_topic_name"), struct.get("TopicId"))


def error_name(ex: dict[str, Any], code: int | None) -> str | None:
    if not code:
        return None
    names = dict(zip(ex["error_codes"], ex["error_names"]))
    return names.get(code, f"error {code}")


# ---------------------------------------------------------------------------- latency

def nearest_rank(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(1, math.ceil(p * len(s)))
    return s[k - 1]


def latency(lines: Lines, key: str) -> dict[tuple, dict[str, float]]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for ex in lines.exchanges:
        if ex["latency_ms"] is None:
            continue
        if key == "api":
            keys = [(ex["api_key"], ex["api_name"], ex["api_version"])]
        elif key == "topic":
            keys = [(t,) for t in ex["topics"]]
        else:
            keys = [(ex[key],)]
        for k in keys:
            groups[k].append(ex["latency_ms"])
    return {k: {"exchanges": len(v), "mean_ms": sum(v) / len(v),
                "p50_ms": nearest_rank(v, 0.5), "p90_ms": nearest_rank(v, 0.9),
                "p99_ms": nearest_rank(v, 0.99), "max_ms": max(v)}
            for k, v in groups.items()}


# ----------------------------------------------------------------------------- traffic

def partition_rows(lines: Lines) -> list[dict[str, Any]]:
    rows = []
    for ex in lines.exchanges:
        if ex["protocol"] != "kafka":
            continue
        base = {"capture": ex["capture"], "index": ex["index"], "client_id": ex["client_id"]}
        if ex["api_key"] == 0 and ex["request"] is not None:
            for td in ex["request"].get("TopicData") or []:
                topic = topic_name(td, "Name")
                for pd in td.get("PartitionData") or []:
                    rec = pd.get("Records") or {}
                    rows.append({**base, "direction": "produce", "t": ex["ts"], "topic": topic,
                                 "partition": pd["Index"], "records": rec.get("record_count", 0),
                                 "bytes": rec.get("size", 0), "error_code": None,
                                 "high_watermark": None, "fetch_offset": None})
        if ex["api_key"] == 1 and ex["response"] is not None:
            req = ex["request"] or {}
            state = req.get("ReplicaState") or {}
            replica = first_not_none(state.get("ReplicaId"), req.get("ReplicaId"))
            direction = "replica-fetch" if replica is not None and replica >= 0 else "fetch"
            wanted = {}
            for t in req.get("Topics") or []:
                for p in t.get("Partitions") or []:
                    wanted.setdefault((topic_name(t, "Topic"), p["Partition"]), p["FetchOffset"])
            t_ = first_not_none(ex["response_ts"], ex["ts"])
            for rt in ex["response"].get("Responses") or []:
                topic = topic_name(rt, "Topic")
                for rp in rt.get("Partitions") or []:
                    rec = rp.get("Records") or {}
                    rows.append({**base, "direction": direction, "t": t_, "topic": topic,
                                 "partition": rp["PartitionIndex"],
                                 "records": rec.get("record_count", 0),
                                 "bytes": rec.get("size", 0), "error_code": rp.get("ErrorCode"),
                                 "high_watermark": rp.get("HighWatermark"),
                                 "fetch_offset": wanted.get((topic, rp["PartitionIndex"]))})
    return rows


def throughput(lines: Lines, bucket: float) -> dict[tuple, tuple[int, int, int]]:
    out: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in partition_rows(lines):
        b = math.floor(r["t"] / bucket) * bucket
        acc = out[(float(b), r["direction"], r["topic"], r["partition"])]
        acc[0] += 1
        acc[1] += r["records"]
        acc[2] += r["bytes"]
    return {k: tuple(v) for k, v in out.items()}


def requests_over_time(lines: Lines, bucket: float) -> dict[tuple, tuple[int, int, int, int]]:
    out: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for ex in lines.exchanges:
        b = float(math.floor(ex["ts"] / bucket) * bucket)
        acc = out[(b, ex["api_name"])]
        acc[0] += 1
        acc[1] += ex["request_bytes"] or 0
        acc[2] += ex["response_bytes"] or 0
        acc[3] += 1 if ex["error_codes"] else 0
    return {k: tuple(v) for k, v in out.items()}


# ------------------------------------------------------------------------------ errors

TOPIC_ARRAYS = {"Topics", "TopicData", "Responses", "Results", "TopicResults",
                "ResultsByTopicV3AndBelow", "V3AndBelowTopics"}


def error_sites(body: Any) -> list[tuple[int, str | None]]:
    """(code, topic) of every non-zero *ErrorCode, iteratively (stack of contexts)."""
    found = []
    stack = [(body, None, None)]
    while stack:
        node, array_name, topic = stack.pop()
        if not isinstance(node, dict):
            continue
        for key in ("Topic", "TopicName", "_topic_name"):
            if isinstance(node.get(key), str):
                topic = node[key]
                break
        else:
            if array_name in TOPIC_ARRAYS and isinstance(node.get("Name"), str):
                topic = node["Name"]
            elif isinstance(node.get("TopicId"), str):
                topic = node["TopicId"]
        for key, value in node.items():
            if key.endswith("ErrorCode") and isinstance(value, int) \
                    and not isinstance(value, bool) and value:
                found.append((value, topic))
            elif isinstance(value, dict):
                stack.append((value, key, topic))
            elif isinstance(value, list):
                stack.extend((item, key, topic) for item in value)
    return found


def errors(lines: Lines) -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for ex in lines.exchanges:
        if not ex["error_codes"]:
            continue
        sites = error_sites(ex["response"]) or [(c, None) for c in ex["error_codes"]]
        for code, topic in sites:
            key = (code, error_name(ex, code), ex["api_name"], topic, ex["client_id"])
            acc = out.setdefault(key, {"exchanges": set(), "occurrences": 0,
                                       "first_ts": ex["ts"], "last_ts": ex["ts"]})
            acc["exchanges"].add((ex["capture"], ex["index"]))
            acc["occurrences"] += 1
            acc["first_ts"] = min(acc["first_ts"], ex["ts"])
            acc["last_ts"] = max(acc["last_ts"], ex["ts"])
    return out


# ------------------------------------------------------------------------------ groups

def _nonempty(v: Any) -> Any:
    return v if v != "" else None


def joins(lines: Lines) -> list[dict[str, Any]]:
    out = []
    for ex in lines.exchanges:
        if ex["protocol"] != "kafka" or ex["api_key"] != 11 or ex["request"] is None:
            continue
        req, resp = ex["request"], ex["response"] or {}
        ok = resp.get("ErrorCode") == 0
        out.append({"group_id": req.get("GroupId"), "ts": ex["ts"],
                    "member_id": first_not_none(_nonempty(resp.get("MemberId")),
                                                _nonempty(req.get("MemberId"))),
                    "generation": resp.get("GenerationId") if ok else None,
                    "error_name": error_name(ex, resp.get("ErrorCode"))})
    return out


def syncs(lines: Lines) -> list[dict[str, Any]]:
    out = []
    for ex in lines.exchanges:
        if ex["protocol"] != "kafka" or ex["api_key"] != 14 or ex["request"] is None:
            continue
        req, resp = ex["request"], ex["response"] or {}
        out.append({"group_id": req.get("GroupId"), "generation": req.get("GenerationId"),
                    "member_id": _nonempty(req.get("MemberId")), "done_ts": ex["response_ts"],
                    "ok": resp.get("ErrorCode") == 0 and ex["response_ts"] is not None})
    return out


def generations(lines: Lines) -> dict[tuple, dict[str, Any]]:
    gens: dict[tuple, dict[str, Any]] = {}
    for j in joins(lines):
        if j["generation"] is None:
            continue
        g = gens.setdefault((j["group_id"], j["generation"]),
                            {"members": set(), "join_start": j["ts"], "sync_end": None})
        g["members"].add(j["member_id"])
        g["join_start"] = min(g["join_start"], j["ts"])
    for s in syncs(lines):
        g = gens.get((s["group_id"], s["generation"]))
        if g is not None and s["ok"]:
            g["sync_end"] = s["done_ts"] if g["sync_end"] is None else max(g["sync_end"],
                                                                           s["done_ts"])
    return gens


def commits(lines: Lines) -> list[dict[str, Any]]:
    out = []
    for ex in lines.exchanges:
        if ex["protocol"] != "kafka" or ex["api_key"] not in (8, 28) or ex["request"] is None:
            continue
        codes = {}
        for t in (ex["response"] or {}).get("Topics") or []:
            for p in t.get("Partitions") or []:
                codes[(topic_name(t, "Name"), p["PartitionIndex"])] = p.get("ErrorCode")
        for t in ex["request"].get("Topics") or []:
            topic = topic_name(t, "Name")
            for p in t.get("Partitions") or []:
                out.append({"ts": ex["ts"], "group_id": ex["request"].get("GroupId"),
                            "topic": topic, "partition": p["PartitionIndex"],
                            "committed_offset": p["CommittedOffset"], "status": ex["status"],
                            "api_name": ex["api_name"],
                            "error_name": error_name(ex, codes.get((topic, p["PartitionIndex"])))})
    return out


def consumer_lag(lines: Lines) -> list[tuple]:
    marks: dict[tuple, list[tuple[float, int]]] = defaultdict(list)
    for r in partition_rows(lines):
        if r["direction"] in ("fetch", "replica-fetch") and r["high_watermark"] is not None \
                and r["high_watermark"] >= 0 and not r["error_code"]:
            marks[(r["topic"], r["partition"])].append((r["t"], r["high_watermark"]))
    out = []
    for c in commits(lines):
        if c["status"] != "paired" or c["error_name"] or c["committed_offset"] < 0:
            continue
        seen = [m for m in marks[(c["topic"], c["partition"])] if m[0] <= c["ts"]]
        if not seen:
            continue
        hw = max(seen, key=lambda m: m[0])[1]   # ties do not occur in the sample captures
        out.append((c["group_id"], c["topic"], c["partition"], c["ts"], c["committed_offset"],
                    hw, hw - c["committed_offset"]))
    return out


# --------------------------------------------------------------------------- producers

def end_txns(lines: Lines) -> list[dict[str, Any]]:
    out = []
    for ex in sorted(lines.exchanges, key=lambda e: e["ts"]):
        if ex["protocol"] == "kafka" and ex["api_key"] == 26 and ex["request"] is not None:
            ok = ex["status"] == "paired" and (ex["response"] or {}).get("ErrorCode") == 0
            out.append({"transactional_id": ex["request"]["TransactionalId"],
                        "producer_id": ex["request"]["ProducerId"], "ok": ok,
                        "outcome": "committed" if ex["request"]["Committed"] else "aborted"})
    return out


def init_producer_ids(lines: Lines) -> dict[int, str | None]:
    """producer id -> transactional id handed out by InitProducerId."""
    out = {}
    for ex in lines.exchanges:
        if ex["protocol"] == "kafka" and ex["api_key"] == 22 and ex["response"] \
                and ex["response"].get("ErrorCode") == 0:
            out[ex["response"]["ProducerId"]] = (ex["request"] or {}).get("TransactionalId")
    return out


def produced_by_producer(lines: Lines) -> dict[int, tuple[int, int]]:
    """producer id -> (records, Produce requests) from the record lines."""
    records: dict[int, int] = defaultdict(int)
    requests: dict[int, set] = defaultdict(set)
    for r in lines.records:
        if r["side"] == "request" and r["producer_id"] is not None and r["producer_id"] >= 0:
            records[r["producer_id"]] += 1
            requests[r["producer_id"]].add((r["capture"], r["exchange"]))
    return {pid: (records[pid], len(requests[pid])) for pid in records}


# ------------------------------------------------------------------------------ matrix

def matrix(lines: Lines) -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for ex in lines.exchanges:
        host = ex["client"].rsplit(":", 1)[0]
        for topic in ex["topics"] or [None]:
            acc = out.setdefault((ex["client_id"], host, ex["broker"], topic),
                                 {"exchanges": 0, "request_bytes": 0, "response_bytes": 0,
                                  "connections": set()})
            acc["exchanges"] += 1
            acc["request_bytes"] += ex["request_bytes"] or 0
            acc["response_bytes"] += ex["response_bytes"] or 0
            acc["connections"].add((ex["capture"], ex["stream"]))
    return out
