"""TcpReassembler: ordering, retransmissions, overlaps, gaps, wrap-around, lifecycle."""

from __future__ import annotations

import pytest
from tcp_helpers import (
    CLIENT,
    SERVER,
    check_contract,
    joined,
    pair,
    run,
    seg,
    streams,
)

from kwsniff.tcp.events import (
    GAP_ACKED,
    GAP_BUFFER,
    GAP_CLOSED,
    GAP_END,
    GAP_SNAPLEN,
    ConnectionClosed,
    ConnectionOpened,
    StreamGap,
)
from kwsniff.tcp.packet import flow_key
from kwsniff.tcp.reassembly import ACK, FIN, PIECE_OVERHEAD, RST, SYN, TcpReassembler


def handshake(c, s):
    return [c.syn(), s.syn(ack=True), c.send(b"")]


def test_in_order_conversation_both_directions_and_fin_close():
    c, s = pair()
    segs = handshake(c, s) + [c.send(b"request-1"), s.send(b"response-1"), c.send(b"req2"),
                              s.send(b"resp2"), c.fin(), s.fin(), c.send(b"")]
    events, r = run(segs)
    check_contract(events)
    assert isinstance(events[0], ConnectionOpened)
    conn = events[0].conn
    assert (conn.index, conn.a, conn.b) == (0, ("10.0.0.1", 40000), ("10.0.0.2", 9092))
    assert conn.a_is_client is True
    assert conn.client == ("10.0.0.1", 40000) and conn.server == ("10.0.0.2", 9092)
    assert streams(events) == {
        (0, 0): [("data", 0, b"request-1", 4), ("data", 9, b"req2", 6)],
        (0, 1): [("data", 0, b"response-1", 5), ("data", 10, b"resp2", 7)],
    }
    assert isinstance(events[-1], ConnectionClosed) and events[-1].reason == "fin"
    # closed when the second FIN arrived (frame 9), not at finish()
    assert conn.close_reason == "fin"
    assert conn.packets == [6, 4]
    assert conn.bytes == [13, 15]
    assert conn.first_ts == pytest.approx(0.1) and conn.last_ts == pytest.approx(1.0)
    assert (conn.first_frame, conn.last_frame) == (1, 10)
    assert r.connections == 1 and r.gaps == 0


def test_reordered_segments_are_delivered_in_order_with_their_frames():
    c, s = pair()
    data = b"0123456789abcdefghijKLMNOPQRST"
    pieces = [c.at(20, data[20:]), c.at(0, data[:7]), c.at(14, data[14:20]), c.at(7, data[7:14])]
    events, r = run(handshake(c, s) + pieces)
    check_contract(events)
    assert streams(events)[0, 0] == [
        ("data", 0, data[:7], 5), ("data", 7, data[7:14], 7),
        ("data", 14, data[14:20], 6), ("data", 20, data[20:], 4)]
    assert r.out_of_order == 2   # frames 4 and 6 arrived ahead of a hole
    assert r.gaps == 0


def test_retransmissions_and_partial_overlaps_are_dropped():
    c, s = pair()
    segs = handshake(c, s) + [
        c.at(0, b"AAAAAAAAAA"),
        c.at(0, b"AAAAAAAAAA"),          # exact retransmission
        c.at(5, b"AAAAABBBBB"),          # half old, half new
        c.at(0, b"AAAAAAAAAABBBBBCCCCC"),  # repacketised retransmission with 5 new bytes
    ]
    events, r = run(segs)
    check_contract(events)
    assert streams(events)[0, 0] == [
        ("data", 0, b"AAAAAAAAAA", 4), ("data", 10, b"BBBBB", 6), ("data", 15, b"CCCCC", 7)]
    assert r.retransmissions == 1
    assert events[0].conn.bytes[0] == 50   # on-the-wire payload bytes, retransmissions included


