"""Mid-stream captures and capture loss: decoding resumes, nothing is invented.

Each case builds a client session with known truth (kafka-python encoders), cuts the
capture at random packets (start and end) and drops random data segments, then checks:

* every exchange refers to a real request (correlation id, API key and version match);
  a paired exchange has the response of that very request;
* every request/response whose packets all survived is found, with the right status;
* orphan responses decoded by inference carry the real API when exactly one fits;
* indexes are 1..n and exchanges come in capture order.
"""

from __future__ import annotations

import random

import pytest
from convsim import Sim, merge
from kscenario import heartbeat, metadata, play, session

from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, PAIRED


def _case(seed: int, pipeline: bool) -> list[str]:
    rnd = random.Random(seed)
    steps = session(30, seed=seed, big_fetch=rnd.choice([20, 3000, 20000]))
    s = Sim(mss=rnd.choice([100, 536, 1448]))
    spans = []
    if pipeline:
        play(s, steps, pipeline=True)
    else:
        for st in steps:
            s.wait(st.gap_before)
            a = s.c(st.request)
            b = s.s(st.response) if st.response is not None else []
            spans.append((st, a + b))
    s.fin()
    n = len(s.pkts)
    lo = rnd.randrange(0, n // 2)
    hi = rnd.randrange(lo + 1, n + 1) if rnd.random() < 0.5 else n
    data = [i for i, p in enumerate(s.pkts) if p[2] in "cs" and lo <= i < hi]
    dropped = set(rnd.sample(data, min(len(data), rnd.randrange(0, 6))))
    drop = [(0, i) for i in range(n) if i < lo or i >= hi or i in dropped]
    eng = Engine(EngineOptions())
    out = list(eng.run(merge(s, drop=drop)))

    errors: list[str] = []
    truth = {st.corr: st for st in steps}
    found: dict[int, list] = {}
    for ex in out:
        st = truth.get(ex.correlation_id)
        if st is None:
            errors.append(f"#{ex.index}: invented correlation id {ex.correlation_id}")
            continue
        found.setdefault(st.corr, []).append(ex)
        if ex.request is not None and (ex.api_key, ex.api_version) != (st.api_key, st.version):
            errors.append(f"#{ex.index}: request API {ex.api_key}v{ex.api_version} != truth")
        if ex.status == PAIRED and ex.response.correlation_id != ex.request.correlation_id:
            errors.append(f"#{ex.index}: mispaired")
        if ex.status == ORPHAN_RESPONSE and ex.response.inferred and \
                ex.response.inferred.split(": ")[1].startswith("1 of") and \
                "other APIs" not in ex.response.inferred and ex.api_key != st.api_key:
            errors.append(f"#{ex.index}: inferred {ex.api_key}, truth {st.api_key}")
    for st, idxs in spans:
        if hi == n and all(lo <= i and i not in dropped for i in idxs):
            want = PAIRED if st.response is not None else NO_RESPONSE_EXPECTED
            if not any(e.status == want for e in found.get(st.corr, [])):
                errors.append(f"corr {st.corr}: complete in the capture but not {want}")
    if [e.index for e in out] != list(range(1, len(out) + 1)):
        errors.append("indexes not 1..n")
    firsts = [(e.request or e.response).frame_first for e in out]
    if firsts != sorted(firsts):
        errors.append("not in capture order")
    return errors


@pytest.mark.parametrize("seed", range(24))
def test_random_cuts_and_drops(seed: int) -> None:
    assert _case(seed, pipeline=seed % 3 == 0) == []


@pytest.mark.slow
def test_random_cuts_and_drops_many() -> None:
    bad = {seed: errs for seed in range(100, 500) if (errs := _case(seed, seed % 3 == 0))}
    assert bad == {}


def test_midstream_start_decodes_orphans_from_connection_traffic() -> None:
    # The capture starts inside a big Fetch response; then a Metadata response whose
    # request was before the capture; then the client keeps using Metadata v1.
    s = Sim(handshake=False, mss=1448)
    from kscenario import fetch
    big = fetch(40, size=30000)
    s.s(big.response[5000:])                  # tail of a response: skipped
    s.s(metadata(41).response)                # orphan: inferred from later Metadata requests
    for corr in range(42, 46):
        st = metadata(corr)
        s.c(st.request)
        s.s(st.response)
    eng = Engine()
    out = list(eng.run(merge(s)))
    assert [e.status for e in out] == [ORPHAN_RESPONSE] + [PAIRED] * 4
    orphan = out[0].response
    assert orphan.api_key == 3 and orphan.api_version == 1 and orphan.body is not None
    assert orphan.inferred.startswith("connection: 1 of")
    assert "resynchronised" in " ".join(orphan.problems)
    assert eng.summary.skipped_bytes == len(big.response) - 5000
    conn = eng.connection_summaries()[0]
    assert conn.client_side_by in ("port", "content")
    assert conn.client == ("10.0.0.1", 40001)


def test_request_cut_before_its_header_counts_its_captured_bytes_as_skipped() -> None:
    # A hole right after a request's size prefix and first byte: the framer keeps sync
    # and discards the rest of the frame, the conversation drops it (too few bytes for a
    # header).  Every captured byte of it -- also those after the hole -- is skipped.
    s = Sim()
    first, cut, after = metadata(1), metadata(2), metadata(3)
    s.c(first.request)
    s.s(first.response)
    req = cut.request
    s.c(req[:5])
    lost = s.c(req[5:6])
    s.c(req[6:])
    s.s(cut.response)
    s.c(after.request)
    s.s(after.response)
    s.fin()
    eng = Engine()
    out = list(eng.run(merge(s, drop=[(0, i) for i in lost])))
    assert [e.status for e in out] == [PAIRED, ORPHAN_RESPONSE, PAIRED]
    conn = eng.connection_summaries()[0]
    assert any("too few for its header" in p for p in conn.problems)
    assert (conn.gaps, conn.gap_bytes) == (1, 1)
    assert conn.skipped_bytes == len(req) - 1
    framed = sum(len(m.raw) + 4 for e in out for m in (e.request, e.response) if m)
    sent = sum(len(st.request) + len(st.response) for st in (first, cut, after))
    assert framed + conn.skipped_bytes + conn.gap_bytes == sent


def test_lost_request_response_is_inferred_or_explained() -> None:
    s = Sim()
    for corr in range(1, 4):
        st = metadata(corr)
        s.c(st.request)
        s.s(st.response)
    lost = metadata(4)
    idx = s.c(lost.request)
    s.s(lost.response)
    hb = heartbeat(5)
    s.c(hb.request)
    s.s(hb.response)
    s.fin()
    eng = Engine()
    out = list(eng.run(merge(s, drop=[(0, i) for i in idx])))
    orphan = next(e for e in out if e.status == ORPHAN_RESPONSE)
    assert orphan.correlation_id == 4 and orphan.api_key == 3
    assert orphan.response.inferred.startswith("connection:")
    assert sum(e.status == PAIRED for e in out) == 4
