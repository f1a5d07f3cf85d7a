"""TlsSession on real TLS streams made by OpenSSL (Python's ``ssl`` in memory), with
the key log OpenSSL wrote: every cipher family, both versions, KeyUpdate-free and
with damaged input."""

from __future__ import annotations

import pytest

from kwsniff.tls.keylog import KeyLog
from kwsniff.tls.session import TlsSession
from tests.tls.memtls import converse

MESSAGES = [(0, b"\x00\x00\x00\x10hello broker...."), (1, b"R" * 70000), (0, b"x" * 3),
            (1, b"done")]


def run(chunks, keylog, split: int = 0):
    got = [bytearray(), bytearray()]
    gaps = []

    def on_data(d, off, data, frame, ts):
        assert off == len(got[d]) + sum(g[2] for g in gaps if g[0] == d)
        got[d] += data

    def on_gap(d, off, length, frame, ts, reason):
        gaps.append((d, off, length, reason))

    s = TlsSession(keylog, on_data, on_gap)
    for i, (d, data) in enumerate(chunks):
        if split:
            for k in range(0, len(data), split):
                s.data(d, data[k:k + split], i, float(i))
        else:
            s.data(d, data, i, float(i))
    return s, got, gaps


def expected():
    want = [b"", b""]
    for d, m in MESSAGES:
        want[d] += m
    return want


CASES = [("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
         ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384"), ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305"),
         ("1.2", "ECDHE-ECDSA-AES256-SHA384"), ("1.2", "ECDHE-ECDSA-AES128-SHA")]


@pytest.mark.parametrize("version,cipher", CASES)
def test_decrypts_what_openssl_sent(tmp_path, version, cipher):
    chunks, keys, ver, suite = converse(tmp_path, version, cipher, MESSAGES)
    kl = KeyLog()
    kl.add_file(str(keys))
    s, got, gaps = run(chunks, kl)
    assert not gaps, s.info.problems
    assert [bytes(g) for g in got] == expected()
    info = s.info
    assert info.version_name == ("TLS 1.3" if version == "1.3" else "TLS 1.2")
    assert info.suite_name == suite.replace("ECDHE-ECDSA-", "TLS_ECDHE_ECDSA_WITH_") \
        or info.suite_name.startswith("TLS_")
    assert info.sni == "kafka.test"
    assert info.key == "found" and info.undecrypted_records == 0
    if version == "1.2":
        assert info.subject == "CN=kafka.test,O=kwsniff tests"


def test_byte_by_byte_feeding_gives_the_same(tmp_path):
    chunks, keys, *_ = converse(tmp_path, "1.3", None, MESSAGES[:2])
    kl = KeyLog()
    kl.add_file(str(keys))
    _, got, gaps = run(chunks, kl, split=7)
    assert not gaps and bytes(got[0]) == MESSAGES[0][1] and bytes(got[1]) == MESSAGES[1][1]


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_without_keys_nothing_is_decoded_and_the_handshake_is_reported(tmp_path, version):
    chunks, *_ = converse(tmp_path, version, None, MESSAGES)
    s, got, gaps = run(chunks, KeyLog())
    assert got == [bytearray(), bytearray()]
    assert s.info.key == "missing" and s.hopeless
    assert s.info.sni == "kafka.test" and s.info.suite is not None
    assert s.info.undecrypted_records > 0


def test_wrong_key_reports_undecryptable_records(tmp_path):
    chunks, keys, *_ = converse(tmp_path, "1.3", None, MESSAGES)
    kl = KeyLog()
    text = keys.read_text()
    # flip one hex digit of every secret
    kl.add_text("\n".join(ln[:-1] + ("0" if ln[-1] != "0" else "1")
                          for ln in text.splitlines() if ln and not ln.startswith("#")))
    s, got, gaps = run(chunks, kl)
    assert got == [bytearray(), bytearray()]
    assert gaps and all("not decrypted" in g[3] for g in gaps)


def test_gap_stops_the_direction_and_is_reported(tmp_path):
    chunks, keys, *_ = converse(tmp_path, "1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", MESSAGES)
    kl = KeyLog()
    kl.add_file(str(keys))
    got = [bytearray(), bytearray()]
    gaps = []
    s = TlsSession(kl, lambda d, o, data, f, t: got[d].extend(data),
                   lambda d, o, n, f, t, r: gaps.append((d, n, r)))
    big = max(range(len(chunks)), key=lambda i: len(chunks[i][1]))
    lost = 20000
    for i, (d, data) in enumerate(chunks):
        if i == big:
            s.data(d, data[:100], i, 0.0)
            s.gap(d, lost, i, 0.0, "capture loss")
            s.data(d, data[100 + lost:], i, 0.0)
            continue
        s.data(d, data, i, 0.0)
    d_big = chunks[big][0]
    assert gaps and gaps[0][0] == d_big
    assert bytes(got[1 - d_big]) == expected()[1 - d_big]
    assert any("records lost" in p for p in s.info.problems)
    # found again at the first whole record after the gap: the rest is exact
    tail = bytes(got[d_big])
    assert tail.endswith(b"done") and set(tail[:-4]) == {ord("R")}
    assert 70000 - lost - 16384 - 100 <= len(tail) - 4 <= 70000 - lost - 100
    assert any("found again" in p for p in s.info.problems)


def test_garbage_never_raises():
    s = TlsSession(KeyLog(), lambda *a: None, lambda *a: None)
    for blob in (b"\x16\x03\x01\x00\x05\x01\x00\x00\x01", b"\x16\x03\x03\xff\xff" + b"a" * 10,
                 b"GET / HTTP/1.1\r\n\r\n", bytes(range(256)) * 3):
        s.data(0, blob, 1, 0.0)
        s.data(1, blob, 1, 0.0)


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_live_key_log_read_again_when_the_secrets_arrive_late(tmp_path, version):
    chunks, keys, *_ = converse(tmp_path, version, None, MESSAGES)
    late = tmp_path / "late.keys"
    late.write_text("")
    kl = KeyLog()
    kl.add_file(str(late))
    got = [bytearray(), bytearray()]
    s = TlsSession(kl, lambda d, o, data, f, t: got[d].extend(data),
                   lambda *a: None, live=True)
    for i, (d, data) in enumerate(chunks):
        s.data(d, data, i, 0.0)
        if i == 1:          # the client writes its secrets after the ServerHello went by
            late.write_text(keys.read_text())
            assert s.info.key in ("missing", "none") and not s.hopeless
    assert [bytes(g) for g in got] == expected()
    assert s.info.key == "found"


def test_offline_missing_key_is_hopeless_at_once(tmp_path):
    chunks, *_ = converse(tmp_path, "1.3", None, MESSAGES[:1])
    s = TlsSession(KeyLog(), lambda *a: None, lambda *a: None)
    for d, data in chunks[:3]:
        s.data(d, data, 1, 0.0)
    assert s.hopeless