def test_overlapping_buffered_copies_first_captured_wins_and_conflict_is_reported():
    c, s = pair()
    segs = handshake(c, s) + [
        c.at(10, b"QQQQQQQQQQ"),   # [10, 20) first copy
        c.at(15, b"yyyyyZZZZZ"),   # [15, 25): [15,20) conflicts, [20,25) new
        c.at(5, b"wwwwwwwwww"),    # [5, 15): [10, 15) conflicts, [5, 10) new
        c.at(0, b"01234"),
    ]
    events, r = run(segs)
    check_contract(events)
    assert joined(events) == b"01234" + b"wwwww" + b"QQQQQQQQQQ" + b"ZZZZZ"
    assert r.overlap_conflicts == 2
    assert any("differ from the copy in frame 4" in p for p in r.problems)
    assert r.gaps == 0


def test_identical_overlapping_copies_are_not_conflicts():
    c, s = pair()
    data = bytes(range(40))
    segs = handshake(c, s) + [c.at(10, data[10:30]), c.at(20, data[20:40]), c.at(0, data[:25])]
    events, r = run(segs)
    assert joined(events) == data
    assert r.overlap_conflicts == 0 and not r.problems.messages


def test_keepalives_are_dropped_and_counted():
    c, s = pair()
    segs = handshake(c, s) + [c.send(b"hello")]
    keepalive = c.at(4, b"\0")     # seq = next - 1, one garbage byte
    keepalive0 = c.at(4, b"")      # zero-length variant: nothing to drop
    events, r = run(segs + [keepalive, keepalive0, c.send(b" world")])
    check_contract(events)
    assert joined(events) == b"hello world"
    assert r.keepalives == 1


def test_sequence_wraparound_with_handshake():
    c, s = pair(client_isn=0xFFFFFFF0, server_isn=0xFFFFFFFF)
    payload = bytes(range(97, 123)) * 3
    segs = handshake(c, s)
    for i in range(0, len(payload), 7):
        segs.append(c.send(payload[i:i + 7]))
    segs.append(s.send(b"wrapped response"))
    events, r = run(segs)
    check_contract(events)
    assert joined(events, 0, 0) == payload
    assert joined(events, 0, 1) == b"wrapped response"
    assert streams(events)[0, 1] == [("data", 0, b"wrapped response", len(segs))]
    assert r.gaps == 0 and r.retransmissions == 0


def test_wraparound_with_reordering_across_the_wrap():
    c, s = pair(client_isn=0xFFFFFFFA)
    data = b"abcdefghijklmnopqrst"
    segs = handshake(c, s) + [c.at(10, data[10:]), c.at(0, data[:10])]  # second part wrapped
    events, _ = run(segs)
    assert joined(events) == data


def test_stream_longer_than_4gib_offsets_keep_growing():
    r = TcpReassembler()
    c, s = pair(client_isn=7)
    events, _ = run(handshake(c, s), reassembler=r, finish=False)
    chunk = b"z" * 1000
    seen = []
    for i in range(5):
        # jump 1 GiB forward each time by pretending 1 GiB was delivered
        flow = r._table[flow_key(CLIENT[0], CLIENT[1], SERVER[0], SERVER[1])][0]
        flow.dirs[0].next = i << 30
        seen += r.feed(10 + i, 1.0, c.at(i << 30, chunk))
    assert [e.offset for e in seen] == [i << 30 for i in range(5)]


def test_mid_stream_start_offset_zero_is_first_byte_seen():
    c, s = pair(client_isn=123456, server_isn=999)
    segs = [c.at(500, b"first-seen"), s.at(70, b"reply", ack=123456 + 1 + 510),
            c.at(510, b"second")]
    events, r = run(segs)
    check_contract(events)
    conn = events[0].conn
    assert conn.a_is_client is None and conn.client is None
    assert streams(events) == {(0, 0): [("data", 0, b"first-seen", 1), ("data", 10, b"second", 3)],
                               (0, 1): [("data", 0, b"reply", 2)]}
    assert conn.close_reason == "end of capture"


def test_syn_ack_alone_identifies_the_client():
    c, s = pair()
    s_synack = s.syn(ack=True)
    events, _ = run([s_synack, c.send(b""), c.send(b"data")])
    conn = events[0].conn
    assert conn.a == ("10.0.0.2", 9092) and conn.a_is_client is False
    assert conn.client == ("10.0.0.1", 40000)
    # the client's stream starts at the first byte seen (its SYN was not captured)
    assert streams(events)[0, 1] == [("data", 0, b"data", 3)]


