"""Property tests: any segmentation, order and duplication reassembles to the original."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tcp_helpers import check_contract, pair, run, seg, streams

from kwsniff.tcp.events import StreamData, StreamGap
from kwsniff.tcp.reassembly import TcpReassembler


@st.composite
def shuffled_segments(draw, allow_drops=False):
    data = draw(st.binary(min_size=1, max_size=2000))
    isn = draw(st.integers(0, 0xFFFFFFFF))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(data) - 1), max_size=30)))) \
        if len(data) > 1 else []
    bounds = list(zip([0, *cuts], [*cuts, len(data)], strict=True))
    # retransmissions of arbitrary ranges (same bytes, different packetisation)
    for _ in range(draw(st.integers(0, 10))):
        i = draw(st.integers(0, len(data) - 1))
        j = draw(st.integers(i + 1, len(data)))
        bounds.append((i, j))
    if allow_drops:
        keep = draw(st.lists(st.booleans(), min_size=len(bounds), max_size=len(bounds)))
        bounds = [b for b, k in zip(bounds, keep, strict=True) if k] or bounds[:1]
    order = draw(st.permutations(range(len(bounds))))
    return data, isn, [bounds[k] for k in order]


@settings(max_examples=300, deadline=None)
@given(shuffled_segments())
def test_all_bytes_present_reassemble_exactly(case):
    data, isn, bounds = case
    c, s = pair(client_isn=isn)
    segs = [c.syn(), s.syn(ack=True)] + [c.at(i, data[i:j], ack=s.isn + 1) for i, j in bounds]
    events, r = run(segs, reassembler=TcpReassembler())
    check_contract(events)
    items = streams(events).get((0, 0), [])
    assert all(kind == "data" for kind, *_ in items)
    assert b"".join(item[2] for item in items) == data
    assert r.overlap_conflicts == 0


@settings(max_examples=300, deadline=None)
@given(shuffled_segments(allow_drops=True), st.integers(1, 3000))
def test_lost_segments_become_exact_gaps(case, max_buffer):
    data, isn, bounds = case
    c, s = pair(client_isn=isn)
    segs = [c.syn(), s.syn(ack=True)] + [c.at(i, data[i:j], ack=s.isn + 1) for i, j in bounds]
    events, r = run(segs, reassembler=TcpReassembler(max_buffer=max_buffer))
    check_contract(events)
    covered = set()
    for i, j in bounds:
        covered.update(range(i, j))
    delivered = set()
    for e in events:
        if isinstance(e, StreamData):
            assert e.data == data[e.offset:e.offset + len(e.data)]
            delivered.update(range(e.offset, e.offset + len(e.data)))
        elif isinstance(e, StreamGap):
            assert e.length > 0
    # every byte up to the last captured one is delivered or in a gap; no byte is invented
    assert delivered <= covered
    end = max(j for _, j in bounds)
    total = sum(len(e.data) if isinstance(e, StreamData) else e.length
                for e in events if isinstance(e, (StreamData, StreamGap)))
    assert total == end
    assert r.buffered_bytes == 0


ENDPOINTS = [(bytes([10, 0, 0, 1]), 1000), (bytes([10, 0, 0, 2]), 9092),
             (bytes([10, 0, 0, 3]), 2000)]
FLAG_CHOICES = [0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14, 0x00, 0x19, 0x03, 0x06]


@st.composite
def chaos(draw):
    """Arbitrary segments between a few endpoints: any flags, sequence numbers near a few
    bases (and anywhere), payloads with or without snaplen-missing tails."""
    bases = draw(st.lists(st.integers(0, 0xFFFFFFFF), min_size=3, max_size=3))
    rows = draw(st.lists(st.tuples(
        st.integers(0, 5),                  # endpoint pair
        st.integers(0, 2), st.integers(-50, 3000),   # sequence: base index, delta
        st.integers(0, 2), st.integers(-10, 3000),   # acknowledgment: base index, delta
        st.sampled_from(FLAG_CHOICES),
        st.integers(0, 300),                # payload length
        st.sampled_from([0, 0, 0, 7, 1000]),  # missing
    ), min_size=1, max_size=60))
    pairs = [(a, b) for a in ENDPOINTS for b in ENDPOINTS if a != b]
    return [seg(*pairs[p], bases[si] + sd, bases[ai] + ad, flags, bytes([n & 255]) * n, miss)
            for p, si, sd, ai, ad, flags, n, miss in rows]


@settings(max_examples=200, deadline=None)
@given(chaos(), st.integers(100, 5000), st.integers(2, 4))
def test_arbitrary_segments_keep_the_contract_and_the_bounds(segs, max_buffer, max_conns):
    r = TcpReassembler(max_buffer=max_buffer, max_total_buffer=2 * max_buffer,
                       max_connections=max_conns)
    events = []
    for i, s in enumerate(segs, 1):
        events.extend(r.feed(i, i / 10, s))
        assert r.buffered_bytes <= 2 * max_buffer
        assert len(r._flows) <= max_conns
    events.extend(r.finish())
    opened, closed = check_contract(events)
    assert opened == closed                      # every connection is closed exactly once
    assert r.buffered_bytes == 0
