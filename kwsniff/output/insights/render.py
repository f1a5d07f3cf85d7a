"""The text form of :meth:`kwsniff.output.insights.InsightsCollector.report` (the
``stats --insights`` sections). Times are seconds relative to ``t0`` (the first
exchange of the run), as ``decode`` shows them by default."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kwsniff.output.color import PLAIN, Palette
from kwsniff.output.stats import _ms, _table

LAG_TIMELINE_ROWS = 12


def _rel(ts: float | None, t0: float | None) -> str:
    if ts is None:
        return "-"
    return f"{ts - (t0 or 0.0):.3f}"


def _num(v: Any) -> str:
    return "-" if v is None else str(v)


def _assignment(a: dict[str, list[int]] | None) -> str:
    if not a:
        return "-"
    return " ".join(f"{t}[{','.join(str(p) for p in parts)}]" for t, parts in a.items())


def render_insights(report: dict[str, Any], *, t0: float | None = None,
                    palette: Palette = PLAIN, timeline_rows: int = LAG_TIMELINE_ROWS
                    ) -> Iterator[str]:
    h, dim = palette.heading, palette.dim
    e2e = report["end_to_end"]
    yield ""
    yield h("End-to-end latency (ms), Produce request sent → Fetch response received")
    if e2e["by_partition"]:
        rows = [[r["group"], r["topic"], str(r["partition"]), str(r["batches"]),
                 str(r["records"]), _ms(r["min_ms"]), _ms(r["p50_ms"]), _ms(r["p90_ms"]),
                 _ms(r["p99_ms"]), _ms(r["max_ms"])] for r in e2e["by_partition"]]
        yield from _table(["Group", "Topic", "Partition", "Batches", "Records", "min", "p50",
                           "p90", "p99", "max"], rows, {2, 3, 4, 5, 6, 7, 8, 9})
        if len(e2e["by_topic"]) < len(e2e["by_partition"]):
            yield ""
            rows = [[r["group"], r["topic"], str(r["batches"]), _ms(r["p50_ms"]),
                     _ms(r["p90_ms"]), _ms(r["p99_ms"]), _ms(r["max_ms"])]
                    for r in e2e["by_topic"]]
            yield from _table(["Group", "Topic", "Batches", "p50", "p90", "p99", "max"],
                              rows, {2, 3, 4, 5, 6})
    else:
        yield "no produced batch seen fetched"
    yield (f"Produced in the capture: {e2e['produced_records']} records in "
           f"{e2e['produced_batches']} batches; never fetched: "
           f"{e2e['never_fetched_records']} records"
           + ("" if not e2e["never_fetched"] else " (" + ", ".join(
               f"{n['topic']}[{n['partition']}] {n['records']}"
               for n in e2e["never_fetched"]) + ")"))
    if e2e["not_delivered_to_group"]:
        yield "Not delivered to a group that fetched the partition: " + ", ".join(
            f"{g} {n}" for g, n in sorted(e2e["not_delivered_to_group"].items()))
    if e2e["redeliveries"]:
        yield "Batches fetched again by the same group: " + ", ".join(
            f"{g} {n}" for g, n in e2e["redeliveries"].items())
    if e2e["fetched_not_produced_in_capture_records"]:
        yield (f"Fetched records produced before the capture (or by an unanswered "
               f"Produce): {e2e['fetched_not_produced_in_capture_records']}")
    dropped = e2e["dropped"]
    if dropped["produced_batches"] or dropped["waiting_deliveries"]:
        yield dim(f"(bounded memory: {dropped['produced_batches']} produced batches and "
                  f"{dropped['waiting_deliveries']} early deliveries were forgotten)")
    yield dim("(groups come from the connection's or client's group requests, else "
              "'client <id>'; a batch counts once per group, at its first delivery)")

    yield ""
    yield h("Consumer lag (high watermark − committed offset)")
    lag = report["lag"]
    if lag:
        rows = [[r["group"], r["topic"], str(r["partition"]), _num(r["high_watermark"]),
                 _num(r["committed"]), _num(r["position"]), _num(r["lag"]),
                 _num(r["position_lag"]), _num(r["max_lag"]), str(r["commits"]),
                 ", ".join(f"{k} {v}" for k, v in r["commit_errors"].items()) or "-"]
                for r in lag]
        yield from _table(["Group", "Topic", "Partition", "High wm", "Committed", "Position",
                           "Lag", "Pos lag", "Max lag", "Commits", "Commit errors"], rows,
                          {2, 3, 4, 5, 6, 7, 8, 9})
        for r in lag:
            commits = [s for s in r["timeline"] if s["event"] == "commit"]
            if len(commits) < 2:
                continue
            step = max(1, -(-len(commits) // timeline_rows))
            shown = commits[::step]
            if shown[-1] is not commits[-1]:
                shown.append(commits[-1])
            yield dim(f"  {r['group']} {r['topic']}[{r['partition']}] lag at commits: "
                      + " ".join(f"{_rel(s['ts'], t0)}s:{_num(s['lag'])}" for s in shown))
    else:
        yield "no consumer offsets seen"

    yield ""
    yield h("Rebalances (consumer group generations)")
    groups = report["rebalances"]
    if not groups:
        yield "no group membership seen"
    for g in groups:
        yield f"Group {g['group']}"
        rows = []
        for gen in g["generations"]:
            members = "; ".join(
                f"{m['client_id'] or '?'} {_assignment(m['assignment'])}"
                for m in gen["members"])
            rows.append([str(gen["generation"]), _rel(gen["start_ts"], t0),
                         _ms(gen["duration_ms"]),
                         f"{gen['protocol_type'] or '?'}/{gen['protocol'] or '?'}",
                         gen["leader_client_id"] or gen["leader"] or "-", members,
                         ", ".join(gen["trigger"]) or "-"])
        if rows:
            yield from _table(["Gen", "Start s", "Took ms", "Protocol", "Leader",
                               "Members and assignments", "Trigger"], rows, {0, 1, 2})
        if g["errors"]:
            yield "  errors: " + ", ".join(f"{k} {v}" for k, v in g["errors"].items())
        if g["since_last_generation"]:
            yield "  since the last generation: " + ", ".join(g["since_last_generation"])

    yield ""
    yield h("Producer health (idempotent and transactional producers)")
    producers = report["producers"]
    if producers:
        rows = [[str(p["producer_id"]), ",".join(str(e) for e in p["epochs"]) or "-",
                 p["client_id"] or "-", p["transactional_id"] or "-", str(p["batches"]),
                 str(p["records"]), str(p["retries"]), str(p["out_of_order"]),
                 str(p["unanswered_requests"]), str(len(p["written_twice"])),
                 ", ".join(f"{k} {v}" for k, v in p["errors"].items()) or "-"]
                for p in producers]
        yield from _table(["Producer id", "Epochs", "Client id", "Transactional id",
                           "Batches", "Records", "Retries", "Out of order", "Unanswered",
                           "Written twice", "Errors"], rows, {0, 4, 5, 6, 7, 8, 9})
        for p in producers:
            for w in p["written_twice"]:
                yield (f"  {p['client_id'] or p['producer_id']}: {w['topic']}[{w['partition']}]"
                       f" sequence {w['base_sequence']} (epoch {w['epoch']}) written at "
                       f"offsets {', '.join(str(o) for o in w['offsets'])}")
    else:
        yield "no idempotent producer seen"