def test_ack_of_unseen_bytes_declares_the_hole_a_gap_at_once():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"aaaa"), c.at(10, b"cccc")]   # [4, 10) never captured
    events, r = run(segs, finish=False)
    assert streams(events)[0, 0] == [("data", 0, b"aaaa", 4)]
    # the server acknowledges everything: the hole was received, the capture lost it
    more = list(r.feed(6, 0.6, s.at(0, b"", ack=c.isn + 1 + 14)))
    check_contract(events + more)
    assert streams(more)[0, 0] == [("gap", 4, 6, GAP_ACKED), ("data", 10, b"cccc", 5)]
    assert events[0].conn.gap_bytes == [6, 0]


def test_ack_seen_before_the_data_after_the_hole_declares_the_gap_on_arrival():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"aaaa"), s.at(0, b"", ack=c.isn + 1 + 10)]
    events, r = run(segs, finish=False)
    more = list(r.feed(6, 0.6, c.at(10, b"cccc")))     # [4, 10) was acked: it is lost
    check_contract(events + more)
    assert streams(more)[0, 0] == [("gap", 4, 6, GAP_ACKED), ("data", 10, b"cccc", 6)]


def test_partial_ack_only_declares_the_acknowledged_part():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"aaaa"), c.at(20, b"zz")]
    events, r = run(segs, finish=False)
    more = list(r.feed(6, 0.6, s.at(0, b"", ack=c.isn + 1 + 8)))   # acks up to offset 8 only
    assert streams(more)[0, 0] == [("gap", 4, 4, GAP_ACKED)]
    fill = list(r.feed(7, 0.7, c.at(8, b"b" * 12)))                 # the rest arrives
    assert streams(fill)[0, 0] == [("data", 8, b"b" * 12, 7), ("data", 20, b"zz", 5)]


def test_gap_on_ack_can_be_disabled():
    c, s = pair()
    r = TcpReassembler(gap_on_ack=False)
    segs = handshake(c, s) + [c.at(0, b"aaaa"), c.at(10, b"cccc"), s.at(0, b"", ack=c.isn + 15)]
    events, _ = run(segs, reassembler=r, finish=False)
    assert streams(events)[0, 0] == [("data", 0, b"aaaa", 4)]
    end = r.finish()
    assert streams(end)[0, 0] == [("gap", 4, 6, GAP_END), ("data", 10, b"cccc", 5)]


def test_buffer_limit_declares_the_hole_and_bounds_memory():
    c, s = pair()
    r = TcpReassembler(max_buffer=1000, gap_on_ack=False)
    segs = handshake(c, s) + [c.at(0, b"a" * 10)]
    # [10, 20) is never captured; 100-byte segments pile up behind it
    segs += [c.at(20 + 100 * i, bytes([65 + i]) * 100) for i in range(12)]
    events, _ = run(segs, reassembler=r, finish=False)
    check_contract(events)
    items = streams(events)[0, 0]
    assert items[0] == ("data", 0, b"a" * 10, 4)
    assert items[1] == ("gap", 10, 10, GAP_BUFFER)
    assert [i[1] for i in items[2:]] == [20 + 100 * k for k in range(len(items) - 2)]
    assert r.buffered_bytes <= 1000
    rest = r.finish()
    check_contract(events + rest)
    assert joined(events + rest) == b"a" * 10 + b"?" * 10 + b"".join(
        bytes([65 + i]) * 100 for i in range(12))


def test_total_buffer_limit_relieves_the_fullest_direction():
    r = TcpReassembler(max_buffer=10_000, max_total_buffer=3000, gap_on_ack=False)
    events = []
    frame = 0
    for port in (1, 2, 3):
        a = (bytes([10, 0, 0, 1]), port)
        b = (bytes([10, 0, 0, 2]), 9092)
        for k in range(2):
            frame += 1
            events += r.feed(frame, 0.0, seg(a, b, 100 + 10 + 400 * k, 0, ACK, b"x" * 400))
    # three connections with 800 buffered bytes each (+ overhead): the first exceeded total
    assert r.buffered_bytes <= 3000
    check_contract(events + r.finish())


