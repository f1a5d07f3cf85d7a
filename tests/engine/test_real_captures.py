"""The engine on the real captures of ``pcaps/`` (real clients against real brokers).

For every capture with a manifest (``pcaps/<name>.json``, written by
``tools/make_pcaps.py`` from the clients' own debug logs):

* every request the clients logged as sent while the capture ran is found, with its API
  key, version and correlation id (and client port when the manifest has it);
* every request/response pair tshark's Kafka dissector pairs is paired here too, and the
  latency equals the difference of the two frames' timestamps exactly;
* nothing is invented: every exchange's request is one the manifest lists;
* cutting a capture at random packets, dropping random segments and cutting random
  packets short (snap length) never invents an exchange, and every exchange whose
  packets all survived intact is still found.
"""

from __future__ import annotations

import collections
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import ORPHAN_RESPONSE, PAIRED

PCAPS = Path(__file__).resolve().parent.parent.parent / "pcaps"
CAPTURES = sorted(p for p in PCAPS.glob("*.pcap") if p.with_suffix(".json").exists())
pytestmark = pytest.mark.skipif(not CAPTURES, reason="no captures in pcaps/ yet")


def manifest(path: Path) -> dict:
    return json.loads(path.with_suffix(".json").read_text())


def decode(path: Path, packets=None):  # type: ignore[no-untyped-def]
    ports = tuple(manifest(path)["capture"]["ports"])
    eng = Engine(EngineOptions(ports=ports))
    if packets is None:
        with open_capture(str(path)) as src:
            out = list(eng.run(src))
    else:
        out = list(eng.run(packets))
    return eng, out


def ident(ex) -> tuple:  # type: ignore[no-untyped-def]
    return (ex.client_id, ex.correlation_id, ex.api_key, ex.api_version)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_every_logged_request_is_found(path: Path) -> None:
    man = manifest(path)
    eng, out = decode(path)
    found = collections.Counter(ident(e) for e in out if e.request is not None
                                and e.protocol != "kafka-sasl")
    # SASL tokens sent bare after a v0 SaslHandshake: no Kafka requests, so not in the
    # clients' request logs; each client sends two (SCRAM client-first and -final)
    bare = [a for a in man.get("authentications", ()) if "bare" in a["handshake"]]
    raw_sasl = [e for e in out if e.protocol == "kafka-sasl"]
    assert len(raw_sasl) == 2 * len(bare)
    assert all(e.status == PAIRED and e.request.body["data"]["message"].startswith("client-")
               for e in raw_sasl)
    sent = [r for r in man["requests"] if r.get("in_capture")]
    want = collections.Counter((r["client_id"], r["correlation_id"], r["api_key"], r["api_version"])
                               for r in sent)
    assert want - found == collections.Counter()
    by_port = {(e.client[1], e.correlation_id): e for e in out if e.request is not None}
    for r in sent:
        if r.get("local_port"):
            ex = by_port[(r["local_port"], r["correlation_id"])]
            assert (ex.api_key, ex.api_version) == (r["api_key"], r["api_version"])
    # nothing invented: every request found was logged by a client (in or before capture)
    logged = collections.Counter((r["client_id"], r["correlation_id"], r["api_key"], r["api_version"])
                                 for r in man["requests"])
    assert found - logged == collections.Counter()
    assert [e.index for e in out] == list(range(1, len(out) + 1))
    assert eng.summary.kafka_connections >= 1
    if man["capture"]["starts_mid_stream"]:
        assert all("resynchronised" in p for p in eng.summary.problems)
    else:
        assert eng.summary.problems == []
        # every response is paired; a request is unanswered only when its connection
        # ended first (consumers closing during a long-poll Fetch, say)
        assert not [e for e in out if e.status == ORPHAN_RESPONSE]
        for e in out:
            if e.status == "unanswered":
                assert e.problems == ["connection closed before a response"] or \
                    e.problems == ["capture ended before a response"]


def tshark_pairs(path: Path) -> tuple[dict, dict]:
    args = ["tshark", "-r", str(path)]
    for port in manifest(path)["capture"]["ports"]:
        args += ["-d", f"tcp.port=={port},kafka"]
    args += ["-Y", "kafka", "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch",
             "-e", "tcp.stream", "-e", "kafka.correlation_id", "-e", "kafka.request_frame"]
    rows = subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()
    ts: dict[int, float] = {}
    pairs: dict[tuple[int, int, int], int] = {}
    for line in rows:
        f = line.split("\t")
        frame = int(f[0])
        ts[frame] = float(f[1])
        if f[4]:
            for req_frame in f[4].split(","):
                pairs[(int(f[2]), int(f[3].split(",")[0]), int(req_frame))] = frame
    return ts, pairs


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_pairs_and_latencies_match_tshark(path: Path) -> None:
    ts, pairs = tshark_pairs(path)
    eng, out = decode(path)
    mine = {(e.stream, e.correlation_id, e.request.frame_last): e
            for e in out if e.status == PAIRED and e.protocol == "kafka"}
    assert pairs, "tshark paired nothing"
    for (stream, corr, req_frame), resp_frame in pairs.items():
        ex = mine.get((stream, corr, req_frame))
        assert ex is not None, f"tshark pairs request frame {req_frame} with {resp_frame}"
        assert ex.response.frame_last == resp_frame
        assert ex.latency_ms == pytest.approx((ts[resp_frame] - ts[req_frame]) * 1000, abs=1e-3)


