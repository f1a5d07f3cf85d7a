"""Display-filter fields from the whole-run insights pass (e2e_latency_ms,
e2e_latency_min_ms, consumer_group) and the per-exchange generation field, on the
insights captures; the pass runs only for filters that name a run-state field."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from insights_run import PCAPS

from kwsniff.capture import open_capture
from kwsniff.cli import main
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.filter import compile_filter
from kwsniff.output.pipeline import Selection

GROUPS = str(PCAPS / "insights-groups.pcap")


def _select(expression: str, capture: str = GROUPS) -> list[tuple[Any, dict[str, Any]]]:
    """(exchange, run-state values) of the exchanges ``expression`` selects."""
    flt = compile_filter(expression)
    out = []
    with open_capture(capture) as source:
        for ex, _facts in Selection(flt)(Engine(EngineOptions()).run(source)):
            entry = flt.annotations.values.get(ex.index)
            out.append((ex, dict(entry[1]) if entry is not None else {}))
    return out


def _stats_insights(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["stats", "--insights", "--json", GROUPS]) == 0
    return json.loads(capsys.readouterr().out)["insights"]


def test_e2e_latency_selects_the_fetches_that_delivered_produced_batches(capsys):
    samples = _stats_insights(capsys)["end_to_end"]["samples"]
    assert len(samples) == 120      # 60 batches, first delivery to each of 2 groups
    per_fetch: dict[tuple[str, int], list[float]] = defaultdict(list)
    for s in samples:
        per_fetch[(s["consumer"], s["fetch_correlation_id"])].append(s["latency_ms"])
    shown = _select("e2e_latency_ms > 0")
    assert all(ex.api_key == 1 for ex, _ in shown)
    got = {(ex.client_id, ex.correlation_id): vals for ex, vals in shown}
    assert len(got) == len(shown) == len(per_fetch)
    assert set(got) == set(per_fetch)
    for key, lats in per_fetch.items():
        assert round(got[key]["e2e_latency_ms"], 3) == max(lats)
        assert round(got[key]["e2e_latency_min_ms"], 3) == min(lats)


def test_e2e_latency_threshold_and_cli_output(capsys):
    samples = _stats_insights(capsys)["end_to_end"]["samples"]
    slow = {(s["consumer"], s["fetch_correlation_id"]) for s in samples
            if s["latency_ms"] > 1000}
    assert slow     # the rebalance held messages for seconds
    assert main(["export", "-o", "-", "-Y", "e2e_latency_ms > 1000", GROUPS]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    exchanges = [r for r in rows if r.get("api_key") == 1]
    assert {(r["client_id"], r["correlation_id"]) for r in exchanges} == slow
    assert len(exchanges) == len(slow)
    # decode: one summary line per selected exchange, and -j falls back to one process
    assert main(["decode", "-j", "2", "-Y", "e2e_latency_ms > 1000", GROUPS]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(slow)


def test_stats_counts_the_fetches_the_filter_selects(capsys):
    assert main(["stats", "--json", "-Y", "e2e_latency_ms > 0", GROUPS]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["exchanges"] == 567
    samples = _stats_insights(capsys)["end_to_end"]["samples"]
    fetches = {(s["consumer"], s["fetch_correlation_id"]) for s in samples}
    assert [(row["api_name"], row["count"]) for row in report["apis"]] \
        == [("Fetch", len(fetches))]


def test_generation_matches_the_exchanges_of_that_generation(capsys):
    rebalances = {g["group"]: g for g in _stats_insights(capsys)["rebalances"]}
    fast = rebalances["insights-fast"]["generations"]
    assert [g["generation"] for g in fast] == [2, 3, 4]
    seen: set[int] = set()
    for gen in fast:
        n = gen["generation"]
        shown = _select(f'generation == {n} and group == "insights-fast"')
        assert shown
        seen.add(n)
        assert {ex.api_key for ex, _ in shown} <= {8, 11, 12, 14}
        # the JoinGroup responses giving generation n went to its members
        joins = {ex.client_id for ex, _ in shown if ex.api_key == 11}
        assert joins == {m["client_id"] for m in gen["members"]}
        for ex, _ in shown:
            body = (ex.response if ex.api_key == 11 else ex.request).body
            assert n in (body.get("GenerationId"), body.get("GenerationIdOrMemberEpoch"))
    gens = set()
    for ex, _ in _select('group == "insights-fast" and generation'):
        body = (ex.response if ex.api_key == 11 else ex.request).body
        gens.add(body.get("GenerationId", body.get("GenerationIdOrMemberEpoch")))
    assert gens == seen


def test_consumer_group_attributes_fetches_to_their_group():
    shown = _select('consumer_group == "insights-slow" and api == Fetch')
    assert shown
    assert {ex.client_id for ex, _ in shown} == {"slow-1"}
    # without Fetch restriction the group requests of the group are there too
    apis = {ex.api_key for ex, _ in _select('consumer_group == "insights-slow"')}
    assert 1 in apis and 11 in apis and 8 in apis
    # the body field does not see Fetches
    assert not _select('group == "insights-slow" and api == Fetch')


def test_filters_without_run_state_fields_do_not_run_the_pass(monkeypatch, capsys):
    import kwsniff.output.insights.annotate as annotate
    calls = []
    real = annotate.annotate_run

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[2])
        return real(*args, **kwargs)
    monkeypatch.setattr(annotate, "annotate_run", counting)
    assert compile_filter("generation == 3 and group contains fast").run_fields == frozenset()
    for expression in ("generation == 3", 'group == "insights-fast"', "api == Fetch"):
        assert main(["decode", "-Y", expression, GROUPS]) == 0
    capsys.readouterr()
    assert calls == []
    assert main(["decode", "-Y", "api == Fetch or e2e_latency_min_ms < 5", GROUPS]) == 0
    capsys.readouterr()
    assert calls == [frozenset({"e2e_latency_min_ms"})]


def test_list_fields_documents_them(capsys):
    assert main(["decode", "--list-fields"]) == 0
    out = capsys.readouterr().out
    for name in ("e2e_latency_ms", "e2e_latency_min_ms", "consumer_group", "generation"):
        assert name in out


def _annotated(exchanges: list[Any], hold: int) -> list[tuple[Any, Any]]:
    """(exchange, e2e_latency_ms) in the order annotate_run gives them."""
    from kwsniff.output.insights.annotate import annotate_run
    flt = compile_filter("e2e_latency_ms")
    out = []
    for ex in annotate_run(exchanges, flt.annotations, flt.run_fields, hold=hold):
        entry = flt.annotations.values[ex.index]
        assert entry[0] is ex
        out.append((ex, entry[1].get("e2e_latency_ms")))
    return out


def test_a_fetch_before_the_produce_it_returns_waits_for_it():
    """A long-poll Fetch whose request comes before the Produce it returns (moved there
    in the real stream, timestamps unchanged): held back until the Produce has been
    seen, order kept; without holding it would miss the latency."""
    with open_capture(GROUPS) as source:
        exchanges = list(Engine(EngineOptions()).run(source))
    first = dict((ex.index, v) for ex, v in _annotated(exchanges, 10_000))
    tried = missed = 0
    for pos, ex in enumerate(exchanges):
        if ex.api_key != 1 or first[ex.index] is None or tried == 12:
            continue
        before = max(i for i in range(pos) if exchanges[i].api_key == 0)
        moved = exchanges[:before] + [ex] + exchanges[before:pos] + exchanges[pos + 1:]
        held = _annotated(moved, 10_000)
        assert [e for e, _ in held] == moved          # same order
        assert dict((e.index, v) for e, v in held) == first
        tried += 1
        missed += dict((e.index, v) for e, v in _annotated(moved, 0))[ex.index] \
            != first[ex.index]
    assert tried == 12 and missed > 0


def test_tui_filter_bar_refuses_run_state_fields_with_a_position():
    from kwsniff.output.filter import FilterError
    from kwsniff.tui.rowfacts import make_matcher
    with pytest.raises(FilterError) as err:
        make_matcher("api == Fetch and e2e_latency_ms > 10")
    assert err.value.position == len("api == Fetch and ")
    assert "insights" in str(err.value.render())
    _flt, _match, fast = make_matcher("generation == 3")
    assert fast is False