def test_snaplen_truncated_in_order_segment_is_data_then_gap():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"head", missing=96), c.at(100, b"next")]
    events, r = run(segs)
    check_contract(events)
    assert streams(events)[0, 0] == [
        ("data", 0, b"head", 4), ("gap", 4, 96, GAP_SNAPLEN), ("data", 100, b"next", 5)]
    assert events[0].conn.bytes[0] == 104


def test_snaplen_gap_out_of_order_and_real_bytes_replace_missing_ones():
    c, s = pair()
    segs = handshake(c, s) + [
        c.at(10, b"ab", missing=8),     # [10,12) data, [12,20) known missing
        c.at(14, b"REAL"),              # a full copy of [14,18) arrives later: it wins
        c.at(0, b"0123456789"),
    ]
    events, _ = run(segs)
    check_contract(events)
    assert streams(events)[0, 0] == [
        ("data", 0, b"0123456789", 6), ("data", 10, b"ab", 4), ("gap", 12, 2, GAP_SNAPLEN),
        ("data", 14, b"REAL", 5), ("gap", 18, 2, GAP_SNAPLEN)]


def test_segment_with_headers_only_truncated_payload_is_all_gap():
    c, s = pair()
    events, _ = run(handshake(c, s) + [c.at(0, b"", missing=50), c.at(50, b"ok")])
    assert streams(events)[0, 0] == [("gap", 0, 50, GAP_SNAPLEN), ("data", 50, b"ok", 5)]


def test_rst_closes_and_flushes_buffered_data_after_a_gap():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"aa"), c.at(5, b"ccc"), s.rst()]
    events, r = run(segs)
    check_contract(events)
    assert streams(events)[0, 0] == [("data", 0, b"aa", 4), ("gap", 2, 3, GAP_CLOSED),
                                     ("data", 5, b"ccc", 5)]
    assert events[-1].reason == "rst"
    assert events[0].conn.close_reason == "rst"


def test_acknowledgment_number_of_a_rst_is_not_evidence():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"aa"), s.rst()[:1] + (s.seq, c.isn + 1 + 100_000,
                                                            RST | ACK, b"", 0)]
    events, _ = run(segs)
    check_contract(events)
    assert streams(events)[0, 0] == [("data", 0, b"aa", 4)]


def test_late_segments_after_close_belong_to_the_closed_connection():
    c, s = pair()
    segs = handshake(c, s) + [c.send(b"x"), c.fin(), s.fin(), c.send(b""), c.at(0, b"x")]
    events, r = run(segs)
    check_contract(events)
    assert r.connections == 1
    conn = events[0].conn
    assert conn.packets == [6, 2]
    assert [type(e).__name__ for e in events].count("ConnectionClosed") == 1


def test_new_syn_on_closed_four_tuple_starts_a_new_connection():
    c, s = pair()
    segs = handshake(c, s) + [c.send(b"one"), c.fin(), s.fin(), c.send(b"")]
    c2, s2 = pair(client_isn=77777, server_isn=88888)
    segs += handshake(c2, s2) + [c2.send(b"two"), c2.rst()]
    events, r = run(segs)
    check_contract(events)
    assert r.connections == 2
    assert streams(events) == {(0, 0): [("data", 0, b"one", 4)],
                               (1, 0): [("data", 0, b"two", 11)]}
    reasons = [(e.conn.index, e.reason) for e in events if isinstance(e, ConnectionClosed)]
    assert reasons == [(0, "fin"), (1, "rst")]


def test_syn_with_new_isn_on_open_connection_is_port_reuse():
    c, s = pair()
    segs = handshake(c, s) + [c.send(b"one")]
    c2, s2 = pair(client_isn=424242)
    segs += handshake(c2, s2) + [c2.send(b"two")]
    events, r = run(segs)
    check_contract(events)
    reasons = [(e.conn.index, e.reason) for e in events if isinstance(e, ConnectionClosed)]
    assert reasons == [(0, "port reused"), (1, "end of capture")]
    assert joined(events, 1, 0) == b"two"


def test_retransmitted_syn_is_the_same_connection():
    c, s = pair()
    syn = c.syn()
    synack = s.syn(ack=True)
    events, r = run([syn, syn, synack, synack, c.send(b""), c.send(b"data")])
    assert r.connections == 1
    assert streams(events) == {(0, 0): [("data", 0, b"data", 6)]}