def test_midstream_capture_resumes() -> None:
    path = PCAPS / "midstream.pcap"
    if not path.exists():
        pytest.skip("no mid-stream capture")
    man = manifest(path)
    assert man["capture"]["starts_mid_stream"]
    eng, out = decode(path)
    sent = {(r["client_id"], r["correlation_id"], r["api_key"], r["api_version"])
            for r in man["requests"] if r["in_capture"]}
    paired = {ident(e) for e in out if e.status == PAIRED}
    # everything sent during the capture is paired, except what was still waiting when
    # the capture stopped
    waiting = {ident(e) for e in out if e.status == "unanswered"}
    assert sent - paired <= waiting and len(waiting) <= 1
    assert eng.summary.skipped_bytes > 0            # it started inside a request
    flight = man["capture"]["in_flight_at_start"]
    orphans = [e for e in out if e.status == ORPHAN_RESPONSE]
    assert orphans and all(e.response.inferred for e in orphans)
    # the in-flight Produce's response is recognised as a Produce response
    assert any(e.correlation_id == flight["correlation_id"] and e.api_key == 0 and
               e.response.api_version == flight["api_version"] for e in orphans)
    # each orphan's inferred API is the one its client logged for that correlation id
    logged = {(r["client_id"], r["correlation_id"]): r["api_key"] for r in man["requests"]}
    for e in orphans:
        clients = {c for c in eng.connections[e.stream].client_ids}
        assert any(logged.get((c, e.correlation_id)) == e.api_key for c in clients)


def _packets(path: Path) -> list[tuple]:
    with open_capture(str(path)) as src:
        return [(f, ts, lt, bytes(d), n) for f, ts, lt, d, n in src]


def _cut_case(path: Path, seed: int) -> list[str]:
    rnd = random.Random(seed)
    pkts = _packets(path)
    eng, full = decode(path, pkts)
    truth = {(e.client[1], e.correlation_id): e for e in full if e.request is not None}
    n = len(pkts)
    lo = rnd.randrange(0, n // 2)
    hi = n if rnd.random() < 0.5 else rnd.randrange(lo + 1, n + 1)
    keep = [p for i, p in enumerate(pkts[lo:hi], lo) if rnd.random() > 0.03]
    # a few packets cut short, as by a small snap length
    snapped = {p[0] for p in keep if len(p[3]) > 80 and rnd.random() < 0.02}
    kept_frames = {p[0] for p in keep} - snapped
    cut = [(i, p[1], p[2], p[3][:rnd.randrange(54, len(p[3]))] if p[0] in snapped else p[3], p[4])
           for i, p in enumerate(keep, 1)]
    _, out = decode(path, cut)
    errors = []
    for ex in out:
        t = truth.get((ex.client[1], ex.correlation_id))
        if t is None:
            if ex.status == ORPHAN_RESPONSE:   # its request was cut away or lost
                t_resp = [e for e in full if e.response is not None and e.correlation_id == ex.correlation_id
                          and e.client[1] == ex.client[1]]
                if not t_resp:
                    errors.append(f"invented orphan {ex.correlation_id} on port {ex.client[1]}")
                continue
            errors.append(f"invented exchange {ex.correlation_id} on port {ex.client[1]}")
            continue
        if ex.request is not None and (ex.api_key, ex.api_version) != (t.api_key, t.api_version):
            errors.append(f"request {ex.correlation_id}: {ex.api_key}v{ex.api_version} != truth")
        if ex.status == ORPHAN_RESPONSE and ex.response.inferred and \
                " 1 of " in ex.response.inferred and "other APIs" not in ex.response.inferred \
                and ex.api_key != t.api_key:
            errors.append(f"orphan {ex.correlation_id} inferred as {ex.api_key}, truth {t.api_key}")
    found = {(e.client[1], e.correlation_id, e.status) for e in out}
    orig = {i: p[0] for i, p in enumerate(keep, 1)}        # frame numbers of the cut
    sasl_found = {(e.client[1], orig[e.request.frame_first], orig[e.response.frame_first])
                  for e in out if e.protocol == "kafka-sasl" and e.status == PAIRED}
    for t in full:
        if t.status != PAIRED:
            continue
        if t.protocol == "kafka-sasl":
            # bare SASL tokens (after a v0 SaslHandshake) have no correlation id: the
            # pair is found by the frames of its two tokens
            if all(f in kept_frames for f in (t.request.frame_first, t.response.frame_first)) \
                    and hi == n and (t.client[1], t.request.frame_first, t.response.frame_first) \
                    not in sasl_found:
                errors.append(f"lost SASL pair at frame {t.request.frame_first} on port "
                              f"{t.client[1]}")
            continue
        frames = range(t.request.frame_first, t.response.frame_last + 1)
        own = [p[0] for p in pkts if p[0] in frames]
        if all(f in kept_frames for f in own) and hi == n:
            if (t.client[1], t.correlation_id, PAIRED) not in found:
                errors.append(f"lost pair {t.correlation_id} on port {t.client[1]}")
    return errors


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_random_cuts_of_real_captures(path: Path) -> None:
    for seed in range(3):
        assert _cut_case(path, seed) == []


@pytest.mark.slow
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_random_cuts_of_real_captures_many(path: Path) -> None:
    bad = {seed: e for seed in range(3, 60) if (e := _cut_case(path, seed))}
    assert bad == {}