def test_syn_on_mid_stream_connection_starts_a_new_one():
    c, s = pair()
    old = [c.at(100, b"old data")]
    c2, s2 = pair(client_isn=5)
    events, r = run(old + handshake(c2, s2) + [c2.send(b"new")])
    assert r.connections == 2
    assert joined(events, 1, 0) == b"new"


def test_data_on_syn_fast_open():
    c, s = pair()
    syn = seg(CLIENT, SERVER, c.isn, 0, SYN, b"tfo-data")
    c.seq = c.isn + 1 + 8
    events, _ = run([syn, s.syn(ack=True), c.send(b"more")])
    assert joined(events) == b"tfo-datamore"


def test_fin_with_hole_before_it_waits_then_closes_when_filled():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"aa")]
    fin = seg(CLIENT, SERVER, c.isn + 1 + 6, s.seq, FIN | ACK, b"dd")   # [4,6) + FIN at 6
    events, r = run(segs + [fin, s.fin()], finish=False)
    assert not any(isinstance(e, ConnectionClosed) for e in events)
    more = list(r.feed(10, 1.0, c.at(2, b"bbcc", ack=s.seq)))
    check_contract(events + more)
    assert joined(events + more) == b"aabbccdd"
    assert isinstance(more[-1], ConnectionClosed) and more[-1].reason == "fin"


def test_fin_with_hole_acked_by_peer_is_a_gap_and_closes():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"aa")]
    fin = seg(CLIENT, SERVER, c.isn + 1 + 6, s.seq, FIN | ACK, b"")
    server_fin = seg(SERVER, CLIENT, s.seq, c.isn + 1 + 7, FIN | ACK)   # acks data + FIN
    events, r = run(segs + [fin, server_fin], finish=False)
    check_contract(events)
    assert streams(events)[0, 0] == [("data", 0, b"aa", 4), ("gap", 2, 4, GAP_ACKED)]
    assert events[-1].reason == "fin"


def test_data_after_fin_is_kept_and_reported():
    """A FIN with bytes after it was not the end (a damaged capture): as Wireshark, the
    bytes are delivered, the FIN's own sequence number is not a hole."""
    c, s = pair()
    segs = handshake(c, s) + [c.send(b"ab"), c.fin(), c.at(3, b"late")]
    events, r = run(segs)
    check_contract(events)
    assert joined(events) == b"ablate"
    assert not [e for e in events if isinstance(e, StreamGap)]
    assert any("after the FIN" in p and "decoding continues" in p for p in r.problems)


def test_data_after_rst_reopens_the_same_connection():
    c, s = pair()
    segs = handshake(c, s) + [c.send(b"ab"), s.rst(), c.at(2, b"more"), c.at(0, b"ab")]
    events, r = run(segs)
    opened = [e for e in events if isinstance(e, ConnectionOpened)]
    assert len(opened) == 2 and opened[0].conn is opened[1].conn
    assert opened[0].conn.reopened == 1
    assert joined(events) == b"abmore"           # (the retransmission reopens nothing)
    assert [e.reason for e in events if isinstance(e, ConnectionClosed)] == \
        ["rst", "end of capture"]
    assert any("after the RST" in p for p in r.problems)


def test_trailing_bytes_acked_but_never_captured_become_a_gap_at_the_end():
    c, s = pair()
    segs = handshake(c, s) + [c.at(0, b"abc"), s.at(0, b"", ack=c.isn + 1 + 50)]
    events, _ = run(segs)
    check_contract(events)
    assert streams(events)[0, 0] == [("data", 0, b"abc", 4), ("gap", 3, 47, GAP_ACKED)]


def test_connection_table_is_bounded_by_eviction():
    r = TcpReassembler(max_connections=16)
    events = []
    for port in range(1, 101):
        a = (bytes([10, 0, 0, 1]), port)
        b = (bytes([10, 0, 0, 2]), 9092)
        events += r.feed(port, float(port), seg(a, b, 1, 0, SYN))
        events += r.feed(port, float(port), seg(a, b, 2, 0, ACK, b"payload"))
    assert len(r._flows) <= 16
    evicted = [e for e in events if isinstance(e, ConnectionClosed)]
    assert evicted and all(e.reason == "evicted" for e in evicted)
    # the least recently active go first
    assert evicted[0].conn.index == 0
    events += r.finish()
    check_contract(events)
    assert r.connections == 100


def test_ignored_connection_gets_no_more_stream_events_but_is_counted():
    c, s = pair()
    events, r = run(handshake(c, s) + [c.send(b"first")], finish=False)
    conn = events[0].conn
    conn.ignored = True
    later = list(r.feed(10, 1.0, c.at(20, b"ahead")))
    later += r.feed(11, 1.1, c.send(b"more"))
    later += r.finish()
    assert streams(later) == {}
    assert conn.packets[0] == 5 and conn.bytes[0] == 14
    assert r.buffered_bytes == 0
    assert isinstance(later[-1], ConnectionClosed)


def test_piece_overhead_counts_towards_the_limit():
    c, s = pair()
    r = TcpReassembler(max_buffer=10 * (1 + PIECE_OVERHEAD), gap_on_ack=False)
    segs = handshake(c, s) + [c.at(2 * i + 1, b"x") for i in range(20)]   # 20 one-byte pieces
    events, _ = run(segs, reassembler=r, finish=False)
    assert any(e.__class__.__name__ == "StreamGap" and e.reason == GAP_BUFFER for e in events)
    assert r.buffered_bytes <= 10 * (1 + PIECE_OVERHEAD)


def test_forgotten_connections_are_handed_over_after_their_close():
    """With ``forgotten`` a list, every connection the table forgets is appended once,
    after its ConnectionClosed and before the ConnectionOpened it made room for; a
    later segment of its 4-tuple starts a new connection; finish() appends none."""
    r = TcpReassembler(max_connections=16)
    r.forgotten = []
    events = []
    forgotten_at = {}            # Connection index -> events seen when it was handed over
    for port in range(1, 61):
        a = (bytes([10, 0, 0, 1]), port)
        b = (bytes([10, 0, 0, 2]), 9092)
        events += r.feed(port, float(port), seg(a, b, 1, 0, SYN))
        events += r.feed(port, float(port), seg(a, b, 2, 0, ACK, b"payload"))
        if port % 2:                     # every other one closes (RST) at once
            events += r.feed(port, float(port), seg(a, b, 9, 0, RST))
        for conn in r.forgotten:
            forgotten_at[conn.index] = port - 1     # (the connection it made room for)
        r.forgotten.clear()
    assert forgotten_at and len(r._flows) <= 16
    opened = {e.conn.index: i for i, e in enumerate(events) if isinstance(e, ConnectionOpened)}
    closed = {e.conn.index: i for i, e in enumerate(events) if isinstance(e, ConnectionClosed)}
    tracked = {f.conn.index for f in r._flows.values()}
    for idx, newer in forgotten_at.items():
        assert closed[idx] < opened[newer]
        assert idx not in tracked
    # the closed ones (RST) go first: all forgotten connections but the evicted ones
    evicted = {e.conn.index for e in events if isinstance(e, ConnectionClosed)
               and e.reason == "evicted"}
    assert evicted <= set(forgotten_at)
    # a segment of a forgotten 4-tuple opens a new connection
    old = min(forgotten_at)
    port = old + 1
    a, b = (bytes([10, 0, 0, 1]), port), (bytes([10, 0, 0, 2]), 9092)
    new = list(r.feed(99, 99.0, seg(a, b, 2, 0, ACK, b"late")))
    fresh = [e.conn for e in new if isinstance(e, ConnectionOpened)]
    assert fresh and fresh[0].index not in forgotten_at and fresh[0].index >= 60
    r.forgotten.clear()
    r.finish()
    assert r.forgotten == []
    # not a list (the default): nothing is kept
    r2 = TcpReassembler(max_connections=4)
    for port in range(1, 20):
        r2.feed(port, float(port), seg((bytes([10, 0, 0, 1]), port),
                                       (bytes([10, 0, 0, 2]), 9092), 1, 0, SYN))
    assert r2.forgotten is None
